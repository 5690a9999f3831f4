"""DuoRec's supervised contrastive term (Qiu et al., WSDM 2022), added to the training loss.

DuoRec regularises a sequence model's queries with a second view of each training sequence: a
sequence from the training data whose next item (target) is the same, encoded with its own
dropout. A batch of N queries and their N partners' queries gives 2N views; each view's
positive is its pair, and the other 2N - 2 views of the batch are its negatives, scored by dot
products over a temperature, as InfoNCE. The training loss becomes the recommendation loss plus
`loss.contrastive_weight` times this term. The partners are drawn by
`training.loop.examples.SameTarget`; their windows, of any length, are encoded a few at a time
in order of length (`encode_by_length`), so a short window is not padded to the batch's longest.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional

from model.towers.base import QueryTowerBase

CHUNK = 32  # partner windows encoded at once


def info_nce(queries: Tensor, partners: Tensor, temperature: float) -> Tensor:
    """Mean InfoNCE loss of the 2N views `queries [N, d]` and `partners [N, d]`.

    View i's positive is view i + N (and the other way round); a view is never its own negative.
    """
    if queries.shape != partners.shape:
        raise ValueError(f"{tuple(queries.shape)} queries, {tuple(partners.shape)} partners")
    views = torch.cat([queries, partners]).float()  # [2N, d]
    n = queries.shape[0]
    logits = views @ views.T / temperature  # [2N, 2N]
    itself = torch.eye(2 * n, dtype=torch.bool, device=views.device)
    logits = logits.masked_fill(itself, float("-inf"))
    pairs = torch.arange(2 * n, device=views.device)
    return functional.cross_entropy(logits, (pairs + n) % (2 * n))


def encode_by_length(tower: QueryTowerBase, inputs: Tensor, chunk: int = CHUNK) -> Tensor:
    """`tower.encode(inputs [B, L])` `[B, d]`, computed `chunk` windows at a time, shortest first.

    Each chunk is cut to its longest window's items (the towers encode a window alike whatever
    padding precedes it), so the padding of a short window is not encoded.
    """
    lengths = (inputs != 0).sum(dim=1)
    order = lengths.argsort()
    parts = []
    for rows in order.split(chunk):
        width = max(int(lengths[rows[-1]]), 1)  # sorted: the chunk's last is its longest
        parts.append(tower.encode(inputs[rows, -width:]))
    return torch.cat(parts)[order.argsort()]
