"""Gradient boosting's additive model and targets, shared by the streaming
:class:`~torchboost.SGB` (Hu et al., AISTATS 2017, Alg. 1) and the stagewise
:class:`~torchboost.StagewiseGB` (Friedman 2001): ``y^0 = y0``, ``y^i = y^{i−1} − η h_i(x)``,
and learner ``i`` fits the loss's gradient (or the Newton direction) at ``y^{i−1}``. The two
differ only in which learners a round trains: all of them at once, or one stage at a time."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import Tensor

from torchboost.boosters.base import Booster
from torchboost.boosters.default_lr import (
    ADAM_NEWTON_OUTPUT_POWER,
    newton_output_power,
    newton_output_scale,
    with_default_lr,
)
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.losses import Loss, get_loss
from torchboost.params import positive_float
from torchboost.scalars import scalar

__all__ = ["DEFAULT_HESSIAN_FLOOR", "DEFAULT_NEWTON_CLIP", "NEWTON_STEP", "STEP_BUDGET",
           "GradientBoosting", "Targets", "paper_step"]

Targets = Literal["gradient", "newton"]

#: Default floor of the diagonal Hessian in Newton targets (see :meth:`Loss.newton`): the
#: direction is at most ``|g| / 0.01 = 100 |g|``, and a softmax/logistic score whose probability
#: is within about 1 % of 0 or 1 keeps a weight of 0.01 (the largest possible weight is ¼).
DEFAULT_HESSIAN_FLOOR = 1e-2

#: Default bound on the Newton targets' magnitude: the direction ``g / w`` is clipped to
#: ``[−4, 4]`` (its weights are not), as Friedman, Hastie & Tibshirani (2000) bound LogitBoost's
#: working response by a ``z_max`` of 2 to 4. Where a class's probability is near 0 on its own
#: examples (a class the stream brings late, a confident mistake) the floored direction is up
#: to ``1 / floor = 100`` and one round's targets swamp what the learners share; clipped, one
#: pass of MNIST at the defaults (ConvNet N = 8, softmax, seed 0) ends at 2.00 % test error,
#: 2.21 % before the clip (``experiments/classification_targets.py``), and a third class
#: arriving after 600 examples of two is learnt (accuracy on the last 300 of 1,500, mean of 6
#: seeds: 0.94 against 0.85 unclipped; ``experiments/stream_growth.py``).
DEFAULT_NEWTON_CLIP = 4.0


#: SGB's default step keeps the total step of its N learners, in units of the curvature of what
#: they fit, at most this: ``N · η · β ≤ STEP_BUDGET`` with ``β`` the loss's smoothness for
#: gradient targets and 1 for Newton targets (the curvature already scales them), i.e.
#: ``η = min(paper's η, STEP_BUDGET / (β N))``: ``min(¼, 6/N)`` for squared loss, ``min(1, 24/N)``
#: for logistic loss on gradient targets, ``min(½, 6/N)`` on Newton targets. A streaming round
#: moves all N learners at once, each towards a residual the learners before it are still
#: reducing, so the prediction moves up to N·η times as far as one learner does. With the paper's
#: η (¼ for squared loss, ½ for Newton targets) one pass of 64 learners ended more than 10 %
#: behind the best cap on three of six streams (keggundirected 5.5×) and of 128 on all six
#: (keggundirected 611×). Of the caps 4, 6, 8 and 16, 6 had the smallest worst cell over
#: streams, N = 8…128 and 1, 3 and 10 passes (1.23 of the cell's best rule: kin40k, which prefers
#: larger steps) and a geometric mean within 0.002 of the best (cap 8's)
#: (``experiments/step_budget.py``, six seeds, squared loss and Newton targets; "Defaults" in the
#: docs). Nothing changes up to N = 24 learners on gradient targets and N = 12 on Newton targets.
STEP_BUDGET = 6.0


#: The step of Newton targets (half the full Newton step), which the curvature already scales.
NEWTON_STEP = 0.5


def paper_step(loss: Loss, targets: Targets = "gradient") -> float:
    """``1/(4β)`` for gradient targets (SGB's Thm. 5.1 with edge γ = 1), :data:`NEWTON_STEP`
    for Newton targets, whatever the number of learners."""
    if targets == "newton":
        return NEWTON_STEP
    if not math.isfinite(loss.smoothness):
        raise ValueError(f"{loss.name} loss is not smooth; pass step= explicitly or "
                         "use ResidualSGB (Alg. 2) for non-smooth losses")
    return 1.0 / (4.0 * loss.smoothness)


def default_targets(loss: Any) -> Targets:
    """The targets a booster fits unless told: Newton for a classification loss with a Hessian
    (logistic, softmax), as the estimators do, gradient otherwise (for squared loss the two
    are equal; the paper's Alg. 1 is ``targets="gradient"``). On MNIST, one pass, ConvNet
    N = 8, softmax, at the defaults: 2.00 % test error on Newton targets against 4.91 % on gradient
    targets (``experiments/classification_targets.py``)."""
    try:
        resolved = get_loss(loss)
    except ValueError:
        return "gradient"  # the loss's own error is raised where the loss is built
    return "newton" if resolved.is_classifier and resolved.has_hessian else "gradient"


class GradientBoosting(Booster):
    """The additive model ``y^k = y0 − η Σ_{i≤k} h_i`` whose learner ``i`` fits
    ``∇ℓ(y^{i−1})`` (SGB Alg. 1 lines 6 and 11; Friedman 2001, Alg. 1) or, with
    ``targets="newton"``, the diagonal Newton direction there (see :class:`~torchboost.SGB`).

    Args:
        step: the shrinkage ``η``; default ``1/(4β)`` for gradient targets (SGB's Thm. 5.1 with
            edge γ = 1), ``½`` for Newton targets (:meth:`paper_step`), capped at
            ``step_budget / (β N)`` where a subclass sets :attr:`step_budget`
            (:meth:`default_step`).
        targets: ``"gradient"`` or ``"newton"``; default (``None``): :func:`default_targets`,
            Newton for a classification loss with a Hessian, gradient otherwise.
        hessian_floor: the floor of the Hessian weights of Newton targets.
        newton_clip: the bound on the Newton targets' magnitude (:data:`DEFAULT_NEWTON_CLIP`);
            ``None``: unbounded (``|g| / hessian_floor`` at most).
        Other arguments: see :class:`~torchboost.boosters.base.Booster`; without
            ``optimizer_kwargs={"lr": ...}`` the learners follow the default rule
            (:mod:`~torchboost.boosters.default_lr`).
    """

    config_keys = ("step", "targets", "hessian_floor", "newton_clip")
    # the uncapped default step and the unclipped Newton targets, adopted (below)
    rule_attributes = ("step", "newton_clip")

    #: the cap on ``N · η · β`` of the default step (``None``: the paper's step for every N)
    step_budget: float | None = None
    #: whether the step is the default (boosters pickled before the flag existed: not known,
    #: so a state saved under the uncapped default step is not adopted)
    _step_was_default = False
    #: the bound on Newton targets (boosters pickled before it existed had none)
    newton_clip: float | None = None

    def __init__(self, learners: Any, loss: Any = "squared", *, step: float | None = None,
                 targets: Targets | None = None,
                 hessian_floor: float = DEFAULT_HESSIAN_FLOOR,
                 newton_clip: float | None = DEFAULT_NEWTON_CLIP, **kwargs: Any) -> None:
        if targets is None:
            targets = default_targets(loss)
        options = with_default_lr(kwargs)
        if (targets == "newton" and "lr" not in (kwargs.get("optimizer_kwargs") or {})
                and options.get("lr_fan_in") is not None):  # the default rule, Newton targets
            n = kwargs.get("n_learners") or (len(learners) if isinstance(learners, list | tuple)
                                             else 1)
            newton_step = (self._within_budget(NEWTON_STEP, n, 1.0) if step is None
                           else positive_float("step", step))
            power = newton_output_power(kwargs.get("optimizer", DEFAULT_OPTIMIZER))
            options.setdefault("lr_output_scale", newton_output_scale(n, newton_step, power))
        super().__init__(learners, loss, **options)
        if targets not in ("gradient", "newton"):
            raise ValueError(f"targets must be 'gradient' or 'newton', got {targets!r}")
        if targets == "newton" and not self.loss.has_hessian:
            raise ValueError(f"targets='newton' needs a twice-differentiable loss; "
                             f"{self.loss.name} has no Hessian (use targets='gradient')")
        self.targets: Targets = targets
        self.hessian_floor = positive_float("hessian_floor", hessian_floor)
        self.newton_clip = (None if newton_clip is None
                            else positive_float("newton_clip", newton_clip))
        if isinstance(step, str):
            raise ValueError(f"step must be a finite number > 0, got {step!r}")
        self.step = positive_float("step", self.default_step() if step is None else step)
        #: the step is the default (a state saved under the uncapped one resumes with it)
        self._step_was_default = step is None

    def _stall_hint(self) -> str:
        steps = self.steps(self.n_learners)
        if isinstance(steps, float):
            return super()._stall_hint() + f", step η={steps:g}"
        low, high = (float(v) for v in steps.aminmax())
        return super()._stall_hint() + f", learned steps η in [{low:.3g}, {high:.3g}]"

    def paper_step(self) -> float:
        """The paper's step for this loss and these targets (:func:`paper_step`)."""
        return paper_step(self.loss, self.targets)

    def default_step(self) -> float:
        """:meth:`paper_step`, capped where :attr:`step_budget` is set so that ``N · η · β`` is
        at most it (``β``: the loss's smoothness for gradient targets, 1 for Newton targets)."""
        smoothness = 1.0 if self.targets == "newton" else self.loss.smoothness
        return self._within_budget(self.paper_step(), self.n_learners, smoothness)

    def _within_budget(self, step: float, n_learners: int, smoothness: float) -> float:
        """``step`` capped at :attr:`step_budget` ``/ (β N)`` (as it is without a budget)."""
        if self.step_budget is None:
            return step
        return min(step, self.step_budget / (n_learners * smoothness))

    def _adopt_earlier_rule(self, saved: Mapping[str, Any]) -> None:
        """Also the default rule's earlier values: the linear learners' output-rate scale of the
        full division by N·η (before schedule-free learners took its square root), and the
        default step before :attr:`step_budget` capped it: a state saved with the paper's step
        where this booster's default is capped resumes with the paper's step, and with the
        output layers' rate scale the default rule gave linear learners with it (where this
        booster's scale is the rule's for its own step); and a state saved without a clip on
        Newton targets (before :data:`DEFAULT_NEWTON_CLIP`, or resumed from such a state)
        resumes without it where this booster has the default one."""
        super()._adopt_earlier_rule(saved)
        if saved.get("newton_clip") is None and self.newton_clip == DEFAULT_NEWTON_CLIP:
            self.newton_clip = None  # saved before the clip, or resumed from such a state
        newton = self.targets == "newton"
        mine = self.learners.optimizer_spec.output_scale
        theirs = saved.get("lr_output_scale", 1.0)
        power = newton_output_power(self.learners.optimizer_spec.cls)
        rule_scaled = newton and mine == newton_output_scale(self.n_learners, self.step,
                                                             power) != 1.0
        if rule_scaled and power != ADAM_NEWTON_OUTPUT_POWER and theirs == newton_output_scale(
                self.n_learners, self.step, ADAM_NEWTON_OUTPUT_POWER):  # the full division
            self.learners.optimizer_spec = dataclasses.replace(  # of the rule before
                self.learners.optimizer_spec, output_scale=float(theirs))
            return
        if not self._step_was_default or self.step_budget is None:
            return  # a given step (any loss, smooth or not) is never replaced
        paper = self.paper_step()
        if self.step == paper or saved.get("step") != paper:
            return
        earlier = {newton_output_scale(self.n_learners, paper, p)
                   for p in (power, ADAM_NEWTON_OUTPUT_POWER)}
        if not ((rule_scaled and theirs in earlier) or mine == theirs == 1.0):
            return  # a scale not the rule's (the user's): refused as configured
        self.step = paper
        self.learners.optimizer_spec = dataclasses.replace(self.learners.optimizer_spec,
                                                           output_scale=float(theirs))

    def steps(self, n_learners: int) -> Tensor | float:
        """The steps ``η_i`` of the first ``n_learners`` learners: here one fixed ``η``."""
        return self.step

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Alg. 1 line 6 for all i at once: ``y^i = y0 − Σ_{j≤i} η_j h_j``."""
        steps = self.steps(h.shape[0])
        scaled = (h * scalar(steps, h) if isinstance(steps, float)
                  else steps[:, None, None].to(h.dtype) * h)
        return torch.cat([y0.unsqueeze(0), y0.unsqueeze(0) - scaled.cumsum(0)], dim=0)

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Alg. 1 line 11: ``∇ℓ(y^{i−1})`` (or the Newton direction there), without weights."""
        return self.learner_objective(h, partials, z)[0]

    def learner_objective(self, h: Tensor, partials: Tensor,
                          z: Tensor) -> tuple[Tensor, Tensor | None]:
        """Gradient targets, unweighted, or Newton targets with their Hessian weights."""
        if self.targets == "newton":
            direction, weights = self.loss.newton(partials[:-1], z, self.hessian_floor)
            if self.newton_clip is not None:
                direction = direction.clamp(-self.newton_clip, self.newton_clip)
            return direction, weights
        return self.loss.gradient(partials[:-1], z), None

    def combination_weights(self, n_learners: int) -> Tensor:
        """``−η_i`` of the first ``k`` learners (Alg. 1 line 6: ``y^k = y0 − Σ η_i h_i``)."""
        steps = self.steps(n_learners)
        if isinstance(steps, float):
            return torch.full((n_learners,), -steps)
        return -steps.detach().clone()
