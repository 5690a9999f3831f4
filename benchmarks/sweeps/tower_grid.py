"""The query-tower study: `bench quality --grid towers`, decided on validation only.

Question: does a frequency-domain or recurrent query tower (`fmlp`, `bsarec`, `lru`) beat
self-attention (`sasrec`) like for like: the full softmax, trained on each user's events up
to the validation one, no refit, 30 minutes on one thread each (the sweeps' `PROTOCOL`, two
runs at a time)?

Each tower trains on amazon-beauty and amazon-toys at two settings, two towers at a third, and
the chosen configuration in the product's frame:
- `published`: the settings the published models were measured with on these splits
  (SASRec, FMLP-Rec, BSARec, LRURec on the S3-Rec data: d = 64, 2 blocks, dropout 0.5,
  L = 50, plain dot-product logits, lr 1e-3, batch 256, one attention head); `sasrec` at
  these settings is the control the issue asks for: SASRec with full cross-entropy.
- `ours`: the product's model settings before this study (d = 256, L = 20, cosine logits at
  temperature 0.1; the sweeps' `PROTOCOL` pins the rest of that model).
- `published-prefix`: the published settings trained as BSARec's code trains every model it
  reports (its dataset makes one example of each prefix of a history, the target its last
  item): `train.targets=last`, not a target at every position; for `sasrec`, the control, and
  `bsarec`, the best published model on these splits, each on both datasets in turn.
- `published-whole`: `published-prefix` with bsarec's low-pass over the whole window, as
  BSARec's code filters it (`model.tower.window=whole`: earlier positions see later items,
  which only the last position's training allows); `bsarec` only.
- `published-author`: `published-prefix` at the learning rate (5e-4), early-stopping patience
  (10 rounds) and initialisation (weights ~ N(0, 0.02^2), `model.init_std`) of BSARec's
  author log for amazon-beauty (`BSARec_Beauty_best.log` in its repository: the run its
  published figure comes from); `bsarec` only.
- `published-author-plateau`: `published-author` with the lr decayed to zero before the run
  ends (`train.lr_schedule=plateau`); `bsarec` only.
- `published-author` with `midx` at m = 64 and at m = 256, `published-author-plateau` with
  `midx` and with `exact` at m = 256 (`SAMPLED_RUNS`, `sampled_spec`): like for like with a
  sampled softmax, whose test figures are set against its setting's full softmax's.
- `published-author-plateau` again at other seeds (`SEEDS`, `seed_spec`): that
  configuration's test figures at three seeds, set beside the chosen configuration's.
- `published-author-plateau-ema`, `published-author-plateau-lr1e-3` (`CANDIDATES`):
  `published-author-plateau` with its weights averaged (`train.ema_decay=0.999`: validation
  ranks, and the run keeps, the moving average), and at the published settings' lr (1e-3)
  before the decay; `bsarec` only, amazon-beauty first (the dataset short of its published
  figure). The second led on both datasets: chosen then, and trained at `SEEDS` too.
- `BEAUTY_FIRST`: one change at a time to the configuration chosen last, each run on
  amazon-beauty first and on amazon-toys only once it led there (`LED_ON_BEAUTY`; both at once
  when two slots were free, `BOTH_AT_ONCE`); a lead on both makes the new choice, trained at
  `SEEDS` too. On `-lr1e-3`: cosine logits at temperature 0.1, d = 128, batch 128, `lru`,
  10% and 30% of each window's input items dropped (`train.item_mask`), the low-pass over the
  whole window (`-whole`, chosen), the weights averaged, lr 2e-3. On `-whole`: the weights
  averaged (`-whole-ema`, chosen). On that: bf16 autocast (`-bf16`, the product's precision on
  this CPU), BSARec's padded rows in bf16 (`-bf16-embedded`: `model.tower.padding=embedded`,
  every window max_len wide, batches shuffled as BSARec's, not bucketed by length), d = 128 in
  bf16 (`-bf16-d128`, chosen). On that, which peaks by epoch 18 and then falls on both
  datasets: dropout 0.6 and AdamW's decoupled weight decay at 0.05 (`-d128-wd0.05`, chosen:
  `CHOSEN_SETTING`, also run with `exact` at m = 256, the last of `SAMPLED_RUNS`). A chosen
  configuration's like-for-like figure is its seed with the best validation figure.
- `published-prefix-product`: `bsarec` at `published-prefix` (the configuration chosen before
  `published-author`) as `recsys train` shipped a model then: the default sampler before `auto`
  (`midx`, m = 64), precision, early stopping and refit, 30 minutes (the final grid's
  settings), one thread; its val NDCG@10 is set against the product default's in the final
  grid (a default is chosen in the frame it ships in).
- `candidate-default`: `CHOSEN_SETTING` as `recsys train` would ship it (`candidate_spec`),
  set against the former default's run in the defaults grid on validation (its records:
  `defaults_published_author`); it led on both datasets and so is the default.
A study on validation drops the refit, and with it the refit's share of the cap: the page
reads a product-frame run's curve at the limit that share would have set. Each setting's keys:
`benchmarks.sweeps.tower_settings`. Runs are ordered so that the published settings on
amazon-beauty come first, then the same on amazon-toys, then ours: every finished pair of runs
is a usable comparison.

A default changes only if a tower leads on validation on both datasets; the test split is
ranked once, at the end, for the chosen tower and the control.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.sweeps.final_grid import FORMER_REFIT, user_settings
from benchmarks.sweeps.sweep_grid import BEAUTY, FORMER_TRAINING, TOYS, RunSpec
from benchmarks.sweeps.tower_settings import SETTINGS

DATASETS = (BEAUTY, TOYS)
TOWERS = ("sasrec", "bsarec", "fmlp", "lru")
CANDIDATES = ("published-author-plateau-ema", "published-author-plateau-lr1e-3")
# Later candidates on `published-author-plateau-lr1e-3` (the last on its whole-window form,
# chosen after it), each run on amazon-beauty first (the dataset short of its published
# figure): one that does not lead there cannot lead on both datasets, so it has an amazon-toys
# run only once it is in `LED_ON_BEAUTY`. (tower, setting) pairs.
BEAUTY_FIRST = (
    ("bsarec", "published-author-plateau-lr1e-3-cosine"),
    ("bsarec", "published-author-plateau-lr1e-3-d128"),
    ("lru", "published-author-plateau-lr1e-3"),
    ("bsarec", "published-author-plateau-lr1e-3-batch128"),
    ("bsarec", "published-author-plateau-lr1e-3-mask0.1"),
    ("bsarec", "published-author-plateau-lr1e-3-mask0.3"),
    ("bsarec", "published-author-plateau-lr1e-3-whole"),
    ("bsarec", "published-author-plateau-lr2e-3"),
    ("bsarec", "published-author-plateau-lr1e-3-ema"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16-embedded"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16-d128"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16-d128-dropout0.6"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16-d128-wd0.05"),
)
LED_ON_BEAUTY: tuple[tuple[str, str], ...] = (
    ("bsarec", "published-author-plateau-lr1e-3-whole"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16"),
    ("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16-d128-wd0.05"),
)
# `BEAUTY_FIRST` runs whose amazon-toys run trained beside their amazon-beauty one (free slots)
BOTH_AT_ONCE = (("bsarec", "published-author-plateau-lr1e-3-whole-ema-bf16-d128"),)
PREFIX_TOWERS = ("sasrec", "bsarec")  # the control and the best published model
CHOSEN_TOWER = "bsarec"
# the like-for-like setting chosen on val
CHOSEN_SETTING = "published-author-plateau-lr1e-3-whole-ema-bf16-d128-wd0.05"
# The settings chosen before it, in turn (before `CANDIDATES`, before `BEAUTY_FIRST`, before
# the weight average on the whole window, before d = 128 in bf16, then before the weight
# decay); each trained at `SEEDS`
EARLIER_CHOICES = (
    "published-author-plateau",
    "published-author-plateau-lr1e-3",
    "published-author-plateau-lr1e-3-whole",
    "published-author-plateau-lr1e-3-whole-ema",
    "published-author-plateau-lr1e-3-whole-ema-bf16-d128",
)
SEEDED = EARLIER_CHOICES[2:] + (CHOSEN_SETTING,)  # the settings trained at `SEEDS` last
PLATEAU_SETTING = EARLIER_CHOICES[0]
# The defaults' setting before `CHOSEN_SETTING` became them: `PLATEAU_SETTING` without its lr
# decay. With the lr decayed over it, the refit ends lower (benchmarks/results/refit_decay/).
FORMER_DEFAULT_SETTING = "published-author"
SHIPPED_AS_THEY_ARE = ("train.lr_schedule", "train.precision")  # keys a default leaves alone
PRODUCT_SETTING = "published-prefix"  # the setting that was held against the former default
PRODUCT = f"{PRODUCT_SETTING}-product"  # that setting as recsys train ships it
SAMPLED = ("midx", 64)  # the default's sampler above its full-softmax limit, like for like
WIDE = 256  # the largest sample the sampled runs are held to
# (setting, sampler, negatives) of the sampled runs, each set against its setting's full softmax:
# the default sampler, then it drawing `WIDE`, then the model's own softmax (`exact`) drawing it
SAMPLED_RUNS = (
    (FORMER_DEFAULT_SETTING, *SAMPLED), (FORMER_DEFAULT_SETTING, SAMPLED[0], WIDE),
    (PLATEAU_SETTING, SAMPLED[0], WIDE), (PLATEAU_SETTING, "exact", WIDE),
    (CHOSEN_SETTING, "exact", WIDE),
)  # fmt: skip
ONE_HEAD = "model.tower.num_heads=1"  # the published attention towers' one head
SEEDS = (43, 44)  # a chosen configuration's other seeds (the sweeps' own is 42)


def towers_of(setting: str) -> tuple[str, ...]:
    """The towers a like-for-like setting trains: every one, but at the prefix settings."""
    if setting == "published-author-plateau-lr1e-3":
        return ("bsarec", "lru")  # the chosen configuration's, and the published settings' leader
    if setting == "published-whole" or setting.startswith("published-author"):
        return ("bsarec",)  # the one tower with a whole-window form; the author log's tower
    return PREFIX_TOWERS if setting == "published-prefix" else TOWERS


def planned(dataset: str, setting: str) -> tuple[str, ...]:
    """The towers `setting` trains on `dataset`: a `BEAUTY_FIRST` run on amazon-toys once it led."""
    towers = towers_of(setting)
    if dataset == BEAUTY:
        return towers
    waiting = set(BEAUTY_FIRST) - set(LED_ON_BEAUTY) - set(BOTH_AT_ONCE)
    return tuple(tower for tower in towers if (tower, setting) not in waiting)


def _spec(dataset: str, tower: str, setting: str) -> RunSpec:
    heads = (ONE_HEAD,) if setting.startswith("published") and tower == "sasrec" else ()
    sets = (f"model.tower={tower}", *heads, *_causal(tower), *SETTINGS[setting])
    return RunSpec(dataset, f"{tower}-{setting}", "full", None, sets=sets)


def _causal(tower: str) -> tuple[str, ...]:
    """Bsarec's causal low-pass, the default when the study ran (a setting may set `whole`)."""
    return ("model.tower.window=causal",) if tower == "bsarec" else ()


