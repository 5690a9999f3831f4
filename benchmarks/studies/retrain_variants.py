"""The retrain benchmark's variants (`benchmarks/studies/retrain_warm.py`): flags, bases, pairs.

Each variant is the flags its `recsys retrain --logs new.csv` ran with on a copy of its base's
home (`BASES`, `BASE_OF`); each pair file, the variants paired with their reference.
"""

from __future__ import annotations

# as every run before the retrain's refit ran: no refit (`recsys retrain` had none; the bases
# predate `train.refit_epochs`)
NO_REFIT = ["--set", "train.refit_epochs=0"]
# as the base and these variants ran: before `train.patience_window` (each round alone) and
# before `train.precision: auto` (fp32)
AS_BEFORE = ["--set", "train.patience_window=1", "--set", "train.precision=fp32", *NO_REFIT]
SHRINK_PERTURB = ["--set", "retrain.shrink=0.4", "--set", "retrain.perturb=0.1"]
# no cap on a warm fit's rounds, as every variant but the capped ones (`_r8`, `_r4_e20`,
# `_r2_e20`) ran (a base trained under a capped default records it, and its retrains inherit it)
NO_CAP = ["--set", "retrain.max_epochs=null"]
# the retrain defaults every variant before `warm_refit_p1_e14` ran with (a base trained since
# records today's, which its retrains would inherit): stop at patience 3, refit as a training
BEFORE_E14 = ["--set", "retrain.patience=3", "--set", "retrain.refit_epochs=null", *NO_CAP]
E14 = ["--set", "retrain.patience=1", "--set", "retrain.refit_epochs=14"]
R8 = ["--set", "retrain.max_epochs=8"]
# a short fit and a long refit: one event back in fp32 the refit curve hardly depends on the
# fit's rounds (2 to 8) and climbs with its epochs (benchmarks/studies/retrain_refit_study.py, the
# `amazon-beauty-fp32-caps` rows), so the budget goes to the refit
E20 = ["--set", "retrain.patience=1", "--set", "retrain.refit_epochs=20"]
R4_E20 = [*E20, "--set", "retrain.max_epochs=4"]
R2_E20 = [*E20, "--set", "retrain.max_epochs=2"]
EARLIER = {
    "warm_context": [*AS_BEFORE],
    "warm_random": ["--set", "retrain.new_item_init=random", *AS_BEFORE],
    "sp_0.4_0.1": [*SHRINK_PERTURB, *AS_BEFORE],
    "sp_0.8_0.05": ["--set", "retrain.shrink=0.8", "--set", "retrain.perturb=0.05", *AS_BEFORE],
    "full": ["--full", *AS_BEFORE],
    "zero_context": ["--max-epochs", "0", "--force"],  # the warm start itself, untrained
    "zero_random": ["--max-epochs", "0", "--force", "--set", "retrain.new_item_init=random"],
    # a fixed budget of 18 rounds (about 40% of the full retrain's time) with the lr decayed over it
    "warm_cosine18": [
        "--max-epochs",
        "18",
        "--set",
        "train.lr_schedule=cosine",
        "--set",
        "retrain.patience=18",
        *AS_BEFORE,
    ],
    # today's defaults, warm and full: early stopping on the mean of the last 3 rounds, and
    # precision auto (bf16 on the machine of the committed runs)
    "warm_mean3": ["--set", "train.patience_window=3", *NO_REFIT],
    "full_mean3": ["--full", "--set", "train.patience_window=3", *NO_REFIT],
    # today's defaults from a base trained with them too (`base_mean3`)
    "warm_base_mean3": [*NO_REFIT],
    # today's defaults with the retrain's refit (8 epochs on the val events after the gate's
    # round), from a base trained with them (`base_refit`, refit too): warm, full, and warm
    # stopped at its first plateau (`retrain.patience=1`), leaving the refit the climb after it
    "warm_refit": [],
    "full_refit": ["--full", "--max-minutes", "40"],  # over the sweep's 20-minute cap here
    "warm_refit_p1": ["--set", "retrain.patience=1"],
    # and with shrink and perturb (0.4 / 0.1, the closest of the fast retrains without the
    # refit): a fresh start's generalisation within the first-plateau stop's time?
    "warm_refit_p1_sp": ["--set", "retrain.patience=1", *SHRINK_PERTURB],
    # ... and under the default patience, which the first-plateau stop cut at 5 rounds
    "warm_refit_sp": [*SHRINK_PERTURB],
    # the warm retrain run to a training's patience: at what time does it reach the full one?
    "warm_refit_p10": ["--set", "retrain.patience=10"],
    # the reference again with another seed: the interval covers the test rows' noise only
    "full_refit_seed43": ["--full", "--max-minutes", "40", "--set", "train.seed=43"],
    # the refit lifts a warm model less (its item rows have grown longer, so each Adam step
    # turns them less): the first-plateau stop with twice the refit epochs
    "warm_refit_p1_e16": ["--set", "retrain.patience=1", "--set", "train.refit_epochs=16"],
    "full_refit_e16": ["--full", "--max-minutes", "40", "--set", "train.refit_epochs=16"],
}
VARIANTS = {
    **{name: [*BEFORE_E14, *flags] for name, flags in EARLIER.items()},
    # the defaults before the 2-round cap, chosen one event back (retrain_refit_study.py):
    # the first-plateau stop, and the most refit epochs the 40% budget left (pinned all the same)
    "warm_refit_p1_e14": [*E14, *NO_CAP],
    # ... with another seed, for a pair of seeds on each side (the full retrain's second seed:
    # `full_refit_seed43`, run again into the same folder)
    "warm_refit_p1_e14_seed43": [*E14, *NO_CAP, "--set", "train.seed=43"],
    # ... and the warm fit capped at 8 rounds (`retrain.max_epochs`: the rounds the first-
    # plateau stop took one event back in fp32), each seed; not made the default (it cost 1.4-
    # 1.7% of test NDCG@10 against the uncapped fit, docs/benchmarks/archive/benchmarks.md)
    "warm_refit_p1_e14_r8": [*E14, *R8],
    "warm_refit_p1_e14_r8_seed43": [*E14, *R8, "--set", "train.seed=43"],
    # ... and at 4 rounds with 20 refit epochs, each seed
    "warm_refit_p1_r4_e20": [*R4_E20],
    "warm_refit_p1_r4_e20_seed43": [*R4_E20, "--set", "train.seed=43"],
    # ... and at 2 (as good as 4 one event back; 4 took 39-41% of the full retrain's time in
    # fp32): today's defaults
    "warm_refit_p1_r2_e20": [*R2_E20],
    "warm_refit_p1_r2_e20_seed43": [*R2_E20, "--set", "train.seed=43"],
}
# runs made by hand on a copy of the base home: result name -> home
BY_HAND = {"warm_patience10": "warm_p10"}  # `--set retrain.patience=10`, to its end
# the served model each variant starts from: `base`, unless named here
BASES = {"base": AS_BEFORE, "base_mean3": NO_REFIT, "base_refit": []}
BASE_OF = {
    "warm_base_mean3": "base_mean3",
    **{name: "base_refit" for name in VARIANTS if "refit" in name},
}

