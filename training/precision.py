"""`train.precision: bf16`: the products that dominate a step in bfloat16, nothing else.

The query tower and the training logits' matmuls run under bf16 autocast; their results are
taken back to fp32 (`undo_autocast`) before anything else sees them, so weights, gradients,
the optimiser, the losses' softmax, the samplers and their log q, and every evaluation stay
fp32. One exception: the one-piece full softmax on the CPU keeps its `[N, n]` logits, softmax
and gradient in one bf16 tensor (`training/full_softmax.py`: the loss and 1 - p(target)
are taken in fp32, the others' row sum in bf16, and the gradients come back in fp32).
It pays where the hardware multiplies bf16 natively (docs/benchmarks/archive/benchmarks.md, "bf16
autocast").
Per-query negatives' logits on the CPU are sparse products in fp32
(`training/gathered_scores.py`). A positive's own score is an fp32 elementwise product while
the logits beside it are rounded bf16 products (about 3 significant digits), so under bf16 the
two differ by that rounding: in the chunked full softmax the log-sum-exp holds a rounded copy
of the positive.

`train.precision: auto` (the default) is bf16 where the device multiplies bf16 natively (a CUDA
GPU of compute capability 8.0 and up; a CPU with AVX512-BF16 or AMX) and fp32 elsewhere, where
bf16 products are emulated and slower than fp32 (docs/benchmarks/archive/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import functools
from contextlib import AbstractContextManager

import torch
from torch import Tensor


def matmul_precision(precision: str, device: torch.device) -> AbstractContextManager[object]:
    """bf16 autocast on `device` for "bf16" (and "auto" where native); nothing for "fp32"."""
    if resolve_precision(precision, device) != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def resolve_precision(precision: str, device: torch.device) -> str:
    """The precision used: `precision` itself, or for "auto" what `device` multiplies natively."""
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device.type) else "fp32"


def precision_line(precision: str, device: torch.device) -> str:
    """What a training logs at its start: `training on cpu, matmuls in bf16 (precision auto)`."""
    used = resolve_precision(precision, device)
    return f"training on {device.type}, matmuls in {used} (precision {precision})"


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether `device_type` multiplies bf16 natively: a bf16 CUDA GPU, an AMX or AVX512-BF16 CPU.

    The CPU answer is torch's own feature checks; a torch without them answers no.
    """
    if device_type == "cuda":
        # native only: torch also answers yes for GPUs that emulate bf16 (V100, T4), slower there
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device_type != "cpu":
        return False
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


# exp below about -87.3 is subnormal in fp32 (or 0), which torch's CPU exp_ computes 15-40x
# slower (docs/benchmarks/archive/benchmarks.md, "The full softmax's one tensor"): in-place softmax
# passes clamp
# their shifted logits here; the probabilities the clamp rounds up stay below 1.7e-38
EXP_FLOOR = -87.0


def undo_autocast(x: Tensor) -> Tensor:
    """A bf16 / fp16 result of an autocast product back in fp32; fp32 and fp64 as they are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
