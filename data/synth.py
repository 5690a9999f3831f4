"""Synthetic interaction logs with known structure: Zipf popularity, topics, a planted Markov chain.

Generating process (all draws from `numpy.random.default_rng(seed)`, so a seed fixes the log):

1. Items. Each item gets a popularity rank (a random permutation) and weight
   `w = 1 / (rank + 1) ** ZIPF_S`, and a topic: `K = clip(num_items // 50, 1, 200)` topics of
   (nearly) equal size, assigned at random.
2. Planted structure. The topics form a ring in a random order: `next_topic(t)` is t's
   successor on the ring. Every item i gets one planted successor item `succ[i]`, drawn
   uniformly from the items of `next_topic(topic[i])`.
3. Sequence lengths. With E >= U, every user gets 1 event plus a multinomial share of the
   remaining E - U events with log-normal(0, 0.75) user weights (a few heavy users, many light
   ones); the total is exactly E.
4. A user's items. The first item is drawn from the global Zipf weights. Each next item, given
   the current item i of topic t:
   - with probability P_SUCC: `succ[i]`, the planted successor (the learnable signal);
   - otherwise a topic step, then an item drawn from that topic with the Zipf weights: the
     topic stays t with probability P_STAY, moves to `next_topic(t)` with probability P_NEXT,
     and jumps to a uniformly random topic otherwise (noise).
   So the best next-item predictor given the last item i is `succ[i]` (right about
   P_SUCC + a little of the time), while popularity alone is right far less often.
5. Timestamps. Each user starts at a uniform time in [T0, T0 + 180 days] (T0 = 2020-09-13);
   gaps between a user's events are 1 + Exponential(mean 1 day) seconds, so a user's events
   are strictly increasing in time and no two of them share a timestamp.

The output is sorted by timestamp (like a real log): `user_id` "u<n>", `item_id` "i<n>" (n from
0), `timestamp: int64`. Everything is vectorised: the only Python loop is over positions within
a sequence (the longest sequence length), each step handling all still-active users at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from data.store import atomic_write

DEFAULT_SYNTHETIC: dict[str, int] = {"users": 2000, "items": 1000, "events": 40000}

ZIPF_S = 1.0
P_SUCC = 0.5
P_STAY = 0.3
P_NEXT = 0.6
T0 = 1_600_000_000
START_SPAN = 180 * 86_400
MEAN_GAP = 86_400.0


@dataclass(frozen=True)
class Catalogue:
    """The planted item structure (arrays indexed by item number n of "i<n>").

    Attributes:
        topic: [N] topic of each item.
        succ: [N] the planted successor item.
        next_topic: [K] the topic ring.
        cum: [N] cumulative Zipf weights over items ordered by topic.
        order: [N] item numbers ordered by topic (positions of `cum`).
        lo: [K] cumulative weight before each topic's first item; hi: [K] after its last.

    """

    topic: np.ndarray
    succ: np.ndarray
    next_topic: np.ndarray
    cum: np.ndarray
    order: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def draw_in_topics(self, topics: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """[n] items, each drawn from its topic with the Zipf weights."""
        u = self.lo[topics] + rng.random(topics.size) * (self.hi[topics] - self.lo[topics])
        pos = np.searchsorted(self.cum, u, side="right")
        return self.order[np.minimum(pos, self.order.size - 1)]


def plant_catalogue(num_items: int, rng: np.random.Generator) -> Catalogue:
    """Steps 1-2 of the module docstring: popularity, topics, topic ring, successors."""
    k = int(np.clip(num_items // 50, 1, 200))
    weight = 1.0 / (rng.permutation(num_items) + 1.0) ** ZIPF_S
    topic = rng.permutation(np.arange(num_items) % k)
    ring = rng.permutation(k)
    next_topic = np.empty(k, dtype=np.int64)
    next_topic[ring] = np.roll(ring, -1)
    order = np.argsort(topic, kind="stable")
    cum = np.cumsum(weight[order])
    sizes = np.bincount(topic, minlength=k)
    ends = np.cumsum(sizes)
    hi = cum[ends - 1]
    lo = np.concatenate([[0.0], hi[:-1]])
    starts = ends - sizes
    target = next_topic[topic]
    succ = order[starts[target] + (rng.random(num_items) * sizes[target]).astype(np.int64)]
    return Catalogue(topic, succ, next_topic, cum, order, lo, hi)


def _lengths(num_users: int, num_events: int, rng: np.random.Generator) -> np.ndarray:
    base = 1 if num_events >= num_users else 0
    share = rng.lognormal(0.0, 0.75, num_users)
    return base + rng.multinomial(num_events - base * num_users, share / share.sum())


def _walk(cat: Catalogue, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """[E] items of every user, laid out user after user in `lengths` order (desc-sorted)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = np.empty(int(lengths.sum()), dtype=np.int64)
    active_by_step = np.searchsorted(-lengths, -np.arange(int(lengths.max(initial=0))), "left")
    cur = np.searchsorted(cat.cum, rng.random(lengths.size) * cat.cum[-1], side="right")
    cur = cat.order[np.minimum(cur, cat.order.size - 1)]
    for step, active in enumerate(active_by_step):
        cur = cur[:active]
        if step > 0:
            cur = _next_items(cat, cur, rng)
        out[offsets[:active] + step] = cur
    return out


