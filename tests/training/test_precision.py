"""`train.precision`: bf16 autocast of the tower and the logits only; auto where it is native."""

import logging
import math
from pathlib import Path

import pytest
import torch

from tests.training.tiny import TINY, tiny_home, validation_rounds
from training.config_loading import load_config
from training.loop.datamodule import item_counts
from training.loop.module_build import build_module
from training.loop.trainer import fit
from training.precision import matmul_precision, native_bf16, resolve_precision


@pytest.mark.parametrize("sampler", ["full", "uniform"])
@pytest.mark.parametrize("chunk", [16384, 8])  # the one-piece and the chunked full softmax
@pytest.mark.parametrize(
    ("precision", "tower_dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)]
)
def test_bf16_reaches_the_tower_and_the_logits_only(
    tmp_path, sampler, chunk, precision, tower_dtype
) -> None:
    _, splits = tiny_home(tmp_path)
    sets = [*TINY, "model.tower=sasrec", f"train.precision={precision}", f"sampler.name={sampler}"]
    module = build_module(
        load_config(overrides=[*sets, f"loss.full_chunk={chunk}"]), splits.num_items,
        item_counts(splits),
    )  # fmt: skip
    seen, autocast_in = [], {}
    module.model.query_tower.blocks[0].ffn[0].register_forward_hook(
        lambda _m, _i, out: seen.append(out.dtype)
    )
    for name in ("sampled_loss", "full_loss"):  # the loss runs inside the logits' autocast
        wrapped = getattr(module, name)
        if wrapped is not None:
            setattr(module, name, _recording(wrapped, autocast_in, "loss"))
    if module.sampler is not None:  # the sampler never does
        module.sampler.sample = _recording(module.sampler.sample, autocast_in, "sampler")
    inputs = torch.randint(1, splits.num_items + 1, (4, 10))
    loss, _ = module._step((inputs, inputs.roll(-1, 1)))
    bf16 = precision == "bf16"
    assert seen == [tower_dtype] and loss.dtype == torch.float32 and torch.isfinite(loss)
    assert autocast_in["loss"] == bf16 and autocast_in.get("sampler", False) is False
    loss.backward()
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def _recording(fn, record: dict, key: str):
    """`fn`, noting in `record[key]` whether CPU autocast was on when it was called."""

    def call(*args, **kwargs):
        record[key] = torch.is_autocast_enabled("cpu")
        return fn(*args, **kwargs)

    return call


def _best_val(tmp_path: Path, precision: str) -> tuple[float, int]:
    """A tiny fixed-seed fit's best val NDCG@10, and its number of items."""
    ws, splits = tiny_home(tmp_path / precision)
    run = ws.root / "runs" / "r"
    sets = [*TINY, "train.max_epochs=6", "train.patience=6", f"train.precision={precision}"]
    fit(load_config(overrides=sets), splits, run)
    best = max(float(row["val/ndcg@10"]) for row in validation_rounds(run))
    return best, splits.num_items


def test_a_bf16_run_learns_as_well_as_fp32(tmp_path) -> None:
    (fp32, items), (bf16, _) = _best_val(tmp_path, "fp32"), _best_val(tmp_path, "bf16")
    chance = sum(1 / math.log2(rank + 1) for rank in range(1, 11)) / items  # one target, random
    assert fp32 > 2 * chance  # the fixed-seed run learns (chance about 0.11 over 40 items)
    assert abs(bf16 - fp32) <= 0.2 * fp32  # stated tolerance: within 20% of the fp32 score


def _cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux reports them (empty elsewhere)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return set()
    lines = cpuinfo.read_text().splitlines()
    return {flag for line in lines if line.startswith("flags") for flag in line.split()}


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads Linux's CPU flags")
def test_auto_is_bf16_exactly_where_the_cpu_multiplies_it_natively() -> None:
    native = bool(_cpu_flags() & {"avx512_bf16", "amx_bf16", "amx_tile"})
    assert native_bf16("cpu") is native
    assert resolve_precision("auto", torch.device("cpu")) == ("bf16" if native else "fp32")
    for chosen in ("fp32", "bf16"):  # an explicit choice is kept, native or not
        assert resolve_precision(chosen, torch.device("cpu")) == chosen
    autocast_on = []
    with matmul_precision("auto", torch.device("cpu")):
        autocast_on.append(torch.is_autocast_enabled("cpu"))
    assert autocast_on == [native]


def test_the_default_is_auto_and_a_fit_says_what_it_used(tmp_path, caplog) -> None:
    cfg = load_config(overrides=[*TINY, "train.max_epochs=1", "train.accelerator=cpu"])
    assert cfg.train.precision == "auto"
    _, splits = tiny_home(tmp_path)
    with caplog.at_level(logging.INFO, logger="recsys.train"):
        fit(cfg, splits, tmp_path / "run")
    used = resolve_precision("auto", torch.device("cpu"))
    assert f"training on cpu, matmuls in {used} (precision auto)" in caplog.text