def towers(out: Path) -> tuple[list[RunSpec], int]:
    """Every tower at both settings on both datasets, published settings first, then the rest.

    The prefix setting's towers come next, each on both datasets in turn (two runs at a time
    make a pair), then the chosen configuration in the product's frame, then bsarec's whole
    window, then the chosen configuration with the default sampler, then the author log's
    settings, then the rest of `SAMPLED_RUNS`, then `PLATEAU_SETTING`'s other seeds, then the
    `CANDIDATES`, amazon-beauty's first, then the other seeds of the one they chose, then the
    `BEAUTY_FIRST` runs on amazon-beauty and those of them in `LED_ON_BEAUTY` or `BOTH_AT_ONCE`
    on amazon-toys, then the other seeds of the `SEEDED` settings, then the chosen configuration
    as a candidate default.
    """
    specs = [
        _spec(dataset, tower, setting)
        for setting in ("published", "ours")
        for dataset in DATASETS
        for tower in TOWERS
    ]
    specs += [
        _spec(dataset, tower, "published-prefix") for tower in PREFIX_TOWERS for dataset in DATASETS
    ]
    specs += [product_spec(dataset) for dataset in DATASETS]
    specs += [_spec(dataset, "bsarec", "published-whole") for dataset in DATASETS]
    specs += [sampled_spec(dataset, *SAMPLED_RUNS[0]) for dataset in DATASETS]
    specs += [_spec(dataset, "bsarec", "published-author") for dataset in DATASETS]
    specs += [_spec(dataset, "bsarec", "published-author-plateau") for dataset in DATASETS]
    specs += [sampled_spec(dataset, *run) for run in SAMPLED_RUNS[1:] for dataset in DATASETS]
    specs += [seed_spec(dataset, seed, PLATEAU_SETTING) for seed in SEEDS for dataset in DATASETS]
    specs += [_spec(dataset, "bsarec", setting) for dataset in DATASETS for setting in CANDIDATES]
    specs += [
        seed_spec(dataset, seed, EARLIER_CHOICES[1]) for seed in SEEDS for dataset in DATASETS
    ]
    specs += [_spec(BEAUTY, tower, setting) for tower, setting in BEAUTY_FIRST]
    specs += [_spec(TOYS, tower, setting) for tower, setting in (*LED_ON_BEAUTY, *BOTH_AT_ONCE)]
    specs += [
        seed_spec(dataset, seed, setting)
        for setting in SEEDED
        for seed in SEEDS
        for dataset in DATASETS
    ]
    specs += [candidate_spec(dataset) for dataset in DATASETS]
    return specs, len(specs)


