"""Shared machinery of Beygelzimer et al.'s online gradient boosting (NeurIPS 2015): weak learners
are online *linear* learners with outputs bounded by ``D``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from torch import Tensor, nn

from torchboost.boosters.base import Booster
from torchboost.learners import BoundedOutput, WeakLearners
from torchboost.losses import get_loss

__all__ = ["STANDARDIZED_BOUND", "LearnerObjective", "OnlineLinearBooster"]

LearnerObjective = Literal["linear", "greedy"]


#: The default bound ``D`` when regression labels are standardised (unit variance): three
#: standard deviations, where the papers' raw labels lie in ``[−1, 1]``.
STANDARDIZED_BOUND = 3.0


class OnlineLinearBooster(Booster):
    """Base of :class:`~torchboost.OGB` and :class:`~torchboost.ConvexHullOGB`.

    Each learner ``i`` is shown the linear loss ``(1/L) ∇ℓ(y^{i−1}) · A_i(x)`` (Alg. 1 line 13,
    Alg. 2 line 11), whose descent direction is ``−∇ℓ(y^{i−1})``; that direction is the learner's
    reported target. ``objective="greedy"`` instead fits ``−∇ℓ(y^{i−1})`` by squared error, the
    practical "fitting to actual loss functions" variant of Sec. 4.1.

    Args:
        bound: ``D``, the bound on ``‖A_i(x)‖``. Learners given as a factory or a list are wrapped
            in :class:`~torchboost.learners.BoundedOutput` (``D·tanh``) unless
            ``bound_outputs=False``; a ready :class:`WeakLearners` is used as it is. Default
            1 (the papers' labels in ``[−1, 1]``), or :data:`STANDARDIZED_BOUND` for a
            regression loss whose labels are standardised (``standardize=True``, the default).
        objective: ``"linear"`` (the paper's analysis) or ``"greedy"`` (Sec. 4.1).
    """

    chains_learners = False  # the learners are wrapped in BoundedOutput, not chained learners

    config_keys = ("bound", "objective")

    def __init__(self, learners: Any, loss: Any = "squared", *, bound: float | None = None,
                 objective: LearnerObjective = "linear", bound_outputs: bool = True,
                 **kwargs: Any) -> None:
        if bound is None:  # standardised labels have unit variance: cover three deviations
            scaled = kwargs.get("standardize", True) and not get_loss(loss).is_classifier
            bound = STANDARDIZED_BOUND if scaled else 1.0
        if not (isinstance(bound, int | float) and math.isfinite(bound) and bound > 0):
            raise ValueError(f"bound D must be a finite number > 0, got {bound!r}")
        if objective not in ("linear", "greedy"):
            raise ValueError(f"objective must be 'linear' or 'greedy', got {objective!r}")
        if bound_outputs and not isinstance(learners, WeakLearners):
            learners = _bounded(learners, bound)
        kwargs.setdefault("y0", 0.0)
        super().__init__(learners, loss, **kwargs)
        self.bound = float(bound)
        self.objective: LearnerObjective = objective

    @property
    def linear_scale(self) -> float:
        """The Lipschitz constant ``L`` dividing the learners' linear losses."""
        raise NotImplementedError

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """The descent direction ``−∇ℓ(y^{i−1})`` for every learner."""
        return -self.loss.gradient(partials[:-1], z)

    def learner_loss_grad(self, h: Tensor, targets: Tensor) -> Tensor:
        """Linear loss ``mean_b (1/L) ∇ℓ(y^{i−1}) · A_i(x_b)``; its gradient is ``−target/(LB)``."""
        if self.objective == "greedy":
            return super().learner_loss_grad(h, targets)
        return targets * (-1.0 / (self.linear_scale * h.shape[1]))


def _bounded(learners: Any, bound: float) -> Any:
    if callable(learners) and not isinstance(learners, nn.Module):
        return lambda: BoundedOutput(learners(), bound)
    if isinstance(learners, Sequence):
        return [BoundedOutput(m, bound) for m in learners]
    return learners
