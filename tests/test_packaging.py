"""The wheel holds the product's packages, every one of them, and not the benchmarks or tests."""

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("app", "data", "model", "recsys", "serving", "training")


def test_the_wheel_holds_every_product_package_and_nothing_else() -> None:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    shipped = set(find_packages(ROOT, include=find["find"]["include"]))
    product = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in PRODUCT
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert shipped == product  # benchmarks/ and tests/ are packages too, and stay out
