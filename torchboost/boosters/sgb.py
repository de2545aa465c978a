"""Streaming Gradient Boosting for smooth losses (Hu et al., AISTATS 2017, Alg. 1), with optional
second-order (Newton) targets and learned step sizes."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor

from torchboost.boosters.default_lr import DEFAULT_LR, DEFAULT_LR_FAN_IN
from torchboost.boosters.gradient_boosting import (
    DEFAULT_HESSIAN_FLOOR,
    DEFAULT_NEWTON_CLIP,
    STEP_BUDGET,
    GradientBoosting,
    Targets,
)
from torchboost.params import positive_float

__all__ = ["DEFAULT_HESSIAN_FLOOR", "DEFAULT_LR", "DEFAULT_LR_FAN_IN", "SGB", "StepSizeAdam"]


class SGB(GradientBoosting):
    """Streaming Gradient Boosting, Alg. 1 of Hu et al. (2017).

    Prediction (lines 4–8): ``y^0 = y0``, ``y^i = y^{i−1} − η_i h_i(x)``, predict ``y^N``.
    Update (lines 10–13): learner ``i`` takes one optimizer step on ``‖∇ℓ(y^{i−1}) − h_i(x)‖²`` —
    the gradient at the *previous* partial sum is its regression target.

    Two options go beyond the paper (the first is the default for classification losses, the
    second off by default):

    * ``targets="newton"``: learner ``i`` fits the diagonal Newton direction ``g / w`` at
      ``y^{i−1}`` by least squares weighted by ``w = max(H, hessian_floor)``, ``H`` the loss's
      diagonal Hessian there (:meth:`~torchboost.losses.Loss.newton`) — LogitBoost's working
      response and weights (Friedman, Hastie & Tibshirani 2000, Alg. 3) and XGBoost's
      second-order objective (Chen & Guestrin 2016, Eq. 3–6), applied to every stage of the
      stream, the direction clipped to ``±newton_clip`` as LogitBoost's working response is
      (:data:`~torchboost.boosters.gradient_boosting.DEFAULT_NEWTON_CLIP`). The learner's loss
      is ``mean_b Σ_k w_k (g_k / w_k − h_k)²``, whose gradient ``2 (w h − g) / B`` stays
      bounded where ``H → 0``. For squared loss ``H = 1``, so Newton targets equal gradient
      targets (within the clip). Needs a loss with a Hessian (not absolute or hinge). The
      default for logistic and softmax losses (:func:`~torchboost.boosters.gradient_boosting.
      default_targets`); the paper's Alg. 1 is ``targets="gradient"``.
    * ``step="learned"``: each ``η_i`` is learned online from the booster's own loss at the
      partial sum it produces, ``ℓ(y^i) = ℓ(y^{i−1} − η_i h_i)``, whose derivative is
      ``∂ℓ(y^i)/∂η_i = −∇ℓ(y^i) · h_i`` in closed form (no autograd across learners). The rule
      is Adam (:class:`StepSizeAdam`) on ``log η_i`` with learning rate ``step_lr``, starting
      from the default ``η`` below and kept within ``[η/100, 100 η]``; the batch mean of the
      derivative (over the global batch when distributed) is one Adam step per round. The
      ``η_i`` are in the ``state_dict`` and in :meth:`diagnostics` (``"step"``).

    Args:
        step: the step ``η``, or ``"learned"``. The paper's (the start of a learned step):
            Thm. 5.1's ``η = γ / (β(8 − 4γ))`` with edge ``γ = 1``, i.e. ``η = 1/(4β)`` for the
            loss's smoothness ``β`` (squared loss: β = 1, η = ¼; logistic: β = ¼, η = 1;
            softmax: β = ½, η = ½). Newton targets are already scaled by the curvature, so
            their default is the full Newton step's half, ``η = ½``, for every loss. The
            default is that ``η`` capped so that ``N · η · β`` is at most
            :data:`~torchboost.boosters.gradient_boosting.STEP_BUDGET` = 6 (``β`` = 1 for
            Newton targets): ``η = min(paper's, 6 / (β N))``, which changes nothing up to N = 24
            learners on gradient targets and N = 12 on Newton targets (all N learners move at
            once in a round; with the paper's η one pass of 64 learners ended more than 10 %
            behind on three of six streams, of 128 on all six: ``experiments/step_budget.py``).
        targets: ``"gradient"`` (the paper) or ``"newton"``; default: Newton for logistic and
            softmax losses, gradient otherwise.
        hessian_floor: ``w``'s floor for Newton targets (default :data:`DEFAULT_HESSIAN_FLOOR`).
        newton_clip: the bound on the Newton targets' magnitude (default 4; ``None``: none).
        step_lr: Adam's learning rate on ``log η_i`` for a learned step (default 0.01).
        standardize: scale-free training (:mod:`~torchboost.boosters.scaling`, default on):
            features and, for regression losses, labels standardised with running statistics
            inside the booster, so that data in any units train alike; ``y0`` and ``η`` are
            then in standardised units (``y0=0`` is the running label mean). ``False``: the
            paper's Alg. 1 on the data as given.
        optimizer, optimizer_kwargs: the learners' optimizer (see
            :class:`~torchboost.boosters.base.Booster`): schedule-free AdamW by default, at
            :data:`DEFAULT_LR` = 1e-1 (chosen by ``experiments/horizon_free.py``) for weights
            with a fan-in up to :data:`DEFAULT_LR_FAN_IN` = 64 and ``1e-1 · 64 / fan_in`` for
            wider ones (``lr_fan_in``), β₁ = 0.92
            (:data:`~torchboost.boosters.default_lr.DEFAULT_BETAS`), no schedule; an explicit
            ``optimizer_kwargs={"lr": ...}`` is one rate for every parameter with the
            optimizer's own betas (add ``lr_fan_in=64`` and ``betas=DEFAULT_BETAS`` to keep the
            rule).
            ``optimizer=torch.optim.Adam`` takes Adam's rule (2e-2); ``optimizer=Prodigy``
            (:class:`~torchboost.learners.Prodigy`) estimates a rate per learner instead.
        Other arguments: see :class:`~torchboost.boosters.base.Booster`.

    At test time the paper's experiments use the final learners ``h_i^T`` (Sec. 6.2), as here.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> _ = torch.manual_seed(0)
        >>> booster = SGB(lambda: nn.Linear(2, 1), n_learners=3, loss="squared", step=0.5)
        >>> x, y = torch.randn(16, 2), torch.randn(16)
        >>> booster.learn(x, y).shape, booster.compute_units
        (torch.Size([16, 1]), 144)
        >>> newton = SGB(lambda: nn.Linear(2, 3), n_learners=3, loss="softmax", n_outputs=3,
        ...              targets="newton", step="learned")
        >>> _ = newton.learn(x, torch.tensor([0, 1, 2, 0] * 4))
        >>> newton.diagnostics()["step"].shape
        torch.Size([3])
    """

    config_keys = ("step_rule",)
    step_budget = STEP_BUDGET

    def __init__(self, learners: Any, loss: Any = "squared", *,
                 step: float | Literal["learned"] | None = None, targets: Targets | None = None,
                 hessian_floor: float = DEFAULT_HESSIAN_FLOOR,
                 newton_clip: float | None = DEFAULT_NEWTON_CLIP, step_lr: float = 0.01,
                 standardize: bool = True, **kwargs: Any) -> None:
        learned = step == "learned"
        if isinstance(step, str) and not learned:
            raise ValueError(f"step must be a finite number > 0 or 'learned', got {step!r}")
        if learned:  # a learned step starts from the paper's η and finds its own scale
            self.step_budget = None
        super().__init__(learners, loss, step=None if learned else step, targets=targets,
                         hessian_floor=hessian_floor, newton_clip=newton_clip,
                         standardize=standardize, **kwargs)
        self.step_rule = StepSizeAdam(self.n_learners, self.step, step_lr) if learned else None

    def steps(self, n_learners: int) -> Tensor | float:
        """The fixed ``η``, or the learned ``η_i`` of the first ``n_learners`` learners."""
        if self.step_rule is None:
            return self.step
        return self.step_rule.steps()[:n_learners]

    @torch.no_grad()
    def after_step(self, h: Tensor, partials: Tensor, z: Tensor) -> None:
        """A learned step: one :class:`StepSizeAdam` step on ``∂ℓ(y^i)/∂η_i = −∇ℓ(y^i)·h_i``,
        averaged over the (global) batch."""
        if self.step_rule is not None:
            slope = self.batch_mean(-(self.loss.gradient(partials[1:], z) * h).sum(-1))
            self.step_rule.update(slope)

    def diagnostics(self) -> dict[str, Tensor]:
        out = super().diagnostics()
        if self.step_rule is not None:
            out["step"] = self.step_rule.steps().float()
        return out


class StepSizeAdam(torch.nn.Module):
    """Adam (Kingma & Ba 2015, Alg. 1) on the log-steps ``log η_i`` of a booster's learners.

    ``update(d)`` takes the derivatives ``d_i = ∂L/∂η_i``; by the chain rule the gradient in
    log space is ``η_i d_i``. After the Adam step ``log η_i`` is clipped to
    ``[log(η/100), log(100 η)]`` around the initial step ``η``. State (log-steps, moments, step
    count) lives in buffers, so it is saved, loaded, moved between devices and, being updated
    from all-reduced batch means, identical on every data-parallel replica.
    """

    def __init__(self, n: int, initial: float, lr: float = 0.01, betas: tuple[float, float] = (
            0.9, 0.999), eps: float = 1e-8, spread: float = 100.0) -> None:
        super().__init__()
        lr = positive_float("step_lr", lr)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.bounds = (math.log(initial / spread), math.log(initial * spread))
        self.register_buffer("log_step", torch.full((n,), math.log(initial), dtype=torch.float64))
        self.register_buffer("exp_avg", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("exp_avg_sq", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def steps(self) -> Tensor:
        """The current ``η_i``, ``(n,)`` in float64."""
        return self.log_step.exp()

    @torch.no_grad()
    def update(self, derivative: Tensor) -> None:
        """One Adam step on ``log η`` given ``∂L/∂η_i`` of shape ``(n,)``."""
        grad = derivative.to(self.log_step.dtype) * self.steps()
        beta1, beta2 = self.betas
        self.count.add_(1)
        self.exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        m_hat = self.exp_avg / (1 - beta1 ** self.count)
        v_hat = self.exp_avg_sq / (1 - beta2 ** self.count)
        self.log_step.sub_(self.lr * m_hat / (v_hat.sqrt() + self.eps))
        self.log_step.clamp_(*self.bounds)
