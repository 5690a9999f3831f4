"""`bench quality-report`: the sampler sweep's table, paired intervals and plots.

Reads every run record of `bench quality --grid` under OUT and writes, per dataset, the paired
bootstrap interval of each run's test NDCG@10 against the full softmax's on the same users
(`harness/paired.py`, from the `.ndcg.npz` files), the record `OUT/report.json`,
`OUT/<dataset>/comparison.png` (the bias curve: test NDCG@10 against m per sampler; val
NDCG@10 against wall-clock minutes; val NDCG@10 per epoch) and a markdown table, which replaces
the block between the markers of `--doc` when given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from benchmarks import records
from benchmarks.harness import options
from benchmarks.harness.paired import paired_interval
from benchmarks.paths import DOCS
from benchmarks.sweeps.grids import GRIDS, REPORTS, result_dir, shared_plan
from benchmarks.sweeps.run_records import load_ndcg, load_results
from data.errors import RecsysInputError

DEFAULT_DOC = DOCS / "sampler_comparison.md"  # links without a doc
BEGIN, END = "<!-- sweep-report:begin -->", "<!-- sweep-report:end -->"
# Best published test NDCG@10 with sampled softmax (../shared/datasets/README.md).
PUBLISHED = {"amazon-beauty": 0.0531, "amazon-toys": 0.0580}
HEADER = (
    "| run | m | loss | Recall@10 | NDCG@10 | vs full (95% interval) | MRR@10 | full CE "
    "| epochs | s / epoch | sampling ms / step | KL(p‖q) | load |"
)


def with_intervals(
    out: Path, records: list[dict[str, Any]], resamples: int, seed: int
) -> list[dict[str, Any]]:
    """Each record with `vs_full`: (relative gap, low, high), or None (no full run, or full)."""
    fulls = [r for r in records if r["sampler"] == "full"]
    loaded = {f["name"]: load_ndcg(out, f) for f in fulls}  # each reference read once
    rows = []
    for rec in records:
        ref, interval = reference_of(rec, fulls), None
        if ref is not None and rec["sampler"] != "full":
            ndcg = load_ndcg(out, rec)
            interval = paired_interval(loaded[ref["name"]], ndcg, resamples, seed)
        rows.append({**rec, "vs_full": interval})
    return rows


def reference_of(rec: dict[str, Any], fulls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The full-softmax run `rec` is paired with: the first of its own model settings.

    A stage that changes the temperature reruns the full softmax beside it; a run whose
    settings no full-softmax run shares is paired with the grid's first.
    """

    def same_model(full: dict[str, Any]) -> bool:  # on every key both records hold
        mine, theirs = rec["config"]["model"], full["config"]["model"]
        return all(mine[key] == theirs[key] for key in mine.keys() & theirs.keys())

    return next((f for f in fulls if same_model(f)), fulls[0] if fulls else None)


