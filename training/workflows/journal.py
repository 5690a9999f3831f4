"""`retrain.json`: the retrain attempt in progress, so that the same command resumes it.

Written once the attempt's logs are ingested (atomically), removed when the attempt has
published or been kept by the gate. It names the attempt (`key`: what makes two commands the
same attempt), its `version` (run and bundle name), the served `previous_version`, the event
`parts` and `num_items` it trains on (a resumed attempt reads exactly those, whatever was
ingested since), and the counts its answer reports. Light to import: `recsys clean` reads it
to leave the pending run alone.
"""

from __future__ import annotations

import json
from typing import Any

from data import store
from data.workspace import Workspace


def read(ws: Workspace) -> dict[str, Any] | None:
    """The journal of a killed attempt, or None (none, or unreadable: start a new attempt)."""
    try:
        journal = json.loads(ws.retrain_journal_path.read_text())
    except (OSError, ValueError):
        return None
    return journal if isinstance(journal, dict) else None


def write(ws: Workspace, journal: dict[str, Any]) -> None:
    """Record the attempt (atomic: a reader sees the old journal or this one)."""
    text = json.dumps(journal, indent=1)
    store.atomic_write(ws.retrain_journal_path, lambda tmp: tmp.write_text(text))


def remove(ws: Workspace) -> None:
    """The attempt is over (published, or kept by the gate)."""
    ws.retrain_journal_path.unlink(missing_ok=True)


def pending_version(ws: Workspace) -> str | None:
    """The version the journal's attempt will resume: its run is not a leftover."""
    journal = read(ws)
    version = journal.get("version") if journal else None
    return str(version) if version else None
