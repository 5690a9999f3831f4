"""docker-compose.yml and the Dockerfile: every command is a valid `recsys` invocation, wired up.

Docker cannot run here, so the compose file is parsed and each service's command is resolved
through the real CLI (the same typer app the other tests run), with compose's `${VAR:-default}`
interpolation applied first.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer._click.exceptions import UsageError
from typer.main import get_command

from app.cli import app
from training.samplers import SAMPLERS

ROOT = Path(__file__).resolve().parents[2]
VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}` / `${VAR:-default}` substitution."""
    return VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def command(service: str, env: dict[str, str] | None = None) -> list[str]:
    raw = compose()["services"][service]["command"]
    assert isinstance(raw, list), "use the exec (list) form: no shell in between"
    return [interpolate(str(part), env or {}) for part in raw]


def resolve(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """Parse argv with the real `recsys` CLI (no execution): (subcommand, its parameters)."""
    assert argv[0] == "recsys"
    group = get_command(app)
    ctx = group.make_context("recsys", [], resilient_parsing=True)
    name = argv[1]
    cmd = group.get_command(ctx, name)  # type: ignore[attr-defined]
    if cmd is None:
        raise UsageError(f"no such command {name!r}")
    sub = cmd.make_context(name, argv[2:], parent=ctx)  # parses and type-checks every option
    return name, sub.params


def test_trainer_runs_make_ups_training_step_with_dataset_and_sampler_from_env(
    tmp_path: Path,
) -> None:
    assert command("trainer") == ["bash", "scripts/train.sh"]
    home = tmp_path / "home"
    for env in ({}, {"RECSYS_DATASET": "/data/logs.csv", "RECSYS_SAMPLER": "rff"}):
        (train,) = _trainer_calls(tmp_path, home, env)
        assert train == _up_calls(tmp_path, home, **env)[0]  # the same `recsys train`
    name, params = resolve(_trainer_calls(tmp_path, home, {})[0])
    assert name == "train" and (params["dataset"], params["sampler"]) == ("synthetic", None)
    (home / "events").mkdir(parents=True)
    (home / "events" / "part-1.parquet").write_bytes(b"")
    (train,) = _trainer_calls(tmp_path, home, {"RECSYS_SAMPLER": "rff"})
    assert train == _up_calls(tmp_path, home, RECSYS_SAMPLER="rff")[0]
    assert (resolve(train)[1]["dataset"], resolve(train)[1]["sampler"]) == (None, "rff")
    assert "rff" in SAMPLERS


def test_the_api_takes_every_server_setting_make_up_reads_with_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.api.settings import Settings

    for key in [k for k in os.environ if k.startswith("RECSYS_")]:
        monkeypatch.delenv(key)
    defaults = Settings().model_dump()  # what `make up`'s `recsys serve` reads, nothing set
    environment = compose()["services"]["api"]["environment"]
    fixed = {"home", "host", "port"}  # the volume's workspace, and 0.0.0.0:8000 inside
    forwarded = {f"RECSYS_{name.upper()}" for name in defaults.keys() - fixed}
    assert forwarded <= environment.keys()
    for key in forwarded:
        assert interpolate(str(environment[key]), {key: "7"}) == "7"  # the shell's value wins
        monkeypatch.setenv(key, interpolate(str(environment[key]), {}))
    served = Settings().model_dump()  # an empty RECSYS_ADMIN_TOKEN is unset: admin off
    assert served["admin_token"] is None
    assert {k: served[k] for k in defaults.keys() - fixed} == {
        k: defaults[k] for k in defaults.keys() - fixed
    }


def test_api_runs_recsys_serve_on_8000_after_the_trainer() -> None:
    name, params = resolve(command("api"))
    assert name == "serve" and params["port"] == 8000 and params["host"] == "0.0.0.0"
    api = compose()["services"]["api"]
    assert api["depends_on"]["trainer"]["condition"] == "service_completed_successfully"
    assert [interpolate(p, {}) for p in api["ports"]] == ["8000:8000"]
    assert [interpolate(p, {"RECSYS_PORT": "18000"}) for p in api["ports"]] == ["18000:8000"]
    assert any("/ready" in part for part in api["healthcheck"]["test"])


def test_a_bad_command_would_be_caught() -> None:
    with pytest.raises(UsageError):
        resolve(["recsys", "serve", "--prot", "8000"])
    with pytest.raises(UsageError):
        resolve(["recsys", "trian"])


def test_services_share_the_workspace_volume() -> None:
    spec = compose()
    assert "workspace" in spec["volumes"]
    for name in ("trainer", "api"):
        service = spec["services"][name]
        home = service["environment"]["RECSYS_HOME"]
        assert f"workspace:{home}" in service["volumes"]


def test_dockerfile_is_slim_nonroot_cpu_with_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert "download.pytorch.org/whl/cpu" in text and "-c constraints.txt" in text
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n?.*/health", text, re.M)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and "workspace" in ignored


def test_up_script_is_valid_bash_and_uses_recsys_commands() -> None:
    up, train = ROOT / "scripts" / "up.sh", ROOT / "scripts" / "train.sh"
    for script in (up, train):
        subprocess.run(["bash", "-n", str(script)], check=True)
        assert os.access(script, os.X_OK)
    assert "train.sh" in up.read_text() and "exec recsys serve --port" in up.read_text()
    assert "exec recsys train" in train.read_text()


@pytest.mark.slow
def test_trainer_command_really_trains(tmp_path: Path) -> None:
    env = {**os.environ, "RECSYS_HOME": str(tmp_path / "home")}
    env = {k: v for k, v in env.items() if k not in ("RECSYS_DATASET", "RECSYS_SAMPLER")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # this venv's `recsys`
    subprocess.run(command("trainer"), cwd=ROOT, env=env, check=True, timeout=900)
    assert (tmp_path / "home" / "models" / "CURRENT").read_text().strip()


def _recorded_calls(tmp_path: Path, argv: list[str], env: dict[str, str]) -> list[list[str]]:
    """The `recsys` command lines `argv` (a script) runs, recorded by a stand-in on PATH."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "recsys"
    stand_in.write_text(f'#!/usr/bin/env bash\necho "recsys $*" >> {calls}\n')
    stand_in.chmod(0o755)
    calls.unlink(missing_ok=True)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("RECSYS_")}
    run_env = {**run_env, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    subprocess.run(argv, cwd=ROOT, env=run_env, check=True)
    return [line.split() for line in calls.read_text().splitlines()]


def _trainer_calls(tmp_path: Path, home: Path, shell: dict[str, str]) -> list[list[str]]:
    """What the compose trainer runs, its environment interpolated from the `shell`'s."""
    environment = compose()["services"]["trainer"]["environment"]
    env = {k: interpolate(str(v), shell) for k, v in environment.items()}
    return _recorded_calls(tmp_path, command("trainer"), {**env, "RECSYS_HOME": str(home)})


def _up_calls(tmp_path: Path, home: Path, **env: str) -> list[list[str]]:
    """The `recsys` command lines scripts/up.sh runs."""
    argv = ["bash", str(ROOT / "scripts" / "up.sh")]
    return _recorded_calls(tmp_path, argv, {"RECSYS_HOME": str(home), **env})


def test_up_script_asks_for_the_synthetic_demo_only_in_a_home_without_events(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    train, serve = _up_calls(tmp_path, home)
    name, params = resolve(train)
    assert (name, params["dataset"]) == ("train", "synthetic")
    assert resolve(serve)[0] == "serve"
    (home / "events").mkdir(parents=True)
    (home / "events" / "part-1.parquet").write_bytes(b"")
    train, _ = _up_calls(tmp_path, home)
    assert resolve(train)[1]["dataset"] is None  # the home's own events
    train, _ = _up_calls(tmp_path, home, RECSYS_DATASET="/data/logs.csv")
    assert resolve(train)[1]["dataset"] == "/data/logs.csv"


def test_trainer_and_up_keep_a_published_model_unless_retrain_is_asked(tmp_path: Path) -> None:
    name, params = resolve(_trainer_calls(tmp_path, tmp_path / "home", {})[0])
    assert name == "train" and params["reuse_published"]
    trainer = compose()["services"]["trainer"]
    assert interpolate(trainer["environment"]["RECSYS_RETRAIN"], {}) == "0"
    assert interpolate(trainer["environment"]["RECSYS_RETRAIN"], {"RECSYS_RETRAIN": "1"}) == "1"
    train, _ = _up_calls(tmp_path, tmp_path / "home")
    assert resolve(train)[1]["reuse_published"]  # make up runs the same rule


def test_the_documented_compose_retrain_command_is_valid_and_its_logs_are_mounted() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    documented = "docker compose run --rm trainer recsys retrain --logs /logs/new.csv"
    assert documented in text and documented in (ROOT / "README.md").read_text()
    name, params = resolve(documented.split()[5:])
    assert name == "retrain" and params["logs"] == [Path("/logs/new.csv")]
    mounts = [interpolate(v, {}) for v in compose()["services"]["trainer"]["volumes"]]
    assert "./logs:/logs:ro" in mounts


class _ComposeLoader(yaml.SafeLoader):
    """YAML with compose's `!reset` tag (an override that clears a key)."""


_ComposeLoader.add_constructor(
    "!reset", lambda loader, node: {"reset": loader.construct_sequence(node)}
)  # type: ignore[arg-type]


def test_replicas_example_balances_the_api_and_publishes_no_replica_port() -> None:
    override = yaml.load((ROOT / "deploy" / "compose.replicas.yml").read_text(), _ComposeLoader)
    services = override["services"]
    assert services["api"]["ports"] == {"reset": []}  # replicas cannot share one host port
    balancer = services["balancer"]
    assert balancer["ports"] == ["${RECSYS_PORT:-8000}:8000"]  # the port `make up` uses
    assert balancer["depends_on"] == {"api": {"condition": "service_healthy"}}
    assert set(services) <= set(compose()["services"]) | {"balancer"}
    (mount,) = balancer["volumes"]
    # with several -f files, compose resolves paths from the first file's folder: the repo root
    conf = (ROOT / mount.split(":")[0]).read_text()
    assert mount.endswith(":/etc/nginx/nginx.conf:ro") and "listen 8000;" in conf
    assert re.search(r"server api:8000 resolve;", conf) and "proxy_pass http://recsys_api;" in conf


def _next_upstream(block: str) -> set[str]:
    """The conditions of a block's `proxy_next_upstream` directive (empty set without one)."""
    found = re.search(r"^\s*proxy_next_upstream ([^;]+);", block, re.M)
    return set(found.group(1).split()) if found else set()


def test_the_balancer_retries_posts_of_recommend_only() -> None:
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    locations = dict(re.findall(r"location (.+?) \{([^}]*)\}", conf))
    assert set(locations) == {"/", "~ ^/recommend(/batch)?$"}
    recommend = re.compile(r"^/recommend(/batch)?$")  # nginx's PCRE, the same in Python's re
    assert recommend.match("/recommend") and recommend.match("/recommend/batch")
    for path in ("/events", "/admin/reload", "/recommendations", "/recommend/batch/x"):
        assert not recommend.match(path)  # these go to `location /`
    assert {"http_503", "non_idempotent"} <= _next_upstream(locations["~ ^/recommend(/batch)?$"])
    server = re.sub(r"location (.+?) \{([^}]*)\}", "", conf)  # what `location /` inherits
    assert not _next_upstream(locations["/"])
    assert "http_503" in _next_upstream(server) and "non_idempotent" not in _next_upstream(server)
    for block in locations.values():
        assert "proxy_pass http://recsys_api;" in block
