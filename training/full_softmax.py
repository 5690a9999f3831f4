"""The full-softmax training loss over the whole catalogue, in item chunks when it is large.

The one-piece loss holds a batch's logits `[N, n]` and their gradient: at N = 6,400 targets
(128 windows of 50) and n = 1,000,000 items that is 51 GB. Above `loss.full_chunk` items the
loss is the same cross-entropy computed `chunk` items at a time: each chunk's log-sum-exp is
checkpointed (its logits are dropped after the forward pass and recomputed in the backward
pass), so a step holds `[N, chunk]` at a time, for one more matmul over the table. Exact: the
chunked loss and its gradients equal the one-piece ones to float rounding
(tests/training/test_full_softmax.py). Under bf16 autocast (`train.precision`) the products
run in bf16; the chunks' logits are taken back to fp32 before their softmax, the one-piece
loss on the CPU keeps its softmax in bf16 (`_InPlaceCrossEntropy`).

Both forms divide the `[N, d]` queries by the temperature rather than the `[N, n]` logits, and
the one-piece form leaves the padding row out of the product instead of masking its column:
the `[N, n]` passes this saves, forward and backward, made a full-softmax epoch of
amazon-beauty about 14% faster (docs/benchmarks/archive/benchmarks.md, "Training throughput").
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from training.precision import EXP_FLOOR, resolve_precision, undo_autocast


def full_softmax_loss(
    queries: Tensor,
    items: Tensor,
    positives: Tensor,
    tau: Any,
    user_items: Tensor | None = None,
    *,
    chunk: int,
) -> Tensor:
    """Mean cross-entropy of the softmax over items 1..n, scored `chunk` items at a time.

    Args:
        queries: `[N, d]` query embeddings.
        items: `[n + 1, d]` item table (row 0 padding, never a candidate).
        positives: `[N]` int64 item_idx.
        tau: Temperature (a number, or a tensor with a gradient when it is learned).
        user_items: `[N, W]` each query's window items (0 = none), masked but for the row's
            positive (`loss.mask_user_items`; None: none masked).
        chunk: Items scored at once (`loss.full_chunk`); n <= chunk items are one piece.

    Returns:
        Scalar mean cross-entropy.

    """
    scaled = queries / tau  # [N, d]
    others = None
    if user_items is not None:
        others = user_items.masked_fill(user_items == positives.unsqueeze(1), 0)
    if logit_columns(items.shape[0], chunk) == items.shape[0] - 1:
        return _one_piece(scaled, items, positives, others)
    # split, not slices: a slice's backward writes its gradient into a zero table of its own
    blocks = items.split(chunk)
    parts = [
        checkpoint(_chunk_lse, scaled, block, index * chunk, others, use_reentrant=False)
        for index, block in enumerate(blocks)
    ]
    lse = torch.logsumexp(torch.stack(parts, dim=1), dim=1)  # [N]
    target = (scaled * items[positives]).sum(1)
    return (lse - target).mean()


def _one_piece(scaled: Tensor, items: Tensor, positives: Tensor, others: Tensor | None) -> Tensor:
    """Cross-entropy over items 1..n from `scaled [N, d]` (queries / tau): logits `[N, n]`.

    Column j of the logits is item j + 1 (the padding row is not scored); `others [N, W]`
    (0 = none) are masked. On the CPU the logits, their softmax and its gradient share one
    `[N, n]` tensor (`_InPlaceCrossEntropy`; bf16 under bf16 autocast); on another device, or
    under fp16 autocast, the logits go through `F.cross_entropy`.
    """
    _, body = items.split([1, items.shape[0] - 1])
    mask = None
    if others is not None:
        mask = torch.zeros(scaled.shape[0], items.shape[0], dtype=torch.bool, device=scaled.device)
        mask = mask.scatter_(1, others, True)[:, 1:]
    in_place = _in_place_dtype(scaled)
    if in_place is not None:
        return _InPlaceCrossEntropy.apply(scaled, body, positives - 1, mask, in_place)
    logits = undo_autocast(scaled @ body.T)
    if mask is not None:
        logits = logits.masked_fill(mask, torch.finfo(logits.dtype).min)
    return F.cross_entropy(logits, positives - 1)


def _in_place_dtype(scaled: Tensor) -> torch.dtype | None:
    """The dtype of the in-place loss's products and `[N, n]` tensor, or None: not in place.

    On the CPU: bf16 for fp32 inputs under bf16 autocast (`train.precision`), else the inputs'
    own fp32 or fp64 (autocast leaves fp64 alone). Other devices, and fp16 autocast, keep
    `F.cross_entropy`.
    """
    if scaled.device.type != "cpu" or scaled.dtype not in (torch.float32, torch.float64):
        return None
    if not torch.is_autocast_enabled("cpu") or scaled.dtype == torch.float64:
        return scaled.dtype
    return torch.bfloat16 if torch.get_autocast_dtype("cpu") == torch.bfloat16 else None


class _InPlaceCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of `scaled @ body.T` with one `[N, n]` tensor for the whole step.

    The forward pass writes the logits, turns them into their softmax in place and keeps that
    for the backward pass, which turns it into the logits' gradient in place before its two
    products. `F.cross_entropy` allocates four `[N, n]` tensors a step (logits, log-softmax,
    the gradients of both; under autocast a fp32 copy of the bf16 logits besides); on the CPU
    each fresh one of more than 32 MB is mapped and faulted in page by page, and the extra
    passes cost as much again (docs/benchmarks/archive/benchmarks.md, "The full softmax's one
    tensor").

    `dtype` is that of the products and of the `[N, n]` tensor: the inputs' own, or bf16 under
    bf16 autocast, where the softmax's passes run over half the bytes, the shifted logits and
    the probabilities rounded to bf16 (the plain autocast form rounds the logits' gradient to
    bf16 before its products; the other items' row sum is summed in bf16); the loss and
    1 - p(target) are taken in the inputs' dtype (`_softmax_in_place`). Loss and gradients
    come back in the inputs' dtype. Equal to the plain form to float rounding, and under bf16
    as close to fp64 as the plain autocast form (tests/training/test_full_softmax.py).
    """

    @staticmethod
    def forward(  # noqa: D102
        ctx: Any,
        scaled: Tensor,
        body: Tensor,
        targets: Tensor,
        mask: Tensor | None,
        dtype: torch.dtype,
    ) -> Tensor:
        with torch.autocast("cpu", enabled=False):
            scaled_c, body_c = scaled.to(dtype), body.to(dtype)
            probs = scaled_c @ body_c.T  # [N, n]
            losses, miss = _softmax_in_place(probs, targets, mask, scaled.dtype)
        ctx.save_for_backward(scaled_c, body_c, targets, probs, miss)
        ctx.spent = False
        return losses.mean()

    @staticmethod
    @once_differentiable  # the softmax is spent in place: no graph of the gradient
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:  # noqa: D102
        if ctx.spent:
            raise RuntimeError("the full softmax's backward pass reuses its softmax: run it once")
        ctx.spent = True
        scaled, body, targets, probs, miss = ctx.saved_tensors
        rows = torch.arange(probs.shape[0], device=probs.device)
        probs[rows, targets] = -miss.to(probs.dtype)  # p(target) - 1
        # now d (summed loss) / d logits; the mean's 1 / N and `grad` scale the two products'
        # results, not the [N, n] tensor: a pass less, and no second bf16 rounding of it
        scale = grad / max(probs.shape[0], 1)  # a batch with no targets: zero gradients
        with torch.autocast("cpu", enabled=False):
            grad_scaled = probs @ body if ctx.needs_input_grad[0] else None
            grad_body = probs.T @ scaled if ctx.needs_input_grad[1] else None
        return _scaled(grad_scaled, scale), _scaled(grad_body, scale), None, None, None


