"""The training module from a config: the model, the sampler an `auto` sampler picks, the loss.

`build_module` is what `fit` trains and what tests and the step benchmarks build on their own;
`resolve_sampler` is the one place `auto` turns into the sampler a catalogue trains with.
"""

from __future__ import annotations

import functools
import logging

import torch

from model.build import build_model
from training import distributed
from training.combinations import refuse_clashes
from training.config import RecsysConfig
from training.full_softmax import full_softmax_loss
from training.loop.lit_module import RetrievalModule
from training.losses import binary_loss_caveat, get_loss
from training.sampler_settings import AutoSampler, SampledSettings
from training.samplers import SamplerContext, build_sampler

log = logging.getLogger(__name__)


def resolve_sampler(cfg: RecsysConfig, n: int) -> RecsysConfig:
    """`cfg.for_catalogue(n)`, saying what an `auto` sampler picked (once, on rank 0)."""
    auto = cfg.sampler
    if not isinstance(auto, AutoSampler):
        return cfg
    picked = cfg.for_catalogue(n)
    if not distributed.launched_as_secondary():
        log.info(
            "sampler auto: %s for %d items (the full softmax up to sampler.full_up_to=%d)",
            picked.sampler.name, n, auto.full_up_to,
        )  # fmt: skip
    return picked


def build_module(cfg: RecsysConfig, n: int, counts: torch.Tensor) -> RetrievalModule:
    """Model, sampler (None for the full softmax) and loss, wired into the module.

    Args:
        cfg: The run's configuration (an `auto` sampler picks for `n` items: `module.cfg`).
        n: Catalogue size (item_idx 1..n).
        counts: `[n + 1]` training interaction counts per item_idx (popularity, log-q).

    """
    cfg = resolve_sampler(cfg, n)
    refuse_clashes(cfg)
    model = build_model(cfg.model, n, sparse=cfg.train.sparse_embeddings)
    settings = cfg.sampler
    if not isinstance(settings, SampledSettings):  # the full softmax (`auto` has picked)
        full_loss = functools.partial(full_softmax_loss, chunk=cfg.loss.full_chunk)
        return RetrievalModule(model, cfg, None, full_loss=full_loss)
    ctx = SamplerContext(n, counts, cfg.model.temperature, cfg.train.seed)
    sampler = build_sampler(settings, ctx)
    if not distributed.launched_as_secondary():  # every rank builds the module: warn once
        for caveat in _sampler_caveats(cfg.loss.name, settings, sampler.per_query, n):
            log.warning(caveat)
    return RetrievalModule(model, cfg, sampler, sampled_loss=get_loss(cfg.loss.name))


def _sampler_caveats(loss: str, settings: SampledSettings, per_query: bool, n: int) -> list[str]:
    """What is likely wrong with a sampled run's settings (no error: it still trains)."""
    caveats = []
    m = settings.num_negatives
    binary = binary_loss_caveat(loss, per_query, m)
    if binary is not None:
        caveats.append(binary)
    if m >= n and settings.uses_num_negatives:
        caveats.append(
            f"sampler.num_negatives={m} is not below the catalogue's {n} items: the full "
            "softmax (sampler.name=full; train --sampler full) scores every item once, at no "
            "more cost than that many negatives"
        )
    return caveats
