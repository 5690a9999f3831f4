"""The bundle's `manifest.json`: one typed `Manifest`, read, validated, upgraded and written here.

Format 4 stores each fact once: the towers' settings are the typed `model` (their `dim` is the
item embeddings' width), the training run's other settings the opaque `config` (its schema is
`training`'s, which this package never imports: `Manifest.run_config` gives training the whole
run config back). What serving needs (`num_items`, `model`, `temperature`, `score`) is typed.
Bundles published in formats 1 to 3 are read through `upgrade`, the one place that knows them.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from data.errors import RecsysInputError
from data.store import fsync_file
from model.bundle.layout import MANIFEST, check_version_name
from model.config import ModelConfig, as_saved

# Format 3 stores each fact once (format 2 kept `dim` beside `model.dim` and `config.model`, and
# a sampler summary beside `config.sampler`); a format-2 reader must refuse it. Format 2 added
# `score`: a format-1 reader would rank an abs_dot model by h . c without noticing.
# Format 4 gives the query tower settings of its own (`model.tower: {name, ...}`; format 3 had
# the name there and its keys at the top of `model`): a format-3 reader must refuse it.
FORMAT_VERSION: Final = 4
READABLE_FORMATS = (1, 2, 3, 4)
# `score`: how the model ranks item c for query h (format 1 had no score: all were "dot").
DOT: Final = "dot"  # h . c, the ordinary softmax's logit
ABS_DOT: Final = "abs_dot"  # |h . c|, a model trained with the absolute softmax
RETRAIN_KEYS = ("previous_version", "warm_start", "since")  # format 2 kept them at the top


class BundleError(RecsysInputError):
    """A bundle is missing, incomplete or inconsistent; the message names the file and problem."""


class RetrainOrigin(BaseModel):
    """Where a retrain's candidate came from (absent for a bundle `recsys train` wrote)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    previous_version: str | None = Field(description="The model served when it started.")
    warm_start: bool = Field(description="Started from the served model's weights.")
    since: int | None = Field(None, description="Unix time of `--since`: events before it left.")


class Manifest(BaseModel):
    """One bundle's manifest: what the files hold and how the model was trained."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    format_version: Literal[4] = FORMAT_VERSION
    version: str = Field(description="The name it was written as: its run is `runs/<version>`.")
    created_at: datetime
    dataset: str
    events: list[str] | None = Field(
        None, description="The event parts it trained on; None: written before they were listed."
    )
    num_items: int = Field(ge=1, description="Catalogue size n: item_idx runs 1..n.")
    model: ModelConfig
    temperature: float = Field(
        gt=0.0, description="The tau it scores with: `model.temperature` as learned or annealed."
    )
    score: Literal["dot", "abs_dot"] = DOT
    config: dict[str, Any] = Field(
        default_factory=dict, description="The training run's config less `model` (training's)."
    )
    metrics: dict[str, dict[str, float]] = Field(default_factory=dict)
    train_seconds: float | None = None
    epochs: int | None = None
    refit_epochs: int = Field(0, ge=0, description="Epochs refit on val (0: never refit).")
    retrain: RetrainOrigin | None = None

    @field_validator("version")
    @classmethod
    def _plain_name(cls, version: str) -> str:
        try:  # it names a folder under runs/: a plain name, never a path
            check_version_name(version)
        except RecsysInputError as err:
            raise ValueError(str(err)) from None
        return version

    @field_validator("config")
    @classmethod
    def _no_second_model(cls, config: dict[str, Any]) -> dict[str, Any]:
        if "model" in config:
            raise ValueError("must not hold `model`: the manifest's `model` is the one copy")
        return config

    @property
    def dim(self) -> int:
        """Embedding dimension d (the item embeddings' and the query tower's width)."""
        return self.model.dim

    @property
    def max_len(self) -> int:
        """History length L the query tower takes."""
        return self.model.max_len

    @property
    def ranks_by_magnitude(self) -> bool:
        """The model ranks items by |h . c| (trained with the absolute softmax), not h . c."""
        return self.score == ABS_DOT

    @property
    def trained_on_val(self) -> bool:
        """Refit on its split's validation events: its `metrics["val"]` are its best round's."""
        return self.refit_epochs > 0

    @property
    def sampler(self) -> dict[str, Any]:
        """The run's sampler settings (`config["sampler"]`, training's schema); {} if unknown."""
        return dict(self.config.get("sampler") or {})

    def run_config(self) -> dict[str, Any]:
        """The training run's whole config as a dict (what `RecsysConfig` validates)."""
        return {**self.config, "model": self.model.model_dump()}