# the paired intervals: each file pairs its warm variants with its reference, the full retrain
# under the same stopping rule
PAIRS = {
    "paired.json": (
        "full",
        ["warm_context", "warm_random", "sp_0.4_0.1", "sp_0.8_0.05", "warm_cosine18"],
    ),
    "paired_mean3.json": ("full_mean3", ["warm_mean3", "warm_base_mean3"]),
    "paired_refit.json": ("full_refit", ["warm_refit", "warm_refit_p1", "warm_refit_p1_sp"]),
    "paired_refit_sp.json": ("full_refit", ["warm_refit_sp"]),
    "paired_refit_p10.json": ("full_refit", ["warm_refit_p10"]),
    "paired_refit_seed43.json": ("full_refit", ["full_refit_seed43"]),
    "paired_refit_e16.json": ("full_refit", ["warm_refit_p1_e16"]),
    "paired_refit_full_e16.json": ("full_refit", ["full_refit_e16"]),
    "paired_refit_e16_both.json": ("full_refit_e16", ["warm_refit_p1_e16"]),
    "paired_refit_e14.json": ("full_refit", ["warm_refit_p1_e14"]),
    "paired_refit_e14_seed43.json": ("full_refit_seed43", ["warm_refit_p1_e14_seed43"]),
    "paired_refit_e14_r8.json": ("full_refit", ["warm_refit_p1_e14_r8"]),
    "paired_refit_e14_r8_seed43.json": ("full_refit_seed43", ["warm_refit_p1_e14_r8_seed43"]),
    "paired_refit_r4_e20.json": ("full_refit", ["warm_refit_p1_r4_e20"]),
    "paired_refit_r4_e20_seed43.json": ("full_refit_seed43", ["warm_refit_p1_r4_e20_seed43"]),
    "paired_refit_r2_e20.json": ("full_refit", ["warm_refit_p1_r2_e20"]),
    "paired_refit_r2_e20_seed43.json": ("full_refit_seed43", ["warm_refit_p1_r2_e20_seed43"]),
}
