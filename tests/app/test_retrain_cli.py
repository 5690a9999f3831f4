"""`recsys retrain` and `recsys train --reuse-published` from the command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from data import store
from data.lock import LOCK_FILE
from data.synth import generate_events
from data.workspace import Workspace
from tests.training.tiny import EVERY_POSITION, flags
from training.config_loading import load_config
from training.workflows.pipeline import train

RECSYS = str(Path(sys.executable).parent / "recsys")

TINY = [
    "--set", "model.dim=16", "--set", "model.max_len=10", "--set", "model.num_layers=1",
    "--set", "train.batch_size=64", "--set", "eval.ks=[10,20]",
    *flags(EVERY_POSITION),  # a target at every position: a few steps an epoch
]  # fmt: skip
PAYLOAD = {
    "version", "previous_version", "published", "reason", "metrics", "new_items", "new_users",
    "new_events", "rejected", "gate",
}  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A home serving model v1 trained on an old log, and a new log with bad rows."""
    folder = tmp_path_factory.mktemp("cli")
    events = generate_events(150, 80, 2000, seed=3)
    cut = events["timestamp"].quantile(0.8)
    events.filter(pl.col("timestamp") < cut).write_csv(folder / "old.csv")
    new = events.filter(pl.col("timestamp") >= cut).cast({"timestamp": pl.String})
    bad = pl.DataFrame({"user_id": ["u1", ""], "item_id": ["i1", "i2"], "timestamp": ["x", "5"]})
    pl.concat([new, bad]).write_csv(folder / "new.csv")
    home = folder / "home"
    cfg = load_config(overrides=[*TINY[1::2], "train.max_epochs=1"])
    train(Workspace(home), cfg, dataset=str(folder / "old.csv"), version="v1")
    return home, folder / "new.csv"


