"""The query-tower study's block: each run's val metrics, per dataset, as its records hold them."""

from __future__ import annotations

from typing import Any

from benchmarks.docs_pages.quality import (
    DEFAULT_RUN,
    DEFAULTS,
    FORMER_DEFAULT_RUN,
    FORMER_DEFAULTS,
    RECIPE_FINAL,
    SAMPLED_DEFAULT_RUN,
)
from benchmarks.docs_pages.seeds import chosen
from benchmarks.docs_pages.tables import cite, gap, load, metrics, num, record, recorded, table
from benchmarks.paths import RESULTS
from benchmarks.sweeps.final_grid import WITHIN
from benchmarks.sweeps.run_records import load_results
from benchmarks.sweeps.tower_grid import (
    CHOSEN_SETTING,
    CHOSEN_TOWER,
    DATASETS,
    SAMPLED_RUNS,
    candidate_spec,
    planned,
    product_spec,
    sampled_spec,
    towers_of,
)
from benchmarks.sweeps.tower_settings import SETTINGS

STUDY = RESULTS / "tower_study"
TESTED = RESULTS / "tower_study_test"  # `bench quality-test`: test ranked once, at the end
PRODUCT_GAIN = 0.08  # the default with its refit is aimed this far above the like-for-like figure


def _cell(run: dict[str, Any]) -> str:
    shown = load(run["machine"])
    return (
        f"| {run['val']['ndcg@10']:.4f} | {run['val']['recall@10']:.4f} | {run['epochs']} x "
        f"{run['seconds_per_epoch']:.0f} s, {run.get('stopped_by', '?')} | {shown} |"
    )


def tower_runs(page: str) -> str:
    """Markdown: one row per planned run, its val NDCG@10 and Recall@10 once it has a record."""
    found = {(r["dataset"], r["name"]): r for rows in load_results(STUDY).values() for r in rows}
    lines = [
        "| dataset | run | val NDCG@10 | val Recall@10 | epochs, what stopped it | load |",
        "|---|---|---|---|---|---|",
    ]
    for setting in SETTINGS:  # the like-for-like settings
        for dataset in DATASETS:
            for tower in planned(dataset, setting):
                name = f"{tower}-{setting}"
                run = found.get((dataset, name))
                cells = _cell(run) if run else "| not run yet | | | |"
                lines.append(f"| {dataset} | `{name}` {cells}")
    return "\n".join(lines) + "\n"


def decision(page: str) -> str:
    """What the records decide: per setting, the tower that leads val NDCG@10 on both datasets.

    Then, of every like-for-like run, the one with the best val NDCG@10 on each dataset: when it
    is the same run on both, that is the study's chosen configuration.
    """
    found = {(r["dataset"], r["name"]): r for rows in load_results(STUDY).values() for r in rows}
    lines = _per_setting(found)
    best = {}
    for dataset in DATASETS:
        names = [f"{t}-{s}" for s in SETTINGS for t in planned(dataset, s)]
        runs = {n: found[(dataset, n)] for n in names if (dataset, n) in found}
        if len(runs) == len(names):
            best[dataset] = max(runs, key=lambda n: runs[n]["val"]["ndcg@10"])
    if len(best) == len(DATASETS):
        lines.append(f"- Of every run above: {_overall(best)}.")
    return "\n".join(lines) + "\n"


def _overall(best: dict[str, str]) -> str:
    """The verdict across settings, from each dataset's run with the best val NDCG@10."""
    leaders = set(best.values())
    if len(leaders) == 1:
        lead = leaders.pop()
        return f"`{lead}` has the best val NDCG@10 on both datasets: the chosen configuration"
    each = ", ".join(f"{dataset}: `{run}`" for dataset, run in best.items())
    return (
        f"no run has the best val NDCG@10 on both datasets ({each}), so the configuration "
        f"chosen before stays: `{CHOSEN_TOWER}-{CHOSEN_SETTING}`"
    )


