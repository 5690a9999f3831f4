"""`ingest_once`: a file whose contents this home holds already is not read again; a dataset
folder's logs and titles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data import store
from data.datasets import dataset_files, fingerprint, ingest_once, prepare_dataset
from data.errors import RecsysInputError
from data.ingest import SYNTHETIC_SOURCE, holds_synthetic_demo, ingest_files
from data.vocab import load_item_titles
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


def test_a_dataset_folder_s_items_csv_gives_titles_and_is_never_read_as_a_log(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "ds"
    folder.mkdir()
    write_log(folder / "events.csv", [("u1", "a", 1), ("u1", "b", 2)])
    (folder / "items.csv").write_text('item_id,title\n a ,"Shoes, red"\nb,Hat\n')
    assert dataset_files(folder) == [folder / "events.csv"]
    ws = Workspace(tmp_path / "home")
    assert prepare_dataset(ws, str(folder)) == "ds"
    assert store.count_events(ws) == 2
    assert load_item_titles(ws) == {"a": "Shoes, red", "b": "Hat"}


def test_an_unreadable_items_csv_is_refused_before_any_event_is_stored(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    folder.mkdir()
    write_log(folder / "events.csv", [("u1", "a", 1)])
    (folder / "items.csv").write_text("")
    ws = Workspace(tmp_path / "home")
    with pytest.raises(RecsysInputError, match="items.csv"):
        prepare_dataset(ws, str(folder))
    assert not store.has_events(ws)
    (folder / "items.csv").write_text("item_id,name\na,Shoes\n")
    with pytest.raises(RecsysInputError, match="items.csv: no column 'title'"):
        prepare_dataset(ws, str(folder))


def test_a_demo_ingest_killed_before_its_record_still_holds_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data import ingest

    ws = Workspace(tmp_path / "home")

    def killed_after_commit(*args: object) -> None:
        raise KeyboardInterrupt  # after the part's commit, before the source is recorded

    monkeypatch.setattr(ingest, "record_ingested", killed_after_commit)
    with pytest.raises(KeyboardInterrupt):
        prepare_dataset(ws, "synthetic")
    monkeypatch.undo()
    events = store.count_events(ws)
    assert events > 0 and not holds_synthetic_demo(ws)  # the record never came
    assert prepare_dataset(ws, "synthetic") == "synthetic"  # its events are the demo's
    assert holds_synthetic_demo(ws) and store.count_events(ws) == events
    real = write_log(tmp_path / "real.csv", [("u1", "a", 1)])
    with pytest.raises(RecsysInputError, match="synthetic demo"):
        ingest_files(ws, [real])
    assert store.count_events(ws) == events


def test_a_users_own_synthetic_folder_elsewhere_is_not_the_demo(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "home")
    (tmp_path / "synthetic").mkdir()
    own = write_log(tmp_path / "synthetic" / "events-2024-01-15.csv", [("u1", "a", 1)])
    assert prepare_dataset(ws, str(own)) == "events-2024-01-15"
    assert not holds_synthetic_demo(ws)
    more = write_log(tmp_path / "more.csv", [("u2", "b", 2)])
    assert ingest_files(ws, [more]).accepted == 1


def test_real_events_after_a_demo_ingest_killed_before_its_commit_are_not_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data import datasets

    ws = Workspace(tmp_path / "home")

    def killed_before_commit(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets, "ingest_files", killed_before_commit)
    with pytest.raises(KeyboardInterrupt):
        prepare_dataset(ws, "synthetic")  # the demo file is written, nothing stored
    monkeypatch.undo()
    real = write_log(tmp_path / "real.csv", [("u1", "a", 1), ("u1", "b", 2)])
    assert ingest_files(ws, [real]).accepted == 2
    assert not holds_synthetic_demo(ws)
    with pytest.raises(RecsysInputError, match="holds real events"):
        prepare_dataset(ws, "synthetic")


def test_the_demo_goes_only_into_a_home_with_no_events_checked_under_the_writer_lock(
    tmp_path: Path,
) -> None:
    # a real event committed after the demo's first check (a POST /events meanwhile)
    ws = Workspace(tmp_path / "home")
    ingest_files(ws, [write_log(tmp_path / "real.csv", [("u1", "a", 1)])])
    demo = write_log(tmp_path / "demo.csv", [("u2", "b", 2)])
    with pytest.raises(RecsysInputError, match="holds real events"):
        ingest_files(ws, [demo], record={fingerprint(demo): SYNTHETIC_SOURCE})
    assert store.count_events(ws) == 1 and not holds_synthetic_demo(ws)


def test_real_rows_are_refused_when_the_demo_committed_after_their_first_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from data import ingest

    ws = Workspace(tmp_path / "home")
    demo = write_log(tmp_path / "demo.csv", [("u2", "b", 2)])
    first_check = ingest._refuse_demo_home
    calls: list[int] = []

    def demo_commits_meanwhile(home: Workspace) -> None:
        first_check(home)
        if not calls:  # between the real ingest's early check and its writer lock
            calls.append(1)
            ingest_files(ws, [demo], record={fingerprint(demo): SYNTHETIC_SOURCE})

    monkeypatch.setattr(ingest, "_refuse_demo_home", demo_commits_meanwhile)
    with pytest.raises(RecsysInputError, match="synthetic demo"):
        ingest_files(ws, [write_log(tmp_path / "real.csv", [("u1", "a", 1)])])
    assert store.count_events(ws) == 1 and holds_synthetic_demo(ws)
