"""`recsys serve` (uvicorn over the FastAPI app) and `recsys models list|show|rollback`."""

from __future__ import annotations

import errno
import json
import logging
import socket
from typing import Annotated, Any

import typer

from app.cli_common import HomeOption, JsonOption, emit_json, workspace
from data.errors import RecsysInputError
from serving.bundle import ModelBundle, current_version, list_versions, read_manifest

log = logging.getLogger("recsys.serve")
models_app = typer.Typer(help="Published model versions: list, show, roll back.")


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


def _summary(ws_current: str | None, version: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": version,
        "current": version == ws_current,
        "created_at": manifest.get("created_at"),
        "dataset": manifest.get("dataset"),
        "sampler": manifest.get("sampler"),
        "num_items": manifest.get("num_items"),
        "metrics": manifest.get("metrics") or {},
    }


@models_app.command("list")
def list_models(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """List published versions, newest last; `*` marks the served one (models/CURRENT)."""
    ws = workspace(home)
    current = current_version(ws)
    rows = []
    for version in list_versions(ws):
        try:
            manifest = read_manifest(ws.models_dir / version)
        except RecsysInputError as err:
            manifest = {"error": str(err)}
        rows.append(_summary(current, version, manifest))
    if as_json:
        emit_json({"current": current, "models": rows})
        return
    if not rows:
        typer.echo(f"no models in {ws.models_dir}; run `recsys train`")
    for row in rows:
        ndcg = row["metrics"].get("test", {}).get("ndcg@10")
        extra = f" ndcg@10={ndcg:.4f}" if isinstance(ndcg, int | float) else ""
        mark = "*" if row["current"] else " "
        typer.echo(
            f"{mark} {row['version']}  {row['created_at']}  dataset={row['dataset']} "
            f"sampler={row['sampler']} items={row['num_items']}{extra}"
        )


@models_app.command("show")
def show_model(version: str, home: HomeOption = None) -> None:
    """Print one version's manifest (JSON)."""
    ws = workspace(home)
    if version not in list_versions(ws):
        raise RecsysInputError(f"no model version {version!r} in {ws.models_dir}")
    manifest = read_manifest(ws.models_dir / version)
    manifest["current"] = version == current_version(ws)
    typer.echo(json.dumps(manifest, indent=2, default=str))


@models_app.command("rollback")
def rollback(version: str, home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Serve VERSION again: validate its bundle, then point models/CURRENT at it atomically."""
    from training.export import publish

    ws = workspace(home)
    if version not in list_versions(ws):
        raise RecsysInputError(f"no model version {version!r} in {ws.models_dir}")
    ModelBundle.load(ws.models_dir / version, load_tower=False)
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
