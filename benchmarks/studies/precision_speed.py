"""What `train.precision: bf16` buys on this CPU: matmuls, the SASRec tower, the full softmax.

Usage: python -m benchmarks.studies.precision_speed
    [--out benchmarks/results/precision_speed/precision_speed.json]

Run it alone (a timing benchmark). With 1 and 2 threads, the median of repeated runs of:
- a [560 x 256] x [256 x 12,102] product (amazon-beauty's targets a step against its table),
  fp32 and bf16, as GFLOP/s;
- the default SASRec tower (d = 256, 2 blocks, 2 heads, dropout 0.5) forward and backward over
  128 windows of 20 items, fp32, under bf16 autocast as `train.precision: bf16` runs it, and
  with `torch.compile` of its blocks (the compile itself reported apart);
- the full-softmax logits of those 560 targets, forward and backward, fp32 and bf16.
The CPU's flags say whether it multiplies bf16 natively (avx512_bf16, amx_bf16).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks import records
from model.build import build_query_tower

TARGETS, DIM, ITEMS = 560, 256, 12_102


def _median_ms(step: Callable[[], object], reps: int, warm: int = 3) -> tuple[float, float]:
    """Median wall ms of `step` over `reps` calls after `warm`; and the first call's seconds."""
    times = []
    for _ in range(warm + reps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sorted(times[warm:])[reps // 2] * 1e3, times[0]


def matmul_gflops(dtype: torch.dtype) -> float:
    """GFLOP/s of the `[560 x 256] x [256 x 12,102]` product in `dtype`."""
    a, b = torch.randn(TARGETS, DIM).to(dtype), torch.randn(DIM, ITEMS).to(dtype)
    ms, _ = _median_ms(lambda: a @ b, reps=20)
    return 2 * TARGETS * DIM * ITEMS / (ms / 1e3) / 1e9


def tower_ms(mode: str) -> tuple[float, float]:
    """Forward and backward of the tower: `fp32`, `bf16` (autocast) or `compiled` (fp32).

    Returns:
        The median milliseconds, and the first call's seconds (a compile's, when compiled).

    """
    torch.manual_seed(0)
    cfg = {"dim": DIM, "max_len": 50, "dropout": 0.5, "tower": {"name": "sasrec", "num_heads": 2}}
    tower = build_query_tower(cfg, ITEMS).train()
    if mode == "compiled":
        assert isinstance(tower.blocks, torch.nn.ModuleList)  # sasrec's blocks
        for block in tower.blocks:
            block.compile(dynamic=True)
    seq = torch.randint(1, ITEMS, (128, 20))
    seq[:, :6] = 0  # left padding, as short histories have

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            out = tower(seq)
        out.float().pow(2).sum().backward()

    return _median_ms(step, reps=15)


def full_softmax_ms(bf16: bool) -> float:
    """Median ms of the full-softmax logits' forward and backward, in fp32 or under bf16."""
    torch.manual_seed(0)
    queries = torch.randn(TARGETS, DIM, requires_grad=True)
    items = torch.randn(ITEMS, DIM, requires_grad=True)
    targets = torch.randint(0, ITEMS, (TARGETS,))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = queries @ items.T
        torch.nn.functional.cross_entropy(logits.float() / 0.1, targets).backward()

    return _median_ms(step, reps=10)[0]


def measure(threads: int) -> dict[str, float]:
    """One row of the module docstring's timings with `threads` torch threads."""
    torch.set_num_threads(threads)
    row: dict[str, float] = {"threads": threads}
    row["matmul_gflops_fp32"] = matmul_gflops(torch.float32)
    row["matmul_gflops_bf16"] = matmul_gflops(torch.bfloat16)
    for mode in ("fp32", "bf16", "compiled"):
        row[f"tower_ms_{mode}"], first = tower_ms(mode)
        if mode == "compiled":
            row["compile_s"] = first
    row["full_softmax_ms_fp32"] = full_softmax_ms(False)
    row["full_softmax_ms_bf16"] = full_softmax_ms(True)
    return {k: round(v, 2) for k, v in row.items()}


def cpu_flags() -> list[str]:
    """The bf16-related flags of /proc/cpuinfo (empty elsewhere)."""
    info = Path("/proc/cpuinfo")
    flags = next((ln for ln in info.read_text().splitlines() if ln.startswith("flags")), "")
    return sorted({f for f in flags.split() if "bf16" in f or f.startswith("amx")})


def main() -> None:
    """Time both thread counts; print the result, and keep it as a record with --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = records.start()
    rows = [measure(threads) for threads in (1, 2)]
    payload = {"rows": rows, "cpu_bf16_flags": cpu_flags(), "torch": torch.__version__}
    print(json.dumps(payload, indent=1))
    if args.out:
        config = {"threads": [1, 2], "targets": TARGETS, "dim": DIM, "items": ITEMS}
        records.save(args.out, config, payload, started)


if __name__ == "__main__":
    main()