def _per_setting(found: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """One line per like-for-like setting: its leader on both datasets, or how far it is."""
    lines = []
    for setting in SETTINGS:  # the like-for-like settings
        if len(towers_of(setting)) < 2:
            continue  # one tower's variant: the line across every run weighs it
        best = {}
        for dataset in DATASETS:
            runs = {t: found.get((dataset, f"{t}-{setting}")) for t in planned(dataset, setting)}
            if any(run is None for run in runs.values()):
                done = sum(run is not None for run in runs.values())
                lines.append(f"- {setting} settings, {dataset}: {done} of {len(runs)} runs done.")
                continue
            best[dataset] = max(runs, key=lambda t: runs[t]["val"]["ndcg@10"])  # type: ignore[index]
        first, then = DATASETS
        waiting = sorted(set(planned(first, setting)) - set(planned(then, setting)))
        if len(best) == len(DATASETS) and waiting:
            others = ", ".join(f"`{tower}`" for tower in waiting)
            lines.append(
                f"- {setting} settings: `{best[first]}` leads on {first}, where {others} ran "
                f"first; not leading there, {others} did not run on {then}."
            )
        elif len(best) == len(DATASETS):
            leaders = set(best.values())
            verdict = (
                f"`{leaders.pop()}` leads on both datasets"
                if len(leaders) == 1
                else "no tower leads on both datasets ("
                + ", ".join(f"{d}: `{t}`" for d, t in best.items())
                + ")"
            )
            lines.append(f"- {setting} settings: {verdict}.")
    return lines


def tested(page: str) -> str:
    """Markdown: the runs whose test split was ranked, with intervals and how many times."""
    runs = [r for rows in load_results(TESTED).values() for r in rows] if TESTED.is_dir() else []
    if not runs:
        return "No run's test split has been ranked yet.\n"
    lines = [
        "| dataset | run | val NDCG@10 | test NDCG@10 (95% interval) | test Recall@10 "
        "(95% interval) | times test was ranked |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        ndcg, recall = run["test"]["ndcg@10"], run["test"]["recall@10"]
        lines.append(
            f"| {run['dataset']} | `{run['name']}` | {run['val_ndcg@10']:.4f} | "
            f"{_interval(ndcg)} | {_interval(recall)} | {run['test_rankings']} |"
        )
    return "\n".join(lines) + "\n"


def _interval(cell: dict[str, float]) -> str:
    return f"{cell['mean']:.4f} ({cell['low']:.4f}-{cell['high']:.4f})"


def product_default(page: str) -> str:
    """The product's default with its refit against the like-for-like figure, on test.

    The like-for-like figure is the chosen configuration's at the seed validation picks
    (`seeds.chosen`), its test ranked once after the study.
    """
    rows, short = [], []
    for dataset in DATASETS:
        alike = chosen(dataset)
        run = f"{DEFAULTS}/{dataset}/{DEFAULT_RUN}"
        base, ndcg = _test(alike), metrics(run)["test"]["ndcg@10"]
        gain = ndcg / base - 1
        if gain < PRODUCT_GAIN:
            short.append(dataset)
        rows.append(
            [dataset, num(base), num(ndcg), gap(gain), cite(alike, page), cite(run, page)]
        )  # fmt: skip
    head = ["dataset", "like for like (no refit): test NDCG@10",
            "the default with its refit: test NDCG@10", "gain", "like-for-like record",
            "the default's record"]  # fmt: skip
    aim = f"The study aims the default at least {PRODUCT_GAIN:.0%} above the like-for-like figure"
    verdict = f"short of it on {' and '.join(short)}" if short else "met on both datasets"
    return table(head, rows) + f"\n{aim}: {verdict}.\n"


def product_frame(page: str) -> str:
    """Trained as `recsys train` shipped a model, against the recipe study's default, on val.

    Two runs per dataset: the tower study's product-frame run, which drops the refit
    (validation only), so its fit had the whole cap and is read at the best round within the
    fit time a refit's reserve would have left; and `published-author`'s run with the recipe
    study's default sampler (`midx`) on the test split, whose fit kept that reserve (its val
    NDCG@10: the round it kept, before its refit).
    """
    rows = []
    for dataset in DATASETS:
        former = f"{RECIPE_FINAL}/{dataset}/{FORMER_DEFAULT_RUN}"  # the one they were held against
        base = metrics(former)["val"]["ndcg@10"]
        studied = f"tower_study/{dataset}/{product_spec(dataset).name}"
        shipped = f"{FORMER_DEFAULTS}/{dataset}/{SAMPLED_DEFAULT_RUN}"  # the former's sampler
        for run in (studied, shipped):
            if not recorded(run):
                rows.append([dataset, f"`{run}`: not run yet", "", "", num(base), "", ""])
                continue
            rows.append(_against(run, former, page, reserve=run == studied)[0])
    head = [
        "dataset", "run", "val NDCG@10", "within a refit's reserve",
        "the recipe study's default: val NDCG@10", "difference (reserve)", "its record",
    ]  # fmt: skip
    return table(head, rows)


def candidate(page: str) -> str:
    """The chosen configuration as `recsys train` ships it, against the former default, on val.

    The candidate's fit had the whole cap (a study on validation drops the refit), so it is read
    at the best round within the fit time the refit's reserve would have left
    (`_within_reserve`); the former default's run kept that reserve. A lead on both datasets
    makes it the default.
    """
    rows, behind = [], []
    for dataset in DATASETS:
        base_run = f"{FORMER_DEFAULTS}/{dataset}/{DEFAULT_RUN}"
        studied = f"tower_study/{dataset}/{candidate_spec(dataset).name}"
        if not recorded(studied):
            return f"`{studied}`: not run yet.\n"
        row, gain = _against(studied, base_run, page, reserve=True)
        rows.append(row)
        if gain <= 0:
            behind.append(dataset)
    head = [
        "dataset", "run", "val NDCG@10", "within a refit's reserve",
        "the former default: val NDCG@10", "difference (reserve)", "the former default's record",
    ]  # fmt: skip
    verdict = (
        f"it does not lead on {' and '.join(behind)}: the default stays"
        if behind
        else "it leads on both datasets: the defaults are this configuration"
    )
    return table(head, rows) + f"\nWithin the reserve, {verdict}.\n"


def _against(run: str, base_run: str, page: str, reserve: bool) -> tuple[list[str], float]:
    """`run`'s row against `base_run`'s val NDCG@10, and its gain.

    `reserve`: `run` read within the refit's reserve (`_within_reserve`), as its kept round.
    """
    got, base = record(run), metrics(base_run)["val"]["ndcg@10"]
    val = got["metrics"]["val"]["ndcg@10"]
    kept = _within_reserve(got) if reserve else val
    gain = kept / base - 1
    shown = [num(val), num(kept), num(base), gap(gain)]
    return [got["metrics"]["dataset"], cite(run, page), *shown, cite(base_run, page)], gain


def _within_reserve(run: dict[str, Any]) -> float:
    """The best val NDCG@10 of the rounds a fit capped with `recsys train`'s refit reserve had.

    `ReservingTimer`: the config's refit epochs at the epochs' pace, at most `REFIT_SHARE` of
    the cap; the fit's limit is the cap less their time. The record's pace includes the
    validation rounds, which the timer's does not: the reserve here is if anything the larger,
    the limit the earlier. (Lightning is imported here, when the block is made, not with the
    pages.)
    """
    from training.loop.final_round import REFIT_SHARE

    got, train = run["metrics"], run["config"]["train"]
    cap, pace = 60.0 * train["max_minutes"], got["seconds_per_epoch"]  # validation included
    refit = min(train["refit_epochs"], max(int(cap * REFIT_SHARE // pace), 1))
    rounds = [r for r in got["validation"] if r["time/fit_seconds"] <= cap - refit * pace]
    return max((r["val/ndcg@10"] for r in rounds), default=float("nan"))


def sampled(page: str) -> str:
    """Like-for-like settings with a sampled softmax against their full softmax, on test.

    One row per dataset and sampled run (`SAMPLED_RUNS`), each ranked once (`quality-test`).
    """
    rows = []
    for dataset in DATASETS:
        for setting, sampler, negatives in SAMPLED_RUNS:
            full = f"tower_study_test/{dataset}/{CHOSEN_TOWER}-{setting}"
            spec = sampled_spec(dataset, setting, sampler, negatives)
            drawn = f"tower_study_test/{dataset}/{spec.name}"
            shown = [dataset, f"`{setting}`", f"`{sampler}`, m = {negatives}", num(_test(full))]
            if not recorded(drawn):
                rows.append([*shown, "not ranked yet", "", "", cite(full, page), ""])
                continue
            base, got = _test(full), _test(drawn)
            verdict = "yes" if got >= base * (1 - WITHIN) else "no"
            rows.append(
                [*shown, num(got), gap(got / base - 1), verdict, cite(full, page),
                 cite(drawn, page)]
            )  # fmt: skip
    head = [
        "dataset", "setting", "sampler", "full softmax: test NDCG@10",
        "sampled: test NDCG@10", "difference", f"within {WITHIN:.0%}", "full softmax's record",
        "sampled run's record",
    ]  # fmt: skip
    return table(head, rows)


def _test(run: str) -> float:
    return float(metrics(run)["test"]["ndcg@10"]["mean"])
