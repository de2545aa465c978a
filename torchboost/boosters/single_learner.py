"""The base learner alone: one weak learner trained directly on the loss (no boosting)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from torchboost.boosters.base import Booster

__all__ = ["SingleLearner"]


class SingleLearner(Booster):
    """One weak learner ``h`` predicting ``y0 + h(x)`` and trained on ``mean_b ℓ(y0 + h(x_b))``.

    The "Base" column of the SGB paper's Table 1 and the base learner of the OGB paper's
    comparisons, with the same interface, input checks and compute units (3 per example) as the
    boosters, so curves share one x-axis.

    Example:
        >>> import torch
        >>> from torch import nn
        >>> base = SingleLearner(lambda: nn.Linear(3, 2), "softmax", n_outputs=2)
        >>> base.learn(torch.randn(4, 3), torch.tensor([0, 1, 1, 0])).shape
        torch.Size([4, 2])
    """

    def __init__(self, learner: Any, loss: Any = "squared", **kwargs: Any) -> None:
        kwargs.setdefault("n_learners", 1)
        super().__init__(learner, loss, **kwargs)
        if self.n_learners != 1:
            raise ValueError(f"SingleLearner has one learner, got {self.n_learners}")

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        return torch.cat([y0.unsqueeze(0), y0.unsqueeze(0) + h])

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """The descent direction ``−∇ℓ(y0 + h(x))`` (reported in the diagnostics)."""
        return -self.loss.gradient(partials[1:], z)

    def learner_loss_grad(self, h: Tensor, targets: Tensor) -> Tensor:
        """Gradient of ``mean_b ℓ(y0 + h(x_b))`` with respect to ``h``: ``∇ℓ / B``."""
        return targets * (-1.0 / h.shape[1])
