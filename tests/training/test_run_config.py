"""`build_run_config`: the layers' precedence, `--sampler`'s own defaults, strict sampler keys,
and configs written before each sampler had its own settings class (`stored_config`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data.errors import RecsysInputError
from model.bundle.layout import MANIFEST
from model.bundle.manifest import read_manifest
from tests.serving.bundles import make_bundle
from training.config import RecsysConfig
from training.config_loading import build_run_config, load_stored_config, stored_config
from training.sampler_settings import SETTINGS, AutoSampler, FullSoftmax
from training.samplers import SAMPLERS
from training.workflows.retrain import served_config

# A config's sampler section as recsys wrote it before (every sampler's keys, most prefixed):
# what `--sampler rff --set sampler.rff_nu=4 --set sampler.leaf_size=64` resolved to.
FLAT_RFF = {
    "name": "rff", "num_negatives": 64, "per_query": True, "popularity_alpha": 0.75,
    "popularity_floor": 1.0, "kernel_alpha": 100.0, "rff_features": 1024, "rff_nu": 4.0,
    "rff_orthogonal": True, "exact_nu": None, "leaf_size": 64, "refresh_every": 100,
    "score_floor": 0.001, "tapas_ratio": 8.0, "tapas_alpha": 0.75, "tapas_beta": 1.0,
    "tapas_temperature": 1.0, "tapas_temperature_final": 0.05, "tapas_anneal": "exponential",
    "tapas_correction": "presample", "tapas_shards": 1,
}  # fmt: skip


def test_the_default_picks_the_full_softmax_up_to_16000_items_and_midx_above() -> None:
    cfg = build_run_config()
    assert cfg == RecsysConfig() and set(SETTINGS) == {*SAMPLERS, "full", "auto"}
    assert cfg.sampler == AutoSampler() and cfg.sampler.full_up_to == 16_000
    assert cfg.for_catalogue(16_000).sampler == FullSoftmax()
    above = cfg.for_catalogue(16_001)
    assert above.sampler == SETTINGS["midx"]() and above.model_dump(exclude={"sampler"}) == (
        cfg.model_dump(exclude={"sampler"})
    )
    assert (above.sampler.num_negatives, above.sampler.per_query) == (64, True)
    always = build_run_config(overrides=["sampler.full_up_to=0"]).for_catalogue(1)
    assert always.sampler.name == "midx"
    chosen = build_run_config(sampler="uniform")
    assert chosen.for_catalogue(10) is chosen  # a named sampler is never replaced


def test_the_default_has_no_sampled_keys_and_the_error_names_the_one_given() -> None:
    with pytest.raises(RecsysInputError, match="num_negatives.*not a key of the auto sampler"):
        build_run_config(num_negatives=128)
    named = build_run_config(overrides=["sampler.name=midx"], num_negatives=128)
    assert named.sampler.num_negatives == 128


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_the_sampler_flag_is_its_own_defaults_and_the_loss_it_pairs_with(name: str) -> None:
    cfg = build_run_config(sampler=name)
    assert cfg.sampler == SETTINGS[name]()
    assert cfg.loss.name == SETTINGS[name].pairs_with.get("loss", {}).get("name", "sampled_softmax")


def test_precedence_defaults_base_sampler_files_sets_flags(tmp_path: Path) -> None:
    """--sampler: its defaults under the file and --set, its name over them (a flag)."""
    base = {"sampler": {"name": "tapas", "ratio": 2.0}, "train": {"lr": 0.1, "seed": 5}}
    base["model"] = {"normalize": True}  # a served model with the cosine logits rff follows
    path = tmp_path / "c.yaml"
    path.write_text("sampler: {name: exact, leaf_size: 64, score_floor: 0.01}\ntrain: {lr: 0.2}\n")
    cfg = build_run_config(
        [path],
        ["sampler.score_floor=0.02", "train.max_epochs=7"],
        sampler="rff",
        num_negatives=8,
        max_epochs=3,
        base=base,
    )
    assert cfg.sampler.model_dump() == {
        **SETTINGS["rff"]().model_dump(), "num_negatives": 8, "leaf_size": 64, "score_floor": 0.02,
    }  # fmt: skip
    assert (cfg.train.lr, cfg.train.seed, cfg.train.max_epochs) == (0.2, 5, 3)


@pytest.mark.parametrize("name", ["uniform", "popularity", "rff", "tapas"])
def test_the_default_yaml_takes_another_sampler_by_flag_or_set(name: str) -> None:
    """Its auto keys give way to the named sampler's own defaults, by flag or by set."""
    path = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
    pairs = SETTINGS[name].pairs_with  # what the flag brings, under the file's own keys
    brought = [f"{section}.{k}={v}" for section, keys in pairs.items() for k, v in keys.items()]
    by_flag = build_run_config([path], brought, sampler=name)
    by_set = build_run_config([path], [f"sampler.name={name}", *brought])
    assert by_flag.sampler.name == by_set.sampler.name == name
    assert by_flag.sampler == by_set.sampler == SETTINGS[name]()
    assert by_flag == by_set  # auto's own key dropped either way (it would be refused)