def upgrade(old: dict[str, Any]) -> dict[str, Any]:
    """A format-1, -2 or -3 manifest's content in format 4, each fact once.

    Format 3 differs only in where the tower's keys sit, which `ModelConfig` reads itself.

    `dim` and `config.model` repeated `model` (they must agree), the `sampler` summary repeated
    `config.sampler`; the retrain's keys move under `retrain`. Format 1 had no `score` (every
    model ranked by h . c); manifests written outside training may lack the tau (the model's
    starting one, which is what it scores with unless learned) and the dataset's name.

    Raises:
        ValueError: `dim` or `model` is missing, `model` or `config` is not an object, or `dim`
            and `model.dim` disagree.

    """
    if old.get("format_version") == 3:
        return {**old, "format_version": FORMAT_VERSION}
    missing = [key for key in ("dim", "model") if key not in old]
    if missing:
        raise ValueError(f"missing key(s) {', '.join(missing)}")
    model, config = old["model"], old.get("config") or {}
    if not isinstance(model, dict) or not isinstance(config, dict):
        raise ValueError("model and config must be objects")
    model = {"dim": old["dim"], **model}
    if model["dim"] != old["dim"]:
        raise ValueError(f"dim {old['dim']!r} differs from model.dim {model['dim']!r}")
    new = {k: v for k, v in old.items() if k not in ("dim", "sampler", *RETRAIN_KEYS)}
    config = {k: v for k, v in config.items() if k != "model"}
    new.update(format_version=FORMAT_VERSION, model=model, config=config)
    new.setdefault("score", DOT)
    new.setdefault("dataset", "workspace")  # what a retrain called such a home's data
    new.setdefault("temperature", as_saved(model)["temperature"])
    if "warm_start" in old:
        new["retrain"] = {key: old.get(key) for key in RETRAIN_KEYS}
    return new


def parse_manifest(raw: Any, where: Path | str = MANIFEST) -> Manifest:
    """Validate a manifest's parsed JSON (any readable format) as a `Manifest`.

    Raises:
        BundleError: not an object, an unreadable format, or a missing, unknown or bad field.

    """
    if not isinstance(raw, dict):
        raise BundleError(f"{where}: must be a JSON object")
    fmt = raw.get("format_version")
    if fmt not in READABLE_FORMATS:
        raise BundleError(
            f"{where}: format_version {fmt!r} is not supported "
            f"(this version reads {', '.join(map(str, READABLE_FORMATS))})"
        )
    try:
        content = raw if fmt == FORMAT_VERSION else upgrade(raw)
        if isinstance(content.get("model"), dict):  # the keys it predates, as trained then
            content = {**content, "model": as_saved(content["model"])}
        return Manifest.model_validate(content)
    except ValidationError as err:
        raise BundleError(f"{where}: {_first_problem(err)}") from None
    except ValueError as err:
        raise BundleError(f"{where}: {err}") from None


def _first_problem(err: ValidationError) -> str:
    """`missing key(s) a, b`, else the first problem as `field.path: message`."""
    problems = err.errors()
    missing = [".".join(map(str, p["loc"])) for p in problems if p["type"] == "missing"]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    first = problems[0]
    where = ".".join(map(str, first["loc"]))
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def read_manifest(path: Path) -> Manifest:
    """Read and validate `manifest.json` of the bundle directory `path`.

    Raises:
        BundleError: missing, not valid JSON, or not a valid manifest (the problem named).

    """
    where = path / MANIFEST
    try:
        raw = json.loads(where.read_text())
    except FileNotFoundError:
        raise BundleError(f"{where}: not found") from None
    except (OSError, ValueError) as err:
        raise BundleError(f"{where}: not valid JSON ({err})") from None
    return parse_manifest(raw, where)


def manifest_json(manifest: Manifest) -> str:
    """The manifest as the JSON text a bundle stores (NaN metrics kept, as `json` writes them)."""
    return json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n"


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Write and fsync `folder/manifest.json` (the bundle writer calls it last)."""
    (folder / MANIFEST).write_text(manifest_json(manifest))
    fsync_file(folder / MANIFEST)
