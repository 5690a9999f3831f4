"""The full softmax in item chunks is the one-piece full softmax, in a fraction of the memory.

`RECSYS_TEST_DEVICE=cuda` puts the loss tests' tensors on that device (scripts/gpu-check.sh).
"""

from __future__ import annotations

import functools

import pytest
import torch

from tests.training.device import TEST_DEVICE as DEVICE
from training.config import RecsysConfig
from training.full_softmax import full_softmax_loss, logit_bytes
from training.loop import memory
from training.loop.module_build import build_module

N, ITEMS, DIM = 40, 500, 8
CPU_ONLY = pytest.mark.skipif(DEVICE.type != "cpu", reason="the in-place softmax is the CPU's")


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    queries = torch.randn(N, DIM, generator=gen, dtype=torch.float64).to(DEVICE)
    items = torch.randn(ITEMS + 1, DIM, generator=gen, dtype=torch.float64).to(DEVICE)
    positives = torch.randint(1, ITEMS + 1, (N,), generator=gen)
    window = torch.randint(0, ITEMS + 1, (N, 6), generator=gen)  # 0 = no item
    window[:, 2] = positives  # the positive is in its own window, and stays a candidate
    return queries.requires_grad_(), items.requires_grad_(), positives.to(DEVICE), window.to(DEVICE)


def _reference(logits: torch.Tensor, positives: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """The plain cross-entropy over `logits [N, n + 1]`, padding and window items masked.

    The positive stays a candidate even when it is in its own window.
    """
    masked = logits.clone()
    masked[:, 0] = -torch.inf
    others = window.masked_fill(window == positives.unsqueeze(1), 0)
    masked = masked.scatter(1, others, -torch.inf)
    return torch.nn.functional.cross_entropy(masked, positives)


def _loss_and_grads_of(loss_fn, queries, items, positives, tau, window):  # noqa: ANN001, ANN202
    """The loss and its gradients for the queries, the items and the (learned) temperature."""
    loss = loss_fn(queries, items, positives, tau, window)
    return [loss.detach(), *torch.autograd.grad(loss, [queries, items, tau])]


def _loss_and_grads(chunk: int, masked: bool, tau: torch.Tensor) -> list[torch.Tensor]:
    queries, items, positives, window = _inputs()
    loss_fn = functools.partial(full_softmax_loss, chunk=chunk)
    return _loss_and_grads_of(loss_fn, queries, items, positives, tau, window if masked else None)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "user-items-masked"])
@pytest.mark.parametrize("chunk", [1, 64, 137, ITEMS])
def test_chunked_loss_and_gradients_equal_the_one_piece_ones(chunk: int, masked: bool) -> None:
    tau = torch.tensor(0.3, dtype=torch.float64, device=DEVICE, requires_grad=True)  # learned
    expected = _loss_and_grads(ITEMS + 1, masked, tau)  # one piece
    got = _loss_and_grads(chunk, masked, tau)
    for want, have in zip(expected, got, strict=True):
        torch.testing.assert_close(have, want, rtol=1e-10, atol=1e-12)


def test_both_paths_are_the_plain_cross_entropy() -> None:
    queries, items, positives, window = _inputs(1)
    logits = queries @ items.T / 0.5
    want = _reference(logits, positives, window)
    got = full_softmax_loss(queries, items, positives, 0.5, window, chunk=ITEMS + 1)
    torch.testing.assert_close(got, want)
    logits[:, 0] = -1e300  # padding is never a candidate
    plain = torch.nn.functional.cross_entropy(logits, positives)
    torch.testing.assert_close(full_softmax_loss(queries, items, positives, 0.5, chunk=9), plain)


def _saved_sizes(
    queries: torch.Tensor, items: torch.Tensor, positives: torch.Tensor, chunk: int
) -> list[int]:
    """Elements of each tensor the loss's forward pass keeps for its backward pass."""
    sizes: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        sizes.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        full_softmax_loss(queries, items, positives, 0.5, chunk=chunk).backward()
    return sizes


def _largest_saved(chunk: int) -> int:
    """Elements of the largest tensor the forward pass keeps for the backward pass."""
    queries, items, positives, _ = _inputs(2)
    return max(_saved_sizes(queries, items, positives, chunk))


def test_chunks_keep_no_batch_by_catalogue_tensor_for_the_backward_pass() -> None:
    assert _largest_saved(ITEMS + 1) >= N * ITEMS  # one piece: the whole logits (no padding column)
    assert _largest_saved(64) <= max(N * 64, (ITEMS + 1) * DIM)  # chunks: a chunk, or the table


