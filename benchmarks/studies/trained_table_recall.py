"""The served HNSW index's recall on a trained item table, queried with the model's own users.

Usage: python -m benchmarks.studies.trained_table_recall --run RUN_DIR --out FILE
    [--queries N] [--ef-search 64,128,256,512,1024] [--cache DIR]

`bench serving --like` draws its tables from the Gaussian of a trained table: the trained
table's spectrum at any size, but none of its clusters, so its recall bounds a real model's
from below. This study measures the real case where a trained table is at hand: RUN_DIR is a
training run (`recsys train`'s, or a sweep's `runs/<name>` in its scratch home) with
`checkpoints/best.ckpt`; its model is read as `training.loop.trainer.load_run` reads it (the
refit checkpoint where there is one, else `best.ckpt`). Its item table, as a bundle holds it,
is indexed with the service's own HNSW (`serving.index.build_index`, the service's default
build settings, built on every core and cached under `--cache`), and the queries are the query
tower's vectors for the first `--queries` validation users (their histories, as /recommend
encodes them). For each efSearch: recall@10 against exact search and the search's p50 and p99, one
query at a time, on one thread.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from benchmarks import records
from benchmarks.harness import options
from benchmarks.speed.raw_search import HISTORY, K


def trained(run: Path, num_queries: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The run's item table `[n + 1, d]` as the bundle holds it, `[Q, d]` user queries, config.

    The config is the run's resolved one, as a dict.
    """
    import torch

    from training.evaluation.ranking import rank_batch
    from training.loop.datamodule import SequenceDataModule
    from training.loop.trainer import load_run

    cfg, splits, module = load_run(run)
    dm = SequenceDataModule(splits, cfg.model.max_len, cfg.train.batch_size, num_queries)
    batch = dm.val_set[list(range(min(num_queries, len(dm.val_set))))]  # the first users
    with torch.no_grad():
        model = module.model.cpu().eval()
        item_emb = model.item_tower.all_embeddings()
        _, _, queries = rank_batch(
            model.query_tower, item_emb, batch, cfg.model.temperature, True, 65536
        )
    table, vectors = item_emb.numpy().astype(np.float32), queries.numpy().astype(np.float32)
    return table, vectors, cfg.model_dump(mode="json")


def measure(
    table: np.ndarray, queries: np.ndarray, widths: list[int], cache: Path
) -> dict[str, Any]:
    """Recall@10 and search latency per efSearch of the service's HNSW over `table`."""
    import faiss

    from serving.index import IndexParams, build_index
    from serving.index_recall import exact_top_k, recall_against

    cache.mkdir(parents=True, exist_ok=True)
    index = build_index(table, IndexParams(kind="hnsw"), cache_dir=cache)  # on every core
    faiss.omp_set_num_threads(1)  # searches are timed one query at a time, as the server's
    exact = exact_top_k(table[1:], queries, K)
    served, rows = index.params, []
    for ef in widths:
        index.params = dataclasses.replace(served, hnsw_ef_search=ef)
        us = options.search_seconds(index, queries, K + HISTORY) * 1e6
        rows.append({
            "ef_search": ef,
            "recall_at_10": round(recall_against(index.search(queries, K)[0], exact), 4),
            "search_p50_us": round(float(np.percentile(us, 50)), 1),
            "search_p99_us": round(float(np.percentile(us, 99)), 1),
        })  # fmt: skip
        typer.echo(str(rows[-1]), err=True)
    index.params = served
    return {"index": index.describe(), "by_ef_search": rows}


def main(
    run: Annotated[Path, typer.Option(help="A training run folder with checkpoints/best.ckpt.")],
    json_path: Annotated[Path, typer.Option("--out", help="Write the record here.")],
    queries: Annotated[int, typer.Option(min=1, help="Validation users queried.")] = 1000,
    ef_search: Annotated[
        str, typer.Option(help="Comma-separated HNSW efSearch values.")
    ] = "64,128,256,512,1024",
    cache: Annotated[Path, typer.Option(help="Where the index build is cached.")] = Path(
        "/tmp/recsys-trained-table-recall"
    ),
) -> None:
    """Measure and write the record."""
    if not (run / "checkpoints" / "best.ckpt").is_file():
        raise typer.BadParameter(f"{run}: no checkpoints/best.ckpt")
    started = records.start()
    table, vectors, trained_with = trained(run, queries)
    result = measure(table, vectors, options.ints(ef_search, "ef-search"), cache / run.name)
    setup = {"run": str(run), "items": len(table) - 1, "dim": table.shape[1],
             "queries": len(vectors), "k": K, "over_fetch": HISTORY,
             "run_config": trained_with}  # fmt: skip
    records.save(json_path, setup, result, started, threads=1)


if __name__ == "__main__":
    typer.run(main)
