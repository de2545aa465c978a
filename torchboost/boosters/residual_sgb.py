"""Streaming Gradient Boosting with residual projection for non-smooth losses
(Hu et al., AISTATS 2017, Alg. 2 for training and Alg. 3 for testing)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from torchboost.boosters.base import Booster
from torchboost.boosters.scaling import Standardizer
from torchboost.projections import Projection

__all__ = ["ResidualSGB"]


class ResidualSGB(Booster):
    """SGB for strongly convex, possibly non-smooth losses (hinge, L1): Alg. 2 of Hu et al.

    Prediction (lines 4–8): ``y^i = Π_Y(y^{i−1} − η_i h_i(x))`` and the prediction is the average
    of *all* partial sums ``y^0..y^N``. (The paper writes ``1/N Σ_{i=0}^N``; we divide by the
    ``N + 1`` terms so that the prediction is a convex combination and stays in ``Y``.)
    Update (lines 10–15): ``Δ_0 = 0``; learner ``i`` regresses ``Δ_{i−1} + ∂ℓ(y^{i−1})`` and the
    residual ``Δ_i = Δ_{i−1} + ∂ℓ(y^{i−1}) − h_i(x)`` is carried to learner ``i + 1``.
    Test time (Alg. 3 with ``t = T``, as in the paper's experiments): the same projected
    recursion with the final learners.

    Args:
        domain: the projection ``Π_Y`` (:class:`~torchboost.projections.Box` or
            :class:`~torchboost.projections.Ball`); ``None`` means ``Y = R^m`` (no projection).
            ``Y`` is in the labels' units, so with a domain only the features are standardised.
        step: ``None`` for Thm. 5.2's schedule ``η_i = 1 / (λ i)``, or a constant step.
        strong_convexity: the ``λ`` of that schedule; defaults to the loss's modulus, or 1 for
            losses that are not strongly convex (hinge, L1), where ``λ`` is a tuning parameter.

    Learner ``i``'s target carries the residuals of every learner before it, so with many
    learners they can run away: on five regression streams the mean L1 test error grew from
    N = 8 to 64 learners (``experiments/residual_sgb_learners.py``). The stall monitor judges
    the averaged anytime predictions (:meth:`anytime_predictions`) and warns when that happens.
    """

    config_keys = ("steps", "domain")
    #: the ``λ`` of the steps ``1/(λ i)`` (``None``: a constant step)
    schedule_lambda: float | None = None

    def __init__(self, learners: Any, loss: Any = "absolute", *,
                 domain: Projection | None = None, step: float | None = None,
                 strong_convexity: float | None = None, **kwargs: Any) -> None:
        super().__init__(learners, loss, **kwargs)
        if domain is not None and self.standardizer is not None:
            # the domain Y is in the labels' units: standardise the features alone
            self.standardizer = Standardizer(targets=False,
                                             compiled=self.standardizer.compiled)
        lam = strong_convexity if strong_convexity is not None else (
            self.loss.strong_convexity or 1.0)
        if not (math.isfinite(lam) and lam > 0):
            raise ValueError(f"strong_convexity must be a finite number > 0, got {lam}")
        if step is not None and not (math.isfinite(step) and step > 0):
            raise ValueError(f"step must be a finite number > 0, got {step!r}")
        index = torch.arange(1, self.n_learners + 1, dtype=torch.get_default_dtype())
        steps = torch.full_like(index, float(step)) if step is not None else 1.0 / (lam * index)
        self.register_buffer("steps", steps)
        self.domain = domain
        self.schedule_lambda = lam if step is None else None

    def bounds_predictions(self) -> bool:
        """With a domain ``Y`` the predictions stay in it (Alg. 2's projections), which the
        label range's clip could leave: then the domain bounds them alone."""
        return self.domain is None and super().bounds_predictions()

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Alg. 2 line 6, sequentially: ``y^i = Π_Y(y^{i−1} − η_i h_i)``."""
        project = self.domain if self.domain is not None else (lambda y: y)
        sums = [project(y0)]
        for i in range(h.shape[0]):
            sums.append(project(sums[-1] - self.steps[i].to(h.dtype) * h[i]))
        return torch.stack(sums)

    def combine(self, partials: Tensor) -> Tensor:
        """Alg. 2 line 8: the average of the partial sums ``y^0..y^k``."""
        return partials.mean(0)

    def anytime_predictions(self, partials: Tensor) -> Tensor:
        """The averages of ``y^0..y^k`` for every ``k`` (what the stall monitor judges)."""
        count = torch.arange(1, partials.shape[0] + 1, dtype=partials.dtype,
                             device=partials.device)
        return partials.cumsum(0) / count.view(-1, *([1] * (partials.ndim - 1)))

    def _stall_hint(self) -> str:
        if self.schedule_lambda is None:
            return super()._stall_hint() + f", step η={float(self.steps[0]):g}"
        return (super()._stall_hint() + f", steps η_i = 1/(λ i) with λ={self.schedule_lambda:g}"
                "; a larger strong_convexity λ takes smaller steps, and fewer learners or a "
                "domain that bounds the partial sums help too, since each learner's target "
                "carries the residuals of all learners before it")

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Alg. 2 lines 12–14: ``target_i = Δ_{i−1} + ∂ℓ(y^{i−1})`` with
        ``Δ_i = Σ_{j≤i} (∂ℓ(y^{j−1}) − h_j)``, i.e. ``target_i = Δ_i + h_i``."""
        g = self.loss.gradient(partials[:-1], z)
        return (g - h).cumsum(0) + h

    def residuals(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """``Δ_1..Δ_N`` (Alg. 2 line 14), for inspection."""
        return self.learner_targets(h, partials, z) - h
