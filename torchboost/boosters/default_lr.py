"""The learners' default learning rate: one rule for every booster (SGB and its variants,
ResidualSGB, OGB, ConvexHullOGB, StagewiseGB, SingleLearner, the multiclass boosters, a user's
:class:`~torchboost.boosters.base.Booster` subclass, and through them the scikit-learn and river
estimators).

When the optimizer is the default (schedule-free AdamW,
:data:`~torchboost.learners.optimizers.DEFAULT_OPTIMIZER`) and no ``lr`` is given, weights with
a fan-in up to :data:`DEFAULT_LR_FAN_IN` get :data:`DEFAULT_LR` after a linear warm-up of
:data:`DEFAULT_WARMUP` rounds (with ``β₁`` = 0.92, :data:`DEFAULT_BETAS`), wider ones
``DEFAULT_LR · 64 / fan_in``
(:class:`~torchboost.learners.optimizers.OptimizerSpec`'s ``lr_fan_in``; μP's rule for Adam,
Yang et al. 2022, Table 3). No horizon enters: the rule holds for a stream of any length.
``optimizer=torch.optim.Adam`` without an ``lr`` keeps the rule Adam had before schedule-free
learners became the default (:data:`ADAM_LR` with the fan-in rule). An explicit
``optimizer_kwargs={"lr": ...}`` is one rate for every parameter with the optimizer's own
defaults otherwise (add ``lr_fan_in=64`` to keep the fan-in rule, ``betas=DEFAULT_BETAS`` the
rule's ``β``). A state saved by the rule before its ``β₁`` became 0.92 (a checkpoint, a pickled
estimator) loads into a booster built with the rule and resumes at 0.9, as it was saved.
"""

from __future__ import annotations

from typing import Any

import torch

from torchboost.learners.optimizers import DEFAULT_OPTIMIZER

__all__ = ["ADAM_LR", "DEFAULT_BETAS", "DEFAULT_LR", "DEFAULT_LR_FAN_IN", "DEFAULT_WARMUP",
           "NEWTON_OUTPUT_POWER", "RULE_BETAS_BEFORE", "newton_output_scale", "with_default_lr"]

#: The default (schedule-free) optimizer's rate when none is given, for weights with a fan-in up
#: to :data:`DEFAULT_LR_FAN_IN`. Chosen by ``experiments/horizon_free.py`` on every stream of the
#: repository after 1, 3 and 10 passes over seeds (its table is in the docs, "Defaults").
DEFAULT_LR = 1e-1

#: Rounds of linear warm-up of the default rate (schedule-free's ``warmup_steps``): the first
#: rounds' steps are smaller while Adam's second moment is a one-batch estimate.
DEFAULT_WARMUP = 0

#: Adam's moment decays ``(β₁, β₂)`` of the default optimizer under the rule. Schedule-free's
#: ``β₁`` interpolates where the gradient is taken between the fast iterate and the uniform
#: average (Defazio et al. 2024, Alg. 1): 0.92 instead of the package's 0.9 moves it towards the
#: average and lowers the noise floor of long runs (keggundirected after ten passes: 6 % above
#: tuned Adam at 0.9, 3.5 % at 0.92, over six seeds) at a cost elsewhere of at most 2.5 % (MNIST
#: after one pass, 1.4 standard errors; every other cell within one); 0.93 and 0.95 cost MNIST
#: more (``experiments/horizon_free.py``, "Defaults" in the docs).
DEFAULT_BETAS = (0.92, 0.999)

#: The rule's betas before :data:`DEFAULT_BETAS` (schedule-free's own): a state saved with them by
#: the rule resumes with them (:mod:`torchboost.boosters.state`).
RULE_BETAS_BEFORE = (0.9, 0.999)

#: Adam's rate when ``optimizer=torch.optim.Adam`` is given without an ``lr`` (the default rule
#: before schedule-free learners): chosen by ``experiments/defaults.py``'s coordinate-wise sweep
#: (``defaults.json``; with the fan-in rule, 2e-2 came within 10 % of each stream's best rate on
#: all nine streams after one pass, over seeds).
ADAM_LR = 2e-2

#: With the default rate (no ``lr`` given), weights wider than this fan-in get
#: ``DEFAULT_LR · 64 / fan_in``: wide layers (MNIST's conv learners' 720-input head, adult's 108
#: one-hot inputs) move their units as fast as a 64-input layer does; nothing changes where no
#: weight is wider.
DEFAULT_LR_FAN_IN = 64.0


#: Under Newton targets the default rule divides the rate of linear learners (those whose only
#: layer with parameters is their output layer) by ``(N · η) ** power``: N of them sum to one
#: linear model moved N·η times as fast as one, and it overshoots where one linear learner does
#: not; deeper learners keep the rule's rates (on MNIST conv learners lost 0.25 points with
#: their output layers slowed the same way). The power is ½ for the default schedule-free
#: learners, whose averaged weights damp the overshoot themselves (one pass, N = 20, against
#: one linear model: within 2.5 points on five streams where the full division trailed by up
#: to 4; three passes within 1 point, against 3.2), and 1 for Adam, where it was measured
#: first (``docs/results/defaults.md``, "Newton targets and linear learners").
NEWTON_OUTPUT_POWER = 0.5
#: the power under Adam (and the default rule's for every optimizer before schedule-free
#: learners were measured with it)
ADAM_NEWTON_OUTPUT_POWER = 1.0


def newton_output_power(optimizer: Any) -> float:
    """The power of :func:`newton_output_scale` for the learners' optimizer class."""
    return ADAM_NEWTON_OUTPUT_POWER if optimizer is torch.optim.Adam else NEWTON_OUTPUT_POWER


def newton_output_scale(n_learners: int, step: float,
                        power: float = NEWTON_OUTPUT_POWER) -> float:
    """The output layers' rate factor ``(N · η) ** −power`` for ``N`` learners and step ``η``
    (1 when ``N · η ≤ 1``)."""
    return min(1.0, (n_learners * step) ** -power)


def with_default_lr(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A booster's keyword arguments with the default rule filled in: for the default optimizer
    (or no ``optimizer``) without an ``lr`` in ``optimizer_kwargs``, ``lr`` =
    :data:`DEFAULT_LR`, ``warmup_steps`` = :data:`DEFAULT_WARMUP`, ``betas`` =
    :data:`DEFAULT_BETAS` (each unless given) and, unless given, ``lr_fan_in`` =
    :data:`DEFAULT_LR_FAN_IN`; for Adam, ``lr`` = :data:`ADAM_LR` and the same
    fan-in rule; other optimizers keep their own defaults."""
    optimizer = kwargs.get("optimizer", DEFAULT_OPTIMIZER)
    if optimizer is DEFAULT_OPTIMIZER:
        rule = {"lr": DEFAULT_LR, "warmup_steps": DEFAULT_WARMUP, "betas": DEFAULT_BETAS}
    elif optimizer is torch.optim.Adam:
        rule = {"lr": ADAM_LR}
    else:
        return kwargs
    given = dict(kwargs.get("optimizer_kwargs") or {})
    out = dict(kwargs)
    if "lr" not in given:  # the default rate is a rule: DEFAULT_LR up to fan-in 64
        out.setdefault("lr_fan_in", DEFAULT_LR_FAN_IN)
        out["optimizer_kwargs"] = {**rule, **given}
    return out
