import subprocess
import sys


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
