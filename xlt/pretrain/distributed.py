"""torchrun set-up: the same code runs as one process (CPU or GPU) or under torchrun.

Single process::

    xlt pretrain --run-dir runs/en-fr ...

One node, 8 GPUs::

    torchrun --nproc_per_node 8 -m xlt pretrain --run-dir runs/en-fr ...

Two nodes (the same command on each; the rendezvous numbers the nodes, so rank 0 may be on either)::

    torchrun --nnodes 2 --nproc_per_node 8 \\
        --rdzv_backend c10d --rdzv_endpoint HOST0:29500 -m xlt pretrain --run-dir /shared/runs/en-fr ...
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar

import torch
import torch.distributed as dist

from xlt.utils.errors import EXIT_USAGE, XltError

T = TypeVar("T")


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup() -> Dist:
    """Read torchrun's environment; start the process group (NCCL on GPUs, gloo on CPU)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available() and os.environ.get("XLT_DEVICE", "") != "cpu":
        if local_rank >= torch.cuda.device_count():
            raise XltError(f"process {local_rank} of this node has no GPU of its own ({torch.cuda.device_count()} "
                           f"visible): give torchrun --nproc_per_node at most that many, or XLT_DEVICE=cpu")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Dist(rank, world_size, local_rank, device)


def teardown(d: Dist) -> None:
    """Destroy the process group once nothing uses it any more.

    A DistributedDataParallel wrapper holds the group through its reducer and sits in reference
    cycles, so it can outlive the trainer that made it. Destroying the group under a live wrapper let
    gloo's threads be torn down at interpreter exit, and about one two-process run in twenty died
    there with SIGABRT ("terminate called without an active exception") after finishing its work
    (torch 2.13, CPU). Collecting the cycles first frees the wrapper while the group is whole.
    """
    if d.enabled and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def any_rank(d: Dist, *flags: bool) -> tuple[bool, ...]:
    """Each flag True on every rank when it is True on at least one (so that all ranks take the same
    branch); several flags cost one all-reduce."""
    if not d.enabled:
        return flags
    t = torch.tensor([float(f) for f in flags], device=d.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(bool(v) for v in t.tolist())


def mean_over_ranks(d: Dist, value: float) -> float:
    """The mean of a number over the ranks (every rank calls it, at the same place)."""
    if not d.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=d.device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item()) / d.world_size


def barrier(d: Dist) -> None:
    if d.enabled:
        dist.barrier()


def broadcast_object(d: Dist, obj: Any) -> Any:
    """Rank 0's value on every rank."""
    if not d.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class RankZeroError(XltError):
    """Rank 0's failure as the other ranks raise it: rank 0 prints the line (or its traceback), they
    exit quietly with its status."""

    quiet = True

    def __init__(self, message: str, path: Optional[str], line: Optional[int], exit_status: int):
        super().__init__(message, path, line)
        self.exit_status = exit_status


def on_main(d: Dist, work: Callable[[], T]) -> T:
    """``work()`` on rank 0 alone, its result on every rank. Whatever it raises stops every rank: the
    others would otherwise wait in their next collective for a rank that has exited, and print gloo's
    "connection closed" traceback (NCCL: wait for its timeout). Rank 0 raises its own exception."""
    result, failure = None, None
    if d.is_main:
        try:
            result = work()
        except BaseException as e:
            if not d.enabled:
                raise
            failure, error = ((e.message, e.path, e.line, getattr(e, "exit_status", EXIT_USAGE))
                              if isinstance(e, XltError) else ("rank 0 failed", None, None, 1)), e
    result, failure = broadcast_object(d, (result, failure))
    if failure is not None:
        if d.is_main:
            raise error
        raise RankZeroError(*failure)
    return result


def gather_objects(d: Dist, obj: Any) -> list[Any]:
    """Every rank's value, in rank order, on every rank."""
    if not d.enabled:
        return [obj]
    out: list[Any] = [None] * d.world_size
    dist.all_gather_object(out, obj)
    return out
