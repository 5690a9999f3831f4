"""The sweep report pairs each run with the full-softmax run of its own model settings."""

from __future__ import annotations

from typing import Any

from benchmarks.sweeps.sweep_report import reference_of


def _record(name: str, sampler: str, temperature: float, **model: Any) -> dict[str, Any]:
    """A run's row (its record's metrics, with its config)."""
    config = {"model": {"temperature": temperature, "max_len": 50, **model}}
    return {"name": name, "sampler": sampler, "config": config}


def test_a_run_is_paired_with_the_full_softmax_of_its_own_temperature() -> None:
    old_full = _record("full", "full", 0.05)
    new_full = _record("full-tau0.1", "full", 0.1)
    fulls = [old_full, new_full]
    assert reference_of(_record("rff_m64", "rff", 0.05), fulls) is old_full
    assert reference_of(_record("rff-tau0.1_m64", "rff", 0.1), fulls) is new_full
    assert reference_of(new_full, fulls) is new_full  # a reference of its own


def test_keys_one_record_lacks_do_not_count_and_no_match_falls_back_to_the_first() -> None:
    old_full = _record("full", "full", 0.05)  # recorded before `ffn_dim` existed
    fulls = [old_full, _record("full-tau0.1", "full", 0.1, ffn_dim=None)]
    assert reference_of(_record("uniform_m64", "uniform", 0.05, ffn_dim=None), fulls) is old_full
    other = _record("full-tau0.2", "full", 0.2)
    assert reference_of(_record("d64", "uniform", 0.05, dim=64), [other]) is other
    assert reference_of(_record("u", "uniform", 0.05), []) is None
