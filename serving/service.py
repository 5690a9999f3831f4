"""The served model's lifecycle: load `models/CURRENT`, build its index, swap atomically, poll.

A reload builds the new bundle, index and Recommender completely on the caller's thread (the
poller or the admin route's worker thread), never on a request's path, and then replaces the
one `current` reference. Requests read `current` once and finish on what they read, so a
swap never fails a request in flight.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from data.errors import RecsysInputError
from data.workspace import Workspace
from serving.bundle import ModelBundle, current_version
from serving.history import HistoryStore
from serving.index import IndexParams, build_index
from serving.recommender import Recommender
from serving.threads import limit_threads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReloadResult:
    """What a reload did: `changed` is False when CURRENT already was the served version."""

    changed: bool
    version: str | None
    previous: str | None
    seconds: float = 0.0


class ModelService:
    """Holds the current Recommender of a workspace and replaces it on reload.

    Attributes:
        ws: The workspace (models/, events/).
        params: Index kind and parameters for every version loaded.
        threads: CPU threads a reload gives faiss and torch on its thread (None: default).
        histories: Known users' histories, shared by all versions.
        last_error: Message of the last failed reload (None after a success).

    """

    def __init__(
        self, ws: Workspace, params: IndexParams | None = None, threads: int | None = None
    ) -> None:
        """Create an empty service; call `reload()` or `start_polling()` to load a model."""
        self.ws = ws
        self.params = params or IndexParams()
        self.threads = threads
        self.histories = HistoryStore(ws)
        self.last_error: str | None = None
        self._current: Recommender | None = None
        self._lock = threading.Lock()  # one reload at a time; readers never take it
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    @property
    def current(self) -> Recommender | None:
        """The Recommender serving now (None until a model is loaded)."""
        return self._current

    def reload(self, force: bool = False) -> ReloadResult:
        """Load the version named by models/CURRENT if it differs from the served one.

        Raises:
            RecsysInputError: nothing is published, or the bundle is broken (the old model
                keeps serving).

        """
        with self._lock:
            start = time.perf_counter()
            if self.threads is not None:  # the index build runs on this (caller's) thread
                limit_threads(self.threads)
            self._refresh_histories()
            previous = self._current.version if self._current else None
            version = current_version(self.ws)
            if version is not None and version == previous and not force:
                return ReloadResult(False, version, previous)
            try:
                if version is None:
                    raise RecsysInputError(f"{self.ws.current_model_path}: no model is published")
                recommender = self._build(version)
            except RecsysInputError as err:
                self.last_error = str(err)
                raise
            self._current = recommender  # the atomic swap
            self.last_error = None
            seconds = time.perf_counter() - start
            log.info("serving model %s (was %s), loaded in %.1f s", version, previous, seconds)
            return ReloadResult(True, version, previous, seconds)

    def _build(self, version: str) -> Recommender:
        bundle = ModelBundle.load(self.ws.models_dir / version)
        index = build_index(bundle.item_embeddings, self.params, cache_dir=bundle.path)
        return Recommender(bundle, index, self.histories.get)

    def _refresh_histories(self) -> None:
        try:
            self.histories.refresh_if_changed()
        except Exception:  # a bad event part must not stop the model from serving
            log.exception("could not refresh user histories")

    def poll_once(self) -> None:
        """One polling step: reload if CURRENT changed; errors are logged, never raised."""
        before = self.last_error
        try:
            self.reload()
        except RecsysInputError as err:
            if str(err) == before:
                return  # said once already
            serving = self._current.version if self._current else "nothing"
            log.warning("reload failed, still serving %s: %s", serving, err)

    def start_polling(self, interval_s: float) -> None:
        """Poll models/CURRENT every `interval_s` seconds on a daemon thread (0 = never)."""
        if interval_s <= 0 or self._poller is not None:
            return

        def loop() -> None:
            while not self._stop.is_set():
                self.poll_once()
                self._stop.wait(interval_s)

        self._poller = threading.Thread(target=loop, name="recsys-model-poller", daemon=True)
        self._poller.start()

    def stop(self) -> None:
        """Stop the poller (a reload in progress finishes)."""
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
            self._poller = None
