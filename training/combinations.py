"""Settings that do not train together, refused before anything is built (exit 2).

Each rule says which settings clash and why, asking the sampler's settings class what it can
do (`training/sampler_settings.py`); `build_run_config` and `build_module` call
`refuse_clashes`. `refuse_missing_accelerator` refuses an accelerator this machine lacks.
"""

from __future__ import annotations

from data.errors import RecsysInputError
from training.config import RecsysConfig
from training.sampler_settings import AutoSampler, FullSoftmax

NEEDS_LOG_Q = ("nce", "blackout", "bernoulli")  # losses whose terms are built on the noise's q


def refuse_clashes(cfg: RecsysConfig) -> None:
    """Raise RecsysInputError naming the first pair of settings that cannot train together.

    An `auto` sampler is held to each of its picks, so a clash is refused before the
    catalogue is known; naming a sampler lifts it.
    """
    if isinstance(cfg.sampler, AutoSampler):
        for where, pick in cfg.sampler.picks().items():
            try:
                refuse_clashes(cfg.model_copy(update={"sampler": pick}))
            except RecsysInputError as err:
                raise RecsysInputError(
                    f"sampler auto trains {pick.name} on a catalogue of {where}, and {err} "
                    "(or name the sampler: --sampler NAME)"
                ) from None
        return
    sampler = cfg.sampler
    full = isinstance(sampler, FullSoftmax)
    if full and cfg.train.sparse_embeddings:
        raise RecsysInputError(
            "full softmax touches every item row: use train.sparse_embeddings=false"
        )
    if cfg.loss.name == "nce" and sampler.positives_as_negatives:
        raise RecsysInputError(
            f"loss nce needs noise drawn independently of the positives; the {sampler.name} "
            "sampler's negatives are the batch's positives: use popularity or uniform"
        )
    if sampler.unit_kernel and not cfg.model.normalize:
        raise RecsysInputError(
            f"the {sampler.name} sampler's kernel follows the softmax on unit vectors only: "
            "use model.normalize=true (cosine logits; with model.temperature=0.1), or another "
            "sampler"
        )
    if cfg.loss.name == "bernoulli" and not (sampler.inclusion_probability or full):
        raise RecsysInputError(
            "loss bernoulli weighs each drawn item once by 1 / b, its probability of being in "
            f"the draw; the {sampler.name} sampler draws with repeats and reports expected "
            "counts: use sampler.name=bernoulli, or loss.name=sampled_softmax"
        )
    _refuse_a_loss_without_its_log_q(cfg)
    _refuse_a_moving_temperature_a_sampler_fixes(cfg)


def _refuse_a_loss_without_its_log_q(cfg: RecsysConfig) -> None:
    """Refuse nce, blackout and bernoulli with negatives that report no log q (tapas, none)."""
    if cfg.loss.name in NEEDS_LOG_Q and not cfg.sampler.reports_log_q():
        raise RecsysInputError(
            f"loss {cfg.loss.name} weighs each negative by its proposal's log q, and the "
            f"{cfg.sampler.name} sampler reports none as set (tapas: sampler.correction=none): "
            "use sampler.correction=presample, or loss.name=sampled_softmax"
        )


def _refuse_a_moving_temperature_a_sampler_fixes(cfg: RecsysConfig) -> None:
    """Refuse a learned or scheduled temperature with a sampler built on the starting one.

    The sampler would keep the starting value and drift from the model it claims to follow.
    A temperature is learned or scheduled, not both.
    """
    model, sampler = cfg.model, cfg.sampler
    if model.learn_temperature and model.temperature_final is not None:
        raise RecsysInputError(
            "model.learn_temperature=true trains the temperature and model.temperature_final "
            "schedules it: choose one"
        )
    moves = "model.learn_temperature=true" if model.learn_temperature else None
    moves = "model.temperature_final" if model.temperature_final is not None else moves
    if moves and sampler.fixes_the_temperature():
        own = sampler.own_temperature
        fix = f"give the sampler its own (sampler.{own})" if own else "use another sampler"
        raise RecsysInputError(
            f"the {sampler.name} sampler is built on the model's starting temperature, "
            f"which {moves} moves: fix the temperature, or {fix}"
        )


def refuse_missing_accelerator(accelerator: str) -> None:
    """Refuse `train.accelerator` naming a device Lightning would not find here (its exit 1).

    `gpu` is CUDA or MPS, as Lightning picks; `auto` and `cpu` always run.
    """
    if accelerator not in ("gpu", "cuda", "mps"):
        return
    # Lightning is imported here, not with the CLI: every other command starts without it
    from lightning_fabric.accelerators import CUDAAccelerator, MPSAccelerator

    cuda, mps = CUDAAccelerator.is_available(), MPSAccelerator.is_available()
    if not {"gpu": cuda or mps, "cuda": cuda, "mps": mps}[accelerator]:
        raise RecsysInputError(
            f"train.accelerator={accelerator}, but torch sees no such device on this machine: "
            "use auto (the best device there is) or cpu"
        )
