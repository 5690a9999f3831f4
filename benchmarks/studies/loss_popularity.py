"""Where a trained model puts popular and rare items: why a loss ranks at chance or not.

Usage: python -m benchmarks.studies.loss_popularity RUN_DIR [RUN_DIR ...] --out OUT [--users U]

Each RUN_DIR is a finished run (`HOME/runs/NAME`, e.g. the sweep's scratch homes, `--scratch`
of `bench quality --grid`). For its best checkpoint, over a fixed sample of U validation users:

- the median training count of the items it puts in each user's top 10, beside the median
  count of the users' true next items (a model that recommends the tail scores near 1-3);
- the mean logit h . c / tau of the true next item, and of every item (a positive no higher
  than the average item cannot be ranked);
- the mean logit of the 10% least and the 10% most frequent training items.

A binary loss (negative sampling, NCE) pushes the logit of every item it draws as noise down
to its own level (about -log n for NCE's self-normalisation), while an item its sampler rarely
draws keeps its initial logit (about 0 for L2-normalised towers): the figures show whether
the tail floats above the items the model was trained on.
"""

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer

from benchmarks import records
from training.loop.datamodule import SequenceDataModule, item_counts
from training.loop.trainer import load_run


def _logits(run_dir: Path, users: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(logits `[U, n]` of the sampled val users, their targets' columns `[U]`, counts `[n]`)."""
    cfg, splits, module = load_run(run_dir)
    data = SequenceDataModule(splits, cfg.model.max_len, 1, 512, val_users=users)
    items = module.model.item_tower.all_embeddings().detach()[1:]
    tau = module.current_temperature()
    rows, targets = [], []
    with torch.no_grad():
        for batch in data.val_dataloader():
            queries = module.model.query_tower.encode(batch["history"])
            rows.append((queries @ items.T / tau).numpy())
            targets.append(batch["target"].numpy() - 1)
    return np.concatenate(rows), np.concatenate(targets), item_counts(splits).numpy()[1:]


def measure(run_dir: Path, users: int) -> dict[str, Any]:
    """The figures of the module docstring for one run."""
    logits, targets, counts = _logits(run_dir, users)
    top = np.argpartition(-logits, 10, axis=1)[:, :10]
    order = np.argsort(counts, kind="stable")
    decile = max(len(counts) // 10, 1)
    return {
        "run": run_dir.name,
        "users": len(targets),
        "top10_median_train_count": float(np.median(counts[top])),
        "target_median_train_count": float(np.median(counts[targets])),
        "target_logit_mean": float(logits[np.arange(len(targets)), targets].mean()),
        "item_logit_mean": float(logits.mean()),
        "rarest_decile_logit_mean": float(logits[:, order[:decile]].mean()),
        "commonest_decile_logit_mean": float(logits[:, order[-decile:]].mean()),
    }


def main(
    runs: Annotated[list[Path], typer.Argument(help="Finished run folders (HOME/runs/NAME).")],
    json_out: Annotated[Path, typer.Option("--out", help="Result JSON.")],
    users: Annotated[int, typer.Option(help="Validation users sampled (fixed seed).")] = 2000,
) -> None:
    """Write each run's popularity figures as one record (`results`: one row a run)."""
    started = records.start()
    results = []
    for run in runs:
        results.append({"label": run.parent.parent.name, **measure(run, users)})
        typer.echo(json.dumps(results[-1]))
    config = {"runs": [str(run) for run in runs], "users": users}
    records.save(json_out, config, {"results": results}, started, threads=torch.get_num_threads())


if __name__ == "__main__":
    typer.run(main)
