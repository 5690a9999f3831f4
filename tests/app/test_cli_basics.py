import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert "bench" in result.stdout


def test_unknown_command_is_usage_error() -> None:
    result = run_cli("no-such-command")
    assert result.returncode == 2


def test_the_cli_starts_without_torch_and_the_server_without_lightning() -> None:
    """Commands import their heavy parts when they run: `--help` starts in about a second."""
    check = (
        "import sys; from app.cli import main; print('torch' in sys.modules);"
        "import app.api.main; print(any(m.split('.')[0] in ('pytorch_lightning', "
        "'lightning_fabric') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_train_on_a_home_without_events_is_refused_before_lightning_is_imported(
    tmp_path: Path,
) -> None:
    check = (
        "import sys; from app.cli import main\n"
        f"sys.argv = ['recsys', 'train', '--home', {str(tmp_path / 'home')!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n"
        "    print(done.code, 'pytorch_lightning' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert "has no events" in done.stderr
    assert done.stdout.split() == ["2", "False"]


def test_json_output_writes_non_finite_floats_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli_common import emit_json

    emit_json({"metrics": {"ndcg@10": 0.5, "full_ce": float("nan")}, "runs": [float("inf"), 1]})
    assert json.loads(capsys.readouterr().out) == {
        "metrics": {"ndcg@10": 0.5, "full_ce": None}, "runs": [None, 1],
    }  # fmt: skip


class _BuiltError(Exception):
    """Raised once the run config is built: the test stops the command there."""


def test_train_max_minutes_reaches_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from app.cli import app
    from app.commands import train_cmds

    built, real = [], train_cmds.build_run_config

    def build(*args: Any, **kwargs: Any) -> None:
        built.append(real(*args, **kwargs))
        raise _BuiltError

    monkeypatch.setattr(train_cmds, "build_run_config", build)
    result = CliRunner().invoke(app, ["train", "--max-minutes", "2.5"])
    assert isinstance(result.exception, _BuiltError)
    assert built[0].train.max_minutes == 2.5
    for bad in ("0", "-1", "nan", "soon"):
        refused = CliRunner().invoke(app, ["train", "--max-minutes", bad])
        assert refused.exit_code == 2 and "--max-minutes" in refused.output, bad