def test_the_training_step_uses_loss_full_chunk() -> None:
    def step_loss(chunk: int) -> torch.Tensor:  # what the module's full-softmax step gives
        cfg = RecsysConfig.model_validate(
            {"sampler": {"name": "full"}, "loss": {"full_chunk": chunk},
             "model": {"dim": 16, "num_layers": 1, "num_heads": 1, "dropout": 0.0, "max_len": 5},
             "train": {"precision": "fp32"}}  # bf16 rounds the chunks' positive copies
        )  # fmt: skip
        torch.manual_seed(0)
        module = build_module(cfg, ITEMS, torch.ones(ITEMS + 1))
        assert module.full_loss.keywords == {"chunk": chunk}  # type: ignore[union-attr]
        gen = torch.Generator().manual_seed(3)
        inputs = torch.randint(1, ITEMS + 1, (4, 5), generator=gen)
        targets = torch.randint(1, ITEMS + 1, (4, 5), generator=gen)
        return module._step((inputs, targets))[0]

    torch.testing.assert_close(step_loss(50), step_loss(ITEMS), rtol=1e-5, atol=1e-6)


def test_a_catalogue_of_chunk_items_is_one_piece() -> None:
    assert _largest_saved(ITEMS) >= N * ITEMS  # n = chunk items: no chunk of one row


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "user-items-masked"])
@pytest.mark.parametrize("spread", [1.0, 400.0], ids=["cosine-like", "beyond-exp-floor"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
def test_one_piece_loss_and_gradients_equal_the_reference(
    masked: bool, spread: float, dtype: torch.dtype
) -> None:
    """The one-piece loss (in place on the CPU) against autograd through the reference.

    `spread` scales the queries so that most of each row's logits lie more than 87 below its
    largest (their exp is clamped there), as with learned or dot-product logits.
    """
    queries, items, positives, window = _inputs(4)
    queries = (queries.detach() * spread).to(dtype).requires_grad_()
    items = items.detach().to(dtype).requires_grad_()
    tau = torch.tensor(0.5, dtype=dtype, device=DEVICE, requires_grad=True)
    window = window if masked else torch.zeros_like(window)

    def reference(q, e, p, t, w):  # noqa: ANN001, ANN202
        return _reference(q @ e.T / t, p, w)

    want = _loss_and_grads_of(reference, queries, items, positives, tau, window)
    got = _loss_and_grads_of(
        functools.partial(full_softmax_loss, chunk=ITEMS), queries, items, positives, tau,
        window if masked else None,
    )  # fmt: skip
    tolerance = {"rtol": 1e-10, "atol": 1e-12} if dtype == torch.float64 else {}
    for expected, have in zip(want, got, strict=True):
        torch.testing.assert_close(have, expected, **tolerance)


def _saved_batch_by_catalogue(
    queries: torch.Tensor, items: torch.Tensor, positives: torch.Tensor
) -> int:
    """How many tensors of at least N x n elements the loss keeps for its backward pass."""
    return sum(size >= N * ITEMS for size in _saved_sizes(queries, items, positives, ITEMS))


@CPU_ONLY
def test_one_piece_loss_keeps_one_batch_by_catalogue_tensor() -> None:
    queries, items, positives, _ = _inputs(5)
    assert _saved_batch_by_catalogue(queries, items, positives) == 1  # softmax, then gradient


def _relative_error(have: torch.Tensor, want: torch.Tensor) -> float:
    return float((have.double() - want).norm() / want.norm())


def _bf16_errors(
    queries: torch.Tensor, items: torch.Tensor, positives: torch.Tensor, tau: torch.Tensor,
    window: torch.Tensor | None,
) -> list[tuple[float, float]]:  # fmt: skip
    """(in-place, plain) relative errors against fp64 of the loss and its three gradients.

    Both under bf16 autocast from the fp64 inputs' fp32 copies. The plain form is what autocast
    makes of `F.cross_entropy` over the same bf16 products (a fp32 softmax of them).
    """

    def reference(q, e, p, t, w):  # noqa: ANN001, ANN202
        return _reference((q / t) @ e.T, p, w)

    def plain(q, e, p, t, w):  # noqa: ANN001, ANN202
        return _reference(((q / t) @ e.T).float(), p, w)

    none = torch.zeros_like(positives).unsqueeze(1) if window is None else window
    want = _loss_and_grads_of(reference, queries, items, positives, tau, none)
    inputs = [x.detach().float().requires_grad_() for x in (queries, items, tau)]
    in_place = functools.partial(full_softmax_loss, chunk=ITEMS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = _loss_and_grads_of(in_place, *inputs[:2], positives, inputs[2], window)
        base = _loss_and_grads_of(plain, *inputs[:2], positives, inputs[2], none)
    assert got[0].dtype == torch.float32
    return [
        (_relative_error(have, expected), _relative_error(plain_form, expected))
        for expected, have, plain_form in zip(want, got, base, strict=True)
    ]


@CPU_ONLY
@pytest.mark.parametrize("masked", [False, True], ids=["plain", "user-items-masked"])
def test_under_bf16_autocast_the_one_piece_loss_is_as_close_as_plain_cross_entropy(
    masked: bool,
) -> None:
    """In place in bf16 (`train.precision` bf16): as far from fp64 as the plain autocast form.

    The in-place form rounds its softmax and the other items' row sums to bf16 as well. Loss
    and gradients (queries, items, learned temperature) come back in fp32.
    """
    queries, items, positives, window = _inputs(7)
    tau = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    errors = _bf16_errors(queries, items, positives, tau, window if masked else None)
    for error, plain_error in errors:
        assert 0 < plain_error < 0.05  # bf16 products: rounded, not wrong
        # the loss and the temperature's gradient are sums over the batch, whose roundings
        # need not cancel as they do in both forms' [N, d] and [n, d] gradients
        assert error <= max(1.25 * plain_error, 1e-3)


@CPU_ONLY
def test_under_bf16_autocast_a_confident_row_keeps_its_targets_gradient() -> None:
    """A target holding nearly all of its row's mass still pulls its query and its item row.

    In bf16 such a p(target) rounds to 1, and p - 1 to 0: the in-place loss keeps 1 - p in
    the inputs' dtype, and stays as close to fp64 as the plain autocast form (the first version,
    which subtracted 1 in bf16, was 1.00 from fp64 here on the queries' gradient, against 0.018).
    """
    gen = torch.Generator().manual_seed(10)
    items = torch.nn.functional.normalize(torch.randn(ITEMS + 1, 64, generator=gen), dim=1)
    positives = torch.randint(1, ITEMS + 1, (N,), generator=gen)
    queries = (15.0 * items[positives] + torch.randn(N, 64, generator=gen)).double()
    items, queries = items.double().requires_grad_(), queries.requires_grad_()
    p_target = torch.softmax(queries @ items[1:].T, 1).gather(1, positives.unsqueeze(1) - 1)
    assert (p_target > 1 - 2**-9).sum() >= N // 4  # these round to 1 in bf16
    tau = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    errors = _bf16_errors(queries, items, positives, tau, None)
    for error, plain_error in errors[1:3]:  # the queries' and the items' gradients
        assert error <= 1.25 * plain_error + 1e-5, (error, plain_error)


@CPU_ONLY
def test_fp64_under_bf16_autocast_stays_fp64_and_fp16_autocast_takes_cross_entropy() -> None:
    queries, items, positives, window = _inputs(9)
    loss_fn = functools.partial(full_softmax_loss, chunk=ITEMS)
    logits = queries.detach() @ items.detach().T / 0.5
    want = _reference(logits, positives, torch.zeros_like(window))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast leaves fp64 alone
        got = loss_fn(queries, items, positives, 0.5)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=0)
    queries, items = (x.detach().float().requires_grad_() for x in (queries, items))
    with torch.autocast("cpu", dtype=torch.float16):
        kept = _saved_batch_by_catalogue(queries, items, positives)
    assert kept == 2  # F.cross_entropy: the log-softmax, saved by both of its halves


@CPU_ONLY
def test_under_bf16_autocast_the_one_piece_loss_keeps_one_bf16_batch_by_catalogue_tensor() -> None:
    queries, items, positives, _ = _inputs(5)
    queries, items = (x.detach().float().requires_grad_() for x in (queries, items))
    kept: list[torch.dtype] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.numel() >= N * ITEMS:
            kept.append(tensor.dtype)
        return tensor

    with (
        torch.autocast("cpu", dtype=torch.bfloat16),
        torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor),
    ):
        full_softmax_loss(queries, items, positives, 0.5, chunk=ITEMS).backward()
    assert kept == [torch.bfloat16]  # F.cross_entropy under autocast kept two fp32 ones


@CPU_ONLY
def test_one_piece_loss_refuses_a_second_backward_pass() -> None:
    queries, items, positives, _ = _inputs(6)
    loss = full_softmax_loss(queries, items, positives, 0.5, chunk=ITEMS)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="run it once"):
        loss.backward()


