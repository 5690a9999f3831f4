"""The query-tower study's like-for-like settings: each name's `--set` overrides.

`published` is the published models' settings on these splits, `ours` the product's model
before the study; every other setting is one of them with keys added or replaced, named by
what it changes (`benchmarks.sweeps.tower_grid` says what each is for and in what order the
study ran them).
"""

from __future__ import annotations

SETTINGS: dict[str, tuple[str, ...]] = {
    "published": (
        "model.dim=64", "model.max_len=50", "model.dropout=0.5", "model.normalize=false",
        "model.temperature=1", "train.lr=0.001", "train.batch_size=256",
    ),
    "ours": ("model.max_len=20", "model.temperature=0.1"),  # the sweeps pin 50 and 0.05
}  # fmt: skip
SETTINGS["published-prefix"] = (*SETTINGS["published"], "train.targets=last")
SETTINGS["published-whole"] = (*SETTINGS["published-prefix"], "model.tower.window=whole")


def _replacing(setting: str, *sets: str) -> tuple[str, ...]:
    """`setting`'s keys, those `sets` name replaced by `sets` (put last)."""
    names = {key.split("=", 1)[0] for key in sets}
    kept = (key for key in SETTINGS[setting] if key.split("=", 1)[0] not in names)
    return (*kept, *sets)


SETTINGS["published-author"] = (
    *_replacing("published-prefix", "train.lr=0.0005"), "train.patience=10", "model.init_std=0.02",
)  # fmt: skip
SETTINGS["published-author-plateau"] = (*SETTINGS["published-author"], "train.lr_schedule=plateau")
SETTINGS["published-author-plateau-ema"] = (
    *SETTINGS["published-author-plateau"], "train.ema_decay=0.999",
)  # fmt: skip
SETTINGS["published-author-plateau-lr1e-3"] = _replacing(
    "published-author-plateau", "train.lr=0.001"
)
SETTINGS["published-author-plateau-lr1e-3-cosine"] = _replacing(
    "published-author-plateau-lr1e-3", "model.normalize=true", "model.temperature=0.1"
)
SETTINGS["published-author-plateau-lr1e-3-d128"] = _replacing(
    "published-author-plateau-lr1e-3", "model.dim=128"
)
SETTINGS["published-author-plateau-lr1e-3-batch128"] = _replacing(
    "published-author-plateau-lr1e-3", "train.batch_size=128"
)
for _share in ("0.1", "0.3"):  # input items dropped from each training window (not its newest)
    SETTINGS[f"published-author-plateau-lr1e-3-mask{_share}"] = _replacing(
        "published-author-plateau-lr1e-3", f"train.item_mask={_share}"
    )
SETTINGS["published-author-plateau-lr1e-3-whole"] = _replacing(
    "published-author-plateau-lr1e-3", "model.tower.window=whole"
)
SETTINGS["published-author-plateau-lr1e-3-ema"] = _replacing(
    "published-author-plateau-lr1e-3", "train.ema_decay=0.999"
)
SETTINGS["published-author-plateau-lr1e-3-whole-ema"] = _replacing(
    "published-author-plateau-lr1e-3-whole", "train.ema_decay=0.999"
)
SETTINGS["published-author-plateau-lr1e-3-whole-ema-bf16"] = _replacing(
    "published-author-plateau-lr1e-3-whole-ema", "train.precision=bf16"
)
# BSARec's padded windows; each is max_len wide, so bucketing by length saves nothing: batches
# are shuffled as BSARec's are
SETTINGS["published-author-plateau-lr1e-3-whole-ema-bf16-embedded"] = _replacing(
    "published-author-plateau-lr1e-3-whole-ema-bf16",
    "model.tower.padding=embedded",
    "train.bucket_by_length=false",
)
SETTINGS["published-author-plateau-lr1e-3-whole-ema-bf16-d128"] = _replacing(
    "published-author-plateau-lr1e-3-whole-ema-bf16", "model.dim=128"
)
# d = 128 peaks by epoch 18 and then falls on both datasets: two regularisers against that
SETTINGS["published-author-plateau-lr1e-3-whole-ema-bf16-d128-dropout0.6"] = _replacing(
    "published-author-plateau-lr1e-3-whole-ema-bf16-d128", "model.dropout=0.6"
)
SETTINGS["published-author-plateau-lr1e-3-whole-ema-bf16-d128-wd0.05"] = _replacing(
    "published-author-plateau-lr1e-3-whole-ema-bf16-d128",
    "train.weight_decay=0.05",
    "train.decoupled_weight_decay=true",
)
SETTINGS["published-author-plateau-lr2e-3"] = _replacing(
    "published-author-plateau", "train.lr=0.002"
)
