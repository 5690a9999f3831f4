"""`recsys serve` (uvicorn over the FastAPI app) and `recsys models list|show|rollback`."""

from __future__ import annotations

import errno
import json
import logging
import socket
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli_common import HomeOption, JsonOption, emit_json, workspace
from data.errors import RecsysInputError
from data.workspace import Workspace
from serving.bundle import ModelBundle, current_version, list_versions, read_manifest

log = logging.getLogger("recsys.serve")
models_app = typer.Typer(help="Published model versions: list, show, roll back.")
VersionArgument = Annotated[
    str,
    typer.Argument(help="A published version: a folder name under models/ (see `models list`)."),
]


def serve(
    home: HomeOption = None,
    host: Annotated[str | None, typer.Option(help="Bind address (env RECSYS_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (env RECSYS_PORT, default 8000).")] = None,
    index: Annotated[
        str | None, typer.Option(help="auto|flat|hnsw|ivf (env RECSYS_INDEX).")
    ] = None,
    reload_interval: Annotated[
        float | None, typer.Option(help="Seconds between models/CURRENT polls; 0 = off.")
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
        raise RecsysInputError(f"setting {first['loc'][0]}: {first['msg']}") from None
    sock = _bind(settings.host, settings.port)  # a port in use is an input error, said first
    log.info("serving %s on http://%s:%d", settings.workspace().root, settings.host, settings.port)
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


def _published_at(path: Path, manifest: dict[str, Any]) -> float:
    """Publish time in Unix seconds: the manifest's created_at, else the folder's mtime."""
    try:
        return datetime.fromisoformat(str(manifest["created_at"])).timestamp()
    except (KeyError, ValueError):
        return path.stat().st_mtime


def _broken(path: Path) -> str | None:
    """Why the bundle would be refused (manifest, embeddings, items, tower file), else None.

    The tower is checked cheaply: `torch.save` writes a zip archive, whose directory sits at
    the end of the file, so a truncated or empty `query_tower.pt` is not a zip file.
    """
    tower = path / "query_tower.pt"
    try:
        ModelBundle.load(path, load_tower=False)
        if not zipfile.is_zipfile(tower):
            raise RecsysInputError(f"{tower}: truncated or not a saved query tower")
    except RecsysInputError as err:
        return str(err).strip().splitlines()[0]
    return None


def _summary(ws: Workspace, ws_current: str | None, version: str) -> dict[str, Any]:
    """One `models list` row; `broken` is the reason the bundle would be refused, or None."""
    path = ws.models_dir / version
    try:
        manifest = read_manifest(path)
    except RecsysInputError:
        manifest = {}
    return {
        "version": version,
        "current": version == ws_current,
        "created_at": manifest.get("created_at"),
        "published_at": _published_at(path, manifest),
        "dataset": manifest.get("dataset"),
        "sampler": manifest.get("sampler"),
        "num_items": manifest.get("num_items"),
        "metrics": manifest.get("metrics") or {},
        "broken": _broken(path),
    }


@models_app.command("list")
def list_models(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """List published versions by publish time, newest last; `*` marks the served one.

    A bundle that would be refused (bad manifest, embeddings, items or tower file) is marked
    `BROKEN: <reason>` (`broken` in the JSON, null for a good one).
    """
    ws = workspace(home)
    current = current_version(ws)
    rows = [_summary(ws, current, version) for version in list_versions(ws)]
    rows.sort(key=lambda row: (row["published_at"], row["version"]))
    if as_json:
        emit_json({"current": current, "models": rows})
        return
    if not rows:
        typer.echo(f"no models in {ws.models_dir}; run `recsys train`")
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
    return (
        f"{mark} {row['version']}  {when}  dataset={row['dataset']} "
        f"sampler={row['sampler']} items={row['num_items']}{extra}"
    )


@models_app.command("show")
def show_model(version: VersionArgument, home: HomeOption = None) -> None:
    """Print one version's manifest (JSON)."""
    ws = workspace(home)
    if version not in list_versions(ws):
        raise RecsysInputError(f"no model version {version!r} in {ws.models_dir}")
    manifest = read_manifest(ws.models_dir / version)
    manifest["current"] = version == current_version(ws)
    typer.echo(json.dumps(manifest, indent=2, default=str))


@models_app.command("rollback")
def rollback(
    version: VersionArgument, home: HomeOption = None, as_json: JsonOption = False
) -> None:
    """Serve VERSION again: validate its bundle, then point models/CURRENT at it atomically."""
    from training.export import publish

    ws = workspace(home)
    if version not in list_versions(ws):
        raise RecsysInputError(f"no model version {version!r} in {ws.models_dir}")
    ModelBundle.load(ws.models_dir / version)  # the server's full validation, tower too
    previous = current_version(ws)
    publish(ws.models_dir, version)
    if as_json:
        emit_json({"current": version, "previous": previous})
    else:
        typer.echo(f"models/CURRENT: {previous} -> {version} (a running server picks it up)")


def register(app: typer.Typer) -> None:
    """Attach `recsys serve` and `recsys models`."""
    app.command("serve")(serve)
    app.add_typer(models_app, name="models")
