"""Data-parallel streaming boosting: one booster replica per process, each global mini-batch split
across the processes, the replicas kept identical to a single-process run.

Every rank holds a full copy of the booster and learns on its contiguous shard of each global
mini-batch (:meth:`torchboost.data.DataStream.shard`). With a :class:`Synchronizer` installed by
:meth:`Booster.distribute <torchboost.boosters.base.Booster.distribute>`, one round on the shards
is one round on the global batch of ``B = Σ_r B_r`` examples:

* **learner gradients** — a learner's loss is a mean over the batch (SGB Alg. 1 line 12, OGB
  Alg. 1 line 13), so rank ``r`` back-propagates its shard mean times ``B_r / B`` and the
  parameter gradients are summed over the ranks, in one coalesced all-reduce, before any
  optimizer steps: every rank steps with the gradient of the global-batch mean, and since the
  optimizers start identical they stay identical;
* **algorithm state** updated from batch averages — OGB's σ step (Alg. 1 line 14), the running
  label statistic of ``y0="mean"``, the edge sums and diagnostics — is all-reduced before it is
  applied (:meth:`Booster.batch_mean <torchboost.boosters.base.Booster.batch_mean>`);
* **counters** — compute units (Hu et al. 2017, Sec. 6.2), samples and rounds advance by the
  global batch, so every rank holds the single-process counts and no unit is counted twice.

The result equals a single-process run over the same global batches up to floating-point
summation order. Under Lightning, :class:`~torchboost.lightning.StreamingBoosterModule` sets all
of this up itself when the trainer runs with more than one process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["ProcessGroupSync", "Synchronizer"]


class Synchronizer(ABC):
    """Sums tensors across the ``world_size`` replicas of a booster (every rank gets the sum).

    Subclasses implement :meth:`all_reduce_` for one contiguous tensor; :meth:`sum_` packs any
    number of tensors into one buffer per dtype and device, so a round costs one collective call
    per kind of buffer however many learners and parameters there are. Every rank must make the
    same calls with tensors of the same shapes, in the same order.

    Args:
        rank: this replica's index in ``0..world_size-1``.
        world_size: the number of replicas.
        device: where :meth:`total` puts its count (the device the collective runs on).
    """

    def __init__(self, rank: int, world_size: int, device: torch.device | str = "cpu") -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(device)

    @abstractmethod
    def all_reduce_(self, tensor: Tensor) -> None:
        """Replace the contiguous ``tensor`` by its sum over the ranks, in place."""

    @torch.no_grad()
    def sum_(self, tensors: Sequence[Tensor]) -> None:
        """Replace every tensor by its sum over the ranks, in place, one collective per
        ``(dtype, device)`` bucket."""
        buckets: dict[tuple[torch.dtype, torch.device], list[Tensor]] = {}
        for tensor in tensors:
            buckets.setdefault((tensor.dtype, tensor.device), []).append(tensor)
        for bucket in buckets.values():
            if len(bucket) == 1 and bucket[0].is_contiguous():
                self.all_reduce_(bucket[0])
                continue
            flat = torch.cat([tensor.reshape(-1) for tensor in bucket])
            self.all_reduce_(flat)
            for tensor, part in zip(bucket, flat.split([t.numel() for t in bucket]), strict=True):
                tensor.copy_(part.view_as(tensor))

    def total(self, count: int) -> int:
        """``count`` summed over the ranks (e.g. the global batch size from the local one)."""
        value = torch.tensor([count], dtype=torch.int64, device=self.device)
        self.all_reduce_(value)
        return int(value.item())


class ProcessGroupSync(Synchronizer):
    """A :class:`Synchronizer` over a ``torch.distributed`` process group (``gloo`` on CPUs,
    ``nccl`` on GPUs), which must already be initialised (Lightning, ``torchrun`` and ``srun``
    launches do it; otherwise call ``torch.distributed.init_process_group``).

    Args:
        device: where the tensors to reduce live; default ``cuda:<current device>`` for an
            ``nccl`` group and the CPU otherwise.
        group: the process group; default the global (``WORLD``) group.
    """

    def __init__(self, device: torch.device | str | None = None,
                 group: dist.ProcessGroup | None = None) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: launch with torchrun, srun "
                               "or Lightning's DDP strategy, or call init_process_group first")
        if device is None:
            device = (torch.device("cuda", torch.cuda.current_device())
                      if dist.get_backend(group) == "nccl" else torch.device("cpu"))
        super().__init__(dist.get_rank(group), dist.get_world_size(group), device)
        self.group = group

    def all_reduce_(self, tensor: Tensor) -> None:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group)
