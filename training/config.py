"""Typed run configuration: one pydantic model per component, and their defaults.

The defaults live here, in one place; `configs/*.yaml` files are override sets on top of them,
read with `--set a.b=c` overrides by `training/config_loading.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from model.config import ModelConfig, Section


class DataConfig(Section):
    """How events become training sequences."""

    split: Literal["loo", "time"] = "loo"
    cutoff: int | None = Field(None, description="Unix time of the global cut for split=time.")
    kcore: int = Field(0, ge=0, description="Iterative k-core filter; 0 disables it.")
    shard_by_rank: bool = Field(
        False,
        description="Data-parallel training: each rank reads only its own users' events "
        "(user_idx % ranks == rank) instead of every rank holding the whole event store.",
    )

    @model_validator(mode="after")
    def _time_split_has_a_cutoff(self) -> DataConfig:
        if self.split == "time" and self.cutoff is None:
            raise ValueError("data.split time needs data.cutoff (Unix seconds of the global cut)")
        return self


class SamplerConfig(Section):
    """The negative sampler; each sampler reads the fields it needs."""

    name: str = "uniform"
    num_negatives: int = Field(256, ge=1)
    per_query: bool = Field(False, description="Per-query negatives instead of shared ones.")
    popularity_alpha: float = Field(0.75, ge=0.0, description="q ~ count^alpha.")
    popularity_floor: float = Field(1.0, ge=0.0, description="Added to counts before ^alpha.")
    kernel_alpha: float = Field(
        100.0, gt=0.0, description="Quadratic kernel alpha o^2 + 1 on the logit o = h.c / tau."
    )
    rff_features: int = Field(1024, ge=1, description="D random frequencies: 2D cos/sin numbers.")
    rff_nu: float = Field(5.0, gt=0.0, description="Gaussian kernel temperature nu.")
    rff_orthogonal: bool = True
    exact_nu: float | None = Field(
        None, gt=0.0, description="exact: draw from softmax(nu h.c); None = 1 / temperature."
    )
    leaf_size: int = Field(32, ge=1, description="Kernel tree leaf bucket size b.")
    refresh_every: int = Field(100, ge=1, description="Full kernel-tree rebuild period (steps).")
    score_floor: float = Field(1e-6, gt=0.0, description="Kernel tree node score floor.")
    tapas_ratio: float = Field(
        8.0, ge=1.0, description="tapas: presample factor r (min(r m, n) items in the first pass)."
    )
    tapas_alpha: float = Field(
        0.75, ge=0.0, le=1.0, description="tapas: first pass ~ max(count^alpha, beta)."
    )
    tapas_beta: float = Field(
        1.0, gt=0.0, description="tapas: floor beta of the squashed popularity count^alpha."
    )
    tapas_temperature: float | None = Field(
        1.0, gt=0.0, description="tapas: second-pass temperature at the start; None = the model's."
    )
    tapas_temperature_final: float | None = Field(
        0.05, gt=0.0, description="tapas: temperature at the end of training; None = no annealing."
    )
    tapas_anneal: Literal["exponential", "linear"] = Field(
        "exponential", description="tapas: how the temperature moves from start to final."
    )
    tapas_correction: Literal["none", "presample"] = Field(
        "presample", description="tapas: the presample's log q, or nothing (the paper's choice)."
    )
    tapas_shards: int = Field(
        1, ge=1, description="tapas: k shards each keeping the top m / k of its presample slice."
    )


class LossConfig(Section):
    """The training objective (see training/losses.py for the names)."""

    name: str = "sampled_softmax"
    mask_user_items: bool = Field(
        False,
        description="No item of the query's own window (its history, the user's later items "
        "in it) is its negative, in the full softmax as in the sampled losses.",
    )
    full_chunk: int = Field(
        16384,
        ge=1,
        description="Full softmax: items scored at once. A larger catalogue is scored in chunks "
        "whose logits are recomputed in the backward pass (exact; memory N x chunk instead of "
        "N x n, for one more matmul over the table).",
    )


class TrainConfig(Section):
    """The optimisation loop."""

    batch_size: int = Field(128, ge=1)
    lr: float = Field(3e-3, gt=0.0)
    lr_schedule: Literal["constant", "cosine", "wsd", "plateau"] = Field(
        "constant",
        description="cosine: from lr down to lr * min_lr_ratio over the training budget "
        "(max_epochs' steps, or max_minutes when that ends sooner; training/optim.py); wsd: "
        "constant, then that cosine over the budget's last decay_fraction; plateau: wsd whose "
        "decay starts sooner, over `patience` validation rounds, when early stopping would "
        "have stopped (`patience` rounds without a gain), the run ending with it.",
    )
    decay_fraction: float = Field(
        0.2, gt=0.0, le=1.0, description="wsd, plateau: the share of the budget the lr decays over."
    )
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0, description="The decay's final lr / lr.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up of the lr over these steps.")
    targets: Literal["all", "last"] = Field(
        "all",
        description="all: a target at every position of a window (SASRec); last: one window "
        "per transition, its preceding L items predicting it (about L times the steps).",
    )
    weight_decay: float = Field(
        0.0, ge=0.0, description="Weight decay of the dense optimiser (L2, or decoupled below)."
    )
    decoupled_weight_decay: bool = Field(
        False,
        description="Decay the weights apart from Adam's gradient scaling (AdamW, Loshchilov & "
        "Hutter 2019) instead of adding weight_decay * w to the gradient (L2). Either form "
        "decays every parameter the Adam optimiser holds.",
    )
    ema_decay: float | None = Field(
        None, gt=0.0, lt=1.0, description="Validate, keep and ship a moving average of the "
        "weights with this decay (training/weight_average.py: a copy of every parameter, all of "
        "it updated each step, a sparse item table too); null: the weights themselves.",
    )  # fmt: skip
    max_epochs: int = Field(200, ge=1)
    refit_epochs: int = Field(
        8, ge=0, description="After early stopping, train the best round this many epochs more "
        "on every event but each user's test one (the validation events added; "
        "training/refit.py); val metrics are the best round's, test and the bundle the refit "
        "model's; a time cap leaves room for them. 0: ship the best round.",
    )  # fmt: skip
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=1e9,
        description="Stop training after this wall time (the best checkpoint is kept).",
    )
    patience: int = Field(10, ge=1, description="Early stopping, in validation rounds.")
    patience_window: int = Field(
        3,
        ge=1,
        description="Early stopping counts patience on the mean val NDCG@10 of this many "
        "rounds, so one noisy round neither restarts nor ends it (1: each round alone; "
        "`training/stopping.py`). The checkpoint is still the best single round.",
    )
    val_every: int = Field(1, ge=1, description="Validate every N epochs.")
    val_every_steps: int | None = Field(
        None,
        ge=1,
        description="Validate every N training steps instead (across epochs' ends): for a "
        "catalogue whose epoch outlasts the budget (null: every `val_every` epochs). On either "
        "cadence the fit's last step (time cap or last epoch) is validated too.",
    )
    val_users: int | None = Field(
        None,
        ge=1,
        description="Validation rounds during training rank a fixed random sample of this many "
        "users (null: all); the final metrics always rank every user.",
    )
    sparse_embeddings: bool = False
    seed: int = Field(42, ge=0, le=2**32 - 1, description="numpy's seed range.")
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = "auto"
    devices: int = Field(1, ge=1, description="Processes (devices) per node; > 1 trains with DDP.")
    num_nodes: int = Field(1, ge=1, description="Machines; each runs `devices` processes.")
    strategy: Literal["auto", "ddp"] = Field(
        "auto", description="Lightning's strategy: ddp (gloo on CPU, nccl on GPU) for > 1 process."
    )
    threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads of torch; null: torch's default (every core, or OMP_NUM_THREADS).",
    )
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto",
        description="bf16: the query tower and the training logits' matmuls run in bfloat16 "
        "autocast (weights, optimiser, losses, samplers and evaluation stay fp32, but for the "
        "CPU full softmax's in-place softmax, bf16 too). Pays where "
        "the hardware multiplies bf16 natively (AVX512-BF16 or AMX CPUs, GPUs); elsewhere it "
        "is slower (docs/benchmarks.md). auto: bf16 where native, fp32 elsewhere.",
    )
    num_workers: int = Field(0, ge=0)
    eval_batch_size: int = Field(512, ge=1)
    bucket_by_length: bool = Field(
        True,
        description="Batch training windows of similar length and trim their common padding.",
    )


class EvalConfig(Section):
    """Full-ranking evaluation (never sampled metrics)."""

    ks: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [10, 20, 100])
    exclude_seen: bool = Field(True, description="Mask the user's history items when ranking.")
    item_chunk: int = Field(65536, ge=1, description="Items scored at once (memory bound).")

    @model_validator(mode="after")
    def _ks_include_10(self) -> EvalConfig:
        if 10 not in self.ks:
            raise ValueError("eval.ks must include 10: checkpoints are chosen on val/ndcg@10")
        return self


class RetrainConfig(Section):
    """`recsys retrain`: the warm start and the quality gate."""

    tolerance: float = Field(
        0.001,
        ge=0.0,
        description="Publish when the candidate's val NDCG@10 >= the served model's minus this.",
    )
    new_item_init: Literal["context", "random"] = Field(
        "context",
        description="New items' rows: the mean query vector of the histories that precede them "
        "in the training sequences, less the mean query (context), or random rows (random).",
    )
    patience: int = Field(
        1,
        ge=1,
        description="Early stopping of a warm retrain, in validation rounds (counted on the "
        "mean of the last `train.patience_window` rounds, as a training's); 1 stops at the "
        "first plateau and leaves the climb after it to the refit (docs/benchmarks.md).",
    )
    max_epochs: int | None = Field(
        2,
        ge=1,
        description="The most epochs a warm retrain fits before its refit (`--max-epochs` "
        "overrides it; `--full` uses `train.max_epochs`); null: `train.max_epochs`. One "
        "event back the refit climbs as well after 2 rounds as after 8 (docs/benchmarks.md).",
    )
    refit_epochs: int | None = Field(
        20,
        ge=0,
        description="The refit of a warm retrain, in epochs (as `train.refit_epochs`, which "
        "`--full` uses); null: `train.refit_epochs`.",
    )
    shrink: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="Warm start: the served weights times this (shrink and perturb, Ash & "
        "Adams 2020); 1 keeps them as served.",
    )
    perturb: float = Field(
        0.0,
        ge=0.0,
        description="Warm start: plus this times the fresh model's initial weights; with a "
        "shrink or a perturbation the optimiser starts fresh.",
    )


# keys added with a default that differs from what configs recorded before them had meant
# (section -> key -> that value): such a config without the key ran with this value
FORMER_DEFAULTS: dict[str, dict[str, Any]] = {
    "train": {"precision": "fp32", "patience_window": 1, "refit_epochs": 0},
    "retrain": {"max_epochs": None},
}


class RecsysConfig(Section):
    """The whole run configuration."""

    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    sampler: SamplerConfig = SamplerConfig()
    loss: LossConfig = LossConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    retrain: RetrainConfig = RetrainConfig()

    @property
    def ranks_by_magnitude(self) -> bool:
        """True when the trained model predicts softmax(|o|) and must rank items by |h . c|.

        That is a model trained with the sampled absolute softmax (Blanc & Rendle 2018, sec.
        3.3): its prediction distribution is exp(|o_i|) / sum_j exp(|o_j|), so a target the
        model learned with o = -15 is among its best items, not its worst. Full softmax
        (`sampler.name: full`) always trains the ordinary softmax.
        """
        return self.sampler.name != "full" and self.loss.name == "absolute_softmax"