def _next_items(cat: Catalogue, cur: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Step 4 of the module docstring for every active user at once."""
    t = cat.topic[cur]
    u = rng.random(cur.size)
    topics = np.where(u < P_STAY, t, cat.next_topic[t])
    jump = u >= P_STAY + P_NEXT
    topics[jump] = rng.integers(0, cat.next_topic.size, int(jump.sum()))
    drawn = cat.draw_in_topics(topics, rng)
    return np.where(rng.random(cur.size) < P_SUCC, cat.succ[cur], drawn)


def generate_events(num_users: int, num_items: int, num_events: int, seed: int) -> pl.DataFrame:
    """A synthetic log following the process of the module docstring.

    Args:
        num_users: U, users "u0".."u{U-1}" (all of them appear when E >= U).
        num_items: N, items "i0".."i{N-1}" (popular ones appear; the tail may not).
        num_events: E, exact number of rows.
        seed: Fixes the output.

    Returns:
        `user_id: str, item_id: str, timestamp: int64`, sorted by timestamp.

    """
    if num_users < 1 or num_items < 1 or num_events < 0:
        raise ValueError("need num_users >= 1, num_items >= 1, num_events >= 0")
    rng = np.random.default_rng(seed)
    cat = plant_catalogue(num_items, rng)
    lengths = _lengths(num_users, num_events, rng)
    by_len = np.argsort(-lengths, kind="stable")
    lengths = lengths[by_len]
    items = _walk(cat, lengths, rng)
    users = np.repeat(by_len, lengths)
    gaps = 1 + rng.exponential(MEAN_GAP, items.size).astype(np.int64)
    clock = np.cumsum(gaps)
    # Zero-length users (only when E < U) sit at the end; clamping keeps their index valid.
    first = np.minimum(np.concatenate([[0], np.cumsum(lengths)[:-1]]), max(items.size - 1, 0))
    start = T0 + rng.integers(0, START_SPAN, lengths.size)
    before = clock[first] - gaps[first] if items.size else np.zeros_like(start)
    stamp = np.repeat(start - before, lengths)
    frame = pl.DataFrame({"u": users, "i": items, "timestamp": stamp + clock})
    return frame.sort("timestamp", "u", maintain_order=True).select(
        pl.format("u{}", "u").alias("user_id"),
        pl.format("i{}", "i").alias("item_id"),
        pl.col("timestamp").cast(pl.Int64),
    )


def write_events(frame: pl.DataFrame, path: str) -> None:
    """Write a synthetic log as CSV or parquet, by the extension of `path`, atomically.

    A process killed mid-write leaves no truncated log behind (the demo is ingested from the
    file once it exists).
    """
    parquet = path.lower().endswith((".parquet", ".pq"))
    atomic_write(Path(path), frame.write_parquet if parquet else frame.write_csv)