def test_the_memory_budget_counts_the_logit_tensors_the_loss_holds() -> None:
    """One `[N, n]` tensor on the CPU (bf16 under bf16), two fp32 ones for chunks and GPUs."""
    cpu, rows = torch.device("cpu"), ITEMS + 1
    assert logit_bytes(N, rows, ITEMS, cpu, "fp32") == N * ITEMS * 4
    assert logit_bytes(N, rows, ITEMS, cpu, "bf16") == N * ITEMS * 2
    assert logit_bytes(N, rows, 64, cpu, "fp32") == 2 * N * 64 * 4
    assert logit_bytes(N, rows, ITEMS, torch.device("cuda"), "fp32") == 2 * N * ITEMS * 4
    cfg = RecsysConfig.model_validate(
        {"sampler": {"name": "full"}, "model": {"dim": 16, "num_layers": 1, "num_heads": 1,
         "max_len": 5, "tower": {"name": "bsarec", "window": "causal"}},
         "train": {"precision": "fp32", "batch_size": 4, "targets": "all"}}
    )  # fmt: skip
    module = build_module(cfg, ITEMS, torch.ones(ITEMS + 1))
    want = 4 * 5 * ITEMS * 4 / memory.MIB  # 4 windows of 5 targets against every item, fp32
    assert memory.budget(module, cfg, world=1)["batch logits per rank"] == pytest.approx(want)
    last = cfg.model_copy(update={"train": cfg.train.model_copy(update={"targets": "last"})})
    one = memory.budget(module, last, world=1)["batch logits per rank"]
    assert one == pytest.approx(want / 5)  # one target a window
