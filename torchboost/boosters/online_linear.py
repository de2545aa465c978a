"""Shared machinery of Beygelzimer et al.'s online gradient boosting (NeurIPS 2015): weak learners
with outputs bounded by ``D``, shown the linear losses of the analysis or (the default) the loss
itself at an offset (Sec. 4.1)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from torch import Tensor, nn

from torchboost.boosters.base import Booster
from torchboost.learners import BoundedOutput, WeakLearners
from torchboost.losses import get_loss
from torchboost.params import flag

__all__ = ["STANDARDIZED_BOUND", "LearnerObjective", "OnlineLinearBooster"]

LearnerObjective = Literal["linear", "greedy"]


#: The default bound ``D`` when regression labels are standardised (unit variance): three
#: standard deviations, where the papers' raw labels lie in ``[−1, 1]``.
STANDARDIZED_BOUND = 3.0


class OnlineLinearBooster(Booster):
    """Base of :class:`~torchboost.OGB` and :class:`~torchboost.ConvexHullOGB`.

    With ``objective="linear"`` each learner ``i`` is shown the linear loss
    ``(1/L) ∇ℓ(y^{i−1}) · A_i(x)`` (Alg. 1 line 13, Alg. 2 line 11), whose descent direction is
    ``−∇ℓ(y^{i−1})``; that direction is the learner's reported target. ``objective="greedy"``
    (the default) is Sec. 4.1's "fitting to actual loss functions": learner ``i`` receives an
    offset ``y′_i`` and a step ``α_i`` fixed in advance (:meth:`greedy_offsets`,
    :meth:`greedy_steps`) and suffers the loss itself, ``ℓ(y′_i + α_i A_i(x))``, whose gradient
    with respect to its output is ``α_i ∇ℓ(y′_i + α_i A_i(x))``. Its reported target is
    ``A_i(x) − ∇ℓ(y′_i + α_i A_i(x)) / α_i``, for the squared loss the minimiser
    ``(z − y′_i) / α_i`` (for other losses it moves with the output, so the edges measure a
    moving target). The learner's loss is ``ℓ`` itself (``½‖·‖²`` for the squared loss), where
    SGB's learners minimise ``‖target − h‖²``: with plain SGD the same rate moves them half as
    far. The paper leaves the offsets and steps to its supplementary Sec. C.1, which is not in
    the text we have: :class:`OGB` fits the loss at ``y^{i−1}`` with ``α = 1`` (Friedman's greedy
    fitting, the booster adds ``η`` of it), :class:`ConvexHullOGB` at its own update,
    ``y′_i = (1 − η_i) y^{i−1}`` and ``α_i = η_i`` (a convex combination needs each learner to
    predict the label itself).

    Args:
        bound: ``D``, the bound on ``‖A_i(x)‖``. Learners given as a factory or a list are wrapped
            in :class:`~torchboost.learners.BoundedOutput` (``D·tanh``) unless
            ``bound_outputs=False``; a ready :class:`WeakLearners` is used as it is. Default
            1 (the papers' labels in ``[−1, 1]``), or :data:`STANDARDIZED_BOUND` for a
            regression loss whose labels are standardised (``standardized_labels``).
        standardized_labels: whether the regression labels are in standard deviations, which
            sets the default ``bound`` and when OGB warns that labels exceed its radius. Default:
            whether the booster standardises them itself (``standardize=True``, the default,
            and a regression loss); pass ``True`` with ``standardize=False`` for labels you
            standardised beforehand.
        objective: ``"greedy"`` (Sec. 4.1; the default) or ``"linear"`` (the analysis of
            Alg. 1 and 2). With linear losses, 8 two-layer learners at the default rule did worse
            than the best constant on 5 of 6 of the repository's streams (MNIST left out; OGB or
            ConvexHullOGB), and at Adam's best tuned rate or cosine stayed 1.2-23x behind greedy
            fitting on every regression stream; with 8 or 32 learners greedy fitting never did
            worse than the constant, and with 8 it ended within 25 % of SGB (``python
            experiments/ogb_defaults.py``; docs "Defaults").
    """

    chains_learners = False  # the learners are wrapped in BoundedOutput, not chained learners
    #: whether ``objective`` was left to the default (boosters pickled before the flag: no)
    _objective_was_default = False
    #: whether the labels are in standard deviations (boosters pickled before the flag:
    #: ``None``, read as whether the booster standardises, :meth:`_labels_in_deviations`)
    standardized_labels: bool | None = None

    config_keys = ("bound", "objective")
    rule_attributes = ("objective",)  # the linear losses of the default before, adopted (below)

    def __init__(self, learners: Any, loss: Any = "squared", *, bound: float | None = None,
                 objective: LearnerObjective | None = None, bound_outputs: bool = True,
                 standardized_labels: bool | None = None, **kwargs: Any) -> None:
        regression = not get_loss(loss).is_classifier
        own = kwargs.get("standardize", True) is True and regression  # the booster's own
        if standardized_labels is None:
            standardized_labels = own
        elif flag("standardized_labels", standardized_labels) and not regression:
            raise ValueError("standardized_labels=True needs a regression loss: a classifier's "
                             "labels are classes, never standardised")
        elif own and not standardized_labels:
            raise ValueError("standardized_labels=False contradicts standardize=True: the "
                             "booster standardises regression labels itself")
        if bound is None:  # standardised labels have unit variance: cover three deviations
            bound = STANDARDIZED_BOUND if standardized_labels else 1.0
        if not (isinstance(bound, int | float) and math.isfinite(bound) and bound > 0):
            raise ValueError(f"bound D must be a finite number > 0, got {bound!r}")
        chosen = objective is not None
        objective = objective if chosen else "greedy"
        if objective not in ("linear", "greedy"):
            raise ValueError(f"objective must be 'linear' or 'greedy', got {objective!r}")
        if bound_outputs and not isinstance(learners, WeakLearners):
            learners = _bounded(learners, bound)
        kwargs.setdefault("y0", 0.0)
        super().__init__(learners, loss, **kwargs)
        self.bound = float(bound)
        self.objective: LearnerObjective = objective
        self._objective_was_default = not chosen
        self.standardized_labels = standardized_labels

    def _labels_in_deviations(self) -> bool:
        """Whether the regression labels are in standard deviations (``standardized_labels``;
        a booster pickled before that flag: whether it standardises them itself)."""
        if self.standardized_labels is None:
            return self.standardizer is not None and not self.loss.is_classifier
        return self.standardized_labels

    def config(self) -> dict[str, Any]:
        """:meth:`Booster.config`, and with ``objective="greedy"`` what its learners fit: a
        state saved when ``"greedy"`` meant fitting ``−∇ℓ(y^{i−1})`` by squared error has no
        such entry and is refused, rather than resumed under another algorithm."""
        out = super().config()
        if self.objective == "greedy":
            out["greedy_fit"] = "the loss at an offset, l(y' + a A(x)) (Sec. 4.1)"
        return out

    def _check_saved_config(self, saved: Mapping[str, Any]) -> None:
        if saved.get("objective") == "greedy" and "greedy_fit" not in saved:
            raise ValueError(
                "the state was saved when objective='greedy' fitted −∇ℓ(y^{i−1}) by squared "
                "error, before greedy fitting became Sec. 4.1's loss at an offset (nothing was "
                "loaded): that objective no longer exists, so the state cannot resume; train a "
                "new booster (objective='greedy' or 'linear')")

    def _adopt_earlier_rule(self, saved: Mapping[str, Any]) -> None:
        """Also the default objective before greedy fitting: a state saved by a booster whose
        learners saw the linear losses, where this booster's objective is the default, resumes
        with them (checkpoints, pickled estimators); a given objective is never replaced."""
        super()._adopt_earlier_rule(saved)
        if self._objective_was_default and saved.get("objective") == "linear":
            self.objective = "linear"

    @property
    def linear_scale(self) -> float:
        """The Lipschitz constant ``L`` dividing the learners' linear losses."""
        raise NotImplementedError

    def greedy_steps(self, like: Tensor) -> Tensor | float:
        """Sec. 4.1's steps ``α_i``, ``(N, 1, 1)`` in ``like``'s dtype and device, or one number
        for every learner: learner ``i`` suffers ``ℓ(y′_i + α_i A_i(x))``
        (:class:`ConvexHullOGB`: its own update; :class:`OGB`: a unit step from ``y^{i−1}``, of
        which line 8 adds ``η``)."""
        raise NotImplementedError

    def greedy_offsets(self, previous: Tensor) -> Tensor:
        """Sec. 4.1's offsets ``y′_i``, ``(N, B, m)``, from the partial sums ``y^{i−1}``."""
        raise NotImplementedError

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """The descent direction ``−∇ℓ(y^{i−1})`` for every learner (``"linear"``), or the
        target ``A_i(x) − ∇ℓ(y′_i + α_i A_i(x)) / α_i`` of the loss itself clipped to the
        learners' reach ``[−D, D]`` (``"greedy"``): for the squared loss, the minimiser of
        ``ℓ(y′_i + α_i A)`` over the outputs a learner can make. Unclipped, ConvexHullOGB's
        later learners chase up to ``(N + 1)/2`` times their residual, saturate and stay there:
        with 32 learners it did worse than with 8 on every regression stream and worse than the
        constant on two (``experiments/ogb_defaults.py``, docs "Defaults")."""
        if self.objective == "linear":
            return -self.loss.gradient(partials[:-1], z)
        steps = self.greedy_steps(h)
        target = h - self.loss.gradient(self.greedy_offsets(partials[:-1]) + steps * h, z) / steps
        return target.clamp(-self.bound, self.bound)

    def learner_loss_grad(self, h: Tensor, targets: Tensor) -> Tensor:
        """``"linear"``: the loss ``mean_b (1/L) ∇ℓ(y^{i−1}) · A_i(x_b)``, whose gradient is
        ``−target/(LB)``. ``"greedy"``: ``mean_b ℓ(y′_i + α_i A_i(x_b))``, whose gradient
        ``α_i ∇ℓ(y′_i + α_i A_i) / B`` is ``α_i² (A_i − target) / B`` wherever the target is
        within reach (beyond it, the pull towards the clipped target)."""
        if self.objective == "greedy":
            steps = self.greedy_steps(h)
            return (h - targets) * (steps * steps / h.shape[1])
        return targets * (-1.0 / (self.linear_scale * h.shape[1]))


def _bounded(learners: Any, bound: float) -> Any:
    if callable(learners) and not isinstance(learners, nn.Module):
        return lambda: BoundedOutput(learners(), bound)
    if isinstance(learners, Sequence):
        return [BoundedOutput(m, bound) for m in learners]
    return learners
