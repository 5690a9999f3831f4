"""The data commands through the real CLI in a subprocess: output, exit codes, unreadable files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from app.cli import main
from data.datasets import ingest_once
from data.ingest import ingest_files
from data.store import read_events
from data.vocab import load_item_titles
from data.workspace import Workspace
from tests.conftest import SHARED_DATASETS, shared_dataset
from tests.in_process import run_main

GOOD = "user_id,item_id,timestamp\nu1,a,1\nu1,b,2\nu2,a,3\n"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120
    )


def run_inproc(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real entry point (`app.cli.main`) in this process: same exit codes and streams.

    Used where a subprocess adds nothing but start-up time; the unreadable-file cases keep
    the subprocess.
    """
    return run_main(main, "recsys", capsys, *args)


def store_snapshot(ws: Workspace) -> dict[str, bytes]:
    if not ws.root.exists():
        return {}
    return {str(p): p.read_bytes() for p in sorted(ws.root.rglob("*")) if p.is_file()}


def test_ingest_json_and_text(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.csv"
    path.write_text(GOOD + ",a,4\n")
    out = run_inproc(capsys, "ingest", str(path), "--json")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert set(payload) == {"ingest_id", "accepted", "rejected", "rejects_path", "events_total"}
    assert (payload["accepted"], payload["rejected"], payload["events_total"]) == (3, 1, 3)
    assert pl.read_parquet(payload["rejects_path"])["reason"].to_list() == ["empty user_id"]
    assert "read 4 rows" in out.stderr  # progress goes to stderr, never stdout
    again = run_inproc(capsys, "ingest", str(path))
    assert again.returncode == 0
    assert again.stdout.count("\n") == 1
    assert "0 accepted, 4 rejected" in again.stdout
    assert "3 events, 2 users, 2 items" in again.stdout


def test_column_options(ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log.tsv"
    path.write_text("who\twhat\twhen\nann\tx\t2024-01-01T00:00:00Z\n")
    out = run_inproc(
        capsys, "ingest", str(path), "--user-col", "who", "--item-col", "what", "--time-col", "when"
    )
    assert out.returncode == 0, out.stderr
    assert read_events(ws).collect().row(0) == ("ann", "x", 1704067200, 0)


def test_an_ingested_file_is_not_read_again_by_train_or_retrain(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.csv"
    path.write_text(GOOD)
    assert run_inproc(capsys, "ingest", str(path)).returncode == 0
    # what `train --dataset` and `retrain --logs` call: the contents are known, nothing is read
    assert ingest_once(ws, [path]) is None
    assert read_events(ws).collect().height == 3 and not ws.rejects_dir.exists()


def _unreadable(tmp_path: Path, case: str) -> tuple[list[str], str]:
    """Write the broken input of `case`; return the CLI args and a bit of the expected message."""
    good_parquet = tmp_path / "good.parquet"
    pl.DataFrame({"user_id": ["u"], "item_id": ["i"], "timestamp": [1]}).write_parquet(good_parquet)
    path = tmp_path / {"truncated-parquet": "t.parquet", "not-parquet": "x.parquet"}.get(
        case, "x.csv"
    )
    if case == "missing":
        return [str(tmp_path / "nope.csv")], "no such file"
    contents: dict[str, bytes] = {
        "empty": b"",
        "blank": b"\n\n  \n",
        "no-user-column": b"item_id,timestamp\ni,1\n",
        "no-time-column": b"user_id,item_id\nu,i\n",
        "repeated-item-column": b"user_id,item_id,timestamp,item_id\nu,i,1,j\n",
        "binary": bytes(range(256)) * 4,
        "latin1": "user_id,item_id,timestamp\nJosé,i,1\n".encode("latin-1"),
        "utf16": "user_id,item_id,timestamp\nu,i,1\n".encode("utf-16"),  # with its BOM
        "not-parquet": GOOD.encode(),
        "truncated-parquet": good_parquet.read_bytes()[:-20],
    }
    expected = {
        "empty": "empty file",
        "blank": "empty file",
        "no-user-column": "no column 'user_id'",
        "no-time-column": "no column 'timestamp'",
        "repeated-item-column": "the header names column 'item_id' twice",
        "binary": "binary content",
        "latin1": "not UTF-8",
        "utf16": "x.csv: UTF-16 text; logs are read as UTF-8: convert it first (iconv -f UTF-16",
        "not-parquet": "not a parquet file",
        "truncated-parquet": "truncated",
    }
    path.write_bytes(contents[case])
    return [str(good_parquet), str(path)], expected[case]


UNREADABLE = [
    "missing",
    "empty",
    "blank",
    "no-user-column",
    "no-time-column",
    "repeated-item-column",
    "binary",
    "latin1",
    "utf16",
    "not-parquet",
    "truncated-parquet",
]


@pytest.mark.parametrize("case", UNREADABLE)
def test_unreadable_file_exit_2_one_line_store_unchanged(
    ws: Workspace, tmp_path: Path, case: str
) -> None:
    seed = tmp_path / "seed.csv"
    seed.write_text(GOOD)
    ingest_files(ws, [seed])
    before = store_snapshot(ws)
    args, message = _unreadable(tmp_path, case)
    out = run_cli("ingest", *args)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert args[-1] in lines[0]  # names the file
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert store_snapshot(ws) == before


def test_garbage_ndjson_and_unknown_format(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.ndjson"
    path.write_text('{"user_id": "u", "item_id": "i", "timestamp": 1}\n{not json\n')
    out = run_cli("ingest", str(path))
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert str(path) in out.stderr
    assert run_inproc(capsys, "ingest", str(path), "--format", "xml").returncode == 2
    assert not ws.root.exists()


def test_synth_cli_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.parquet"
    args = ["--users", "50", "--items", "40", "--events", "500", "--seed", "7"]
    assert run_inproc(capsys, "synth", *args, "--out", str(a)).returncode == 0
    out = run_inproc(capsys, "synth", *args, "--out", str(b), "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["events"] == 500
    assert pl.read_csv(a, schema_overrides={"timestamp": pl.Int64}).equals(pl.read_parquet(b))
    bad = run_inproc(capsys, "synth", *args, "--out", str(tmp_path / "a.txt"))
    assert bad.returncode == 2 and "csv or .parquet" in bad.stderr
    (tmp_path / "d.csv").mkdir()
    bad = run_inproc(capsys, "synth", *args, "--out", str(tmp_path / "d.csv"))
    assert bad.returncode == 2 and "is a folder" in bad.stderr
    bad = run_inproc(capsys, "synth", "--seed", "-1", "--out", str(tmp_path / "s.csv"))
    assert bad.returncode == 2 and not (tmp_path / "s.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.parquet", "d.csv"]
    few = run_inproc(capsys, "synth", "--users", "10", "--items", "5", "--events", "3",
                     "--out", str(tmp_path / "few.csv"), "--json")  # fmt: skip
    written = pl.read_csv(tmp_path / "few.csv")["user_id"].n_unique()
    assert json.loads(few.stdout)["users"] == written < 10  # those written, not those asked


def test_a_home_that_is_a_file_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    for command in (["ingest", str(tmp_path / "x.csv")], ["models", "list"], ["evaluate"]):
        out = run_inproc(capsys, *command, "--home", str(home))
        assert out.returncode == 2, (command, out.stderr)
        assert f"home {home} is a file" in out.stderr


def test_ingest_items_titles(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "items.csv"
    path.write_text('item_id,name\n1,"Toy Story (1995)"\n2,Heat\n')
    out = run_inproc(capsys, "ingest-items", str(path), "--title-col", "name", "--json")
    assert out.returncode == 0, out.stderr
    counts = {"read": 2, "stored": 2, "blank": 0, "repeated": 0, "titles_total": 2}
    assert json.loads(out.stdout) == counts
    path.write_text("item_id,name\n2,Heat (1995)\n3,Up\n")
    assert run_inproc(capsys, "ingest-items", str(path), "--title-col", "name").returncode == 0
    assert load_item_titles(ws) == {"1": "Toy Story (1995)", "2": "Heat (1995)", "3": "Up"}
    path.write_text("item_id,name\n3\n2,  \n")  # no title, a blank one: nothing replaced
    assert run_inproc(capsys, "ingest-items", str(path), "--title-col", "name").returncode == 0
    assert load_item_titles(ws) == {"1": "Toy Story (1995)", "2": "Heat (1995)", "3": "Up"}
    assert run_inproc(capsys, "ingest-items", str(path)).returncode == 2  # no 'title' column


def test_ingest_items_counts_the_rows_it_left_out(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "items.csv"
    path.write_text("item_id,title\n1,One\n2,Two\n1,One again\n,No id\n3,\n4,Four\n")
    out = run_inproc(capsys, "ingest-items", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "stored the titles of 3 items (2 rows without an id or a title skipped, 1 repeating an "
        "earlier id: the last kept); the home holds titles for 3 items\n"
    )
    assert load_item_titles(ws) == {"1": "One again", "2": "Two", "4": "Four"}
    counts = json.loads(run_inproc(capsys, "ingest-items", str(path), "--json").stdout)
    assert counts == {"read": 6, "stored": 3, "blank": 2, "repeated": 1, "titles_total": 3}


def test_ingest_takes_a_folder_as_train_does_with_its_titles(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.csv").write_text("user_id,item_id,timestamp\nu1,i1,1\nu1,i2,2\n")
    (logs / "b.csv").write_text("user_id,item_id,timestamp\nu2,i1,3\n")
    (logs / "notes.txt").write_text("not a log")
    (logs / "items.csv").write_text("item_id,title\ni1,First\n")  # titles, never a log
    out = run_inproc(capsys, "ingest", str(logs), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["accepted"] == 3
    assert load_item_titles(ws) == {"i1": "First"}


def test_ingest_items_of_a_missing_file_says_so(
    ws: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_inproc(capsys, "ingest-items", str(tmp_path / "items.xlsx"))
    assert out.returncode == 2 and "no such file" in out.stderr, out.stderr


def test_amazon_beauty_cli_prints_counts(ws: Workspace) -> None:
    out = run_cli("ingest", str(shared_dataset("amazon-beauty")))
    assert out.returncode == 0, out.stderr
    assert "198502 accepted, 0 rejected" in out.stdout
    assert "198502 events, 22363 users, 12101 items" in out.stdout


def test_ml100k_titles(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    path = SHARED_DATASETS / "ml-100k" / "items.csv"
    if not path.exists():
        pytest.skip("ml-100k not available")
    assert run_inproc(capsys, "ingest-items", str(path)).returncode == 0
    assert load_item_titles(ws)["1"] == "Toy Story"


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder where no file can be made (read-only for a user; /sys or /proc for root)."""
    for folder in (tmp_path / "read-only", Path("/sys"), Path("/proc")):
        folder.mkdir(exist_ok=True)
        if folder.parent == tmp_path:
            folder.chmod(0o500)
        try:
            (folder / "probe").write_text("")
        except OSError:
            return folder
        (folder / "probe").unlink()
    pytest.skip("every folder tried is writable here")


def test_unwritable_outputs_are_refused_before_the_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = unwritable_folder(tmp_path)
    out = run_inproc(capsys, "synth", "--events", "100", "--out", str(folder / "x.csv"))
    assert out.returncode == 2 and "--out" in out.stderr and "cannot write" in out.stderr
