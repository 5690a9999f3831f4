"""`recsys serve` (uvicorn over the FastAPI app) and `recsys models list|show|rollback`.

The bundle's owner and the web stack are imported inside the commands that use them, so that
`recsys --help` and the data commands start without them; the bundle's owner imports torch only
to load or save a query tower, so `models list` and `show` start without it too.
"""

from __future__ import annotations

import errno
import json
import logging
import socket
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import typer

from app.cli_common import HomeOption, JsonOption, emit_json, workspace
from data.errors import RecsysInputError

log = logging.getLogger("recsys.serve")
IndexKind = Literal["auto", "flat", "hnsw", "ivf", "ivfpq"]  # serving.index.INDEX_KINDS (tested)
models_app = typer.Typer(help="List, show and roll back the published model versions.")
VersionArgument = Annotated[
    str,
    typer.Argument(help="A published version: a folder name under models/ (see `models list`)."),
]


def serve(
    home: HomeOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            metavar="<address>", help="Bind address.", show_default="$RECSYS_HOST, else 127.0.0.1"
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(help="Port; 0: one the system picks.", show_default="$RECSYS_PORT, else 8000"),
    ] = None,
    index: Annotated[
        IndexKind | None,
        typer.Option(
            help="Nearest-neighbour index; its parameters come from RECSYS_HNSW_M, "
            "RECSYS_IVF_NLIST, RECSYS_IVF_NPROBE, RECSYS_PQ_M, RECSYS_PQ_BITS and the others "
            "in docs/guides/serving.md.",
            show_default="$RECSYS_INDEX, else auto",
        ),
    ] = None,
    reload_interval: Annotated[
        float | None,
        typer.Option(
            help="Seconds between models/CURRENT polls; 0: off.",
            show_default="$RECSYS_RELOAD_INTERVAL, else 5",
        ),
    ] = None,
) -> None:
    """Serve the published model over HTTP (one log line per request, with its latency)."""
    import uvicorn
    from pydantic import ValidationError

    from app.api.main import create_app
    from app.api.protocol import JsonErrorHttpToolsProtocol
    from app.api.settings import Settings

    given: dict[str, object] = {"home": home, "host": host, "port": port, "index": index}
    given["reload_interval"] = reload_interval
    try:
        settings = Settings.model_validate({k: v for k, v in given.items() if v is not None})
    except ValidationError as err:
        first = err.errors()[0]
        where = first["loc"][0] if first["loc"] else "environment"  # a RECSYS_* variable
        raise RecsysInputError(f"setting {where}: {first['msg']}") from None
    sock = _bind(settings.host, settings.port)  # a port in use is an input error, said first
    bound = sock.getsockname()[1]  # the port the system chose for --port 0
    log.info("serving %s on http://%s:%d", settings.workspace().root, settings.host, bound)
    config = uvicorn.Config(
        create_app(settings),
        log_config=None,  # keep the CLI's logging; our middleware writes the access lines
        access_log=False,
        loop="uvloop",  # C event loop and HTTP parser: the CPU they save goes to the model
        http=JsonErrorHttpToolsProtocol,  # httptools, with JSON answers to unparsable requests
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run(sockets=[sock])


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or RecsysInputError naming what is wrong."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise RecsysInputError(f"--host {host}: cannot resolve it ({err.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise RecsysInputError(f"port {port} on {host} is already in use") from None
        raise RecsysInputError(f"cannot listen on {host}:{port} ({err.strerror})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@models_app.command("list")
def list_models(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """List model versions by publish time, newest last; `*` marks the served one.

    A bundle that would be refused (bad manifest, embeddings, items or tower file) is marked
    `BROKEN: <reason>` (`broken` in the JSON, null for a good one); a retrain candidate the
    gate did not publish is marked `KEPT OUT: <reason>` (`kept_out`).
    """
    from model.bundle import current_version, describe, list_versions

    models_dir = workspace(home).models_dir
    current = current_version(models_dir)
    rows = [describe(models_dir, version, current) for version in list_versions(models_dir)]
    rows.sort(key=lambda row: (row["published_at"], row["version"]))
    if as_json:
        emit_json({"current": current, "models": rows})
        return
    if not rows:
        typer.echo(f"no models in {models_dir}; run `recsys train`")
    for row in rows:
        typer.echo(_text_row(row))


def _text_row(row: dict[str, Any]) -> str:
    """A `models list` line: mark, version, publish time, then what it is or why it is broken."""
    mark = "*" if row["current"] else " "
    when = datetime.fromtimestamp(row["published_at"], UTC).isoformat(timespec="seconds")
    if row["broken"]:
        return f"{mark} {row['version']}  {when}  BROKEN: {row['broken']}"
    ndcg = row["metrics"].get("test", {}).get("ndcg@10")
    extra = f" ndcg@10={ndcg:.4f}" if isinstance(ndcg, int | float) else ""
    if row["kept_out"]:
        extra += f"  KEPT OUT: {row['kept_out']}"
    return (
        f"{mark} {row['version']}  {when}  dataset={row['dataset']} "
        f"sampler={_sampler_text(row['sampler'])} items={row['num_items']}{extra}"
    )


def _sampler_text(sampler: dict[str, Any]) -> str:
    """`uniform(m=256)` for a run's sampler settings, or `full` (the full softmax draws none)."""
    from training.sampler_settings import FullSoftmax

    name = str(sampler.get("name", "unknown"))  # a bundle written outside training has none
    m = None if name == FullSoftmax().name else sampler.get("num_negatives")
    return name if m is None else f"{name}(m={m})"


@models_app.command("show")
def show_model(version: VersionArgument, home: HomeOption = None) -> None:
    """Print one version's manifest (JSON; an older bundle's as this version reads it)."""
    from model.bundle import current_version, list_versions, read_manifest

    models_dir = workspace(home).models_dir
    if version not in list_versions(models_dir):
        raise RecsysInputError(f"no model version {version!r} in {models_dir}")
    manifest = read_manifest(models_dir / version).model_dump(mode="json")
    manifest["current"] = version == current_version(models_dir)
    typer.echo(json.dumps(manifest, indent=2))


@models_app.command("rollback")
def rollback_model(
    version: VersionArgument,
    home: HomeOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Serve a version the retrain gate kept out.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Serve VERSION again: validate its bundle, then point models/CURRENT at it atomically."""
    from model.bundle import rollback

    previous = rollback(workspace(home).models_dir, version, force)
    if as_json:
        emit_json({"current": version, "previous": previous})
    else:
        typer.echo(f"models/CURRENT: {previous} -> {version} (a running server picks it up)")


def register(app: typer.Typer) -> None:
    """Attach `recsys serve` and `recsys models`."""
    app.command("serve")(serve)
    app.add_typer(models_app, name="models")