def _fmt(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def table_row(row: dict[str, Any]) -> str:
    """One markdown row of a run."""
    test, gap = row["test"], row["vs_full"]
    vs = "reference" if row["sampler"] == "full" else ""
    if gap is not None:
        vs = f"{100 * gap[0]:+.1f}% ({100 * gap[1]:+.1f}, {100 * gap[2]:+.1f})"
    stop = " (cap)" if row["stopped_by"] == "time cap" else ""
    machine = row["machine"]
    cells = [
        f"`{row['label']}`", str(row["num_negatives"] or "-"),
        "full softmax" if row["sampler"] == "full" else row["loss"],
        _fmt(test["recall@10"], 4), _fmt(test["ndcg@10"], 4), vs, _fmt(test["mrr@10"], 4),
        _fmt(test["full_ce"], 2), f"{row['epochs']}{stop}", _fmt(row["seconds_per_epoch"], 0),
        _fmt(row["sampling_ms_per_step"], 2), _fmt(row["proposal_kl"], 2),
        f"{machine['load_before']:.1f} / {machine['load_after']:.1f}",
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def _gap(row: dict[str, Any]) -> str:
    gap = row["vs_full"]
    return f"{row['test']['ndcg@10']:.4f}" + ("" if gap is None else f" ({100 * gap[0]:+.1f}%)")


def cross_table(by_dataset: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Test NDCG@10 (gap to full) of each run side by side over datasets, where both have it."""
    names = {d: {r["name"]: r for r in rows} for d, rows in by_dataset.items()}
    shared = [n for n in next(iter(names.values()), {}) if all(n in v for v in names.values())]
    if len(names) < 2 or not shared:
        return []
    head = "| run | " + " | ".join(names) + " |"
    lines = ["", "#### Both datasets (test NDCG@10, gap to full)", "", head]
    lines.append("|" + "---|" * (len(names) + 1))
    lines += [f"| `{n}` | " + " | ".join(_gap(v[n]) for v in names.values()) + " |" for n in shared]
    return lines


def markdown(
    by_dataset: dict[str, list[dict[str, Any]]], done: int, planned: int, figures: str
) -> str:
    """The tables of every dataset, with the count of runs done and planned.

    `figures`: the folder of the datasets' `comparison.png`, as the doc's links reach it.
    """
    lines = [
        f"**{done} of {planned} planned runs done**" + (" (partial)." if done < planned else ".")
    ]
    for dataset, rows in by_dataset.items():
        lines += ["", f"#### {dataset}", "", HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
        lines += [table_row(r) for r in rows]
        lines += ["", f"![{dataset}]({figures}/{dataset}/comparison.png)"]
    lines += cross_table(by_dataset)
    return "\n".join(lines) + "\n"


def _style(row: dict[str, Any], colors: dict[str, str]) -> dict[str, Any]:
    """One colour per sampler label; dashed for a loss variant, dotted for m other than 64."""
    dash = "--" if row["loss_variant"] else "-" if row["num_negatives"] in (None, 64) else ":"
    return {"color": colors[row["label"]], "ls": dash}


def _bias_panel(ax: Any, dataset: str, rows: list[dict[str, Any]], colors: dict[str, str]) -> None:
    """Test NDCG@10 against m per sampler (default loss); full softmax and best published."""
    plain = [r for r in rows if not r["loss_variant"]]
    for label in sorted({r["label"] for r in plain if r["num_negatives"]}):
        pts = sorted(
            (r["num_negatives"], r["test"]["ndcg@10"]) for r in plain if r["label"] == label
        )
        ax.plot(*zip(*pts, strict=True), marker="o", label=label, color=colors[label])
    for row in plain:
        if row["sampler"] == "full":
            first = row["label"] == "full"
            label = "full softmax" if first else row["label"]
            ax.axhline(
                row["test"]["ndcg@10"], color="black", ls="--" if first else "-.", label=label
            )
    if dataset in PUBLISHED:
        ax.axhline(PUBLISHED[dataset], color="grey", ls=":", label="best published")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="negatives m", ylabel="test NDCG@10", title="bias curve")


def _curve_panels(axes: Any, rows: list[dict[str, Any]], colors: dict[str, str]) -> None:
    """Val NDCG@10 against wall-clock minutes and per epoch, one line per run."""
    for row in rows:
        curve = [c for c in row["validation"] if c.get("time/fit_seconds") is not None]
        minutes = [c["time/fit_seconds"] / 60 for c in curve]
        ndcg = [c["val/ndcg@10"] for c in curve]
        style = _style(row, colors)
        axes[0].plot(minutes, ndcg, marker=".", label=row["name"], **style)
        axes[1].plot([c["epoch"] + 1 for c in curve], ndcg, marker=".", label=row["name"], **style)
    axes[0].set(xlabel="wall-clock minutes of training", ylabel="val NDCG@10", title="vs time")
    axes[1].set(xlabel="epoch", ylabel="val NDCG@10", title="validation curves")


def plot(dataset: str, rows: list[dict[str, Any]], path: Path) -> None:
    """The three panels of one dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = sorted({r["label"] for r in rows})
    colors = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    fig, axes = plt.subplots(1, 3, figsize=(19, 5))
    _bias_panel(axes[0], dataset, rows, colors)
    _curve_panels(axes[1:], rows, colors)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(f"{dataset}: sampler comparison (load and caps: the table)")
    options.save_figure(fig, path)


def check_block(doc: Path) -> str:
    """`doc`'s text, which must hold the report markers (RecsysInputError otherwise)."""
    try:
        content = doc.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise RecsysInputError(f"--doc {doc}: cannot read it ({err})") from None
    if BEGIN not in content or END not in content:
        raise RecsysInputError(f"--doc {doc}: no {BEGIN} ... {END} block")
    return content


def replace_block(doc: Path, text: str) -> None:
    """Put `text` between the report markers of `doc`."""
    head, rest = check_block(doc).split(BEGIN, 1)
    doc.write_text(f"{head}{BEGIN}\n{text}{END}{rest.split(END, 1)[1]}")


def build_report(
    out: Path, grid: str, doc: Path | None, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Intervals, plots, the record `report.json` and the markdown (into `doc` if given)."""
    started = records.start()
    specs, planned = shared_plan(grid, out) if grid in GRIDS else ([], 0)
    order = {(s.dataset, s.name): i for i, s in enumerate(specs)}
    by_dataset = {}
    for dataset, runs in load_results(out).items():
        runs.sort(key=lambda r: order.get((dataset, r["name"]), len(order)))
        by_dataset[dataset] = with_intervals(out, runs, resamples, seed)
        plot(dataset, by_dataset[dataset], out / dataset / "comparison.png")
    done = sum(len(rows) for rows in by_dataset.values())
    figures = options.doc_link(out, doc or DEFAULT_DOC)
    text = markdown(by_dataset, done, max(planned, done), figures)
    setting = {"grid": grid, "resamples": resamples, "seed": seed}
    summary = {
        "done": done, "planned": planned,
        "runs": {d: {r["name"]: {"test": r["test"], "vs_full": r["vs_full"]} for r in rows}
                 for d, rows in by_dataset.items()},
    }  # fmt: skip
    records.save(out / "report.json", setting, summary, started)
    if doc is not None:
        replace_block(doc, text)
    return {**setting, **summary, "markdown": text}


def report_command(
    out: Annotated[
        Path | None,
        typer.Option(help="The sweep's result folder.", show_default="the grid's, under results/"),
    ] = None,
    grid: Annotated[
        str,
        typer.Option(
            help="comparison|catalogue|recipe|final: its result folder, planned count and report."
        ),
    ] = "comparison",
    doc: Annotated[
        Path | None, typer.Option(help="Markdown file whose report block is replaced.")
    ] = None,
    resamples: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
) -> None:
    """Table, paired intervals against the full softmax, and plots of a sampler sweep.

    The recipe study (chosen on validation) and the final test of the defaults have their own
    reports (`grids.REPORTS`).
    """
    if grid not in GRIDS:
        raise RecsysInputError(f"--grid {grid!r}: expected one of {', '.join(GRIDS)}")
    if doc is not None:
        check_block(doc)  # before any plot or report.json is written
    out = result_dir(grid, out)
    if not out.is_dir():
        raise RecsysInputError(f"--out {out}: no such folder (the sweep's result folder)")
    if grid not in REPORTS:
        typer.echo(build_report(out, grid, doc, resamples)["markdown"])
        return
    text = REPORTS[grid](out, resamples, doc)  # links relative to where the table goes
    if doc is not None:
        replace_block(doc, text)
    typer.echo(text)
