"""Follow-the-Leader root values: LocAdaBoost's variant used in the paper's experiments.

Appendix F of Liautaud et al.: "instead of the grid search over root values Γ, we employ a Follow
the Leader (or best expert) strategy", which for the squared loss brings the regret of learning
the roots from ``O(B√T)`` down to ``O(B log T)`` (Cesa-Bianchi & Lugosi 2006, Ch. 3.2). The root of
the tree of core node ``n`` then plays ``argmin_c Σ_{s<t, x_s ∈ X_n} ℓ_s(c)``, clipped to
``[−B, B]``: the running mean of the labels seen in ``X_n`` for the squared loss. For other losses
the minimiser is taken from the running mean of the loss's target statistic
(:meth:`~torchboost.losses.Loss.best_constant`): exact for the squared and logistic losses, and
the mean as a streaming stand-in for the median of the absolute loss. A node that has seen no data
inherits the leader of its closest ancestor that has (0, the ``θ_{root,1}`` of Theorem 1, before
any data at all).
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchboost.chaining.lazy_table import LazyTable, sum_by_key
from torchboost.losses import Loss

__all__ = ["FollowTheLeaderRoots"]


class FollowTheLeaderRoots(LazyTable):
    """Per-node Follow-the-Leader constants, stored for the nodes that have seen data.

    Args:
        loss: the single-output loss whose best constant is followed.
        bound: ``B``; the leader is clipped to ``[−B, B]``.

    Examples:
        >>> import torch
        >>> from torchboost.losses import get_loss
        >>> leaders = FollowTheLeaderRoots(get_loss("squared"), bound=8.0)
        >>> labels = torch.tensor([[1.0], [3.0], [20.0]])
        >>> leaders.add(torch.tensor([0, 0, 1]), labels, torch.ones(3))
        >>> leaders.path_values(torch.tensor([[0, 1, 3], [0, 2, 5], [4, 6, 7]])).tolist()
        [[2.0, 8.0, 8.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    """

    def __init__(self, loss: Loss, bound: float) -> None:
        super().__init__(["statistic_sum", "weight_sum"])
        self.loss = loss
        self.bound = float(bound)

    def path_values(self, keys: Tensor) -> Tensor:
        """Leaders of the nodes of paths ``keys`` (``(B, L)``, root first). A node without data
        takes the leader of its deepest ancestor with data (the argmin over no rounds is any
        constant; this one is the best guess so far for its cell), and 0 if there is none."""
        rows = self.find(keys)
        state = self.data[rows.clamp_min(0)]
        mean = state[..., 0] / state[..., 1].clamp_min(1e-300)
        leader = self.loss.best_constant(mean[..., None])[..., 0].clamp(-self.bound, self.bound)
        seen = rows >= 0
        level = torch.arange(keys.shape[1], device=keys.device).expand_as(keys)
        source = torch.where(seen, level, -1).cummax(1).values
        inherited = leader.gather(1, source.clamp_min(0))
        return torch.where(source >= 0, inherited, 0.0)

    def add(self, keys: Tensor, labels: Tensor, weights: Tensor, distinct: bool = False) -> None:
        """Add the encoded labels ``(M, 1)`` of nodes ``keys`` (``(M,)``; they may repeat unless
        ``distinct``) with per-point weights ``(M,)`` (``1/B_s`` for a round of ``B_s`` points)."""
        statistic = self.loss.target_statistic(labels, 1)[:, 0].to(self.data.dtype)
        weights = weights.to(self.data.dtype)
        values = torch.stack([weights * statistic, weights], 1)
        if not distinct:
            keys, values, _ = sum_by_key(keys, values)
        rows, _ = self.find_or_insert(keys)
        self.data[rows] += values

    def extra_repr(self) -> str:
        return f"loss={self.loss.name}, B={self.bound}, nodes={len(self)}"
