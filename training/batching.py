"""Batch samplers of the training windows.

Length buckets, each rank's part of a global batch, and the same number of batches on every
rank of a sharded training.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from torch.utils.data import Sampler

BUCKET_SPAN = 50  # batches drawn together, sorted by length, then cut and shuffled


class LengthBucketBatches(Sampler[list[int]]):
    """Random batches of windows of similar length, so trimming their padding saves compute.

    Each epoch: shuffle all rows, take `BUCKET_SPAN` batches' worth at a time, sort that span by
    length, cut it into batches, then shuffle the order of all batches. Most windows of short
    sequences are mostly padding; batching them together avoids attending over it.
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int = 0) -> None:
        self.lengths = lengths
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Order the next pass as epoch `epoch` (Lightning calls it; a resumed fit resumes it)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:  # noqa: D105
        rng = np.random.default_rng((self.seed, self.epoch))
        self.epoch += 1
        order = rng.permutation(len(self.lengths))
        span = self.batch_size * BUCKET_SPAN
        batches: list[np.ndarray] = []
        for start in range(0, len(order), span):
            chunk = order[start : start + span]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches.extend(np.array_split(chunk, -(-len(chunk) // self.batch_size)))
        for pick in rng.permutation(len(batches)):
            yield batches[pick].tolist()


class RankSlices:
    """A batch sampler's batches cut across the ranks: rank r takes the r-th part of each one.

    Every rank iterates the same global batches (the same seed), so the ranks' parts of one
    step make up exactly the batch one process would have trained on; a batch with fewer rows
    than ranks is skipped (every rank must take the same number of steps).
    """

    def __init__(self, batches: object, rank: int, world: int) -> None:
        self.batches = batches
        self.rank, self.world = rank, world

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        """Pass the epoch on to the global batches (every rank orders them alike)."""
        if callable(set_epoch := getattr(self.batches, "set_epoch", None)):
            set_epoch(epoch)

    def __iter__(self) -> Iterator[list[int]]:  # noqa: D105
        for batch in self.batches:  # type: ignore[attr-defined]
            if len(batch) >= self.world:
                yield np.array_split(np.asarray(batch), self.world)[self.rank].tolist()


class EqualCount:
    """Exactly `count` batches of a batch sampler per epoch: cut short, or topped up by a pass more.

    Every rank of a data-parallel training must take the same number of steps; when each rank
    batches its own shard of the windows, the shards' batch counts differ, and the ranks with
    fewer draw the rest from a fresh pass over their windows (as torch's DistributedSampler
    pads a rank's share with repeated rows).
    """

    def __init__(self, batches: object, count: int) -> None:
        if count > 0 and len(batches) == 0:  # type: ignore[arg-type]
            raise ValueError("no batches to draw from")
        self.batches = batches
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[list[int]]:  # noqa: D105
        made = 0
        while made < self.count:
            for batch in self.batches:  # type: ignore[attr-defined]
                if made == self.count:
                    return
                made += 1
                yield batch
