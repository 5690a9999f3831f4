"""Result blocks of model quality: the defaults on the test split, samplers side by side.

Runs of four studies: the defaults on the test split (`defaults`, as `recsys train` runs
them), the recipe study's final grid (`recipe_final`, its defaults), the sampler comparison
at 12k items (`sampler_sweep`) and the half-million-item catalogue (`catalogue_1m`); the
last two with the paired intervals their `report.json` holds (`recsys bench
quality-report`), so nothing is resampled here.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks.docs_pages.tables import (
    cite,
    gap,
    interval,
    load,
    machine,
    metrics,
    num,
    record,
    recorded,
    sampler_name,
    table,
)
from benchmarks.paths import REPO, RESULTS
from benchmarks.sweeps.final_grid import PUBLISHED, planned_refit
from benchmarks.sweeps.run_records import row
from benchmarks.sweeps.sweep_report import markdown

DATASETS = ("amazon-beauty", "amazon-toys")
# what the default sampler (`auto`) trains on these catalogues, and above its full-softmax
# limit (a test holds both to the config)
DEFAULT_RUN, SAMPLED_DEFAULT_RUN = "full", "midx_m64"
FORMER_DEFAULT_RUN = "midx_m64"  # the default sampler when the recipe study ranked test
FINAL_RUNS = (FORMER_DEFAULT_RUN, "uniform_m256", "full", "exact_m64")  # the recipe study's
DEFAULTS, RECIPE_FINAL = "defaults", "recipe_final"  # the studies of the test split
# the defaults grid's runs of the default before the tower study's chosen configuration (its
# records as that grid wrote them, moved here when the defaults changed; no grid trains it now)
FORMER_DEFAULTS = "defaults_published_author"
SWEEP, CATALOGUE, LARGE = "sampler_sweep", "catalogue_1m", "synthetic-1m"
COMPARED = ("full", "exact_m64", "rff_m64", "uniform_m64", "popularity_m64", "tapas-r1_m64",
            "tapas-r8_m64", "bernoulli_m64", "mixed_m64", "in-batch", "quadratic_m64")  # fmt: skip


def _final_cells(study: str, dataset: str, name: str) -> list[str]:
    """Sampler, test Recall@10 and NDCG@10, gap to the full softmax, minutes of a test run.

    The gap is left empty while the study's full softmax has no record.
    """
    facts, full = metrics(f"{study}/{dataset}/{name}"), f"{study}/{dataset}/full"
    ndcg = facts["test"]["ndcg@10"]
    vs = "reference" if name == "full" else ""
    if name != "full" and recorded(full):
        vs = gap(ndcg / metrics(full)["test"]["ndcg@10"] - 1)
    label = sampler_name(facts) + (_default_role(name) if study == DEFAULTS else "")
    minutes = num(facts["train_seconds"] / 60, 0)
    return [label, num(facts["test"]["recall@10"]), num(ndcg), vs, minutes]


def _default_role(name: str) -> str:
    """Which catalogues the default sampler trains the run's way on (`auto`'s choice)."""
    from training.sampler_settings import FULL_SOFTMAX_UP_TO

    side = {DEFAULT_RUN: "up to", SAMPLED_DEFAULT_RUN: "above"}.get(name)
    return f" (the default {side} {FULL_SOFTMAX_UP_TO:,} items)" if side else ""


def defaults(page: str) -> str:
    """The defaults on the test split: both of the default sampler's choices."""
    return _test_runs(DEFAULTS, (DEFAULT_RUN, SAMPLED_DEFAULT_RUN), page)


def recipe_final(page: str) -> str:
    """The recipe study's defaults on the test split, with uniform, the full softmax, exact."""
    return _test_runs(RECIPE_FINAL, FINAL_RUNS, page)


def _test_runs(study: str, names: tuple[str, ...], page: str) -> str:
    """A table of a test study's runs `names` on both datasets (those with a record)."""
    rows = []
    for dataset in DATASETS:
        for name in names:
            run = f"{study}/{dataset}/{name}"
            if not recorded(run):
                continue
            facts, train = metrics(run), record(run)["config"]["train"]
            refit = planned_refit(facts, train)
            epochs = f"{facts['epochs']} + {refit} refit, {facts['stopped_by']}"
            cells = _final_cells(study, dataset, name)
            val = num(facts["val"]["ndcg@10"])
            rows.append([dataset, cells[0], val, *cells[1:], epochs, machine(run), cite(run, page)])
    head = ["dataset", "sampler", "val NDCG@10 (kept round)", "test Recall@10", "test NDCG@10",
            "NDCG@10 vs full softmax", "training minutes (fit and refit)", "epochs", "machine",
            "record"]  # fmt: skip
    return table(head, rows)


def published(page: str) -> str:
    """The published SASRec + sampled softmax test figures the defaults are held against."""
    rows = [[d, num(v["recall@10"]), num(v["ndcg@10"])] for d, v in PUBLISHED.items()]
    return table(["dataset", "Recall@10", "NDCG@10"], rows)


