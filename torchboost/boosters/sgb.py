"""Streaming Gradient Boosting for smooth losses (Hu et al., AISTATS 2017, Alg. 1)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from torchboost.boosters.base import Booster

__all__ = ["SGB"]


class SGB(Booster):
    """Streaming Gradient Boosting, Alg. 1 of Hu et al. (2017).

    Prediction (lines 4–8): ``y^0 = y0``, ``y^i = y^{i−1} − η h_i(x)``, predict ``y^N``.
    Update (lines 10–13): learner ``i`` takes one optimizer step on ``‖∇ℓ(y^{i−1}) − h_i(x)‖²`` —
    the gradient at the *previous* partial sum is its regression target.

    Args:
        step: the step ``η``. Default: Thm. 5.1's ``η = γ / (β(8 − 4γ))`` with edge ``γ = 1``,
            i.e. ``1 / (4β)`` for the loss's smoothness ``β`` (0.25 for squared loss, 1 for
            logistic, 0.5 for softmax).
        Other arguments: see :class:`~torchboost.boosters.base.Booster`.

    At test time the paper's experiments use the final learners ``h_i^T`` (Sec. 6.2), as here.

    Example:
        >>> import torch
        >>> from torch import nn
        >>> _ = torch.manual_seed(0)
        >>> booster = SGB(lambda: nn.Linear(2, 1), n_learners=3, loss="squared", step=0.5)
        >>> x, y = torch.randn(16, 2), torch.randn(16)
        >>> booster.learn(x, y).shape, booster.compute_units
        (torch.Size([16, 1]), 144)
    """

    def __init__(self, learners: Any, loss: Any = "squared", *, step: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(learners, loss, **kwargs)
        if step is None:
            if not math.isfinite(self.loss.smoothness):
                raise ValueError(f"{self.loss.name} loss is not smooth; pass step= explicitly or "
                                 "use ResidualSGB (Alg. 2) for non-smooth losses")
            step = 1.0 / (4.0 * self.loss.smoothness)
        if not step > 0:
            raise ValueError(f"step must be > 0, got {step}")
        self.step = float(step)

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Alg. 1 line 6 for all i at once: ``y^i = y0 − η Σ_{j≤i} h_j``."""
        sums = y0.unsqueeze(0) - self.step * h.cumsum(0)
        return torch.cat([y0.unsqueeze(0), sums], dim=0)

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Alg. 1 line 11: ``∇ℓ(y^{i−1})``."""
        return self.loss.gradient(partials[:-1], z)
