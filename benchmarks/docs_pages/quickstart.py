"""The quick start's training time, from `bench quickstart`'s record, for the quick start pages."""

from __future__ import annotations

from benchmarks.docs_pages.tables import cite, load, record

RUN = "quickstart/train"


def training_time(page: str) -> str:
    """One sentence: how long the demo model took to train here, and on what machine."""
    facts = record(RUN)
    run, machine = facts["metrics"], facts["machine"]
    minutes = facts["wall_seconds"] / 60
    return (
        f"Measured: the demo model trained in {minutes:.1f} minutes on {machine['cores']} CPU "
        f"cores ({run['epochs']} epochs, then {run['refit_epochs']} refit epochs, within the "
        f"demo's time cap; load {load(machine)}; record {cite(RUN, page)}).\n"
    )
