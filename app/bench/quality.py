"""`recsys bench quality`: model quality per (sampler, number of negatives), as JSON and a plot.

Two modes. With `--grid NAME` it runs a named sweep (`app/bench/sweep.py`), one result file
per run, and `recsys bench quality-report` tables and plots it (`app/bench/sweep_report.py`).
Without it, every combination trains with the same config and seed on the same home (the dataset is
ingested once); `full` (full softmax) runs once. Results are written after each run, and runs
already in the JSON file are skipped, so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from app.bench import options, sweep
from app.bench.grids import GRIDS, VALIDATION_ONLY, result_dir
from app.cli_common import require_writable
from data.errors import RecsysInputError
from data.workspace import Workspace

log = logging.getLogger(__name__)


def combos(samplers: list[str], negatives: list[int]) -> list[tuple[str, int | None]]:
    """(sampler, m) pairs to run; `full` once with m None."""
    out: list[tuple[str, int | None]] = []
    for name in samplers:
        if name == "full":
            out.append(("full", None))
        else:
            out.extend((name, m) for m in negatives)
    return out


def _load(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The results document to resume: `path`'s if it was made with the same `settings`.

    Raises:
        RecsysInputError: `path` is not a results document (a folder, not JSON, not an
            object), or holds runs of another dataset, epoch bound or overrides.

    """
    if not path.exists():
        return {"results": [], **settings}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecsysInputError(f"{path}: not a results JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.setdefault("results", []), list):
        raise RecsysInputError(f"{path}: not a results JSON (an object with a results list)")
    other = {k: data.get(k) for k in settings if data.get(k, settings[k]) != settings[k]}
    if other and data["results"]:
        raise RecsysInputError(
            f"{path} holds runs made with {other}, not { ({k: settings[k] for k in other}) }: "
            "resume with the same settings, or write to another --json file"
        )
    return {**data, **settings}


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def validation_curve(run_dir: str | None) -> list[dict[str, float]]:
    """Per validation round of a run: epoch, fit seconds, val NDCG@10 and proposal KL.

    `time/fit_seconds` is the wall time since the fit started; `val/proposal_kl` is there
    when the run had a sampler.
    """
    import polars as pl

    path = Path(run_dir or "") / "metrics.csv"
    if run_dir is None or not path.is_file():
        return []
    # every row read for the types: a long epoch logs more than 100 train rows before its first
    # validation row, and a type guessed from those would read the metrics as text
    frame = pl.read_csv(path, infer_schema_length=None).filter(pl.col("val/ndcg@10").is_not_null())
    names = ("epoch", "time/fit_seconds", "val/ndcg@10", "val/proposal_kl")
    keep = [c for c in names if c in frame.columns]
    return frame.select(keep).to_dicts()


def _row(result: Any) -> dict[str, Any]:
    test = result.metrics["test"]
    return {
        "sampler": result.sampler,
        "num_negatives": result.num_negatives,
        "recall@10": test["recall@10"],
        "ndcg@10": test["ndcg@10"],
        "full_ce": test["full_ce"],
        "val_ndcg@10": result.metrics["val"]["ndcg@10"],
        "seconds_per_epoch": result.seconds_per_epoch,
        "epochs": result.epochs,
        "train_seconds": result.train_seconds,
        "device": result.device,
        "precision": result.precision,
        "metrics": result.metrics,
        "validation": validation_curve(result.run_dir),
    }


def best_epoch_kl(row: dict[str, Any]) -> float | None:
    """`val/proposal_kl` at the validation round with the best val NDCG@10 (None if absent)."""
    curve = row.get("validation", [])
    if not curve:
        return None
    kl = max(curve, key=lambda v: v["val/ndcg@10"]).get("val/proposal_kl")
    return None if kl is None else float(kl)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """NDCG@10, full CE, proposal KL and seconds per epoch against m, one line per sampler."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [{**r, "proposal_kl": best_epoch_kl(r)} for r in results]
    panels = (
        ("ndcg@10", "test NDCG@10"),
        ("full_ce", "test full CE"),
        ("proposal_kl", "KL(model || proposal), best val epoch"),
        ("seconds_per_epoch", "s / epoch"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(20, 4.2))
    for ax, (key, label) in zip(axes, panels, strict=True):
        for name in sorted({r["sampler"] for r in results}):
            rows = sorted(
                (r for r in results if r["sampler"] == name), key=lambda r: r["num_negatives"] or 0
            )
            if name == "full":
                if rows[0][key] is not None:
                    ax.axhline(rows[0][key], color="black", linestyle="--", label="full softmax")
                if key == "ndcg@10":  # the sampler quality target: within 3% of it
                    ax.axhline(0.97 * rows[0][key], color="grey", linestyle=":", label="full - 3%")
                continue
            rows = [r for r in rows if r[key] is not None]
            ax.plot(
                [r["num_negatives"] for r in rows], [r[key] for r in rows], marker="o", label=name
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("negatives m")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    options.save_figure(fig, path)


def run_quality(
    dataset: str,
    samplers: list[str],
    negatives: list[int],
    json_path: Path,
    plot_path: Path | None,
    home: Path,
    max_epochs: int | None = None,
    overrides: list[str] | None = None,
    **trainer_overrides: Any,
) -> dict[str, Any]:
    """Run the missing combinations, saving after each; returns the results document.

    Raises:
        RecsysInputError: a bad config, or one of several processes: before any run.

    """
    from app.commands.train_cmds import build_config
    from training import distributed
    from training.workflows.pipeline import train

    configs = {
        c: build_config(c[0], c[1], max_epochs, [], overrides or [])
        for c in combos(samplers, negatives)
    }
    for cfg in configs.values():  # the runs train in this process: ranks would hang or crash
        distributed.require_one_process(cfg.train.devices, cfg.train.num_nodes, "bench quality")
    settings = {"dataset": dataset, "max_epochs": max_epochs, "overrides": overrides or []}
    data = _load(json_path, settings)
    done = {(r["sampler"], r["num_negatives"]) for r in data["results"]}
    ws = Workspace(home)
    for (name, m), cfg in configs.items():
        if (name, m) in done:
            log.info("bench quality: %s m=%s already in %s, skipped", name, m, json_path)
            continue
        log.info("bench quality: training %s m=%s", name, m)
        result = train(ws, cfg, dataset=dataset, publish=False, **trainer_overrides)
        data["results"].append(_row(result))
        _save(json_path, data)
    if plot_path is not None and data["results"]:
        plot(data["results"], plot_path)
    return data


def quality_command(
    dataset: Annotated[
        str | None, typer.Option(help="Log file or folder, or 'synthetic' (needed without --grid).")
    ] = None,
    samplers: Annotated[
        str | None, typer.Option(help="Comma-separated sampler names (needed without --grid).")
    ] = None,
    json_file: Annotated[
        Path | None,
        typer.Option("--json", help="Results JSON, resumed if present (needed without --grid)."),
    ] = None,
    num_negatives: Annotated[str, typer.Option(help="Comma-separated m values.")] = "64,256",
    max_epochs: Annotated[int | None, typer.Option(help="Upper bound on epochs.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="section.key=value.")] = None,
    plot_file: Annotated[Path | None, typer.Option("--plot", help="PNG plot path.")] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="Scratch home for the runs (default: a temporary folder)."),
    ] = None,
    grid: Annotated[
        str | None,
        typer.Option(help="Run a named sweep instead: comparison, catalogue, recipe or final."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="--grid: result folder (default: the grid's, under benchmarks/results)."),
    ] = None,
    data_root: Annotated[
        Path, typer.Option(help="--grid: folder of the named datasets.")
    ] = sweep.DATA_ROOT,
    scratch: Annotated[
        Path, typer.Option(help="--grid: the runs' homes (kept, outside the repo).")
    ] = sweep.SCRATCH,
) -> None:
    """Train every (sampler, m) with the same config and seed; write a table and a plot.

    With --grid: train the named sweep's runs that have no result file with the same settings
    in --out, one file per run; run the same command again to resume.
    """
    if grid is not None:
        _grid_command(grid, sweep.Sweep(result_dir(grid, out), data_root, scratch, set_ or []))
        return
    if dataset is None or samplers is None or json_file is None:
        raise RecsysInputError("--dataset, --samplers and --json are needed without --grid")
    require_writable({"--json": json_file, "--plot": plot_file})
    negatives = options.ints(num_negatives, "num-negatives")
    names = options.names(samplers, "samplers")
    with tempfile.TemporaryDirectory(prefix="recsys-bench-") as tmp:
        chosen = home if home is not None else Path(tmp)
        data = run_quality(
            dataset, names, negatives, json_file, plot_file, chosen, max_epochs, set_ or []
        )
    for row in data["results"]:
        typer.echo(
            f"{row['sampler']:<12} m={row['num_negatives']!s:<6} recall@10 {row['recall@10']:.4f} "
            f"ndcg@10 {row['ndcg@10']:.4f} full_ce {row['full_ce']:.3f} "
            f"{row['seconds_per_epoch']:.1f} s/epoch x {row['epochs']} ({row['device']})"
        )


def _grid_command(name: str, settings: sweep.Sweep) -> None:
    """Run the pending runs of grid `name`, then say how many of its runs have results."""
    if name not in GRIDS:
        raise RecsysInputError(f"--grid: unknown grid {name!r}; known: {', '.join(GRIDS)}")
    settings.test = name not in VALIDATION_ONLY
    trained = sweep.run_sweep(GRIDS[name], settings)
    specs, planned = GRIDS[name](settings.out)
    done = sum(sweep.is_done(spec, settings) for spec in specs)
    typer.echo(f"trained {len(trained)} run(s); {done} of {planned} planned runs have results")


def register(bench_app: typer.Typer) -> None:
    """Attach `recsys bench quality` and `recsys bench quality-report`."""
    from app.bench.sweep_report import report_command

    bench_app.command("quality")(quality_command)
    bench_app.command("quality-report")(report_command)
