"""Recipe choices trained towards convergence on a GPU.

Usage: python -m benchmarks.studies.gpu_convergence DATA_DIR [--set stage13|stage14|ceiling]
    [--minutes M] [--out DIR] [--logs DIR]

Issue 19's study runs on 2 CPU cores under a 20- or 30-minute cap; a GPU shows where each
recipe's validation curve levels off. One `recsys train` process per (dataset, recipe), all
at once on one GPU, one CPU thread each, default early stopping, capped at `--minutes` of
training, on `DATA_DIR/<dataset>.csv`. Each run writes the record
`OUT/<dataset>-<recipe>/result.json` (its `--json` result) and its per-round `metrics.csv`
beside it; homes and stderr logs go to `--logs`.
- `stage13`: recipe choices, full softmax, both datasets;
- `stage14`: two more choices, likewise;
- `ceiling`: the defaults (full softmax, three seeds) and `exact` m = 64 (two seeds) on
  amazon-beauty, to see where each levels off.
The committed runs: `--minutes` 4, 2.1 and 3.2 respectively.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from benchmarks import records
from benchmarks.paths import RESULTS, TEMP

FULL = "--sampler full"
EXACT = "--sampler exact --set sampler.num_negatives=64 --set sampler.per_query=true"
BOTH = ("amazon-beauty", "amazon-toys")
# set -> (datasets, recipe -> its `recsys train` flags)
SETS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "stage13": (BOTH, {
        "defaults": FULL,
        "dropout-0.6": f"{FULL} --set model.dropout=0.6",
        "dropout-0.7": f"{FULL} --set model.dropout=0.7",
        "len-50": f"{FULL} --set model.max_len=50",
        "blocks-1": f"{FULL} --set model.num_layers=1",
    }),
    "stage14": (BOTH, {
        "separate-tables": f"{FULL} --set model.share_embeddings=false",
        "heads-4": f"{FULL} --set model.num_heads=4",
    }),
    "ceiling": (("amazon-beauty",), {
        **{f"full-seed{s}": f"{FULL} --set train.seed={s}" for s in (42, 43, 44)},
        **{f"exact_m64-seed{s}": f"{EXACT} --set train.seed={s}" for s in (42, 43)},
    }),
}  # fmt: skip


def main(
    data: Annotated[Path, typer.Argument(help="Folder of <dataset>.csv logs.")],
    which: Annotated[str, typer.Option("--set", help="stage13, stage14 or ceiling.")] = "stage13",
    minutes: Annotated[float, typer.Option(help="Training cap per run.")] = 5.0,
    out: Annotated[Path, typer.Option(help="Result folder.")] = RESULTS / "gpu_convergence",
    logs: Annotated[Path, typer.Option(help="Homes and logs.")] = TEMP / "gpu-convergence",
) -> None:
    """Start every run of the set at once; keep each finished run's record and curve."""
    if which not in SETS:
        raise typer.BadParameter(f"unknown set {which!r}; known: {', '.join(SETS)}")
    datasets, recipes = SETS[which]
    started = records.start()
    running = {}
    for dataset in datasets:
        for recipe, flags in recipes.items():
            run = logs / f"{dataset}-{recipe}"
            run.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "app", "-v", "train", "--home", str(run / "home"),
                   "--dataset", str(data / f"{dataset}.csv"), "--set", "train.accelerator=gpu",
                   "--set", "train.threads=1", "--set", f"train.max_minutes={minutes}",
                   *shlex.split(flags), "--json"]  # fmt: skip
            with (run / "stderr.log").open("w") as stderr:  # the child keeps its own handle
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True)
            running[run.name] = (proc, {"set": which, "minutes": minutes, "args": cmd[3:]})
    failed = []
    for name, (proc, config) in running.items():
        stdout, _ = proc.communicate()
        if proc.returncode != 0:
            failed.append(name)
            continue
        result = json.loads(stdout)
        metrics_csv = logs / name / "home" / "runs" / result["version"] / "metrics.csv"
        (out / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(metrics_csv, out / name / "metrics.csv")
        records.save(out / name / "result.json", config, result, started, device="gpu", threads=1)
    if failed:
        typer.echo(f"FAILED: {', '.join(failed)} (their stderr.log in {logs})", err=True)
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