def readme_results(page: str) -> str:
    """The README's table: both of the default sampler's choices (once recorded), both datasets."""
    names = (DEFAULT_RUN, SAMPLED_DEFAULT_RUN)
    runs = [r for r in (f"{DEFAULTS}/{d}/{n}" for d in DATASETS for n in names) if recorded(r)]
    rows = []
    for run in runs:
        _, dataset, name = run.split("/")
        label, recall, ndcg, _, minutes = _final_cells(DEFAULTS, dataset, name)
        rows.append([dataset, label, recall, ndcg, minutes, cite(run, page)])
    head = ["dataset", "sampler", "Recall@10", "NDCG@10", "minutes", "record"]
    facts = [record(run) for run in runs]
    loads = [f["machine"][k] for f in facts for k in ("load_before", "load_after")]
    index = os.path.relpath(REPO / "docs/benchmarks/index.md", (REPO / page).parent)
    note = (
        f"\nTest split, every item ranked; each run trained under a "
        f"{facts[0]['config']['train']['max_minutes']:.0f}-minute cap on "
        f"{facts[0]['machine']['cores']} CPU cores with one thread, two runs at a time "
        f"(load {min(loads):.1f} to {max(loads):.1f}). More: [the benchmark results]({index}).\n"
    )
    return table(head, rows) + note


def sweep_rows(study: str) -> dict[str, list[dict[str, Any]]]:
    """Each dataset's run rows of a sweep, in its report's order, with their paired interval."""
    report = metrics(f"{study}/report")["runs"]
    return {
        dataset: [{**row(record(f"{study}/{dataset}/{name}")), "vs_full": runs[name]["vs_full"]}
                  for name in runs]
        for dataset, runs in report.items()
    }  # fmt: skip


def sweep_report(study: str, page: str) -> str:
    """A sweep's full tables and figures, as `recsys bench quality-report` writes them."""
    report = metrics(f"{study}/report")
    figures = os.path.relpath(RESULTS / study, (REPO / page).parent)
    return markdown(sweep_rows(study), report["done"], report["planned"], figures)


def compared(page: str) -> str:
    """Every sampler at m = 64 on both datasets under one budget, best on amazon-beauty first."""
    by = {d: {r["name"]: r for r in rows} for d, rows in sweep_rows(SWEEP).items()}
    names = sorted(COMPARED, key=lambda n: (n != "full", -by[DATASETS[0]][n]["test"]["ndcg@10"]))
    rows = []
    for name in names:
        runs = [by[d][name] for d in DATASETS]
        cells = [c for r in runs for c in (num(r["test"]["ndcg@10"]), interval(r["vs_full"]))]
        rows.append([
            sampler_name(runs[0]), *cells,
            " / ".join(num(r["seconds_per_epoch"], 0) for r in runs),
            " / ".join(load(r["machine"]) for r in runs),
            ", ".join(cite(f"{SWEEP}/{d}/{name}", page) for d in DATASETS),
        ])  # fmt: skip
    head = ["sampler", *[f"{d} {c}" for d in DATASETS for c in ("test NDCG@10", "vs full (95%)")],
            "s / epoch (beauty / toys)", "load (beauty / toys)", "records"]  # fmt: skip
    return table(head, rows)


def catalogue(page: str) -> str:
    """Every run on the 546k-item catalogue under one 30-minute budget, best first."""
    runs = sorted(sweep_rows(CATALOGUE)[LARGE], key=lambda r: -r["test"]["ndcg@10"])
    rows = [[
        sampler_name(r), num(r["test"]["recall@10"]), num(r["test"]["ndcg@10"]),
        interval(r["vs_full"]), f"{r['epochs']}, {r['stopped_by']}",
        str(r["sampling_calls"] or "-"), num(r["sampling_ms_per_step"], 1),
        num(r["train_seconds"] / 60, 0), load(r["machine"]),
        cite(f"{CATALOGUE}/{LARGE}/{r['name']}", page),
    ] for r in runs]  # fmt: skip
    head = ["sampler", "test Recall@10", "test NDCG@10", "vs full (95%)", "epochs",
            "training steps (one draw each)", "ms per draw", "training minutes", "load",
            "record"]  # fmt: skip
    return table(head, rows)


# the kernel-family samplers beside the full softmax at the recipe study's model settings
TODAYS_MODEL = ("full-tau0.1-len20", "rff-tau0.1-len20_m64", "midx-tau0.1-len20_m64",
                "midx-tau0.1-len20_m256", "tapas-midx-tau0.1-len20_m64",
                "tapas-midx-tau0.1-len20_m256")  # fmt: skip


def kernel_bias(page: str) -> str:
    """Val NDCG@10 of the kernel samplers against the full softmax, same model and budget."""
    by = {d: {r["name"]: r for r in rows} for d, rows in sweep_rows(SWEEP).items()}
    full = {d: by[d][TODAYS_MODEL[0]]["val"]["ndcg@10"] for d in DATASETS}
    rows = []
    for name in TODAYS_MODEL:
        runs = [by[d][name] for d in DATASETS]
        val = [r["val"]["ndcg@10"] for r in runs]
        rows.append([
            sampler_name(runs[0]),
            *[_against(v, full[d]) for v, d in zip(val, DATASETS, strict=True)],
            *[interval(r["vs_full"]) for r in runs],
            ", ".join(cite(f"{SWEEP}/{d}/{name}", page) for d in DATASETS),
        ])  # fmt: skip
    head = ["sampler", *[f"{d} val NDCG@10 (vs full)" for d in DATASETS],
            *[f"{d} test vs full (95%)" for d in DATASETS], "records"]  # fmt: skip
    return table(head, rows)


def _against(value: float, full: float) -> str:
    shown = "reference" if value == full else gap(value / full - 1)
    return f"{num(value)} ({shown})"