def _softmax_in_place(
    probs: Tensor, targets: Tensor, mask: Tensor | None, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """Turn the logits `probs [N, n]` into their softmax in place, but for the targets' column.

    Returns `(losses [N], miss [N])` in `dtype`: each row's cross-entropy and 1 - p(target),
    which the backward pass writes into the targets' column (left 0 here). The passes run in
    the tensor's own dtype (bf16 under autocast: the shifted logits and the probabilities
    rounded to it); the target's exp is taken in `dtype` and left out of the row's sum, so
    1 - p(target) is the other items' share, accurate where the target holds nearly all the
    mass (in bf16 a p near 1 rounds to 1, and p - 1 to 0). `mask [N, n]`: columns not scored.
    """
    rows = torch.arange(probs.shape[0], device=probs.device)
    target_logits = probs[rows, targets].to(dtype)  # by indexing: bf16 scatter_ copies it all
    if mask is not None:
        probs.masked_fill_(mask, torch.finfo(probs.dtype).min)
    row_max = probs.amax(1)
    probs.sub_(row_max.unsqueeze(1)).clamp_(min=EXP_FLOOR).exp_()
    if mask is not None:
        probs.masked_fill_(mask, 0.0)
    probs[rows, targets] = 0.0
    others = probs.sum(1).to(dtype)
    shift = row_max.to(dtype)
    sums = others + (target_logits - shift).clamp(min=EXP_FLOOR).exp()
    probs.div_(sums.unsqueeze(1).to(probs.dtype))
    return shift + sums.log() - target_logits, others / sums


def _scaled(grad: Tensor | None, scale: Tensor) -> Tensor | None:
    """A product's result times `scale`, in the inputs' dtype (the product's may be bf16)."""
    return None if grad is None else grad.to(scale.dtype) * scale


def logit_bytes(targets: int, rows: int, chunk: int, device: torch.device, precision: str) -> int:
    """Bytes of a step's full-softmax logits and their gradient over a table of `rows` (n + 1).

    `targets` x the columns held at once (`logit_columns`): on the CPU the one-piece loss holds
    one tensor (`_InPlaceCrossEntropy`, bf16 where `train.precision` resolves to bf16); other
    devices, and the chunks, count two fp32 ones.
    """
    columns = logit_columns(rows, chunk)
    if device.type == "cpu" and columns == rows - 1:
        width = 2 if resolve_precision(precision, device) == "bf16" else 4
        return targets * columns * width
    return 2 * targets * columns * 4


def logit_columns(rows: int, chunk: int) -> int:
    """Logit columns a step holds at once for a table of `rows` (n + 1): n up to chunk items."""
    return rows - 1 if rows - 1 <= chunk else chunk


def _chunk_lse(scaled: Tensor, block: Tensor, start: int, others: Tensor | None) -> Tensor:
    """Log-sum-exp `[N]` of the logits over items start..start + c - 1 (c = len(block)), masked.

    The masked columns are scattered into `[N, c + 1]`, items outside the chunk into the spare
    last column, so that no step waits on the device for a count of them.
    """
    logits = undo_autocast(scaled @ block.T)  # [N, c]
    width = block.shape[0]
    mask = torch.zeros(logits.shape[0], width + 1, dtype=torch.bool, device=logits.device)
    if start == 0:
        mask[:, 0] = True  # padding
    if others is not None:
        column = others - start
        column = column.masked_fill((column < 0) | (column >= width), width)
        mask.scatter_(1, column, True)
    return logits.masked_fill(mask[:, :width], torch.finfo(logits.dtype).min).logsumexp(1)
