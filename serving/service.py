"""The served model's lifecycle: load `models/CURRENT`, build its index, swap atomically, poll.

A reload builds the new bundle, index and Recommender completely on the caller's thread (the
poller or the admin route's worker thread), never on a request's path, and then replaces the
one `current` reference. Requests read `current` once and finish on what they read, so a
swap never fails a request in flight.

Any error while loading a version, whatever its type, is a refused reload: the old model keeps
serving, the error is recorded in `status()`, and the poller keeps polling. The poller does
not retry a version that failed until its bundle's files change (or CURRENT names another).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.errors import RecsysInputError
from data.workspace import Workspace
from model.bundle import BundleError, ModelBundle, current_path, current_version
from serving.history import HistoryStore
from serving.index import IndexParams, build_index
from serving.index_recall import RECALL_QUERIES
from serving.recommender import Recommender, user_queries
from serving.threads import limit_threads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReloadResult:
    """What a reload did: `changed` is False when CURRENT already was the served version."""

    changed: bool
    version: str | None
    previous: str | None
    seconds: float = 0.0


@dataclass(frozen=True)
class ServiceStatus:
    """What the service serves and what went wrong last (for /ready and /metrics).

    Attributes:
        served: The version answering requests (None before the first good load).
        published: The version `models/CURRENT` names now (None: nothing published).
        last_error: Why the last reload failed (None after a success).
        last_error_at: Unix time of that failure.
        failed_reloads: Failed reloads since the process started.

    """

    served: str | None
    published: str | None
    last_error: str | None
    last_error_at: float | None
    failed_reloads: int


def _as_input_error(err: Exception) -> RecsysInputError:
    """A failed reload as one message: ours as they are, anything else with its type."""
    if isinstance(err, RecsysInputError):
        return err
    return RecsysInputError(f"reload failed ({type(err).__name__}: {err})")


def _bundle_signature(path: Path) -> tuple[tuple[str, int, int], ...]:
    """Names, sizes and mtimes of a bundle's files: it changes when a file is rewritten.

    () when they cannot be listed: no folder, or a CURRENT naming no path (a NUL byte raises
    ValueError); the load then refuses that version inside `reload`.
    """
    try:
        files = sorted(p for p in path.iterdir() if p.is_file())
        return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    except (OSError, ValueError):
        return ()


class ModelService:
    """Holds the current Recommender of a workspace and replaces it on reload.

    Attributes:
        ws: The workspace (models/, events/).
        params: Index kind and parameters for every version loaded.
        threads: CPU threads a reload gives faiss and torch on its thread (None: default).
        histories: Known users' histories, shared by all versions.
        last_error: Message of the last failed reload (None after a success).
        last_error_at: Unix time of the last failed reload.
        failed_reloads: Number of failed reloads so far.

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
        self.last_error_at: float | None = None
        self.failed_reloads = 0
        self._failed_key: tuple[object, ...] | None = None  # what CURRENT was when it failed
        self._current: Recommender | None = None
        self._lock = threading.Lock()  # one reload at a time; readers never take it
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    @property
    def current(self) -> Recommender | None:
        """The Recommender serving now (None until a model is loaded)."""
        return self._current

    def status(self) -> ServiceStatus:
        """The served and published versions and the last reload error."""
        current = self._current
        try:
            published = current_version(self.ws.models_dir)
        except (OSError, ValueError):
            published = None
        return ServiceStatus(
            served=current.version if current else None,
            published=published,
            last_error=self.last_error,
            last_error_at=self.last_error_at,
            failed_reloads=self.failed_reloads,
        )

    def reload(self, force: bool = False) -> ReloadResult:
        """Load the version named by models/CURRENT if it differs from the served one.

        Raises:
            RecsysInputError: nothing is published, or the version cannot be loaded, whatever
                the underlying error (the old model keeps serving; `last_error` says why).

        """
        with self._lock:
            key = self._published_key()
            try:
                return self._reload(key, force)
            except Exception as err:
                failure = _as_input_error(err)
                self.last_error, self.last_error_at = str(failure), time.time()
                if key != (None, ()):  # "nothing published yet" is no failed reload
                    self.failed_reloads += 1
                self._failed_key = key
                raise failure from None

    def _published_key(self) -> tuple[str | None, tuple[object, ...]]:
        """(version CURRENT names, its bundle's file signature); (None, (error,)) if unreadable."""
        try:
            version = current_version(self.ws.models_dir)
        except (OSError, ValueError) as err:  # a folder, unreadable, not UTF-8...
            return (None, (f"{current_path(self.ws.models_dir)}: unreadable ({err})",))
        return (version, _bundle_signature(self.ws.models_dir / version) if version else ())

    def _reload(self, key: tuple[str | None, tuple[object, ...]], force: bool) -> ReloadResult:
        start = time.perf_counter()
        if self.threads is not None:  # the index build runs on this (caller's) thread
            limit_threads(self.threads)
        self._refresh_histories()
        previous = self._current.version if self._current else None
        version = key[0]
        if version is not None and version == previous and not force:
            self.last_error, self._failed_key = None, None  # CURRENT is back on what serves
            return ReloadResult(False, version, previous)
        if version is None:
            problem = (
                key[1][0]
                if key[1]
                else f"{current_path(self.ws.models_dir)}: no model is published; "
                "train one with `recsys train`"
            )
            raise RecsysInputError(str(problem))
        self._current = self._build(self.ws.models_dir / version)  # the atomic swap
        self.last_error, self._failed_key = None, None
        seconds = time.perf_counter() - start
        log.info("serving model %s (was %s), loaded in %.1f s", version, previous, seconds)
        return ReloadResult(True, version, previous, seconds)

    def _build(self, path: Path) -> Recommender:
        bundle = ModelBundle.load(path)

        def queries() -> np.ndarray | None:  # known users' queries, for the recall check
            return user_queries(bundle, self.histories.sample(RECALL_QUERIES))

        try:
            index = build_index(
                bundle.item_embeddings, self.params, cache_dir=bundle.path, queries=queries
            )
            return Recommender(bundle, index, self.histories.get)
        except Exception as err:
            raise BundleError(f"{path}: cannot serve ({type(err).__name__}: {err})") from err

    def _refresh_histories(self) -> None:
        try:
            self.histories.refresh_if_changed()
        except Exception:  # a bad event part must not stop the model from serving
            log.exception("could not refresh user histories")

    def _failed_before(self) -> bool:
        """CURRENT names what failed last, unchanged: retried only once it changes."""
        return self._failed_key is not None and self._failed_key == self._published_key()

    def poll_once(self) -> None:
        """One polling step: reload if CURRENT changed; never raises (errors are logged)."""
        try:
            if self._failed_before():  # said once already; tried again once it changes
                self._refresh_histories()  # new events count while a refused bundle is named
                return
            self.reload()
        except Exception as err:
            serving = self._current.version if self._current else "nothing"
            log.warning("reload failed, still serving %s: %s", serving, err)

    def start_polling(self, interval_s: float) -> None:
        """Poll models/CURRENT every `interval_s` seconds on a daemon thread (0 = never)."""
        if interval_s <= 0 or self._poller is not None:
            return

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.poll_once()
                except Exception:  # the poller outlives any error, by construction
                    log.exception("model poller step failed; polling on")
                self._stop.wait(interval_s)

        self._poller = threading.Thread(target=loop, name="recsys-model-poller", daemon=True)
        self._poller.start()

    def stop(self) -> None:
        """Stop the poller (a reload in progress finishes)."""
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
            self._poller = None
