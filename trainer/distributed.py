"""Data parallelism under torchrun: gloo on CPU, NCCL on GPU; a no-op in a single process.

Every rank holds the same global batch (rank 0 reads it and broadcasts it), computes advantages
on all of it, and backpropagates only its own shard with the loss already divided by the global
token count; summing gradients across ranks then gives exactly the full-batch gradient.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

__all__ = ["DistContext", "init_distributed"]

T = TypeVar("T")


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world: int = 1
    device: str = "cpu"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: list[T]) -> list[T]:
        """This rank's contiguous share of ``items`` (ranks differ by at most one item)."""
        per, extra = divmod(len(items), self.world)
        start = self.rank * per + min(self.rank, extra)
        return items[start : start + per + (1 if self.rank < extra else 0)]

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if self.world == 1:
            return obj
        box: list[Any] = [obj]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Sum gradients over ranks in one flat buffer (a parameter without a gradient adds 0)."""
        if self.world == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])  # (sum of numels,)
        torch.distributed.all_reduce(flat)
        offset = 0
        for p, g in zip(params, grads, strict=False):
            p.grad = flat[offset : offset + g.numel()].view_as(g).clone()
            offset += g.numel()

    def sum_scalar(self, value: float) -> float:
        if self.world == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(tensor)
        return float(tensor.item())

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()


def init_distributed() -> DistContext:
    """The torchrun process group if launched under torchrun, else a single-process context."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistContext(device="cuda" if torch.cuda.is_available() else "cpu")
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        backend, device = "nccl", f"cuda:{local}"
    else:
        backend, device = "gloo", "cpu"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend)
    return DistContext(rank=rank, world=world, device=device)
