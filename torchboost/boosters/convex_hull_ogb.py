"""Online Gradient Boosting for the convex hull CH(F) (Beygelzimer et al., NeurIPS 2015, Alg. 2)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from torchboost.boosters.online_linear import OnlineLinearBooster

__all__ = ["ConvexHullOGB"]


class ConvexHullOGB(OnlineLinearBooster):
    """Frank-Wolfe online boosting, Alg. 2 of Beygelzimer et al. (2015).

    Prediction (lines 4–8): ``y^0 = 0``, ``y^i = (1 − η_i) y^{i−1} + η_i A_i(x)`` with
    ``η_i = 2/(i + 1)``, predict ``y^N`` — a convex combination of the learners' outputs.
    Update (lines 10–12): with ``objective="linear"`` learner ``i`` receives
    ``(1/L_D) ∇ℓ(y^{i−1}) · y``; by default it fits the loss itself at its own update,
    ``ℓ((1 − η_i) y^{i−1} + η_i A_i(x))`` (Sec. 4.1, :class:`OnlineLinearBooster`).

    Args: see :class:`OnlineLinearBooster` (``bound`` is ``D``).
    """

    def __init__(self, learners: Any, loss: Any = "squared", **kwargs: Any) -> None:
        super().__init__(learners, loss, **kwargs)
        index = torch.arange(1, self.n_learners + 1, dtype=torch.get_default_dtype())
        self.register_buffer("steps", 2.0 / (index + 1.0))

    def _stall_remedy(self) -> str:
        return ("the number of learners (n_learners; ConvexHullOGB's steps η_i = 2/(i + 1) are "
                "fixed), or use OGB or SGB for many learners, or lower the learning rate")

    @property
    def linear_scale(self) -> float:
        return self.loss.lipschitz(self.bound)

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Alg. 2 line 6: ``y^i = (1 − η_i) y^{i−1} + η_i A_i(x)``."""
        sums = [y0]
        for i in range(h.shape[0]):
            eta = self.steps[i].to(h.dtype)
            sums.append((1.0 - eta) * sums[-1] + eta * h[i])
        return torch.stack(sums)

    def greedy_steps(self, like: Tensor) -> Tensor:
        """``α_i = η_i`` (line 6)."""
        return self.steps.to(like.dtype).view(-1, 1, 1)

    def greedy_offsets(self, previous: Tensor) -> Tensor:
        """``y′_i = (1 − η_i) y^{i−1}`` (line 6)."""
        return (1.0 - self.greedy_steps(previous)) * previous
