"""When a recorded sweep run stands for today's settings, so that the sweep need not train it.

A run's record holds its training settings (`training_settings`) as its config. It is reused
when today's settings train as it did (`same_settings`), or when they differ only in when early
stopping ends a run and the recorded run provably trained as today's would (`stops_alike`);
`stands_for` is either. A key a record lacks was added since it was made: it ran at the value
the key's saved configs take (`training.config_loading.SAVED_WITHOUT`), else at the default
it has today (its own sampler's, for a sampler key; a study whose runs had another pins that
value in its protocol); a model section is read in today's layout.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.harness.curves import val_ndcg

TRAINING_SECTIONS = ("data", "model", "sampler", "loss", "train", "eval")
# keys that only decide when a run stops early (but for the plateau schedule: `stops_alike`)
STOPPING_KEYS = ("patience", "patience_window")
RAN_TO_ITS_END = ("time cap", "max epochs")  # `sweep.stopped_by`'s other answer: early stopping


def training_settings(cfg: Any) -> dict[str, Any]:
    """The config sections that shape a training run, as JSON values."""
    dump = json.loads(json.dumps(cfg.model_dump()))
    return {section: dump[section] for section in TRAINING_SECTIONS}


def _as_recorded(stored: dict[str, Any], section: str) -> dict[str, Any]:
    """A recorded section completed for the keys added since: as saved, else today's defaults.

    A model section is read in today's layout (a former flat tower key moves into the tower).
    """
    from training.config_loading import saved_section

    saved = saved_section(section, stored.get(section, {}))
    recorded = {**_defaults(stored, section), **saved}
    return _in_todays_layout(recorded) if section == "model" else recorded


def _defaults(stored: dict[str, Any], section: str) -> dict[str, Any]:
    """Today's defaults of a section; of a sampler section, its own sampler's."""
    from training.config import RecsysConfig

    defaults = training_settings(RecsysConfig())[section]
    name = (stored.get("sampler") or {}).get("name") if section == "sampler" else None
    if name is None:
        return defaults
    from pydantic import ValidationError

    from training.sampler_settings import validate_sampler

    try:
        return dict(json.loads(validate_sampler({"name": name}).model_dump_json()))
    except ValidationError:
        return defaults  # a sampler no longer known: the record stands for nothing today


def _in_todays_layout(model: dict[str, Any]) -> dict[str, Any]:
    """A recorded model section as `ModelConfig` reads it today; as it is if it no longer reads."""
    from pydantic import ValidationError

    from model.config import ModelConfig

    try:
        return dict(json.loads(ModelConfig.model_validate(model).model_dump_json()))
    except ValidationError:
        return model


def same_settings(stored: dict[str, Any], current: dict[str, Any]) -> bool:
    """True when `current` trains as `stored` did (a key `stored` lacks: at today's default)."""
    for section, values in current.items():
        old = _as_recorded(stored, section)
        if any(old.get(key) != v for key, v in values.items()):
            return False
    return True


def stands_for(record: dict[str, Any], current: dict[str, Any]) -> bool:
    """True when the recorded run need not train again for `current`: it trained the same."""
    return same_settings(record["config"] or {}, current) or stops_alike(record, current)


def stops_alike(record: dict[str, Any], current: dict[str, Any]) -> bool:
    """True when `record` trained as `current` would, though its stopping settings differ.

    That is when the two differ only in when early stopping ends a run (not under the plateau
    schedule, where the same keys start the lr decay), and the recorded run went on to its time
    cap or epoch limit with neither its own rule nor today's stopping it on its validation
    curve: training is deterministic for a seed.
    """
    from training.loop.stopping import stop_round

    train = current["train"]
    others = {**current, "train": {k: v for k, v in train.items() if k not in STOPPING_KEYS}}
    stored, run = record["config"] or {}, record["metrics"]
    if train["lr_schedule"] == "plateau" or run.get("stopped_by") not in RAN_TO_ITS_END:
        return False
    if not same_settings(stored, others):
        return False
    curve = val_ndcg(run)
    if not curve:
        return False
    was = _as_recorded(stored, "train")
    own = stop_round(curve, was["patience"], was["patience_window"])
    # its own rule did not stop it before its limit (a stop in the last epoch before the cap
    # reads as the cap: only a limit really reached may coincide with it), and today's
    # would stop it no sooner than it ended
    if own is not None and (own < len(curve) or not _reached_limit(run, was)):
        return False
    return stop_round(curve, train["patience"], train["patience_window"]) in (None, len(curve))


def _reached_limit(run: dict[str, Any], train: dict[str, Any]) -> bool:
    """The recorded run (`run`: its metrics) trained its whole time cap or all its epochs."""
    cap = train.get("max_minutes")
    capped = cap is not None and run.get("train_seconds", 0.0) >= 60.0 * cap
    return capped or run.get("epochs", 0) >= train["max_epochs"]
