"""The sampler sweeps of issue 13: which runs `bench quality --grid NAME` trains.

`comparison`: every sampler on amazon-beauty and amazon-toys (below); `midx`: the inverted
multi-index sampler on both, beside the comparison's full softmax at today's model settings;
`catalogue`: the samplers against the full softmax on a synthetic log over 1,000,000 items
(at the end).

A run is a `RunSpec`: a dataset, a sampler with its preset (its settings class's defaults),
m, optionally another loss and extra `--set` overrides. The grid is ordered so that the most
informative runs come first, and it is planned again before every run, because one of its
stages depends on results: the m = 16 and m = 256 runs on amazon-beauty are for the three
samplers closest to the full softmax at m = 64 there (by val NDCG@10, so that the test set
picks nothing), plus uniform, and are
planned once every m = 64 run on amazon-beauty has a result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.sweeps.run_records import val_ndcg10

BEAUTY, TOYS = "amazon-beauty", "amazon-toys"
M = 64
BIAS_MS = (16, 256)
# the sweeps' protocol; the temperature, the history length, the precision and the stopping
# window are the ones the comparison and the recipe study ran at (the defaults until the study
# chose 0.1 and, in stage 7, 20; fp32 until `auto`; each round alone until the window), and
# `FORMER_MODEL` the model they trained (the defaults until the query-tower study chose
# bsarec at the published sizes), so their committed runs stay comparable and reused;
# `FORMER_TRAINING` no weight decay and no weight average (the defaults until the query-tower
# study's chosen configuration became them)
FORMER_MODEL = (
    "model.tower=sasrec", "model.dim=256", "model.normalize=true", "model.init_std=null",
    "train.lr=0.003", "train.batch_size=128", "train.targets=all",
)  # fmt: skip
FORMER_TRAINING = (
    "train.weight_decay=0",
    "train.decoupled_weight_decay=false",
    "train.ema_decay=null",
)
PROTOCOL = (
    "train.patience=5", "train.max_minutes=30", "train.threads=1", "model.temperature=0.05",
    "model.max_len=50", "train.precision=fp32", "train.patience_window=1", "train.refit_epochs=0",
    *FORMER_MODEL, *FORMER_TRAINING,
)  # fmt: skip


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid; `name` is its result file's stem."""

    dataset: str
    label: str
    sampler: str
    m: int | None = M
    loss: str | None = None
    sets: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """`full`, `in-batch`, `<label>_m<m>` or `<label>_m<m>_<loss>`."""
        base = self.label if self.m is None else f"{self.label}_m{self.m}"
        return base if self.loss is None else f"{base}_{self.loss}"

    def overrides(self) -> list[str]:
        """The run's own `--set` overrides (the loss and extra settings)."""
        loss = [] if self.loss is None else [f"loss.name={self.loss}"]
        return [*loss, *self.sets]


def _tapas(dataset: str, ratio: int, m: int = M) -> RunSpec:
    sets = (f"sampler.ratio={ratio}",)
    return RunSpec(dataset, f"tapas-r{ratio}", "tapas", m, sets=sets)


def core(dataset: str) -> list[RunSpec]:
    """Every sampler at m = 64 (full softmax and in-batch have no m), most informative first."""

    def plain(*names: str) -> list[RunSpec]:
        return [RunSpec(dataset, name, name) for name in names]

    return [
        RunSpec(dataset, "full", "full", None),
        *plain("uniform", "popularity"),
        _tapas(dataset, 1),
        _tapas(dataset, 8),
        *plain("rff"),
        RunSpec(dataset, "in-batch", "in-batch", None),
        *plain("mixed", "bernoulli", "quadratic", "exact"),
    ]


def losses(dataset: str) -> list[RunSpec]:
    """Loss variants at m = 64 with the sampler each belongs to.

    ranking, negative sampling, NCE and BlackOut draw from the popularity noise f^alpha of
    their papers; absolute softmax (quadratic's preset) and the Bernoulli likelihood (bernoulli's
    preset) are in `core`, so their contrast here is the same sampler with the sampled softmax.
    """
    pop = [
        RunSpec(dataset, "popularity", "popularity", loss=loss)
        for loss in ("ranking", "negative_sampling", "nce", "blackout")
    ]
    plain = [RunSpec(dataset, s, s, loss="sampled_softmax") for s in ("quadratic", "bernoulli")]
    return [*pop, *plain]


def closest(specs: list[RunSpec], folder: Path, count: int = 3) -> list[RunSpec] | None:
    """The `count` specs with the best val NDCG@10 in `folder` (None until all have results).

    Full softmax, uniform and in-batch (no m) are not candidates.
    """
    scores = {}
    for spec in specs:
        path = folder / f"{spec.name}.json"
        if not path.is_file():
            return None
        scores[spec] = val_ndcg10(path)
    ranked = [s for s in specs if s.m is not None and s.label != "uniform"]
    return sorted(ranked, key=lambda s: -scores[s])[:count]


def bias(out: Path) -> list[RunSpec] | None:
    """Runs at m = 16 and 256 on amazon-beauty: the three closest to full softmax, and uniform."""
    chosen = closest(core(BEAUTY), out / BEAUTY)
    if chosen is None:
        return None
    chosen.append(RunSpec(BEAUTY, "uniform", "uniform"))
    return [
        RunSpec(s.dataset, s.label, s.sampler, m, s.loss, s.sets) for s in chosen for m in BIAS_MS
    ]


