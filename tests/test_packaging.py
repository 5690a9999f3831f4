"""The package list of pyproject.toml names every package of the code (a wheel holds no other)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_is_in_the_setuptools_list() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("app", "data", "training", "serving")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found == listed
