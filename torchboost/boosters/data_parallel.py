"""Data-parallel plumbing of a booster (:class:`DataParallel`, a base of
:class:`~torchboost.boosters.base.Booster`): joining replicas, batch means over the global
batch, and the round's input checks agreed across replicas (:mod:`torchboost.distributed`)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from torchboost.distributed import Synchronizer

__all__ = ["DataParallel"]


class DataParallel:
    """A booster's data-parallel side (module docstring)."""

    #: whether data-parallel replicas stay in step (:meth:`distribute`): not when the round
    #: updates state from the local shard alone (StagewiseGB, the multiclass boosters)
    supports_distributed = True

    def batch_mean(self, values: Tensor) -> Tensor:
        """Mean of ``values (..., B)`` over the round's batch; when distributed, over the global
        batch (the shard sums are all-reduced), the same on every rank."""
        if self.sync is None:
            return values.mean(-1)
        total = values.sum(-1)
        self.sync.sum_([total])
        return total / self._round_size

    def distribute(self, sync: Synchronizer | None) -> None:
        """Train as one of ``sync.world_size`` data-parallel replicas, each :meth:`learn` call
        getting this rank's shard of a global batch (see :mod:`torchboost.distributed`);
        ``None`` goes back to training alone. Every replica must start from the same state.

        Raises ``ValueError`` for a booster whose round updates state from the local shard alone
        (:class:`~torchboost.StagewiseGB`, the multiclass boosters) and for learners
        with BatchNorm running statistics (updated from each rank's shard alone).
        """
        if sync is not None:
            if not self.supports_distributed:
                raise ValueError(f"{type(self).__name__} runs its own round (its per-round state "
                                 "is not synchronised across processes); data-parallel training "
                                 "needs a booster whose class sets supports_distributed = True "
                                 "(SGB and its variants, OGB, ConvexHullOGB, ResidualSGB and "
                                 "SingleLearner among the library's)")
            if any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
                   for m in self.learners.modules()):
                raise ValueError("weak learners with BatchNorm running statistics would update "
                                 "them from each rank's shard alone; use "
                                 "track_running_stats=False to train data-parallel")
            reasons = {reason for m in self.learners.modules()
                       if (reason := getattr(m, "loop_only_reason", None))}
            if reasons:
                raise ValueError("weak learners that keep their own per-round state cannot be "
                                 "synchronised across processes: " + "; ".join(sorted(reasons)))
        self.sync = sync

    def _checked_round_input(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Checked features and encoded labels of a round, and its (global) batch size in
        ``_round_size``. Distributed, one all-reduce carries the shard sizes and whether any
        replica's shard failed the checks, so that every replica raises together (a replica
        left alone in the next collective would hang or pair with the wrong round)."""
        try:
            x = self._check_features(x)
            z = self._check_labels(y, x.shape[0])
        except ValueError:
            if self.sync is not None:
                self.sync.sum_([torch.tensor([0, 1], dtype=torch.int64, device=self.sync.device)])
            raise
        if self.sync is None:
            self._set_plain(_round_size=x.shape[0])
            return x, z
        counts = torch.tensor([x.shape[0], 0], dtype=torch.int64, device=self.sync.device)
        self.sync.sum_([counts])
        size, rejected = counts.tolist()
        if rejected:
            raise ValueError(f"{rejected} other replica(s) rejected their shard of this batch "
                             "(see the error on those ranks); the round was skipped everywhere")
        self._round_size = size
        return x, z
