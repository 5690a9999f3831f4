"""`bench ddp`: training examples per second with 1, 2, ... data-parallel processes.

A synthetic log (`--users`, `--items`, `--events`) is ingested once into a scratch home (its
Zipf tail leaves many items unseen, so extra "catalogue" users of 200 events each visit every
item the log missed: the catalogue is all `--items`); then
`recsys train` runs once per process count P, one epoch each, with the machine's cores split
between the processes (cores / P threads each: never oversubscribed), sampled softmax over
sparse item tables (at 1,000,000 items the full softmax's logits do not fit, see
docs/guides/gpus-and-data-parallel.md). Examples per second = the epoch's training windows /
the epoch's seconds; the epoch's seconds include one validation round over `train.val_users`
= 200 users, a small share. Run it alone on the machine: the result records the load average
before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.paths import REPO, RESULTS, TEMP


def covering(log: pl.DataFrame, items: int, per_user: int = 200) -> pl.DataFrame:
    """`log` plus users "c<k>" whose events visit, `per_user` at a time, every item it misses."""
    seen = set(log["item_id"].unique().to_list())
    missing = [f"i{n}" for n in range(items) if f"i{n}" not in seen]
    start = int(log.select(pl.col("timestamp").max()).item()) + 1
    extra = pl.DataFrame({
        "user_id": [f"c{k // per_user}" for k in range(len(missing))],
        "item_id": missing,
        "timestamp": [start + k for k in range(len(missing))],
    }, schema=log.schema)  # fmt: skip
    return pl.concat([log, extra])


def _prepare(home: Path, users: int, items: int, events: int) -> tuple[int, int]:
    """Ingest the synthetic log into `home` once; (training windows, catalogue size n)."""
    from data.split import build_splits
    from data.synth import generate_events
    from data.workspace import Workspace
    from training.config import RecsysConfig
    from training.loop.examples import make_windows

    ws = Workspace(home)
    if not ws.events_dir.is_dir():
        log = home.parent / f"synthetic-{items}.csv"
        log.parent.mkdir(parents=True, exist_ok=True)
        covering(generate_events(users, items, events, seed=0), items).write_csv(log)
        subprocess.run([sys.executable, "-m", "app", "ingest", str(log), "--home", str(home)],
                       cwd=REPO, check=True, capture_output=True)  # fmt: skip
    splits = build_splits(ws, "loo", None, 0)
    cfg = RecsysConfig()  # what `recsys train` trains: windows of the default length and targets
    last = cfg.train.targets == "last"
    windows = make_windows(splits.train["items"], cfg.model.max_len, every_prefix=last)
    return len(windows), splits.num_items


def _train(
    home: Path, processes: int, sampler: str, negatives: int, sharded: bool
) -> dict[str, Any]:
    """One `recsys train` of one epoch with `processes` processes; its JSON result."""
    threads = max(1, (os.cpu_count() or 1) // processes)
    cmd = [
        sys.executable, "-m", "app", "train", "--home", str(home), "--json", "--max-epochs", "1",
        "--sampler", sampler, "--num-negatives", str(negatives), "--devices", str(processes),
        "--set", f"train.threads={threads}", "--set", "train.sparse_embeddings=true",
        "--set", "train.val_users=200", "--set", "train.accelerator=cpu",
        *(["--strategy", "ddp"] if processes > 1 else []),
        *(["--set", "data.shard_by_rank=true"] if sharded else []),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"recsys train with {processes} processes failed:\n{done.stderr[-3000:]}"
        )
    result: dict[str, Any] = json.loads(done.stdout)
    result["threads_per_process"] = threads
    return result


def run(
    home: Path, counts: list[int], data: dict[str, int], sampler: str, m: int, sharded: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The setting (with the catalogue and its training windows) and the metrics.

    The metrics: every process count's row (and, `sharded`, each count above 1 again, sharded).
    """
    windows, catalogue = _prepare(home, data["users"], data["items"], data["events"])
    rows = []
    plan = [(p, False) for p in counts] + [(p, True) for p in counts if sharded and p > 1]
    for processes, shard in plan:
        before = records.load_1m()
        result = _train(home, processes, sampler, m, shard)
        epoch = result["seconds_per_epoch"]
        rows.append({
            "processes": processes, "sharded": shard,
            "threads_per_process": result["threads_per_process"],
            "epoch_seconds": epoch, "examples_per_s": round(windows / epoch, 1),
            "val_ndcg@10": result["metrics"]["val"]["ndcg@10"],
            "load_avg_1m": [before, records.load_1m()],
        })  # fmt: skip
        label = f"{processes} process(es){' sharded' if shard else ''}"
        typer.echo(f"{label}: {windows / epoch:,.0f} examples/s ({epoch:.1f} s)")
    setting = {**data, "catalogue": catalogue, "windows": windows, "sampler": sampler,
               "num_negatives": m}  # fmt: skip
    return setting, {"rows": rows}


def plot(record: dict[str, Any], path: Path) -> None:
    """Bars of examples per second against the number of processes."""
    import matplotlib.pyplot as plt

    rows = record["metrics"]["rows"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(range(len(rows)), [r["examples_per_s"] for r in rows])
    names = [f"{r['processes']}{' sharded' if r.get('sharded') else ''}" for r in rows]
    ax.set_xticks(range(len(rows)), names)
    ax.set_xlabel("processes (cores split between them)")
    ax.set_ylabel("training examples / s")
    s = record["config"]
    ax.set_title(f"{s['catalogue']:,} items, {s['sampler']} m = {s['num_negatives']}", fontsize=9)
    options.save_figure(fig, path)


def ddp(
    processes: Annotated[str, typer.Option(help="Comma-separated process counts.")] = "1,2",
    items: Annotated[int, typer.Option(min=1, help="Catalogue size.")] = 1_000_000,
    users: Annotated[int, typer.Option(min=1, help="Users of the synthetic log.")] = 2_000,
    events: Annotated[int, typer.Option(min=1, help="Events of the synthetic log.")] = 3_000_000,
    sampler: Annotated[str, typer.Option(help="Sampler of every run.")] = "uniform",
    num_negatives: Annotated[int, typer.Option(min=1, help="m.")] = 256,
    work: Annotated[Path, typer.Option("--scratch", help="Scratch home (kept).")] = TEMP
    / "bench-ddp",
    out: Annotated[Path, typer.Option(help="Result record (a PNG beside it).")] = RESULTS
    / "ddp_throughput/ddp_throughput.json",
    sharded: Annotated[
        bool, typer.Option(help="Also run each count above 1 with data.shard_by_rank.")
    ] = False,
) -> None:
    """Examples per second of one training epoch with 1, 2, ... data-parallel processes."""
    counts = options.ints(processes, "processes")
    require_writable({"--out": out})
    data = {"users": users, "items": items, "events": events}
    home = work / f"home-{items}-{users}-{events}"
    started = records.start()
    setting, metrics = run(home, counts, data, sampler, num_negatives, sharded)
    options.plot_record(
        records.save(out, setting, metrics, started), out, out.with_suffix(".png"), plot
    )
