"""The benchmark pages and the README's result tables say what their records say.

Every generated block of docs/benchmarks/ and README.md must equal what `python -m benchmarks
docs-pages` writes from `benchmarks/results/`, so a figure that disagrees with its record
fails here; the fix is to run that command (or to correct the record).
"""

import re
import shutil
from pathlib import Path

import pytest

from benchmarks.docs_pages import blocks, pages, quality, towers
from benchmarks.paths import REPO
from training.config import RecsysConfig

# words that tell a history instead of what is (the docs' convention), and issue numbers
HISTORY = re.compile(r"\bsessions?\b|of the time|today's|#\d+", re.IGNORECASE)


def test_every_page_has_its_blocks() -> None:
    assert pages.missing() == [], "add the markers, then run `python -m benchmarks docs-pages`"


def test_every_generated_block_matches_its_records() -> None:
    assert pages.stale() == [], "run `python -m benchmarks docs-pages`"


def test_a_figure_edited_by_hand_is_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    page = "docs/benchmarks/retraining.md"
    copy = tmp_path / page
    copy.parent.mkdir(parents=True)
    shutil.copy(REPO / page, copy)
    text = copy.read_text()
    body = blocks.body(text, "retraining")
    assert body is not None and "0.0559" in body
    copy.write_text(blocks.fill(text, "retraining", body.replace("0.0559", "0.0600", 1)))
    monkeypatch.setattr(pages, "REPO", tmp_path)
    monkeypatch.setattr(pages, "PAGES", {page: pages.PAGES[page]})
    assert pages.stale() == [f"{page}: retraining"]


def test_the_default_rows_are_what_the_default_sampler_picks() -> None:
    default = RecsysConfig()
    small = default.for_catalogue(12_101).sampler  # amazon-beauty's and amazon-toys' size
    assert small.name == quality.DEFAULT_RUN
    sampled = default.for_catalogue(default.sampler.full_up_to + 1).sampler
    assert f"{sampled.name}_m{sampled.num_negatives}" == quality.SAMPLED_DEFAULT_RUN


def test_the_product_default_verdict_names_each_dataset_short_of_the_aim() -> None:
    block = towers.product_default("docs/benchmarks/query-towers.md")
    rows = [line.split(" | ") for line in block.splitlines() if line.startswith("| amazon-")]
    short = [
        row[0].strip("| ") for row in rows if float(row[3].rstrip("%")) < 100 * towers.PRODUCT_GAIN
    ]
    verdict = block.strip().splitlines()[-1]
    assert ("met on both datasets" in verdict) == (not short)
    assert all(dataset in verdict for dataset in short)


def test_every_page_is_linked_from_the_index_and_tells_no_history() -> None:
    index = (REPO / pages.INDEX).read_text()
    for page in pages.PAGES:
        if page.startswith("docs/benchmarks/") and page != pages.INDEX:
            assert f"({Path(page).name})" in index, page
        if page != "README.md":
            assert not HISTORY.findall((REPO / page).read_text()), page


def test_a_block_is_filled_between_its_markers_only() -> None:
    text = "a\n<!-- generated:x -->\nold\n<!-- /generated:x -->\nb\n"
    assert blocks.body(text, "y") is None
    filled = blocks.fill(text, "x", "new\n")
    assert filled == "a\n<!-- generated:x -->\nnew\n<!-- /generated:x -->\nb\n"
    assert blocks.body(filled, "x") == "new\n"


def test_the_defaults_table_counts_the_refit_epochs_each_run_had() -> None:
    """The cap cuts a refit (`ReservingTimer`): a row counts its run's epochs, not the config's."""
    from benchmarks.docs_pages.tables import metrics

    lines = quality.defaults("docs/benchmarks/index.md").splitlines()
    for dataset in ("amazon-beauty", "amazon-toys"):
        for name in (quality.DEFAULT_RUN, quality.SAMPLED_DEFAULT_RUN):
            run = f"{quality.DEFAULTS}/{dataset}/{name}"
            facts = metrics(run)
            (row,) = [line for line in lines if f"`{run}`" in line]
            assert f"| {facts['epochs']} + {facts['refit_epochs']} refit, " in row
