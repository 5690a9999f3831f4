"""Which generated block goes into which page, and the command that writes or checks them all.

`python -m benchmarks docs-pages` fills every block from the records; `--check` compares
instead (the test of `make test` does the same). A page that lacks one of its blocks'
markers is named and the command exits 2, after writing the pages that have all of theirs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated

import typer

from benchmarks.docs_pages import (
    blocks,
    choice,
    default_sampler,
    operations,
    quality,
    quickstart,
    refit,
    seeds,
    serving_guide,
    serving_scale,
    steps,
    tower_tune,
    towers,
)
from benchmarks.paths import REPO, RESULTS
from benchmarks.sweeps.recipe_report import PLOT, recipe_table
from data.errors import RecsysInputError

Block = Callable[[str], str]  # the page's path under the repository -> the block's markdown


def recipe(page: str) -> str:
    """The recipe study's validation table, best mean first, and its plot."""
    out = RESULTS / "recipe_study"
    plot = os.path.relpath(out / PLOT, (REPO / page).parent)
    return recipe_table(out) + f"\n![recipe study: val NDCG@10 against time]({plot})\n"


def _sweep(study: str) -> Block:
    return lambda page: quality.sweep_report(study, page)


INDEX = "docs/benchmarks/index.md"
PAGES: dict[str, dict[str, Block]] = {
    "README.md": {"results": quality.readme_results, "quickstart": quickstart.training_time},
    "docs/getting-started/docker.md": {"quickstart": quickstart.training_time},
    "docs/getting-started/local.md": {"quickstart": quickstart.training_time},
    "docs/guides/choosing-a-sampler.md": {"sampler-choice": choice.sampler_choice},
    "docs/guides/serving.md": {
        "index-memory": serving_guide.index_memory, "replicas": serving_guide.replicas,
        "smoke-stages": serving_guide.smoke_stages,
    },
    INDEX: {
        "defaults": quality.defaults, "samplers": quality.compared,
        "catalogue": quality.catalogue, "retraining": operations.retraining,
        "serving": operations.serving,
    },
    "docs/benchmarks/sampler-comparison.md": {
        "samplers": quality.compared, "report": _sweep(quality.SWEEP),
        "kernel-bias": quality.kernel_bias,
    },
    "docs/benchmarks/catalogue-1m.md": {
        "catalogue": quality.catalogue, "choice": choice.sampler_choice,
        "report": _sweep(quality.CATALOGUE), "step-kernels": steps.per_query_steps,
        "step-shared": steps.shared_steps,
    },
    "docs/benchmarks/recipe-study.md": {
        "recipe": recipe, "defaults": quality.recipe_final, "published": quality.published,
    },
    "docs/benchmarks/query-towers.md": {
        "towers": towers.tower_runs, "tower-decision": towers.decision,
        "tower-test": towers.tested, "tower-seeds": seeds.seeds, "tower-tune": tower_tune.tuned,
        "tower-product-default": towers.product_default,
        "tower-product-frame": towers.product_frame, "tower-sampled": towers.sampled,
        "tower-candidate": towers.candidate,
        "tower-refit": refit.refit_curve,
        "tower-refit-length": refit.refit_length,
        "tower-refit-decay": refit.refit_decay,
    },
    "docs/benchmarks/default-sampler.md": {
        "default-sampler-steps": default_sampler.step_costs, "defaults": quality.defaults,
    },
    "docs/benchmarks/retraining.md": {"retraining": operations.retraining},
    "docs/benchmarks/serving.md": {
        "serving": operations.serving, "search": operations.search,
        "default-width": serving_scale.default_width,
        "default-width-recall": serving_scale.recall,
        "default-width-profile": serving_scale.profile,
    },
}  # fmt: skip


def missing() -> list[str]:
    """`page: block` for every block whose markers its page lacks (or a page that is absent)."""
    found = []
    for page, named in PAGES.items():
        path = REPO / page
        text = path.read_text() if path.is_file() else ""
        found += [f"{page}: {name}" for name in named if blocks.body(text, name) is None]
    return found


def stale() -> list[str]:
    """`page: block` for every block whose body differs from what its records give."""
    found = []
    for page, named in PAGES.items():
        path = REPO / page
        text = path.read_text() if path.is_file() else ""
        found += [
            f"{page}: {name}"
            for name, build in named.items()
            if blocks.body(text, name) not in (None, build(page))
        ]
    return found


def write() -> list[str]:
    """Fill every block of every page that has all of its markers; the pages written."""
    lacking = {entry.split(": ")[0] for entry in missing()}
    written = []
    for page, named in PAGES.items():
        if page in lacking:
            continue
        path = REPO / page
        text = path.read_text()
        for name, build in named.items():
            text = blocks.fill(text, name, build(page))
        path.write_text(text)
        written.append(page)
    return written


def docs_pages(
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if a block differs.")
    ] = False,
) -> None:
    """Write the result tables of docs/benchmarks/ and the README from the records."""
    if check:
        differing = stale()
        for entry in differing:
            typer.echo(f"differs from its records: {entry}", err=True)
        if differing:
            raise typer.Exit(1)
    else:
        for page in write():
            typer.echo(f"wrote {page}")
    if lacking := missing():
        raise RecsysInputError(
            "no generated block (<!-- generated:NAME --> ... <!-- /generated:NAME -->) for "
            + "; ".join(lacking)
        )