def preset_check() -> list[RunSpec]:
    """The rff sampler at m = 16 on amazon-toys, where m = 64 ran 6.4% below the full softmax.

    Added after the other 36 runs: at m = 64 both datasets' rff runs ended at the time cap (13
    epochs of 139 s on amazon-toys, against the full softmax's 21 rounds), and at m = 16
    amazon-beauty's rff ran 24 epochs of 72 s to -2.5%. If m = 16 holds on amazon-toys too
    (the target's own measure, the paired test gap; its val score is reported beside), the
    rff preset takes it.
    """
    return [RunSpec(TOYS, "rff", "rff", 16)]


# the defaults since the recipe study (docs/benchmarks/archive/recipe_study.md), over the
# protocol's 0.05 and 50
TODAYS_MODEL = ("model.temperature=0.1", "model.max_len=20")
TAPAS_MIDX = "sampler.first_pass=midx"  # tapas's second pass over a midx presample


def preset_today() -> list[RunSpec]:
    """The rff preset at m = 64 with today's temperature, and its reference, on both datasets.

    Added after `preset_check` (m = 16 fell further behind, -9.5%): the preset's kernel
    (nu = 5) was chosen against the softmax of temperature 0.05, whose logits span
    [-20, 20]; at today's 0.1 they span [-10, 10], a softmax half as sharp, which the same
    kernel follows more closely. The full softmax reruns at the same settings: the gap is
    measured like for like. amazon-beauty's pair was added once the kernel sampler's step had
    been cut to 40% (amazon-toys' pair then ran again beside it: the cap had stopped rff).
    """
    return [
        RunSpec(dataset, label, sampler, m, sets=TODAYS_MODEL)
        for dataset in (TOYS, BEAUTY)
        for label, sampler, m in (
            ("full-tau0.1-len20", "full", None),
            ("rff-tau0.1-len20", "rff", M),
        )
    ]


def comparison(out: Path) -> tuple[list[RunSpec], int]:
    """The issue-13 grid in run order, and how many runs it plans in all (41)."""
    staged = bias(out)
    tail = [*losses(BEAUTY), *preset_check(), *preset_today()]
    planned = len(core(BEAUTY)) + len(core(TOYS)) + 2 * 4 + len(tail)
    specs = [*core(BEAUTY), *core(TOYS), *(staged or []), *tail]
    return specs, planned


def midx_today(out: Path) -> tuple[list[RunSpec], int]:
    """`midx`, and `tapas` with midx's first pass, at m = 64 and 256 with today's model.

    On both datasets, beside `preset_today`'s full softmax: their bias against the full
    softmax, same budget.
    """
    specs = [
        RunSpec(dataset, name, sampler, m, sets=(*TODAYS_MODEL, *sets))
        for name, sampler, sets in (
            ("midx-tau0.1-len20", "midx", ()),
            ("tapas-midx-tau0.1-len20", "tapas", (TAPAS_MIDX,)),
        )
        for m in (M, 256)
        for dataset in (BEAUTY, TOYS)
    ]
    return specs, len(specs)


# Issue 13, item 5: where sampling is for. `recsys synth --users 20000 --items 1000000 --events
# 3000000` writes the log (<data root>/synthetic-1m/interactions.csv); each sampler gets the same
# 30 minutes, one run at a time on both cores. At 1e6 items a validation round ranks a fixed
# sample of users, and the sampled runs keep sparse tables (SparseAdam touches the rows a step
# used, dense Adam would sweep all 1e6 every step); the full softmax needs the dense table.
CATALOGUE = "synthetic-1m"
CATALOGUE_M = 256
CATALOGUE_SETS = ("train.val_users=2000", "train.threads=2")
SPARSE = (*CATALOGUE_SETS, "train.sparse_embeddings=true")
# a full-softmax step over 1e6 items takes minutes and its epoch hours: validate every 3 steps
FULL_AT_1M = (*CATALOGUE_SETS, "train.val_every_steps=3")
# per-query negatives gather B L m rows a step (10 s at these shapes, whatever the sampler):
# under a wall-clock budget midx draws one shared set from the batch's mixture, as tapas does
MIDX_SHARED = (*SPARSE, "sampler.per_query=false")
MIDX_POPULAR = (*MIDX_SHARED, "sampler.popularity_alpha=0.75")  # in a cell, as popularity draws


def catalogue(out: Path) -> tuple[list[RunSpec], int]:
    """Full softmax and the samplers a large catalogue needs, at m = 256, in run order."""
    specs = [
        RunSpec(CATALOGUE, "full", "full", None, sets=FULL_AT_1M),
        RunSpec(CATALOGUE, "uniform", "uniform", CATALOGUE_M, sets=SPARSE),
        RunSpec(CATALOGUE, "popularity", "popularity", CATALOGUE_M, sets=SPARSE),
        RunSpec(CATALOGUE, "rff", "rff", CATALOGUE_M, sets=(*SPARSE, "sampler.leaf_size=32")),
        RunSpec(CATALOGUE, "tapas-r8", "tapas", CATALOGUE_M, sets=(*SPARSE, "sampler.ratio=8")),
        RunSpec(CATALOGUE, "in-batch", "in-batch", None, sets=SPARSE),
        RunSpec(CATALOGUE, "mixed", "mixed", CATALOGUE_M, sets=SPARSE),
        RunSpec(CATALOGUE, "midx-shared", "midx", CATALOGUE_M, sets=MIDX_SHARED),
        RunSpec(CATALOGUE, "midx-pop-shared", "midx", CATALOGUE_M, sets=MIDX_POPULAR),
        RunSpec(CATALOGUE, "tapas-midx-r8", "tapas", CATALOGUE_M,
                sets=(*SPARSE, "sampler.ratio=8", TAPAS_MIDX)),
    ]  # fmt: skip
    return specs, len(specs)


Planner = Callable[[Path], tuple[list[RunSpec], int]]
