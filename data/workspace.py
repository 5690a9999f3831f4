"""The workspace layout: where every runtime file of recsys lives under one home directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from data.errors import RecsysInputError

DEFAULT_HOME = Path("workspace")
HOME_ENV_VAR = "RECSYS_HOME"


@dataclass(frozen=True)
class Workspace:
    """Paths of the workspace (see docs/architecture.md, Workspace).

    Attributes:
        root: The home directory; created on demand by the writers, never by reading.

    """

    root: Path

    @classmethod
    def resolve(cls, home: Path | str | None = None) -> Workspace:
        """Pick the home: the explicit argument, else `$RECSYS_HOME`, else `./workspace`."""
        chosen = home if home is not None else os.environ.get(HOME_ENV_VAR) or DEFAULT_HOME
        root = Path(chosen).expanduser()
        if root.exists() and not root.is_dir():
            raise RecsysInputError(f"home {root} is a file, not a folder (--home / {HOME_ENV_VAR})")
        return cls(root)

    @property
    def events_dir(self) -> Path:
        """Append-only event parts, `part-*.parquet`."""
        return self.root / "events"

    @property
    def rejects_dir(self) -> Path:
        """Rejected rows per ingest, `<ingest-id>.parquet` with a `reason` column."""
        return self.root / "rejects"

    @property
    def vocab_dir(self) -> Path:
        """Item and user vocabularies."""
        return self.root / "vocab"

    @property
    def items_vocab_path(self) -> Path:
        """`item_id, item_idx, first_seen, count` (item_idx 1-based; 0 is padding)."""
        return self.vocab_dir / "items.parquet"

    @property
    def users_vocab_path(self) -> Path:
        """`user_id, user_idx, first_seen, count`."""
        return self.vocab_dir / "users.parquet"

    @property
    def runs_dir(self) -> Path:
        """Lightning logs and checkpoints, one folder per training run."""
        return self.root / "runs"

    def run_owner_path(self, run_id: str) -> Path:
        """`runs/<run-id>.owner.json`: who trains that run, and whether it finished.

        Beside the run folder, not in it: Lightning's loggers want the folder empty at start.
        """
        return self.runs_dir / f"{run_id}.owner.json"

    @property
    def models_dir(self) -> Path:
        """Published model bundles, one folder per version."""
        return self.root / "models"

    @property
    def tune_dir(self) -> Path:
        """`recsys tune`'s default output: study.db, trials.json, best.yaml, trial runs."""
        return self.root / "tune"

    @property
    def ingested_path(self) -> Path:
        """`ingested.json`: sha256 of each log file ingested -> its source (`data.ingest`)."""
        return self.root / "ingested.json"

    @property
    def retrain_journal_path(self) -> Path:
        """`retrain.json`: the retrain in progress (its inputs' key, version, counts)."""
        return self.root / "retrain.json"
