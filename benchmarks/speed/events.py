"""`bench events`: how soon a posted event reaches the user's next recommendation.

For each stored-log size: a home holding that many synthetic events (`data.synth`, ids "u..",
"i0".."i{N-1}"), a synthetic bundle over items "i1".."iN" (random embeddings and query tower, as in
`bench serving`: the latency does not depend on the weights), `recsys serve` as a
subprocess with an admin token and no polling. Then, `repeats` times, for one stored user: send
`POST /events` with `batch` new events of known items, then `GET /recommend` for that user,
and time the POST alone and the POST plus the recommendation (from sending the POST to the
recommendation's answer: what "the next /recommend reflects it" costs). The POST's duplicate
check reads the stored keys, so its cost grows with the store.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options, server_process
from benchmarks.paths import RESULTS
from benchmarks.speed.synthetic_bundles import synthetic_bundle

TOKEN = "bench-token"
NEW_TIME = 4_000_000_000  # after every synthetic event: a posted event is never a duplicate


def _home(work: Path, stored: int, num_items: int) -> Path:
    """A home with `stored` synthetic events over `num_items` items and a published bundle."""
    from data.ingest import ingest_files
    from data.synth import generate_events
    from data.workspace import Workspace

    home = work / f"home-{stored}"
    if stored:
        csv = work / f"events-{stored}.csv"
        generate_events(_users(stored), num_items, stored, seed=0).write_csv(csv)
        ingest_files(Workspace(home), [csv])
        csv.unlink()
    synthetic_bundle(home, num_items, dim=64, seed=0, item_prefix="i")
    return home


def _users(stored: int) -> int:
    """Users of the synthetic log of `stored` events: one per 20 events."""
    return max(stored // 20, 1)


def _post_then_recommend(
    client: Any, user: str, items: list[str], stamp: int
) -> tuple[float, float]:
    """(POST ms, POST + GET /recommend ms) for one batch of `items` by `user`."""
    events = [
        {"user_id": user, "item_id": it, "timestamp": stamp + j} for j, it in enumerate(items)
    ]
    start = time.perf_counter()
    posted = client.post("/events", json={"events": events})
    posted.raise_for_status()
    if posted.json()["accepted"] != len(events):
        raise RuntimeError(f"POST /events did not accept every event: {posted.text}")
    after_post = time.perf_counter()
    client.get("/recommend", params={"user_id": user, "k": 10}).raise_for_status()
    end = time.perf_counter()
    return 1000 * (after_post - start), 1000 * (end - start)


def run_size(
    stored: int, work: Path, *, num_items: int, repeats: int, batch: int
) -> dict[str, Any]:
    """Home, server and `repeats` timed post-then-recommend rounds for one store size."""
    import httpx

    home = _home(work, stored, num_items)
    port = server_process.free_port()
    env = {"RECSYS_ADMIN_TOKEN": TOKEN}
    proc = server_process.serve(home, port, "flat", work / f"server-{stored}.log", env)
    rng = np.random.default_rng(1)
    post_ms, total_ms = [], []
    try:
        server_process.wait_ready(port, proc, timeout=600)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
            for r in range(repeats + 1):  # the first round warms the server up, not timed
                items = [f"i{i}" for i in rng.integers(1, num_items + 1, size=batch)]
                user = f"u{r % _users(stored)}"  # a stored user (none stored: u0, new)
                post, total = _post_then_recommend(client, user, items, NEW_TIME + 100 * r)
                if r:
                    post_ms.append(post)
                    total_ms.append(total)
    finally:
        server_process.stop(proc)
    return {
        "stored_events": stored,
        "post_ms": _summary(post_ms),
        "post_then_recommend_ms": _summary(total_ms),
    }


def _summary(ms: list[float]) -> dict[str, float]:
    percentiles = {f"p{q}": round(float(np.percentile(ms, q)), 1) for q in (50, 95)}
    return {"rounds": len(ms), **percentiles, "max": round(max(ms), 1)}


def bench_events(
    stored: Annotated[str, typer.Option(help="Comma-separated stored-event counts.")] = "0,1000000",
    items: Annotated[int, typer.Option(min=2, help="Catalogue size.")] = 10_000,
    repeats: Annotated[int, typer.Option(min=1, help="Timed rounds per store size.")] = 50,
    batch: Annotated[int, typer.Option(min=1, help="Events per POST.")] = 10,
    json_path: Annotated[
        Path, typer.Option("--out", help="The result record (/dev/null: none).")
    ] = RESULTS / "events/events.json",
) -> None:
    """Time POST /events and the next /recommend of that user against the stored-log size."""
    require_writable({"--out": json_path})
    sizes = options.ints(stored, "stored", minimum=0)
    setup = {
        "stored": sizes, "items": items, "repeats": repeats, "events_per_post": batch,
        "request": "POST /events (new events of a stored user), then GET /recommend k=10",
        "client": "httpx, one keep-alive connection on localhost, same machine",
    }  # fmt: skip
    started = records.start()
    with tempfile.TemporaryDirectory(prefix="recsys-bench-events-") as tmp:
        runs = []
        for n in sizes:
            runs.append(run_size(n, Path(tmp), num_items=items, repeats=repeats, batch=batch))
            typer.echo(json.dumps(runs[-1]), err=True)
    metrics = {"runs": runs, "python": platform.python_version()}
    typer.echo(json.dumps(records.save(json_path, setup, metrics, started), indent=1))
