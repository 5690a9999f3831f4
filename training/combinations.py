"""Settings that do not train together, refused before anything is built (exit 2).

Each rule says which settings clash and why; `build_module` calls `refuse_clashes` first.
"""

from __future__ import annotations

from data.errors import RecsysInputError
from training.config import RecsysConfig

FULL = "full"
UNIT_KERNELS = ("quadratic", "rff")  # kernels built on L2-normalised towers (feature_maps.py)
POSITIVES_AS_NEGATIVES = ("in-batch", "mixed")  # each row's own positive sits in its own slot


def refuse_clashes(cfg: RecsysConfig) -> None:
    """Raise RecsysInputError naming the first pair of settings that cannot train together."""
    sampler = cfg.sampler.name
    if sampler == FULL and cfg.train.sparse_embeddings:
        raise RecsysInputError(
            "full softmax touches every item row: use train.sparse_embeddings=false"
        )
    if cfg.loss.name == "nce" and sampler in POSITIVES_AS_NEGATIVES:
        raise RecsysInputError(
            f"loss nce needs noise drawn independently of the positives; the {sampler} "
            "sampler's negatives are the batch's positives: use popularity or uniform"
        )
    if sampler in UNIT_KERNELS and not cfg.model.normalize:
        raise RecsysInputError(
            f"the {sampler} sampler's kernel follows the softmax on unit vectors only: "
            "use model.normalize=true, or another sampler"
        )
