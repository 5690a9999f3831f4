"""`bench quality`: model quality per (sampler, number of negatives), one record per run.

Two modes. With `--grid NAME` it runs a named sweep (`sweeps/sweep.py`), and `bench
quality-report` tables and plots it (`sweeps/sweep_report.py`). Without it, every combination
trains with the same config and seed on the same home (the dataset is ingested once); `full`
(full softmax) runs once. Each run writes its record `OUT/<sampler>[_m<m>].json` as it ends,
and a run whose record OUT holds is skipped, so an interrupted sweep resumes where it stopped;
`--plot` draws every run of OUT.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli_common import require_writable
from benchmarks import records
from benchmarks.harness import options
from benchmarks.harness.curves import best_epoch_kl, validation_curve
from benchmarks.paths import dataset_source, datasets_root
from benchmarks.sweeps import sweep
from benchmarks.sweeps.grids import GRIDS, VALIDATION_ONLY, result_dir
from benchmarks.sweeps.reuse import training_settings
from data.errors import RecsysInputError
from data.workspace import Workspace
from training.config_loading import build_run_config

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


def cell_name(sampler: str, m: int | None) -> str:
    """A run's record name: `full`, or `<sampler>_m<m>`."""
    return sampler if m is None else f"{sampler}_m{m}"


def done_runs(out: Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Record name -> metrics of the runs `out` holds, each made with `settings`.

    Raises:
        RecsysInputError: a file of `out` is not a record, or holds a run of another dataset,
            epoch bound or overrides.

    """
    found = {}
    for path in sorted(out.glob("*.json")):
        record = records.read(path)
        config = record["config"] or {}
        other = {k: config.get(k) for k in settings if config.get(k) != settings[k]}
        if other:
            raise RecsysInputError(
                f"{path} holds a run made with {other}, not { ({k: settings[k] for k in other}) }:"
                " resume with the same settings, or write to another --out folder"
            )
        found[path.stem] = record["metrics"]
    return found


def _metrics(result: Any) -> dict[str, Any]:
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
        "metrics": result.metrics,
        "validation": validation_curve(result.run_dir),
    }


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
    out: Path,
    plot_path: Path | None,
    home: Path,
    max_epochs: int | None = None,
    overrides: list[str] | None = None,
    **trainer_overrides: Any,
) -> list[dict[str, Any]]:
    """Train the combinations `out` has no record of, each record written as it ends.

    Returns:
        Every combination's metrics, in run order.

    Raises:
        RecsysInputError: a bad config, or one of several processes: before any run.

    """
    from training import distributed

    configs = {
        (name, m): build_run_config(
            overrides=overrides or [], sampler=name, num_negatives=m, max_epochs=max_epochs
        )
        for name, m in combos(samplers, negatives)
    }
    for cfg in configs.values():  # the runs train in this process: ranks would hang or crash
        distributed.require_one_process(cfg.train.devices, cfg.train.num_nodes, "bench quality")
    settings = {"dataset": dataset, "max_epochs": max_epochs, "overrides": overrides or []}
    done = done_runs(out, settings)
    ws = Workspace(home)
    for (name, m), cfg in configs.items():
        cell = cell_name(name, m)
        if cell in done:
            log.info("bench quality: %s already in %s, skipped", cell, out)
            continue
        log.info("bench quality: training %s m=%s", name, m)
        run = _train_cell(ws, cfg, out / f"{cell}.json", settings, trainer_overrides)
        done[cell] = run["metrics"]
    if plot_path is not None and done:
        plot(list(done.values()), plot_path)
    return [done[cell_name(*c)] for c in configs]


def _train_cell(
    ws: Workspace, cfg: Any, path: Path, settings: dict[str, Any], trainer_overrides: Any
) -> dict[str, Any]:
    """Train one (sampler, m) on the home's dataset (`settings["dataset"]`); its record."""
    from training.workflows.pipeline import train

    started = records.start()
    source = dataset_source(settings["dataset"])
    result = train(ws, cfg, dataset=source, publish=False, **trainer_overrides)
    assert result is not None  # one process (`require_one_process`): it is rank 0
    config = {**settings, "settings": training_settings(cfg)}
    return records.save(
        path, config, _metrics(result), started,
        precision=result.precision, device=result.device, threads=result.threads,
    )  # fmt: skip


def quality_command(
    dataset: Annotated[
        str | None,
        typer.Option(
            help="Log file or folder, dataset name, or 'synthetic' (needed without --grid)."
        ),
    ] = None,
    samplers: Annotated[
        str | None, typer.Option(help="Comma-separated sampler names (needed without --grid).")
    ] = None,
    num_negatives: Annotated[str, typer.Option(help="Comma-separated m values.")] = "64,256",
    max_epochs: Annotated[int | None, typer.Option(help="Upper bound on epochs.")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="<key=value>", help="Config override (repeatable)."),
    ] = None,
    plot_file: Annotated[Path | None, typer.Option("--plot", help="PNG plot path.")] = None,
    home: Annotated[
        Path | None,
        typer.Option(help="Scratch home for the runs.", show_default="a temporary folder"),
    ] = None,
    grid: Annotated[
        str | None,
        typer.Option(help=f"Run a named sweep instead: {', '.join(GRIDS)}."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Result folder, one record per run (needed without --grid).",
            show_default="with --grid, the grid's, under results/",
        ),
    ] = None,
    data_root: Annotated[
        Path | None,
        typer.Option(help="--grid: folder of the named datasets.", show_default="$RECSYS_DATASETS"),
    ] = None,
    scratch: Annotated[
        Path, typer.Option(help="--grid: the runs' homes (kept, outside the repo).")
    ] = sweep.SCRATCH,
) -> None:
    """Train every (sampler, m) with the same config and seed; one record per run, and a plot.

    With --grid: train the named sweep's runs that have no record with the same settings in
    --out; run the same command again to resume.
    """
    if grid is not None:
        where = sweep.Sweep(
            result_dir(grid, out), data_root or datasets_root(), scratch, set_ or []
        )
        _grid_command(grid, where)
        return
    if dataset is None or samplers is None or out is None:
        raise RecsysInputError("--dataset, --samplers and --out are needed without --grid")
    negatives = options.ints(num_negatives, "num-negatives")
    names = options.names(samplers, "samplers")
    first = out / f"{cell_name(*combos(names, negatives)[0])}.json"  # the folder's first record
    require_writable({"--out": first, "--plot": plot_file})
    with tempfile.TemporaryDirectory(prefix="recsys-bench-") as tmp:
        chosen = home if home is not None else Path(tmp)
        rows = run_quality(
            dataset, names, negatives, out, plot_file, chosen, max_epochs, set_ or []
        )
    typer.echo("\n".join(map(_line, rows)))


def _line(row: dict[str, Any]) -> str:
    """One run's figures, one line."""
    return (
        f"{row['sampler']:<12} m={row['num_negatives']!s:<6} recall@10 {row['recall@10']:.4f} "
        f"ndcg@10 {row['ndcg@10']:.4f} full_ce {row['full_ce']:.3f} "
        f"{row['seconds_per_epoch']:.1f} s/epoch x {row['epochs']}"
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