@pytest.fixture
def served_copy(served: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the served home that a test may change, and the new log."""
    home, new = served
    shutil.copytree(home, tmp_path / "home")
    return tmp_path / "home", new


def test_retrain_json_payload_and_exit_0_when_kept_or_published(
    served_copy: tuple[Path, Path], run_cli
) -> None:
    copy, new = served_copy
    done = run_cli("retrain", "--logs", str(new), "--max-epochs", "1", "--json", home=copy)
    assert done.returncode == 0, done.stderr[-2000:]
    payload = json.loads(done.stdout)
    assert set(payload) == PAYLOAD and payload["previous_version"] == "v1"
    assert payload["rejected"] == 2 and payload["new_events"] > 0
    assert set(payload["metrics"]) == {"candidate", "current"}
    gate = payload["gate"]  # the paired comparison that decided
    assert gate["decision"] in {"publish", "refuse"} and gate["confidence"] == 0.95
    low, high = gate["interval"]
    assert low <= gate["mean_difference"] <= high and gate["rows"] > 0
    assert (gate["decision"] == "publish") == payload["published"]
    served_now = (copy / "models" / "CURRENT").read_text().strip()
    assert served_now == (payload["version"] if payload["published"] else "v1")
    text = run_cli("retrain", "--logs", str(new), "--max-epochs", "0", "--full", home=copy)
    assert text.returncode == 0 and "not published" in text.stdout
    # new events: those the served model was not trained on (none once the candidate serves)
    unseen = 0 if payload["published"] else payload["new_events"]
    assert "served model kept" in text.stdout and f"{unseen} new events" in text.stdout


def test_logs_the_served_model_has_seen_train_nothing_and_exit_0(
    served_copy: tuple[Path, Path], run_cli
) -> None:
    copy, new = served_copy
    first = run_cli("retrain", "--logs", str(new), "--max-epochs", "0", "--force", home=copy)
    assert first.returncode == 0 and " published" in first.stdout, first.stderr[-2000:]
    serving = (copy / "models" / "CURRENT").read_text().strip()
    again = run_cli("retrain", "--logs", str(new), "--json", home=copy)
    assert again.returncode == 0, again.stderr[-2000:]
    payload = json.loads(again.stdout)
    assert set(payload) == PAYLOAD and payload["new_events"] == 0 and not payload["published"]
    assert payload["version"] == payload["previous_version"] == serving
    text = run_cli("retrain", "--logs", str(new), home=copy)
    assert text.returncode == 0
    head = "0 new events (0 rejected), 0 new items, 0 new users; "
    message = f"{head}nothing retrained: no stored event is new to the served model {serving}"
    assert message in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--logs", "/no/such.csv"], "--logs /no/such.csv: no such file"),
        (["--max-epochs", "-1"], "--max-epochs must be >= 0"),
        (["--since", "yesterday"], "--since 'yesterday'"),
        (["--since=--5"], "--since '--5'"),
        (["--since", "\u00b2"], "--since '\u00b2'"),  # a digit to str.isdigit, not to int()
        (["--set", "retrain.new_item_init=zero"], "retrain.new_item_init"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    served: tuple[Path, Path], args: list[str], message: str, run_cli
) -> None:
    home, new = served
    logs = [] if "--logs" in args else ["--logs", str(new)]
    done = run_cli("retrain", *logs, *args, home=home)
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr and done.stderr.count("\n") == 1


def test_a_second_retrain_exits_2_naming_the_running_one(
    served_copy: tuple[Path, Path], run_cli
) -> None:
    home, new = served_copy
    first = subprocess.Popen(
        [RECSYS, "retrain", "--home", str(home), "--logs", str(new), "--max-epochs", "500",
         "--set", "retrain.patience=500", *TINY],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    other = home.parent / "other.csv"
    other.write_text("user_id,item_id,timestamp\nu-other,i-other,1\nu-other,i-other2,2\n")
    try:
        record = _lock_record_of(home, first)
        parts = store.part_paths(Workspace(home))
        done = run_cli("retrain", "--logs", str(other), home=home)  # a log not ingested yet
    finally:
        first.kill()
        first.wait()
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record["started_at"]))
    assert done.returncode == 2 and "is busy" in done.stderr, done.stderr
    assert f"recsys retrain (pid {first.pid}, host {record['host']}, since {since})" in done.stderr
    assert store.part_paths(Workspace(home)) == parts  # the refused one ingested nothing


def _lock_record_of(home: Path, proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """The home's lock record once `proc` holds the lock and has ingested (its journal)."""
    deadline, journal = time.monotonic() + 120, Workspace(home).retrain_journal_path
    while time.monotonic() < deadline and proc.poll() is None:
        if (lock := home / LOCK_FILE).is_file() and journal.is_file():
            record: dict[str, Any] = json.loads(lock.read_text())
            if record["pid"] == proc.pid:
                return record
        time.sleep(0.05)
    pytest.fail(f"the first retrain never held the lock (exit {proc.poll()})")


def test_a_current_naming_no_servable_bundle_is_not_reused(tmp_path: Path, run_cli) -> None:
    log = tmp_path / "log.csv"
    generate_events(80, 40, 900, seed=2).write_csv(log)
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / "CURRENT").write_text("gone\n")  # `make up` would never train again
    done = run_cli("train", "--reuse-published", "--dataset", str(log), "--max-epochs", "1",
                   *TINY, "--json", home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CURRENT names gone, which cannot be served" in done.stderr
    version = json.loads(done.stdout)["version"]
    assert version != "gone" and (home / "models" / "CURRENT").read_text().strip() == version


def test_train_reuses_a_published_model_unless_retrain_is_set(
    served: tuple[Path, Path], run_cli
) -> None:
    home, _ = served
    kept = run_cli("train", "--reuse-published", "--json", home=home)
    assert kept.returncode == 0 and json.loads(kept.stdout) == {"version": "v1", "reused": True}
    again = run_cli("train", "--reuse-published", "--max-epochs", "1", *TINY, "--json",
                    home=home, RECSYS_RETRAIN="1")  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["version"] != "v1"


def test_a_failure_exits_1_naming_it_last_and_the_rerun_finishes_the_attempt(
    served_copy: tuple[Path, Path], run_cli
) -> None:
    home, new = served_copy
    serving = (home / "models" / "CURRENT").read_text()
    shutil.rmtree(home / "runs")
    (home / "runs").write_text("a file where the runs folder belongs\n")
    args = ("retrain", "--logs", str(new), "--max-epochs", "1", "--json")
    done = run_cli(*args, home=home)
    last = done.stderr.splitlines()[-1]
    assert done.returncode == 1 and done.stdout == "", done.stderr[-2000:]
    assert last.startswith("error: FileExistsError") and last.endswith("(-v for details)")
    assert (home / "models" / "CURRENT").read_text() == serving
    ws = Workspace(home)
    attempt, parts = json.loads(ws.retrain_journal_path.read_text()), store.part_paths(ws)
    (home / "runs").unlink()  # the cause put right, the same command finishes the attempt
    again = run_cli(*args, home=home)
    assert again.returncode == 0, again.stderr[-2000:]
    finished = json.loads(again.stdout)
    assert finished["version"] == attempt["version"]  # the failed attempt's, resumed
    assert finished["previous_version"] == serving.strip()
    assert store.part_paths(ws) == parts  # its logs were not ingested twice
