"""Synthetic logs: determinism, exact sizes, timestamps, and the planted sequential structure."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from data.ingest import ingest_files
from data.split import build_splits
from data.synth import DEFAULT_SYNTHETIC, generate_events, plant_catalogue
from data.workspace import Workspace


def test_deterministic_and_exact_sizes() -> None:
    a = generate_events(300, 200, 5000, seed=3)
    assert a.equals(generate_events(300, 200, 5000, seed=3))
    assert not a.equals(generate_events(300, 200, 5000, seed=4))
    assert a.height == 5000
    assert a["user_id"].n_unique() == 300
    assert a.schema == {"user_id": pl.String, "item_id": pl.String, "timestamp": pl.Int64}
    assert a["timestamp"].is_sorted()
    # Strictly increasing within a user, so no (user, item, timestamp) duplicates.
    assert a.select(pl.col("timestamp").diff().over("user_id").min()).item() >= 1
    assert a.unique(["user_id", "item_id", "timestamp"]).height == 5000


def test_fewer_events_than_users() -> None:
    frame = generate_events(50, 10, 20, seed=0)
    assert frame.height == 20
    assert generate_events(5, 10, 0, seed=0).height == 0


def test_zipf_popularity() -> None:
    frame = generate_events(2000, 1000, 40000, seed=0)
    counts = frame["item_id"].value_counts(sort=True)["count"].to_numpy()
    assert counts[:10].sum() > 0.1 * frame.height  # a heavy head ...
    assert counts[0] > 20 * np.median(counts)  # ... far above the typical item


def test_successors_point_to_next_topic() -> None:
    cat = plant_catalogue(1000, np.random.default_rng(0))
    assert (cat.topic[cat.succ] == cat.next_topic[cat.topic]).all()
    ring, topic = [0], int(cat.next_topic[0])
    while topic != 0:  # one cycle through every topic: a ring, no fixed point or sub-cycle
        ring.append(topic)
        topic = int(cat.next_topic[topic])
        assert len(ring) <= cat.next_topic.size
    assert sorted(ring) == list(range(cat.next_topic.size))


def test_markov_predictor_beats_popularity_on_held_out(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "synth.parquet"
    generate_events(**_default_args(), seed=1).write_parquet(path)
    ingest_files(ws, [path])
    splits = build_splits(ws, "loo")
    follows: dict[int, Counter[int]] = defaultdict(Counter)
    popularity: Counter[int] = Counter()
    for seq in splits.train["items"].to_list():
        popularity.update(seq)
        for prev, nxt in zip(seq, seq[1:], strict=False):
            follows[prev][nxt] += 1
    top_popular = {i for i, _ in popularity.most_common(10)}
    markov_hits = pop_hits = 0
    for history, target in splits.test.select("history", "target").iter_rows():
        markov_hits += target in {i for i, _ in follows[history[-1]].most_common(10)}
        pop_hits += target in top_popular
    n = splits.test.height
    assert n > 1500
    assert markov_hits / n > 0.5  # the planted successor alone is followed half the time
    assert markov_hits > 3 * pop_hits


def _default_args() -> dict[str, int]:
    d = DEFAULT_SYNTHETIC
    return {"num_users": d["users"], "num_items": d["items"], "num_events": d["events"]}
