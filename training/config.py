"""Typed run configuration: one pydantic model per component, and their defaults.

The defaults live here, in one place, and each sampler's in its settings class
(`training/sampler_settings.py`); YAML files and `--set a.b=c` overrides on top of them are
read by `training/config_loading.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, SerializeAsAny, model_validator

from model.config import ModelConfig, Section
from training.retrain_config import RetrainConfig
from training.sampler_settings import AnySampler, AutoSampler, SampledSettings, validate_sampler


class DataConfig(Section):
    """How events become training sequences."""

    split: Literal["loo", "time"] = Field(
        "loo",
        description="loo: leave-one-out (last event = test, second last = val); time: a "
        "global cut at `cutoff`.",
    )
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


class LossConfig(Section):
    """The training objective (see training/losses.py for the names)."""

    name: str = Field(
        "sampled_softmax",
        description="Sampled loss family: sampled_softmax, absolute_softmax, bernoulli, ranking, "
        "negative_sampling, nce or blackout (the full softmax ignores it).",
    )
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

    batch_size: int = Field(256, ge=1, description="Training windows per batch.")
    lr: float = Field(1e-3, gt=0.0, description="Adam learning rate (SparseAdam: sparse tables).")
    lr_schedule: Literal["constant", "cosine", "wsd", "plateau"] = Field(
        "constant",
        description="cosine: from lr down to lr * min_lr_ratio over the training budget "
        "(max_epochs' steps, or max_minutes when that ends sooner; training/loop/optim.py); wsd: "
        "constant, then that cosine over the budget's last decay_fraction; plateau: wsd whose "
        "decay starts sooner, over `patience` validation rounds, when early stopping would "
        "have stopped (`patience` rounds without a gain), the run ending with it; with a refit, "
        "the fit stops there and the refit decays over its own steps.",
    )
    decay_fraction: float = Field(
        0.2, gt=0.0, le=1.0, description="wsd, plateau: the share of the budget the lr decays over."
    )
    min_lr_ratio: float = Field(0.0, ge=0.0, le=1.0, description="The decay's final lr / lr.")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up of the lr over these steps.")
    targets: Literal["all", "last"] = Field(
        "last",
        description="all: a target at every position of a window (SASRec); last: one window "
        "per transition, its preceding L items predicting it (about L times the steps).",
    )
    item_mask: float = Field(
        0.0, ge=0.0, lt=1.0, description="With targets=last: drop each input item of a training "
        "window but its newest (made padding) with this probability, drawn anew each epoch.",
    )  # fmt: skip
    weight_decay: float = Field(
        0.05, ge=0.0, description="Weight decay of the dense optimiser (L2, or decoupled below)."
    )
    decoupled_weight_decay: bool = Field(
        True,
        description="Decay the weights apart from Adam's gradient scaling (AdamW, Loshchilov & "
        "Hutter 2019) instead of adding weight_decay * w to the gradient (L2). Either form "
        "decays every parameter the Adam optimiser holds.",
    )
    ema_decay: float | None = Field(
        0.999, gt=0.0, lt=1.0, description="Validate, keep and ship a moving average of the "
        "weights with this decay (training/loop/weight_average.py: a copy of every parameter, "
        "all of it updated each step, a sparse item table too); null: the weights themselves.",
    )  # fmt: skip
    max_epochs: int = Field(200, ge=1, description="Upper bound on training epochs.")
    refit_epochs: int = Field(
        16, ge=0, description="After early stopping, train the best round this many epochs more "
        "on every event but each user's test one (the validation events added; "
        "training/workflows/refit.py); val metrics are the best round's, test and the bundle the "
        "refit model's; a time cap leaves room for them. 0: ship the best round.",
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
        "`training/loop/stopping.py`). The checkpoint is still the best single round.",
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
    sparse_embeddings: bool = Field(
        False, description="Sparse item-table gradients (SparseAdam) instead of dense Adam."
    )
    seed: int = Field(42, ge=0, le=2**32 - 1, description="numpy's seed range.")
    accelerator: Literal["auto", "cpu", "gpu", "cuda", "mps"] = Field(
        "auto", description="Where to train: auto picks a GPU when there is one."
    )
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
        "is slower. auto: bf16 where native, fp32 elsewhere.",
    )
    num_workers: int = Field(0, ge=0, description="DataLoader workers for training batches.")
    eval_batch_size: int = Field(512, ge=1, description="Users ranked at once in evaluation.")
    bucket_by_length: bool = Field(
        True,
        description="Batch training windows of similar length and trim their common padding.",
    )

    @model_validator(mode="after")
    def _item_mask_needs_last_targets(self) -> TrainConfig:
        if self.item_mask and self.targets != "last":
            raise ValueError(
                "train.item_mask needs train.targets=last: with a target at every position, "
                "a dropped item's own target would have no query"
            )
        return self


class EvalConfig(Section):
    """Full-ranking evaluation (never sampled metrics)."""

    ks: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [10, 20, 100],
        description="Cut-offs K of Recall, NDCG and MRR@K; must include 10.",
    )
    exclude_seen: bool = Field(True, description="Mask the user's history items when ranking.")
    item_chunk: int = Field(65536, ge=1, description="Items scored at once (memory bound).")

    @model_validator(mode="after")
    def _ks_include_10(self) -> EvalConfig:
        if 10 not in self.ks:
            raise ValueError("eval.ks must include 10: checkpoints are chosen on val/ndcg@10")
        return self


def register_samplers() -> None:
    """Register the built-in samplers: their modules do it when imported.

    Called when a config is read, not when this module is imported: the samplers import torch,
    which the CLI does not load to start.
    """
    import training.samplers  # noqa: F401


def _sampler(value: Any) -> AnySampler:
    register_samplers()
    return validate_sampler(value)


class RecsysConfig(Section):
    """The whole run configuration."""

    data: DataConfig = DataConfig()
    model: ModelConfig = Field(default_factory=ModelConfig)  # its tower loads torch: at use
    sampler: Annotated[SerializeAsAny[AnySampler], PlainValidator(_sampler)] = Field(
        default_factory=lambda: _sampler({}),
        description="The negative sampler: its `name` picks its settings class "
        "(training/sampler_settings.py); the full softmax draws none.",
    )
    loss: LossConfig = LossConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()
    retrain: RetrainConfig = RetrainConfig()

    @model_validator(mode="after")
    def _non_causal_towers_train_the_last_position(self) -> RecsysConfig:
        if self.model.tower.sees_later_items() and self.train.targets != "last":
            raise ValueError(
                f"model.tower {self.model.tower.name!r} sees later items of its window (not "
                "causal): it needs train.targets=last, or a position would learn from its "
                "target; for a target at every position set model.tower.window=causal (and "
                "model.tower.padding=zero)"
            )
        return self

    def for_catalogue(self, num_items: int) -> RecsysConfig:
        """The config with an `auto` sampler replaced by the one it picks for `num_items` items.

        Where a config meets its data (`fit`, `build_module`, `train_on`): what trains, is
        recorded and is written to a bundle names the sampler that ran. Other configs are
        returned as they are.
        """
        if not isinstance(self.sampler, AutoSampler):
            return self
        return self.model_copy(update={"sampler": self.sampler.pick(num_items)})

    @property
    def ranks_by_magnitude(self) -> bool:
        """True when the trained model predicts softmax(|o|) and must rank items by |h . c|.

        That is a model trained with the sampled absolute softmax (Blanc & Rendle 2018, sec.
        3.3): its prediction distribution is exp(|o_i|) / sum_j exp(|o_j|), so a target the
        model learned with o = -15 is among its best items, not its worst. The full softmax
        always trains the ordinary softmax.
        """
        sampled = isinstance(self.sampler, SampledSettings)  # not auto: picked before it is read
        return sampled and self.loss.name == "absolute_softmax"
