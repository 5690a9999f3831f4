"""scripts/replicas-smoke.sh, for real: three api replicas behind the balancer, under load.

Slow (minutes: the image build, two trainings, a load of a few minutes) and needs a container
engine, as the compose smoke does (tests/app/test_compose_smoke.py); skipped, with the reason,
where none is available. The run's record goes to a temporary path, not the committed one.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.app.test_compose_smoke import _engine

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "replicas-smoke.sh"


def test_replicas_smoke_script_is_valid_bash_and_executable() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert os.access(SCRIPT, os.X_OK)
    text = SCRIPT.read_text()
    assert "deploy/compose.replicas.yml" in text and "--scale" in text
    assert "recsys retrain --logs /logs/new.csv --json" in text and "read_decision" in text
    assert "source" in text and "smoke-lib.sh" in text  # the compose smoke's stages, shared


@pytest.mark.slow
def test_replicas_smoke_script_passes(tmp_path: Path) -> None:
    engine = _engine()
    if engine is None:
        pytest.skip("no container engine: neither podman nor a running Docker daemon")
    record = tmp_path / "replicas.json"
    env = {**os.environ, "RECSYS_SMOKE_RECORD": str(record)}
    run = subprocess.run(
        ["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600
    )
    assert run.returncode == 0, f"replicas smoke failed ({engine}):\n{run.stderr[-6000:]}"
    metrics = json.loads(record.read_text())["metrics"]
    assert metrics["load"]["failed"] == 0
    assert metrics["publish_to_every_replica_s"] <= 2 * 5
