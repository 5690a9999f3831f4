"""What `bench serving` serves at one size: a synthetic bundle, or a trained one as it is.

A synthetic catalogue is written by `synthetic_bundles` (random unit rows, or rows drawn like a
trained table's with `--like`); its item ids are "1".."N". A trained bundle (`--bundle`, one
that `recsys train` published) is served unchanged through a home of its own whose
`models/<version>` folder links each of its files, so its item rows, its ids and its query
tower are the model's, while the index the bench builds is cached beside the links: the load's
histories are drawn from its ids and recall is measured for them through its tower.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.speed.synthetic_bundles import TrainedLaw, synthetic_bundle
from data.errors import RecsysInputError


@dataclass(frozen=True)
class ServedCatalogue:
    """A serving home whose CURRENT is `bundle_dir`, its item ids, and recall queries.

    `queries` is None where recall is measured for the load's own sessions through the
    bundle's query tower.
    """

    home: Path
    bundle_dir: Path
    item_ids: list[str]
    queries: np.ndarray | None


def synthetic(num_items: int, dim: int, work: Path, like: TrainedLaw | None) -> ServedCatalogue:
    """A synthetic bundle of `num_items` rows of width `dim` (random, or drawn as `like`)."""
    home = work / f"home-{num_items}-d{dim}"
    draw = None if like is None else lambda: like.draw(num_items, np.random.default_rng(0))
    name = "random" if like is None else f"like-{like.fingerprint()}"
    bundle_dir = synthetic_bundle(home, num_items, dim, seed=0, table=draw, table_name=name)
    queries = None if like is None else like.draw(500, np.random.default_rng(1))
    return ServedCatalogue(home, bundle_dir, [str(i) for i in range(1, num_items + 1)], queries)


def trained(bundle: Path, work: Path) -> ServedCatalogue:
    """A home serving the trained `bundle` as it is: a folder of links to its files.

    The index the bench builds is cached in that folder, under `work`, never in the user's
    bundle (whose recall note `recsys serve` would then read instead of measuring its own).
    """
    from model.bundle import ModelBundle, publish

    loaded = ModelBundle.load(bundle, load_tower=False, map_embeddings=True)
    version = loaded.version
    home = work / f"home-{version}"
    folder = home / "models" / version
    if folder.is_dir() and not _links_to(folder, bundle.resolve()):
        shutil.rmtree(folder)  # a reused --work-dir: another bundle of this version name
    folder.mkdir(parents=True, exist_ok=True)
    for source in sorted(bundle.resolve().iterdir()):
        if not (folder / source.name).exists():
            (folder / source.name).symlink_to(source)
    publish(home / "models", version)
    return ServedCatalogue(home, folder, loaded.item_ids[1:], None)


def _links_to(folder: Path, bundle: Path) -> bool:
    """Whether every link in `folder` points into `bundle` (its own cached index aside)."""
    links = [path for path in folder.iterdir() if path.is_symlink()]
    return bool(links) and all(path.readlink().parent == bundle for path in links)


def trained_shape(bundle: Path) -> tuple[int, int]:
    """(items, width) of the trained `bundle` (RecsysInputError when it is not one)."""
    from model.bundle.manifest import BundleError, read_manifest

    if not bundle.is_dir():
        raise RecsysInputError(f"--bundle {bundle}: not a model bundle folder")
    try:
        manifest = read_manifest(bundle)
    except BundleError as err:
        raise RecsysInputError(f"--bundle {bundle}: {err}") from None
    return manifest.num_items, manifest.dim