def seed_spec(dataset: str, seed: int, setting: str) -> RunSpec:
    """`setting`'s bsarec like for like at another seed: `...-seedN`."""
    full = _spec(dataset, CHOSEN_TOWER, setting)
    sets = (*full.sets, f"train.seed={seed}")
    return RunSpec(dataset, f"{full.label}-seed{seed}", "full", None, sets=sets)


def sampled_spec(dataset: str, setting: str, sampler: str, negatives: int) -> RunSpec:
    """`setting` like for like, `sampler` drawing `negatives` for the full softmax.

    The default sampler's runs are named after their setting; another sampler's name follows.
    """
    full = _spec(dataset, CHOSEN_TOWER, setting)
    label = full.label if sampler == SAMPLED[0] else f"{full.label}-{sampler}"
    return RunSpec(dataset, label, sampler, negatives, sets=full.sets)


def product_spec(dataset: str) -> RunSpec:
    """`PRODUCT_SETTING` as `recsys train` ships it: the final grid's settings, midx."""
    one_thread = "train.threads=1"  # as the default's final-grid runs had (two at a time)
    tower = (f"model.tower={CHOSEN_TOWER}", *_causal(CHOSEN_TOWER))
    trained = ("model.init_std=null", *FORMER_TRAINING, FORMER_REFIT)  # as that setting was held
    shipped = (*user_settings(), one_thread, *tower, *SETTINGS[PRODUCT_SETTING], *trained)
    return RunSpec(dataset, f"{CHOSEN_TOWER}-{PRODUCT}", *SAMPLED, sets=shipped)


def as_shipped(setting: str) -> tuple[str, ...]:
    """`setting`'s keys (its tower's too) without `SHIPPED_AS_THEY_ARE`.

    Those two stay at the defaults' values: the lr schedule `constant` (the refit-decay study's
    finding) and the precision `auto`. (The keys are the same on either dataset.)
    """
    keys = _spec(BEAUTY, CHOSEN_TOWER, setting).sets
    return tuple(key for key in keys if key.split("=", 1)[0] not in SHIPPED_AS_THEY_ARE)


def candidate_spec(dataset: str) -> RunSpec:
    """`CHOSEN_SETTING` as `recsys train` would ship it: `bsarec-candidate-default`.

    The defaults' frame (`final_grid.defaults`' full softmax): early stopping and the refit, 30
    minutes, one thread.
    """
    sets = (*user_settings(), "train.threads=1", *as_shipped(CHOSEN_SETTING))
    return RunSpec(dataset, f"{CHOSEN_TOWER}-candidate-default", "full", None, sets=sets)
