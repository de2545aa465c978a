"""The base learner alone: one weak learner trained directly on the loss (no boosting)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from torchboost.boosters.base import Booster
from torchboost.boosters.default_lr import with_default_lr
from torchboost.boosters.state import adopt_unrecorded

__all__ = ["SingleLearner"]


class SingleLearner(Booster):
    """One weak learner ``h`` predicting ``y0 + h(x)`` and trained on ``mean_b ℓ(y0 + h(x_b))``.

    The "Base" column of the SGB paper's Table 1 and the base learner of the OGB paper's
    comparisons, with the same interface, input checks and compute units as the boosters, so
    curves share one x-axis: 3 units per example (one prediction, one update) times
    ``prediction_units``, the cost of one prediction of this learner in weak-learner predictions.
    A "wide" network with the parameter count of an ``N``-learner ensemble (e.g.
    ``TwoLayerNet(d, N·h)``) costs as much per example as ``N`` weak learners, so it is built with
    ``prediction_units=N`` and spends ``3N`` units per example, like the streaming boosters.
    Its learner's default learning rate is the boosters' rule
    (:mod:`~torchboost.boosters.default_lr`), so "boosting vs one learner" with defaults compares
    two methods, not two rates.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> base = SingleLearner(lambda: nn.Linear(3, 2), "softmax", n_outputs=2)
        >>> base.learn(torch.randn(4, 3), torch.tensor([0, 1, 1, 0])).shape
        torch.Size([4, 2])
        >>> base.units_per_example, SingleLearner(lambda: nn.Linear(3, 1),
        ...                                       prediction_units=8).units_per_example
        (3, 24)
    """

    chains_learners = False  # one learner: nothing to chain

    config_keys = ("prediction_units",)

    def __init__(self, learner: Any, loss: Any = "squared", *, prediction_units: int = 1,
                 **kwargs: Any) -> None:
        kwargs.setdefault("n_learners", 1)
        super().__init__(learner, loss, **with_default_lr(kwargs))
        if self.n_learners != 1:
            raise ValueError(f"SingleLearner has one learner, got {self.n_learners}")
        if isinstance(prediction_units, bool) or not (
                isinstance(prediction_units, int) and prediction_units >= 1):
            raise ValueError(f"prediction_units must be an int >= 1, got {prediction_units!r}")
        self.prediction_units = prediction_units

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any,
                              **kwargs: Any) -> None:
        adopt_unrecorded(state_dict, prefix, "prediction_units", self.prediction_units)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def units_per_example(self) -> int:
        """``3 × prediction_units``: one prediction and one update (2) of the learner, each
        costing ``prediction_units`` weak-learner predictions."""
        return super().units_per_example * self.prediction_units

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        return torch.cat([y0.unsqueeze(0), y0.unsqueeze(0) + h])

    def combination_weights(self, n_learners: int) -> Tensor:
        """``y0 + h``: the one learner's weight 1."""
        return torch.ones(n_learners)

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """The descent direction ``−∇ℓ(y0 + h(x))`` (reported in the diagnostics)."""
        return -self.loss.gradient(partials[1:], z)

    def learner_loss_grad(self, h: Tensor, targets: Tensor) -> Tensor:
        """Gradient of ``mean_b ℓ(y0 + h(x_b))`` with respect to ``h``: ``∇ℓ / B``."""
        return targets * (-1.0 / h.shape[1])
