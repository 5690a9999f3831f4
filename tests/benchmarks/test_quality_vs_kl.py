"""studies/quality_vs_kl.py: one point per run, labelled by its settings, gap to full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.studies import quality_vs_kl
from tests.benchmarks.helpers import write_record


def _row(
    sampler: str, m: int | None, ndcg: float, curve: list[tuple[float, float]]
) -> dict[str, Any]:
    validation = [
        {"epoch": i, "val/ndcg@10": v, "val/proposal_kl": kl} for i, (v, kl) in enumerate(curve)
    ]
    return {"sampler": sampler, "num_negatives": m, "ndcg@10": ndcg, "val_ndcg@10": 0.06,
            "full_ce": 9.0, "epochs": len(curve), "validation": validation}  # fmt: skip


def test_points_use_the_best_epoch_kl_and_name_each_setting(tmp_path: Path) -> None:
    base = {"overrides": ["train.patience=5", "sampler.per_query=true"]}
    tuned = {"overrides": ["sampler.per_query=true", "sampler.nu=5", "train.seed=43"]}
    runs = {
        "full": (base, _row("full", None, 0.05, [(0.06, 0.0)])),
        "uniform_m64": (base, _row("uniform", 64, 0.044, [(0.05, 9.0), (0.055, 8.0)])),
        "uniform_m16": (base, _row("uniform", 16, 0.040, [(0.05, 9.5)])),
        "rff_m64": (tuned, _row("rff", 64, 0.049, [(0.058, 6.0), (0.057, 4.0)])),
    }
    paths = []
    for name, (config, row) in runs.items():
        paths.append(tmp_path / "runs" / f"{name}.json")
        write_record(paths[-1], row, config)
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    quality_vs_kl.main(paths, 64, out, png)
    summary = json.loads(out.read_text())["metrics"]
    assert summary["reference"]["ndcg@10"] == 0.05
    assert [r["label"] for r in summary["results"]] == ["rff nu=5 seed=43", "uniform"]
    rff, uniform = summary["results"]
    assert rff["proposal_kl"] == 6.0  # the best val epoch's KL, not the last one's
    assert uniform["proposal_kl"] == 8.0
    assert uniform["vs_full"] == pytest.approx(-0.12)
    assert png.stat().st_size > 0


def test_without_a_full_softmax_run_it_refuses(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    write_record(path, _row("uniform", 64, 0.04, [(0.05, 9.0)]), {"overrides": []})
    with pytest.raises(Exception, match="no full-softmax run"):
        quality_vs_kl.main([path], 64, tmp_path / "s.json", tmp_path / "s.png")
