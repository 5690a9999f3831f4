"""Batch samplers of the training windows.

Shuffled batches or length buckets, each ordered by (seed, epoch); each rank's part of a global
batch; the same number of batches on every rank of a sharded training; an epoch resumed
part-way.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import Sampler

BUCKET_SPAN = 50  # batches drawn together, sorted by length, then cut and shuffled


class ShuffledBatches(Sampler[list[int]]):
    """Random batches of `rows` rows, the order drawn from (seed, epoch) alone.

    So a fit resumed in epoch e draws epoch e's order, not epoch 0's (a generator seeded once
    would start over).
    """

    def __init__(self, rows: int, batch_size: int, seed: int = 0) -> None:
        self.rows = rows
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return -(-self.rows // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Order the next pass as epoch `epoch`."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:  # noqa: D105
        order = np.random.default_rng((self.seed, self.epoch)).permutation(self.rows)
        self.epoch += 1
        for start in range(0, self.rows, self.batch_size):
            yield order[start : start + self.batch_size].tolist()


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
    than ranks is skipped (every rank must take the same number of steps), and not counted.
    """

    def __init__(self, batches: object, rank: int, world: int) -> None:
        self.batches = batches
        self.rank, self.world = rank, world
        # every pass cuts batches of the same sizes, only their order changes: count them on a
        # copy (a pass over the batches themselves would move their epoch on)
        self._count = sum(len(b) >= world for b in copy.copy(batches))  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return self._count

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

    def set_epoch(self, epoch: int) -> None:
        """Pass the epoch on to the batches drawn from (their order is (seed, epoch)'s)."""
        if callable(set_epoch := getattr(self.batches, "set_epoch", None)):
            set_epoch(epoch)

    def __iter__(self) -> Iterator[list[int]]:  # noqa: D105
        made = 0
        while made < self.count:
            for batch in self.batches:  # type: ignore[attr-defined]
                if made == self.count:
                    return
                made += 1
                yield batch


class ResumableBatches(Sampler[list[int]]):
    """A batch sampler's passes, numbered as epochs; the one a resumed fit takes skips its start.

    `resume(epoch, done)` (a checkpoint's loader state) makes the next pass epoch `epoch`'s
    order without its first `done` batches: those the killed run had trained. The length stays
    the whole epoch's, as Lightning counts the batches done before the kill.
    """

    def __init__(self, batches: Any) -> None:
        self.batches = batches
        self.epoch = 0  # of the next pass
        self.current = 0  # of the pass under way
        self.skip = 0  # batches the next pass leaves out

    def __len__(self) -> int:
        return len(self.batches)

    def set_epoch(self, epoch: int) -> None:
        """Order the next pass as epoch `epoch` (Lightning calls it before each epoch)."""
        self.epoch = epoch

    def resume(self, epoch: int, done: int) -> None:
        """The next pass is epoch `epoch` after its first `done` batches."""
        self.epoch, self.skip = epoch, done

    def __iter__(self) -> Iterator[list[int]]:  # noqa: D105
        # the skip belongs to the pass created now (Lightning may create one it never starts);
        # the epoch is read when the pass starts (Lightning sets it after creating the pass)
        skip, self.skip = self.skip, 0
        return self._pass(skip)

    def _pass(self, skip: int) -> Iterator[list[int]]:
        self.current, self.epoch = self.epoch, self.epoch + 1
        if callable(set_epoch := getattr(self.batches, "set_epoch", None)):
            set_epoch(self.current)
        yield from itertools.islice(self.batches, skip, None)