def test_a_base_of_another_sampler_keeps_only_the_keys_the_new_one_has() -> None:
    base = {"sampler": {"name": "tapas", "num_negatives": 32, "ratio": 2.0}}
    cfg = build_run_config(overrides=["sampler.name=uniform"], base=base)
    assert cfg.sampler.model_dump() == {"name": "uniform", "num_negatives": 32, "per_query": False}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sampler.ratio=4"], "config sampler.ratio: not a key of the auto sampler; its keys: "
         "name, full_up_to"),
        (["sampler.name=midx", "sampler.ratio=4"], "config sampler.ratio: not a key of the midx "
         "sampler; its keys: name, num_negatives, per_query, per_sequence, refresh_every"),
        (["sampler.name=tapas", "sampler.tapas_ratio=4"], "config sampler.tapas_ratio: not a key "
         "of the tapas sampler"),
        (["sampler.name=full", "sampler.num_negatives=4"], "not a key of the full sampler"),
        (["sampler.name=nope"], "config sampler.name: unknown sampler 'nope'; known: auto, "
             "bernoulli"),
        (["sampler=3"], "config sampler: expected a mapping"),
        (["train.sparse_embeddings=true"], "sampler auto trains full on a catalogue of at most "
         "16,000 items, and full softmax touches every item row"),
        (["model.normalize=true", "model.learn_temperature=true"], "sampler auto trains midx on "
         "a catalogue of more than 16,000 items, and the midx sampler is built on the model's"),
        (["sampler.full_up_to=0", "train.sparse_embeddings=true", "loss.name=bernoulli"],
         "sampler auto trains midx on a catalogue of more than 0 items, and loss bernoulli"),
        (["loss.name=nope"], "config loss.name: unknown loss 'nope'"),
        (["loss.name=nce", "sampler.name=in-batch"], "negatives are the batch's positives"),
    ],
)  # fmt: skip
def test_what_cannot_train_is_refused_once_with_one_line(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(RecsysInputError, match=message) as refused:
        build_run_config(overrides=overrides)
    assert "\n" not in str(refused.value)


def test_a_former_flat_sampler_section_reads_as_the_samplers_own_keys() -> None:
    config = stored_config({"sampler": FLAT_RFF, "train": {"lr": 0.01}})
    predated = {"targets": "all", "ema_decay": None, "decoupled_weight_decay": False}
    assert config["train"] == {"lr": 0.01, **predated}  # the keys it predates, as run
    assert config["sampler"] == {
        "name": "rff", "num_negatives": 64, "per_query": True, "features": 1024, "nu": 4.0,
        "orthogonal": True, "leaf_size": 64, "refresh_every": 100, "score_floor": 0.001,
    }  # fmt: skip
    flat_tapas = {**FLAT_RFF, "name": "tapas", "tapas_ratio": 2.0, "tapas_correction": "none"}
    tapas = RecsysConfig.model_validate(stored_config({"sampler": flat_tapas})).sampler
    assert tapas == SETTINGS["tapas"](num_negatives=64, ratio=2.0, correction="none")
    full = RecsysConfig.model_validate(stored_config({"sampler": {**FLAT_RFF, "name": "full"}}))
    assert full.sampler == FullSoftmax()
    today = RecsysConfig().model_dump()
    assert stored_config(today) == today  # today's format passes as it is
    unnamed = {k: v for k, v in FLAT_RFF.items() if k != "name"}  # written when uniform was
    assert RecsysConfig.model_validate(stored_config({"sampler": unnamed})).sampler == SETTINGS[
        "uniform"
    ](num_negatives=64, per_query=True)
    midx = {"sampler": {"codewords": 32, "popularity_alpha": 0.75}}  # today's, unnamed: midx's
    assert stored_config(midx) == midx


def test_a_retrain_that_names_its_samplers_again_keeps_the_served_settings() -> None:
    base = {"sampler": {"name": "midx", "codewords": 16, "quantizer": "product"}}
    cfg = build_run_config(overrides=["sampler.name=tapas", "sampler.name=midx"], base=base)
    assert (cfg.sampler.name, cfg.sampler.codewords, cfg.sampler.quantizer) == (
        "midx", 16, "product",
    )  # fmt: skip


def test_a_model_published_before_keeps_retraining_with_its_settings(tmp_path: Path) -> None:
    models = tmp_path / "models"
    path = make_bundle(models, "v1")
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["config"] = {"sampler": FLAT_RFF, "loss": {"name": "sampled_softmax"}, "train": {}}
    del manifest["model"]["normalize"]  # written before the key: every model was normalised
    (path / MANIFEST).write_text(json.dumps(manifest))
    cfg = build_run_config(overrides=["train.lr=0.01"], base=served_config(models))
    assert cfg.sampler == SETTINGS["rff"](num_negatives=64, nu=4.0, leaf_size=64)
    assert cfg.model.normalize and cfg.train.targets == "all"
    hparams = tmp_path / "hparams.yaml"  # a run's saved config, as Lightning wrote it
    hparams.write_text(json.dumps({"sampler": FLAT_RFF, "model": {"dim": 8}}))  # JSON is YAML
    stored = load_stored_config(hparams)
    assert stored.sampler == cfg.sampler
    assert (stored.model.tower.name, stored.model.normalize) == ("sasrec", True)


def test_a_bsarec_model_saved_before_the_whole_window_default_reads_causal(tmp_path: Path) -> None:
    path = make_bundle(tmp_path / "models", "v1")
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["model"]["tower"] = {"name": "bsarec", "num_layers": 1, "num_heads": 1}  # no window
    (path / MANIFEST).write_text(json.dumps(manifest))
    assert read_manifest(path).model.tower.window == "causal"  # as it was trained
    saved = {"model": {"tower": {"name": "bsarec"}}, "train": {"lr": 0.01}}
    cfg = RecsysConfig.model_validate(stored_config(saved))
    assert cfg.model.tower.window == "causal" and cfg.train.ema_decay is None
    fresh = build_run_config(overrides=["model.tower=bsarec", "train.lr=0.01"])
    assert fresh.model.tower.window == "whole" and fresh.train.ema_decay == 0.999  # the defaults


def test_the_kernel_sampler_flag_brings_cosine_logits_but_not_over_a_served_model() -> None:
    fresh = build_run_config(sampler="rff")
    assert (fresh.model.normalize, fresh.model.temperature) == (True, 0.1)
    served = {"model": {"normalize": False, "temperature": 1.0}}  # a dot-product model
    with pytest.raises(RecsysInputError, match="use model.normalize=true"):
        build_run_config(sampler="rff", base=served)  # a retrain keeps the served model
