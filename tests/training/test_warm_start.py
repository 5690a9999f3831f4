"""Warm start: weights and Adam moments carried onto a larger catalogue; new items' rows."""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from types import SimpleNamespace

import polars as pl
import pytest
import torch
from torch.nn.functional import cosine_similarity, normalize

from model.bundle import Manifest
from training.config_loading import load_config
from training.loop.module_build import build_module
from training.workflows.warm_start import QUERY_TABLE, WarmStart, new_item_contexts

CFG = load_config(overrides=["model.dim=8", "model.max_len=4", "model.num_layers=1"])
OLD, NEW = 10, 13


def _module(n: int, seed: int):
    torch.manual_seed(seed)
    return build_module(CFG, n, torch.ones(n + 1))


def _trained_state() -> tuple[dict, dict]:
    """A module over OLD items after one Adam step: (state_dict, optimiser state_dict)."""
    module = _module(OLD, 0)
    optimizer = module.configure_optimizers()
    module.model.item_embedding_weight.sum().backward()
    optimizer.step()
    return module.state_dict(), optimizer.state_dict()


def _contexts() -> tuple[torch.Tensor, torch.Tensor]:
    train = pl.DataFrame({"items": [[1, 2, 11, 3], [4, 11, 12], [5, 6]]})
    return new_item_contexts(train, OLD, max_len=4)


def test_known_rows_and_the_tower_carry_over_and_random_new_rows_stay_fresh() -> None:
    state, _ = _trained_state()
    module = _module(NEW, 1)
    fresh = module.model.item_embedding_weight.detach().clone()
    WarmStart(state, None, OLD, "random", _contexts()).apply(module)
    table = module.model.item_embedding_weight.detach()
    torch.testing.assert_close(table[: OLD + 1], state[QUERY_TABLE])
    torch.testing.assert_close(table[OLD + 1 :], fresh[OLD + 1 :])
    for name, value in state.items():
        if value.shape == module.state_dict()[name].shape:
            torch.testing.assert_close(module.state_dict()[name], value)


def test_adam_moments_continue_with_zero_rows_for_new_items() -> None:
    state, opt_state = _trained_state()
    module = _module(NEW, 1)
    (callback,) = WarmStart(state, [opt_state], OLD, "random", _contexts()).apply(module)
    optimizer = module.configure_optimizers()
    callback.on_train_start(SimpleNamespace(optimizers=[optimizer]), module)
    moments = optimizer.state[module.model.item_embedding_weight]
    old_moments = next(m for m in opt_state["state"].values() if m["exp_avg"].shape[0] == OLD + 1)
    torch.testing.assert_close(moments["exp_avg"][: OLD + 1], old_moments["exp_avg"])
    assert moments["exp_avg"][OLD + 1 :].abs().sum() == 0
    assert moments["exp_avg_sq"].shape == module.model.item_embedding_weight.shape


def test_contexts_are_the_histories_before_each_new_item() -> None:
    histories, targets = _contexts()
    assert targets.tolist() == [11, 11, 12]
    assert histories.tolist() == [[0, 0, 1, 2], [0, 0, 0, 4], [0, 0, 4, 11]]


def test_context_rows_point_where_the_queries_for_the_item_point() -> None:
    state, _ = _trained_state()
    histories, targets = _contexts()
    before = _module(NEW, 1)  # the warm model as the context step sees it: new rows random
    WarmStart(state, None, OLD, "random", (histories, targets)).apply(before)
    before.eval()
    with torch.no_grad():
        queries = normalize(before.model.query_tower.encode(histories), dim=1)
    module = _module(NEW, 1)
    WarmStart(state, None, OLD, "context", (histories, targets)).apply(module)
    table = module.model.item_embedding_weight.detach()
    mean_norm = state[QUERY_TABLE][1:].norm(dim=1).mean()
    for item in (11, 12):
        want = queries[targets == item].mean(0) - queries.mean(0)
        assert cosine_similarity(table[item], want, dim=0) > 0.9999
        torch.testing.assert_close(table[item].norm(), mean_norm)
    torch.testing.assert_close(table[13], before.model.item_embedding_weight[13].detach())


