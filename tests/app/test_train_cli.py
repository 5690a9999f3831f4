"""`recsys train` / `recsys evaluate` end to end in a subprocess; the shipped configs."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from data.errors import RecsysInputError
from data.synth import generate_events
from model.bundle import read_manifest
from training.config import RecsysConfig
from training.config_loading import load_config
from training.precision import resolve_precision
from training.samplers import SAMPLERS

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--set", "model.dim=16", "--set", "model.max_len=10", "--set", "model.num_layers=1",
    "--set", "train.batch_size=64",
]  # fmt: skip


def _main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str):
    """The real CLI entry point in-process (no interpreter start): (exit code, stdout, stderr)."""
    from app.cli import main

    monkeypatch.setattr(sys, "argv", ["recsys", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def _recsys(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECSYS_HOME": str(home), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_train_json_then_evaluate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=3).write_csv(log)
    home = tmp_path / "home"
    args = ["train", "--dataset", str(log), "--sampler", "popularity", "--num-negatives", "16"]
    done = _recsys(*args, "--max-epochs", "1", *TINY, "--version", "v1", "--json", home=home)
    assert done.returncode == 0, done.stderr[-2000:]
    payload = json.loads(done.stdout)  # stdout holds exactly one JSON object
    noise = [ln for ln in done.stderr.splitlines() if re.search(r"Tip|Warning|warn\(", ln)]
    assert noise == []  # no Lightning advert or warnings about its own internals
    assert payload["version"] == "v1" and payload["sampler"] == "popularity"
    assert payload["num_negatives"] == 16 and payload["epochs"] == 1
    assert {"recall@10", "ndcg@10", "mrr@10", "full_ce"} <= set(payload["metrics"]["test"])
    assert (home / "models" / "CURRENT").read_text().strip() == "v1"
    monkeypatch.setenv("RECSYS_HOME", str(home))
    code, out, err = _main(monkeypatch, capsys, "evaluate", "--split", "test", "--json")
    assert code in (0, None), err
    again = json.loads(out)
    assert again["metrics"]["ndcg@10"] == pytest.approx(payload["metrics"]["test"]["ndcg@10"])
    code, out, err = _main(monkeypatch, capsys, "evaluate", "--model", "nope")
    assert code == 2 and "nope" in err
    (home / "models" / "v1" / "item_embeddings.npy").write_bytes(b"")  # numpy: EOFError
    broken = _recsys("evaluate", "--model", "v1", home=home)
    assert broken.returncode == 2 and "Aborted" not in broken.stderr
    assert broken.stderr.strip().endswith(
        "item_embeddings.npy: unreadable (EOFError: No data left in file)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sampler", "nope"], "unknown sampler"),
        (["--num-negatives", "0"], "num-negatives"),
        (["--set", "model.dim=-3"], "model.dim"),
        (["--set", "model.dim=33"], "model.dim 33 is not divisible by model.num_heads 2"),
        (["--set", "eval.ks=[0, 10]"], "eval.ks.0"),
        (["--set", "train.accelerator=tpu9"], "train.accelerator"),
        (["--set", "sampler.name=nope"], "config sampler.name: unknown sampler 'nope'"),
        (["--set", "loss.name=nope"], "config loss.name: unknown loss 'nope'"),
        (["--set", "data.split=time"], "data.split time needs data.cutoff"),
        (["--dataset", "/no/such/dir"], "no such file"),
    ],
)
def test_bad_options_exit_2(
    ws,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    args: list[str],
    message: str,
) -> None:
    code, out, err = _main(monkeypatch, capsys, "train", *args)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_default_yaml_documents_the_defaults() -> None:
    path = REPO / "configs" / "default.yaml"
    assert load_config([path]) == RecsysConfig()
    raw = yaml.safe_load(path.read_text())
    assert raw == RecsysConfig().model_dump()  # every key present, nothing extra


def test_one_config_per_sampler() -> None:
    names = {p.stem for p in (REPO / "configs" / "samplers").glob("*.yaml")}
    assert names >= set(SAMPLERS) | {"full"}
    for name in names:
        cfg = load_config([REPO / "configs" / "samplers" / f"{name}.yaml"])
        assert cfg.sampler.name == name


def test_bench_quality_writes_table_plot_and_resumes(tmp_path: Path) -> None:
    from app.bench.quality import best_epoch_kl, run_quality

    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=4).write_csv(log)
    sets = ["model.dim=16", "model.max_len=10", "model.num_layers=1", "train.batch_size=64"]
    out, png, home = tmp_path / "q.json", tmp_path / "q.png", tmp_path / "home"
    kw = {"enable_progress_bar": False}
    run_quality(str(log), ["full", "uniform"], [8], out, png, home, 1, sets, **kw)
    rows = json.loads(out.read_text())["results"]
    assert [(r["sampler"], r["num_negatives"]) for r in rows] == [("full", None), ("uniform", 8)]
    for row in rows:
        assert 0 <= row["ndcg@10"] <= row["recall@10"] <= 1 and row["full_ce"] > 0
        assert row["epochs"] == 1 and row["seconds_per_epoch"] > 0 and row["device"]
        assert row["precision"] == resolve_precision("auto", torch.device(row["device"]))
        assert [v["epoch"] for v in row["validation"]] == [0]
    assert rows[0]["validation"][0]["val/ndcg@10"] == pytest.approx(rows[0]["val_ndcg@10"])
    assert rows[1]["validation"][0]["val/proposal_kl"] > 0  # uniform is log n - H(p) away
    assert best_epoch_kl(rows[1]) == rows[1]["validation"][0]["val/proposal_kl"]
    assert best_epoch_kl(rows[0]) is None  # full softmax draws nothing
    gap = {"validation": [{"val/ndcg@10": 0.1, "val/proposal_kl": 2.0}, {"val/ndcg@10": 0.2}]}
    assert best_epoch_kl(gap) is None  # the best round's KL, not another round's
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    first = out.read_text()
    data = run_quality(str(log), ["full", "uniform"], [8, 16], out, None, home, 1, sets, **kw)
    assert len(data["results"]) == 3 and data["results"][2]["num_negatives"] == 16
    assert json.loads(first)["results"] == data["results"][:2]  # earlier runs kept, not redone
    with pytest.raises(RecsysInputError, match="'max_epochs': 1}, not {'max_epochs': 2}"):
        run_quality(str(log), ["uniform"], [8], out, None, home, 2, sets, **kw)  # other settings
    for bad in ("[]", "\xff"):
        (tmp_path / "bad.json").write_text(bad, encoding="latin-1")
        with pytest.raises(RecsysInputError, match="bad.json: not a results JSON"):
            run_quality(str(log), ["uniform"], [8], tmp_path / "bad.json", None, home, 1, sets)
    with pytest.raises(RecsysInputError, match="not a results JSON"):
        run_quality(str(log), ["uniform"], [8], tmp_path, None, home, 1, sets)  # a folder


def test_best_epoch_kl_is_read_at_the_best_validation_round() -> None:
    from app.bench.quality import best_epoch_kl

    curve = [
        {"epoch": 0, "val/ndcg@10": 0.01, "val/proposal_kl": 5.0},
        {"epoch": 1, "val/ndcg@10": 0.03, "val/proposal_kl": 3.0},
        {"epoch": 2, "val/ndcg@10": 0.02, "val/proposal_kl": 2.0},
    ]
    assert best_epoch_kl({"validation": curve}) == 3.0
    assert best_epoch_kl({"validation": [{"epoch": 0, "val/ndcg@10": 0.1}]}) is None


def test_a_diverging_training_fails_naming_the_lr_and_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    log = tmp_path / "tiny.csv"
    generate_events(100, 50, 1200, seed=3).write_csv(log)
    monkeypatch.setenv("RECSYS_HOME", str(tmp_path / "home"))
    args = ["train", "--dataset", str(log), "--max-epochs", "3", *TINY, "--json"]
    code, out, err = _main(monkeypatch, capsys, *args, "--set", "train.lr=1e30")
    assert code == 1 and out == ""
    assert "training diverged: the loss is nan" in err and "lower train.lr (now 1e+30)" in err
    assert not (tmp_path / "home" / "models" / "CURRENT").exists()


def test_settings_that_clash_are_refused_before_any_ingest_or_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    home = tmp_path / "home"
    log = tmp_path / "log.csv"
    generate_events(30, 20, 300, seed=0).write_csv(log)
    clash = ["--sampler", "in-batch", "--set", "loss.name=nce", "--home", str(home)]
    for command in (["train", "--dataset", str(log)], ["tune", "--budget-minutes", "1"]):
        code, out, err = _main(monkeypatch, capsys, *command, *clash)
        assert code == 2 and "negatives are the batch's positives" in err, err
    assert not home.exists() or not any(home.rglob("*.parquet"))  # nothing ingested
    assert not (home / "tune").exists()  # no study that would refuse the fixed command


def test_a_sampler_whose_settings_file_is_missing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.commands import train_cmds

    monkeypatch.setattr(train_cmds, "CONFIGS_DIR", tmp_path)  # configs/ not beside the code
    with pytest.raises(RecsysInputError, match="quadratic sampler's settings are missing"):
        train_cmds.build_config("quadratic", None, None, [], [])
    with pytest.raises(RecsysInputError, match="unknown sampler 'nope'"):
        train_cmds.build_config("nope", None, None, [], [])


@pytest.mark.parametrize(
    ("sampler", "loss"), [("tapas", "sampled_softmax"), ("bernoulli", "bernoulli")]
)
def test_tapas_and_bernoulli_train_from_the_cli_with_their_presets_loss(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    sampler: str,
    loss: str,
) -> None:
    log = tmp_path / "tiny.csv"
    generate_events(150, 80, 2000, seed=3).write_csv(log)
    home = tmp_path / "home"
    args = ["train", "--dataset", str(log), "--home", str(home), "--sampler", sampler]
    code, out, err = _main(monkeypatch, capsys, *args, "--num-negatives", "16",
                           "--max-epochs", "1", *TINY, "--json")  # fmt: skip
    assert code in (0, None), err[-2000:]
    payload = json.loads(out)
    assert payload["sampler"] == sampler and payload["num_negatives"] == 16
    assert payload["metrics"]["test"]["ndcg@10"] > 0
    manifest = read_manifest(home / "models" / payload["version"])
    # bernoulli's preset pairs its own loss; tapas's keeps the sampled softmax
    assert manifest["config"]["loss"]["name"] == loss
    assert manifest["config"]["sampler"]["name"] == sampler
