"""The ranks of a data-parallel training (Lightning's DDP strategies over torch.distributed).

`recsys train --devices N` has Lightning start N processes (or torchrun / a cluster manager
starts them): every process runs the same command. Rank 0 owns the home - the lock, the
ingest, the run's files, the bundle and its publication - and the other ranks only train.
Parameters stay identical on every rank (DDP averages the gradients); what else must stay
identical goes through the helpers here: the rows a step changed (so the samplers' trees apply
the same updates), the fraction of training done (so the lr schedule and TAPAS's temperature
agree), and the validation ranks (so every rank logs the same metrics and early stopping
agrees). Outside a process group every helper is the identity of a single process.
"""

from __future__ import annotations

import math
import os

import torch
import torch.distributed as dist
from torch import Tensor

from data.errors import RecsysInputError

# Set by the launcher of each process: Lightning (LOCAL_RANK, NODE_RANK), torchrun (RANK,
# LOCAL_RANK, GROUP_RANK), SLURM (SLURM_PROCID). Any non-zero one marks a secondary rank.
RANK_ENV = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID")
# The run id chosen by rank 0, for the ranks Lightning starts later (they copy its environment).
RUN_VERSION_ENV = "RECSYS_RUN_VERSION"


def launched_as_secondary() -> bool:
    """True in a process its launcher started as a rank other than 0 (known before any group)."""
    return any(os.environ.get(key, "0") not in ("", "0") for key in RANK_ENV)


def planned_rank_and_world(devices: int, num_nodes: int) -> tuple[int, int]:
    """(rank, world size) of this process as its launcher planned them, before any group exists.

    torchrun sets RANK and WORLD_SIZE, SLURM SLURM_PROCID and SLURM_NTASKS; the ranks Lightning
    starts have NODE_RANK and LOCAL_RANK (rank node * devices + local), and rank 0 nothing yet.
    """
    env = os.environ
    world = int(env.get("WORLD_SIZE") or env.get("SLURM_NTASKS") or devices * num_nodes)
    if env.get("RANK"):
        rank = int(env["RANK"])
    elif env.get("SLURM_PROCID"):
        rank = int(env["SLURM_PROCID"])
    else:
        rank = int(env.get("NODE_RANK") or 0) * devices + int(env.get("LOCAL_RANK") or 0)
    if not 0 <= rank < world:
        raise RecsysInputError(f"rank {rank} is outside a world of {world} processes")
    return rank, world


def require_one_process(devices: int, num_nodes: int, command: str) -> None:
    """Refuse a data-parallel config for a command that runs in one process.

    Raises:
        RecsysInputError: `devices` or `num_nodes` above 1.

    """
    if devices * num_nodes > 1:
        raise RecsysInputError(
            f"recsys {command} runs in one process: set train.devices and train.num_nodes to 1 "
            "(recsys train takes --devices / --num-nodes)"
        )


def active() -> bool:
    """True inside a process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank_and_world() -> tuple[int, int]:
    """The rank of the process and the number of processes; (0, 1) outside a process group."""
    if not active():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


@torch.no_grad()
def gather_rows(rows: Tensor) -> Tensor:
    """Every rank's `rows [k_r, ...]` concatenated in rank order: `[sum k_r, ...]`.

    The ranks may hold different numbers of rows (padded to the largest for the collective).
    No gradient flows through the result.
    """
    if not active():
        return rows
    sizes = [
        torch.zeros(1, dtype=torch.int64, device=rows.device) for _ in range(dist.get_world_size())
    ]
    dist.all_gather(sizes, torch.tensor([rows.shape[0]], device=rows.device))
    longest = int(max(int(s) for s in sizes))
    padded = rows.new_zeros((longest, *rows.shape[1:]))
    padded[: rows.shape[0]] = rows
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([part[: int(size)] for part, size in zip(parts, sizes, strict=True)])


@torch.no_grad()
def rows_of_rank_zero(rows: Tensor) -> Tensor:
    """Rank 0's `rows [k, ...]` on every rank (the others' `rows` give only dtype and width)."""
    if not active():
        return rows
    size = torch.tensor([rows.shape[0]], dtype=torch.int64, device=rows.device)
    dist.broadcast(size, src=0)
    if dist.get_rank() == 0:
        held = rows.contiguous()
    else:
        held = rows.new_empty((int(size), *rows.shape[1:]))
    dist.broadcast(held, src=0)
    return held


def gather_union(ids: Tensor) -> Tensor:
    """The sorted distinct ids `[k]` that any rank holds in `ids`."""
    return gather_rows(ids.reshape(-1)).unique()


def _reduced(count: int, op: str, device: torch.device | str) -> int:
    """`count` reduced over the ranks by `op` ("SUM" or "MAX"); itself outside a group."""
    if not active():
        return count
    value = torch.tensor([count], dtype=torch.int64, device=device)
    dist.all_reduce(value, op=getattr(dist.ReduceOp, op))
    return int(value)


def total(count: int, device: torch.device | str = "cpu") -> int:
    """The sum of `count` over the ranks."""
    return _reduced(count, "SUM", device)


def largest(count: int, device: torch.device | str = "cpu") -> int:
    """The largest `count` of the ranks."""
    return _reduced(count, "MAX", device)


def smallest(count: int, device: torch.device | str = "cpu") -> int:
    """The smallest `count` of the ranks."""
    return -largest(-count, device)


def share_weight(count: int, device: torch.device | str = "cpu") -> float:
    """The weight of this rank's mean loss over its `count` targets (1 for one process).

    DDP averages the ranks' gradients; weighed by count * world / (every rank's count), the
    average is the gradient of the mean over the whole batch's targets, as one process
    computes it, however unevenly the targets fall on the ranks.
    """
    if not active():
        return 1.0
    return count * dist.get_world_size() / total(count, device)


def average(value: Tensor) -> Tensor:
    """The mean of a scalar `value` over the ranks (no gradient)."""
    if not active():
        return value
    held = value.detach().clone()
    dist.all_reduce(held)
    return held / dist.get_world_size()


def from_rank_zero(value: float, device: torch.device | str = "cpu") -> float:
    """Rank 0's `value` on every rank (float64)."""
    if not active():
        return value
    held = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(held, src=0)
    return float(held)


def check_same(
    value: float, what: str, rel: float = 1e-6, device: torch.device | str = "cpu"
) -> None:
    """Raise when the ranks disagree on `value` by more than `rel` (relative to the largest).

    Raises:
        RuntimeError: naming `what` and every rank's value (the state has drifted).

    """
    if not active():
        return
    values = gather_rows(torch.tensor([value], dtype=torch.float64, device=device)).tolist()
    scale = max(max(abs(v) for v in values), 1e-30)
    if not all(math.isfinite(v) for v in values) or max(values) - min(values) > rel * scale:
        raise RuntimeError(f"{what} differs across ranks: {values}")
