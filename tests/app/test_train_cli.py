"""`recsys train` / `recsys evaluate` end to end in a subprocess; the shipped configs."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from data.synth import generate_events
from model.bundle import read_manifest
from tests.training.tiny import EVERY_POSITION, flags
from training.config import RecsysConfig
from training.config_loading import load_config
from training.sampler_settings import SETTINGS

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--set", "model.dim=16", "--set", "model.max_len=10", "--set", "model.num_layers=1",
    "--set", "train.batch_size=64",
    *flags(EVERY_POSITION),  # a target at every position: a few steps an epoch
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
        (["--num-negatives", "0"], "num-negatives"),
        (["--set", "model.dim=-3"], "model.dim"),
        (
            ["--set", "model.tower.num_heads=2", "--set", "model.dim=33"],
            "model.dim 33 is not divisible by model.tower.num_heads 2",
        ),
        (["--set", "eval.ks=[0, 10]"], "eval.ks.0"),
        (["--set", "train.accelerator=tpu9"], "train.accelerator"),
        (["--set", "sampler.name=nope"], "config sampler.name: unknown sampler 'nope'"),
        (["--sampler", "tapas", "--set", "sampler.per_query=true"], "its keys: name, num_neg"),
        (["--sampler", "full", "--num-negatives", "8"], "not a key of the full sampler"),
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


def test_an_unknown_sampler_is_a_usage_error_naming_the_known_ones(
    ws, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    code, out, err = _main(monkeypatch, capsys, "train", "--sampler", "nope")
    assert code == 2 and out == ""
    assert "Invalid value for '--sampler': unknown sampler 'nope'; known: " in err
    assert "tapas" in err and "full" in err


def test_default_yaml_documents_the_defaults() -> None:
    path = REPO / "configs" / "default.yaml"
    assert load_config([path]) == RecsysConfig()
    text = path.read_text()
    raw = yaml.safe_load(text)
    assert raw == RecsysConfig().model_dump()  # every key present, nothing extra
    # each other sampler's keys, commented under the sampler section: `# name:` then `#   key:`
    block = text[text.index("\nsampler:\n") : text.index("\nloss:\n")]
    commented = [ln[2:] for ln in block.splitlines() if re.match(r"# ([\w-]+|  +\w+):", ln)]
    documented = yaml.safe_load("\n".join(commented))
    default = RecsysConfig().sampler.name
    assert set(documented) == set(SETTINGS) - {default}
    for name, keys in documented.items():
        assert {"name": name, **(keys or {})} == SETTINGS[name]().model_dump(), name


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
    assert manifest.config["loss"]["name"] == loss
    assert manifest.config["sampler"]["name"] == sampler
