"""`recsys models list|show|rollback` and `recsys serve` option errors, via the real CLI."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import app
from data.workspace import Workspace
from tests.serving.bundles import make_bundle

ROOT = Path(__file__).resolve().parents[2]


def recsys_inproc(*args: str) -> str:
    """Run a command that must succeed in-process (fast: no interpreter start); its stdout."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def recsys(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_models_list_show_rollback(ws: Workspace) -> None:
    make_bundle(ws.models_dir, "20260101-000000-aaaa")
    make_bundle(ws.models_dir, "20260102-000000-bbbb", target=41)
    home = str(ws.root)

    listed = json.loads(recsys_inproc("models", "list", "--home", home, "--json"))
    assert listed["current"] == "20260102-000000-bbbb"
    assert [m["version"] for m in listed["models"]] == [
        "20260101-000000-aaaa",
        "20260102-000000-bbbb",
    ]
    assert [m["current"] for m in listed["models"]] == [False, True]
    assert listed["models"][0]["dataset"] == "planted" and listed["models"][0]["num_items"] == 60

    text = recsys_inproc("models", "list", "--home", home).splitlines()
    assert text[1].startswith("* 20260102-000000-bbbb") and text[0].startswith("  2026")
    assert "ndcg@10=0.5000" in text[0]

    shown = json.loads(recsys_inproc("models", "show", "20260101-000000-aaaa", "--home", home))
    assert shown["version"] == "20260101-000000-aaaa" and shown["current"] is False

    back = recsys_inproc("models", "rollback", "20260101-000000-aaaa", "--home", home, "--json")
    assert json.loads(back) == {
        "current": "20260101-000000-aaaa",
        "previous": "20260102-000000-bbbb",
    }
    assert (ws.models_dir / "CURRENT").read_text().strip() == "20260101-000000-aaaa"


def test_rollback_refuses_unknown_or_broken_versions(ws: Workspace) -> None:
    make_bundle(ws.models_dir, "good")
    broken = make_bundle(ws.models_dir, "broken", publish_it=False)
    (broken / "items.parquet").unlink()
    for version, message in [("nope", "no model version 'nope'"), ("broken", "items.parquet")]:
        result = recsys("models", "rollback", version, "--home", str(ws.root))
        assert result.returncode == 2
        assert message in result.stderr and result.stderr.count("\n") == 1
    assert (ws.models_dir / "CURRENT").read_text().strip() == "good"


def test_models_list_empty_and_serve_bad_option(ws: Workspace) -> None:
    assert "no models" in recsys_inproc("models", "list", "--home", str(ws.root))
    bad = recsys("serve", "--home", str(ws.root), "--index", "annoy", "--port", "0")
    assert bad.returncode == 2 and "Invalid value for '--index'" in bad.stderr  # the parser's
    env = {"RECSYS_INDEX": "annoy"}
    bad = recsys("serve", "--home", str(ws.root), "--port", "0", env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("error: setting index")
    cors = {"RECSYS_CORS_ORIGINS": "http://a.example"}  # not the JSON list the setting takes
    plain = recsys("serve", "--home", str(ws.root), "--port", "0", env=cors)
    assert plain.returncode == 2 and plain.stderr.startswith("error: setting "), plain.stderr
    assert "cors_origins" in plain.stderr.lower()


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = recsys("serve", "--home", str(tmp_path), "--host", "127.0.0.1", "--port", str(port))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: port {port} on 127.0.0.1 is already in use"
    assert "serving" not in done.stderr + done.stdout


def test_serve_on_port_0_logs_the_port_it_got(ws: Workspace) -> None:
    make_bundle(ws.models_dir, "v1")
    cmd = [sys.executable, "-m", "app", "serve", "--home", str(ws.root), "--port", "0"]
    env = {**os.environ, "RECSYS_RELOAD_INTERVAL": "0"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = next(ln for ln in proc.stderr if "serving " in ln)  # the first lines, then it runs
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)", line).group(1))  # type: ignore[union-attr]
        assert port != 0
        for _ in range(100):  # the socket listens already; the app may still be starting
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise AssertionError("no answer on the logged port")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_an_empty_recsys_home_is_the_default_home_as_for_every_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from app.api.settings import Settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECSYS_HOME", "")
    assert Settings().home is None
    assert Settings().workspace().root == Workspace.resolve(None).root
