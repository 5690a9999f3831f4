from pathlib import Path

import pytest

from data.errors import RecsysInputError
from training.config import RecsysConfig
from training.config_loading import load_config


def test_defaults_without_files() -> None:
    assert load_config() == RecsysConfig()


def test_yaml_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  dim: 32\nsampler:\n  name: popularity\n")
    cfg = load_config([path], ["model.dim=16", "train.lr=0.01", "sampler.per_query=true"])
    assert cfg.model.dim == 16
    assert cfg.sampler.name == "popularity"
    assert cfg.train.lr == pytest.approx(0.01)
    assert cfg.sampler.per_query is True


def test_unknown_key_is_named() -> None:
    with pytest.raises(RecsysInputError, match="model.dimm"):
        load_config(overrides=["model.dimm=3"])


def test_bad_value_is_named() -> None:
    with pytest.raises(RecsysInputError, match="train.lr"):
        load_config(overrides=["train.lr=-1"])


def test_malformed_override() -> None:
    with pytest.raises(RecsysInputError, match="section.key=value"):
        load_config(overrides=["no-equals-sign"])


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RecsysInputError, match="not found"):
        load_config([tmp_path / "absent.yaml"])


def test_override_value_that_is_not_yaml() -> None:
    with pytest.raises(RecsysInputError, match="not valid YAML"):
        load_config(overrides=["train.lr=["])


def test_a_binary_config_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00\x01model:")
    with pytest.raises(RecsysInputError, match="bin.yaml: not UTF-8 text"):
        load_config([path])


def test_directory_as_config_file(tmp_path: Path) -> None:
    with pytest.raises(RecsysInputError, match="cannot read config"):
        load_config([tmp_path])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.tower.num_heads=2", "model.dim=33"], "not divisible by model.tower.num_heads 2"),
        (["model.tower=mean", "model.dim=33"], None),  # the mean tower has no heads
        (["data.split=time"], "data.split time needs data.cutoff"),
        (["data.split=time", "data.cutoff=100"], None),
        (["train.val_every=5", "train.max_epochs=4"], None),  # the last epoch is validated
        (["eval.ks=[10, 0]"], "config eval.ks.1"),
        (["train.accelerator=tpu9"], "config train.accelerator"),
        (["train.max_minutes=.inf"], "config train.max_minutes"),  # was an OverflowError
        (["train.max_minutes=1e300"], "config train.max_minutes"),
        (["train.lr=.nan"], "config train.lr"),
        (["train.seed=-1"], "config train.seed"),  # numpy refused it after the run started
        (["train.seed=4294967296"], "config train.seed"),
        (["train.seed=4294967295"], None),
        (["model.tower.window=whole", "train.targets=all"], "needs train.targets=last"),
        (["model.tower=bsarec", "model.tower.window=whole", "train.targets=last"], None),
        (
            ["model.tower.window=causal", "model.tower.padding=embedded", "train.targets=all"],
            "needs",
        ),
    ],
)
def test_invariants_the_trainer_assumes_are_checked(overrides: list[str], message: str) -> None:
    if message is None:
        load_config(overrides=overrides)
        return
    with pytest.raises(RecsysInputError, match=message):
        load_config(overrides=overrides)


def test_a_tower_key_set_before_the_tower_is_named_is_kept() -> None:
    cfg = load_config(overrides=["model.tower.window=causal", "model.tower=bsarec"])
    assert cfg.model.tower.window == "causal"  # not the default
    with pytest.raises(RecsysInputError, match="alpha: not a key of the sasrec tower"):
        load_config(overrides=["model.tower.alpha=0.5", "model.tower=sasrec"])  # kept: refused
    named = ["model.tower.alpha=0.5", "model.tower=bsarec"]
    fresh = load_config(overrides=[*named, "model.tower=bsarec"])
    assert fresh.model.tower.alpha == 0.7  # over a named mapping a bare name starts afresh


def test_a_tower_key_at_its_former_place_still_sets_the_tower() -> None:
    default_yaml = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
    cfg = load_config([default_yaml], ["model.num_layers=3"])  # over the file's tower mapping
    assert (cfg.model.tower.name, cfg.model.tower.num_layers) == ("bsarec", 3)
    fmlp = load_config(overrides=["model.tower=fmlp", "model.num_heads=4"])  # fmlp has no heads
    assert fmlp.model.tower.model_dump() == {"name": "fmlp", "num_layers": 2, "ffn_dim": None}
    with pytest.raises(RecsysInputError, match="not a key of the sasrec tower"):
        load_config(overrides=["model.tower=sasrec", "model.tower.alpha=0.5"])
