"""`ingest_once`: a file whose contents this home holds already is not read again."""

from __future__ import annotations

import json
from pathlib import Path

from data import store
from data.datasets import ingest_once
from data.workspace import Workspace


def write_log(path: Path, rows: list[tuple[str, str, int]]) -> Path:
    lines = ["user_id,item_id,timestamp", *(f"{u},{i},{t}" for u, i, t in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_only_new_files_are_read_when_a_folder_of_logs_grows(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    day1 = write_log(tmp_path / "day1.csv", [("u1", "a", 1), ("u2", "b", 2)])
    first = ingest_once(ws, [day1])
    assert first is not None and first.accepted == 2
    day2 = write_log(tmp_path / "day2.csv", [("u1", "c", 3)])
    second = ingest_once(ws, [day1, day2])  # `retrain --logs logs/`: day1 is in the store
    assert second is not None and (second.accepted, second.rejected) == (1, 0)
    assert second.rejects_path is None and store.count_events(ws) == 3
    sources = json.loads((ws.root / "ingested.json").read_text())
    assert sorted(sources.values()) == [str(day1), str(day2)]
    assert ingest_once(ws, [day2, day1]) is None  # nothing new: nothing read


def test_a_home_whose_events_are_gone_reads_its_files_again(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    day1 = write_log(tmp_path / "day1.csv", [("u1", "a", 1)])
    assert ingest_once(ws, [day1]) is not None
    for part in store.part_paths(ws):
        part.unlink()
    again = ingest_once(ws, [day1])
    assert again is not None and again.accepted == 1