def test_a_learned_temperature_carries_over_from_the_served_bundle() -> None:
    from training.workflows.warm_start import from_served

    learned = load_config(
        overrides=["model.dim=8", "model.max_len=4", "model.learn_temperature=true",
                   "sampler.name=uniform"]  # the default, midx, keeps its temperature
    )  # fmt: skip
    old = build_module(learned, OLD, torch.ones(OLD + 1))
    manifest = Manifest(
        version="v1", created_at=datetime.now(UTC), dataset="toy", num_items=OLD,
        model=learned.model, temperature=0.3,
    )  # fmt: skip
    served = SimpleNamespace(
        query_tower=old.model.query_tower, item_embeddings=None, manifest=manifest
    )
    retrain = learned.retrain.model_copy(update={"new_item_init": "random"})
    start = from_served(served, None, retrain, _contexts())
    module = build_module(learned, NEW, torch.ones(NEW + 1))
    assert module.current_temperature() == pytest.approx(learned.model.temperature)
    start.apply(module)
    assert module.current_temperature() == pytest.approx(0.3)
    shrunk = from_served(served, None, retrain.model_copy(update={"shrink": 0.5}), _contexts())
    module = build_module(learned, NEW, torch.ones(NEW + 1))
    shrunk.apply(module)
    assert module.current_temperature() == pytest.approx(0.3)  # not shrunk with the weights


def test_shrink_and_perturb_mixes_the_served_weights_with_a_fresh_initialisation() -> None:
    state, opt_state = _trained_state()
    module = _module(NEW, 1)
    fresh = {name: value.clone() for name, value in module.state_dict().items()}
    start = WarmStart(state, [opt_state], OLD, "random", _contexts(), shrink=0.6, perturb=0.1)
    assert start.apply(module) == []  # Adam starts fresh: its moments fit the unshrunk weights
    table = module.model.item_embedding_weight.detach()
    want = 0.6 * state[QUERY_TABLE] + 0.1 * fresh[QUERY_TABLE][: OLD + 1]
    torch.testing.assert_close(table[: OLD + 1], want)
    torch.testing.assert_close(table[OLD + 1 :], fresh[QUERY_TABLE][OLD + 1 :])  # new rows
    mixed = 0
    for name, value in state.items():
        if value.shape == fresh[name].shape and value.is_floating_point():
            torch.testing.assert_close(module.state_dict()[name], 0.6 * value + 0.1 * fresh[name])
            mixed += 1
    assert mixed > 10  # the query tower's blocks, norms and positions, not only the tables


def test_adam_moments_start_fresh_when_the_parameters_differ_from_the_served_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`--set model.learn_temperature=true` adds a parameter; a moment of another shape."""
    state, opt_state = _trained_state()
    learned = load_config(
        overrides=["model.dim=8", "model.max_len=4", "model.num_layers=1",
                   "model.learn_temperature=true", "sampler.name=uniform"]
    )  # fmt: skip
    torch.manual_seed(1)
    module = build_module(learned, NEW, torch.ones(NEW + 1))
    (callback,) = WarmStart(state, [opt_state], OLD, "random", _contexts()).apply(module)
    optimizer = module.configure_optimizers()
    with caplog.at_level(logging.WARNING, logger="training.workflows.warm_start"):
        callback.on_train_start(SimpleNamespace(optimizers=[optimizer]), module)
    assert len(optimizer.state) == 0 and "start fresh" in caplog.text
    reshaped = copy.deepcopy(opt_state)
    for moments in reshaped["state"].values():
        moments["exp_avg"] = torch.zeros(OLD + 1, 3)  # not the table's [n + 1, 8]
    module = _module(NEW, 1)
    (callback,) = WarmStart(state, [reshaped], OLD, "random", _contexts()).apply(module)
    optimizer = module.configure_optimizers()
    callback.on_train_start(SimpleNamespace(optimizers=[optimizer]), module)
    assert len(optimizer.state) == 0
