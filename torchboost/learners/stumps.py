"""Regression stumps: the third base learner of the OGB paper's experiments.

Beygelzimer et al. (2015), Sec. 5: "Regression stumps were implemented by doing stochastic
gradient descent on each individual feature, and predicting with the best-performing non-zero
valued feature in the current example."

A weak learner in torchboost only receives the gradient of its own loss with respect to the
output it returned (:meth:`~torchboost.learners.WeakLearners.step_outputs`). The per-feature
regressors ``s_j(x) = w_j x_j + b_j`` must each be trained on *their own* loss at *their own*
output, so :class:`StumpRegressor` reconstructs those gradients from the one it receives. That is
exact when the learner loss is a batch mean of per-example losses that are at most quadratic in
the output, with a known second derivative ``c`` (the ``curvature``): with ``g_b`` the gradient
received at the selected output ``o_b`` of example ``b`` in a batch of ``B``,

    ∂/∂s_j(x_b) = g_b + c · (s_j(x_b) − o_b) / B,

and feature ``j``'s loss on the batch exceeds the selected prediction's by

    Σ_b g_b (s_j(x_b) − o_b) + c / (2B) · (s_j(x_b) − o_b)²,

which is what the running losses accumulate over the whole stream, measured before each update
(progressive): the common part, the loss of the selected predictions, is the same for every
feature, so the ranking is exact. With ``bound=D`` all of this holds for the bounded outputs
``D·tanh(s_j)``, and autograd carries each feature's gradient through its own ``tanh``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["StumpRegressor"]


class _RouteToFeatures(torch.autograd.Function):
    """Forward: per example, the selected feature's output. Backward: every feature's own
    gradient (module docstring), and the running losses advance by each feature's excess loss."""

    @staticmethod
    def forward(ctx, outputs: Tensor, selected: Tensor, curvature: float,  # type: ignore[override]
                running_loss: Tensor) -> Tensor:
        chosen = outputs.gather(1, selected.unsqueeze(1))
        ctx.save_for_backward(outputs, chosen)
        ctx.curvature = curvature
        ctx.running_loss = running_loss
        return chosen

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        outputs, chosen = ctx.saved_tensors
        scale = ctx.curvature / outputs.shape[0]
        gap = outputs - chosen
        excess = grad * gap + 0.5 * scale * gap.square()
        ctx.running_loss += excess.sum(0).to(ctx.running_loss.dtype)
        return grad + scale * gap, None, None, None


class StumpRegressor(nn.Module):
    """``d`` one-feature regressors ``s_j(x) = w_j x_j + b_j``, each trained on its own loss;
    each example is predicted by the best one (lowest running loss, ties → lowest index) among
    the features that are non-zero in that example (all features if none is).

    Args:
        n_features: ``d``; inputs are flattened to ``(B, d)``.
        curvature: ``c``, the second derivative of the per-example learner loss with respect to
            this module's output (the loss being a batch mean). Which booster gives which:

            * ``SingleLearner`` on squared loss ``½(y − h)²``: 1;
            * ``SGB``, ``StagewiseGB`` (learner loss ``‖target − h‖²``): 2;
            * ``OGB``, ``ConvexHullOGB`` with ``objective="linear"`` (Alg. 1 line 13,
              Alg. 2 line 11: a loss linear in the output): 0; ``objective="greedy"`` (their
              default) on squared loss (``½(y′ + α h − z)²``): ``α²``, so 1 for ``OGB`` and
              ``η_i² = (2/(i + 1))²`` for learner ``i`` of ``ConvexHullOGB`` (give it a list of
              learners, each with its own curvature: a factory builds them all alike).

            With a loss that is not quadratic in the output (``SingleLearner`` on logistic loss,
            say) the per-feature gradients are a second-order approximation around the selected
            output.
        bound: if given, ``D``: every feature predicts ``D·tanh(s_j(x))``, so outputs are bounded
            as OGB needs and each feature's gradient goes through its own ``tanh``. Give OGB
            ``bound_outputs=False`` then; wrapped in :class:`~torchboost.learners.BoundedOutput`
            instead, the gradient reaching this module carries ``tanh'`` at the *selected*
            output and the routing is no longer exact.

    Only for ``WeakLearners(mode="loop")`` (``"auto"`` picks it): the running losses are updated
    in the backward pass, which the stacked (vmapped) path cannot do.

    Examples:
        >>> stump = StumpRegressor(3, curvature=1.0)
        >>> x = torch.tensor([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]])
        >>> stump.select(x)  # running losses tie: lowest non-zero index; none non-zero: overall
        tensor([1, 0])
        >>> stump(x).shape
        torch.Size([2, 1])
    """

    loop_only_reason = ("StumpRegressor updates its running per-feature losses in backward, "
                        "which the stacked path cannot do; use mode='loop'")

    def __init__(self, n_features: int, curvature: float, bound: float | None = None) -> None:
        super().__init__()
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if not curvature >= 0:
            raise ValueError(f"curvature must be >= 0 (a convex learner loss), got {curvature}")
        if bound is not None and not bound > 0:
            raise ValueError(f"bound must be > 0, got {bound}")
        self.n_features = n_features
        self.curvature = float(curvature)
        self.bound = None if bound is None else float(bound)
        self.weight = nn.Parameter(torch.zeros(n_features))
        self.bias = nn.Parameter(torch.zeros(n_features))
        self.register_buffer("running_loss", torch.zeros(n_features, dtype=torch.float64))

    def feature_outputs(self, x: Tensor) -> Tensor:
        """Every feature's prediction, ``(B, d)`` (``D·tanh`` applied when bounded)."""
        out = x * self.weight + self.bias
        return out if self.bound is None else self.bound * torch.tanh(out)

    def select(self, x: Tensor) -> Tensor:
        """Index of the predicting feature per example, ``(B,)``."""
        nonzero = x != 0
        masked = torch.where(nonzero, self.running_loss, torch.inf)
        return torch.where(nonzero.any(1), masked.argmin(1), self.running_loss.argmin())

    def forward(self, x: Tensor) -> Tensor:
        x = x.reshape(x.shape[0], -1)
        if x.shape[1] != self.n_features:
            raise ValueError(f"StumpRegressor has {self.n_features} features, input has "
                             f"{x.shape[1]}")
        outputs = self.feature_outputs(x)
        return _RouteToFeatures.apply(outputs, self.select(x), self.curvature, self.running_loss)

    def extra_repr(self) -> str:
        bound = "" if self.bound is None else f", bound={self.bound}"
        return f"n_features={self.n_features}, curvature={self.curvature}{bound}"
