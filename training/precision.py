"""`train.precision: bf16`: the products that dominate a step in bfloat16, nothing else.

The query tower and the training logits' matmuls run under bf16 autocast; their results are
taken back to fp32 (`undo_autocast`) before anything else sees them, so weights, gradients,
the optimiser, the losses' softmax, the samplers and their log q, and every evaluation stay
fp32. It pays where the hardware multiplies bf16 natively (docs/benchmarks.md, "bf16
autocast"). A positive's own score is an fp32 elementwise product while the logits beside it
are rounded bf16 products (about 3 significant digits), so under bf16 the two differ by that
rounding: in the chunked full softmax the log-sum-exp holds a rounded copy of the positive.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager

import torch
from torch import Tensor


def matmul_precision(precision: str, device: torch.device) -> AbstractContextManager[object]:
    """bf16 autocast on `device` for `precision` "bf16"; nothing at all for "fp32"."""
    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def undo_autocast(x: Tensor) -> Tensor:
    """A bf16 / fp16 result of an autocast product back in fp32; fp32 and fp64 as they are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
