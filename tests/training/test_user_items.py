"""`loss.mask_user_items`: no item of a query's own window is its negative (full and sampled)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from training.config_loading import load_config
from training.corrections import STEP_ORDER, Batch, correct, in_rows, query_windows
from training.full_softmax import full_softmax_loss
from training.loop.module_build import build_module
from training.losses import SAMPLED_LOSSES, get_loss
from training.samplers import Negatives

LOW = torch.finfo(torch.float32).min


def test_query_windows_are_each_querys_whole_window_in_step_order() -> None:
    inputs = torch.tensor([[0, 7, 8], [4, 5, 6]])
    targets = torch.tensor([[0, 8, 9], [5, 6, 2]])  # row 0 has two queries, row 1 three
    windows = query_windows(inputs, targets)
    assert windows.tolist() == [[0, 7, 8, 9]] * 2 + [[4, 5, 6, 2]] * 3


def test_the_step_masks_the_rows_own_window_items_and_nothing_else() -> None:
    draw = Negatives(torch.tensor([3, 4, 9]), None, None)  # shared by both rows
    windows = torch.tensor([[0, 4, 5], [9, 3, 1]])
    batch = Batch(draw, torch.tensor([5, 1]), 1.0, windows)
    logits = correct(torch.zeros(2), torch.zeros(2, 3), batch, frozenset(STEP_ORDER))
    assert logits.keep.tolist() == [[True, False, True], [False, True, False]]
    assert torch.all(logits.neg[~logits.keep] == LOW)
    unmasked = correct(torch.zeros(2), torch.zeros(2, 3), Batch(draw, torch.tensor([5, 1]), 1.0),
                       frozenset(STEP_ORDER))  # fmt: skip
    assert unmasked.keep.all()  # without window items the step does nothing
    per_query = Negatives(torch.tensor([[4, 6], [6, 1]]), None, None)
    rows = correct(torch.zeros(2), torch.zeros(2, 2), Batch(per_query, torch.tensor([5, 2]), 1.0,
                   windows), frozenset({"user_items"}))  # fmt: skip
    assert rows.keep.tolist() == [[False, True], [True, False]]


def test_draws_of_the_rows_own_positive_are_left_to_the_accidental_hits_step() -> None:
    draw = Negatives(torch.tensor([3, 2, 7]), None, None)
    windows = torch.tensor([[1, 2, 3], [1, 2, 3]])  # each window holds its own positive
    batch = Batch(draw, torch.tensor([2, 3]), 1.0, windows)
    nce = correct(torch.zeros(2), torch.zeros(2, 3), batch, get_loss("nce").steps)
    assert nce.keep.tolist() == [[False, True, True], [True, False, True]]  # positives kept
    every = correct(torch.zeros(2), torch.zeros(2, 3), batch, frozenset(STEP_ORDER))
    assert every.keep.tolist() == [[False, False, True], [False, False, True]]


def test_in_rows_is_membership_of_each_id_in_its_rows_items_with_repeats() -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        rows, m, width, n = (int(v) for v in torch.randint(1, 12, (4,), generator=gen))
        ids = torch.randint(1, n + 1, (rows, m), generator=gen)  # repeats when m > n
        items = torch.randint(0, n + 1, (rows, width), generator=gen)
        want = (ids.unsqueeze(2) == items.unsqueeze(1)).any(dim=2)
        assert torch.equal(in_rows(ids, items), want)
        shared = ids[0]  # one draw for every row, sorted once
        want = (shared.view(1, -1, 1) == items.unsqueeze(1)).any(dim=2)
        assert torch.equal(in_rows(shared, items), want)


@pytest.mark.parametrize("name", sorted(SAMPLED_LOSSES))
def test_every_sampled_loss_takes_the_step(name: str) -> None:
    assert "user_items" in get_loss(name).steps


def test_sampled_softmax_without_the_windows_negatives() -> None:
    # one query, positive 5 (logit 1), negatives 3, 4 (logits 0, 2); 4 is in the window
    draw = Negatives(torch.tensor([3, 4]), None, None)
    args = (torch.tensor([1.0]), torch.tensor([[0.0, 2.0]]), draw, torch.tensor([5]), 1.0)
    masked = get_loss("sampled_softmax")(*args, torch.tensor([[4, 5]]))
    assert masked.item() == pytest.approx(-1.0 + math.log(math.e + 1.0))


def test_full_softmax_masks_the_window_but_never_the_positive() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, 0.5]], requires_grad=True)  # x the identity
    table = torch.eye(5)
    window = torch.tensor([[0, 2, 3]])
    loss = full_softmax_loss(logits, table, torch.tensor([2]), 1.0, window, chunk=16)
    # item 3 (and padding 0) masked, positive 2 kept: softmax over items 1, 2, 4
    assert loss.item() == pytest.approx(-2.0 + math.log(math.e + math.e**2 + math.e**0.5))
    loss.backward()
    assert logits.grad[0, 3].item() == 0.0 and logits.grad[0, 4].item() > 0.0
    plain = full_softmax_loss(logits, table, torch.tensor([2]), 1.0, chunk=16)
    assert plain.item() == pytest.approx(F.cross_entropy(logits[:, 1:], torch.tensor([1])).item())


# fp32: the by-hand figures below are fp32 products
BASE = [
    "model.dim=8", "model.max_len=4", "model.num_layers=1", "model.dropout=0.0",
    "train.precision=fp32",
]  # fmt: skip
INPUTS = torch.tensor([[0, 2, 3, 4], [5, 6, 7, 8]])
TARGETS = torch.tensor([[0, 3, 4, 9], [6, 7, 8, 10]])


def _module(*sets: str):
    torch.manual_seed(0)
    return build_module(load_config(overrides=[*BASE, *sets]), 12, torch.ones(13))


def test_a_full_softmax_step_leaves_out_each_querys_own_window_items() -> None:
    module = _module("sampler.name=full", "loss.mask_user_items=true")
    got = module._step((INPUTS, TARGETS))[0]
    # by hand: each query's softmax over the items 1..12 not in its window, its positive kept
    queries = module.model.query_tower(INPUTS)[TARGETS != 0]
    logits = queries @ module.model.item_tower.all_embeddings().T / module.cfg.model.temperature
    windows = [[2, 3, 4, 9]] * 3 + [[5, 6, 7, 8, 10]] * 4
    terms = []
    for row, positive in enumerate(TARGETS[TARGETS != 0].tolist()):
        kept = [i for i in range(1, 13) if i == positive or i not in windows[row]]
        terms.append(torch.logsumexp(logits[row, kept], 0) - logits[row, positive])
    torch.testing.assert_close(got, torch.stack(terms).mean())
    plain = _module("sampler.name=full")._step((INPUTS, TARGETS))[0]
    assert plain.item() > got.item()


def test_a_sampled_step_masks_the_negatives_in_the_querys_window() -> None:
    losses = []
    for mask in ("false", "true"):
        module = _module("sampler.name=uniform", "sampler.num_negatives=16",
                         f"loss.mask_user_items={mask}")  # fmt: skip
        module.sampler.refresh(module.model.item_tower.all_embeddings().detach())
        torch.manual_seed(1)  # the same 16 draws
        losses.append(module._step((INPUTS, TARGETS))[0].item())
    # 12 items, 16 draws and windows of 4-5 items: some negative is in its window
    assert losses[1] < losses[0]
