"""The learners' default learning rate: one rule for every booster that trains its learners on a
regression or classification loss (SGB and its variants, StagewiseGB, SingleLearner, the
multiclass boosters, and through them the scikit-learn and river estimators).

When the optimizer is Adam and no ``lr`` is given, weights with a fan-in up to
:data:`DEFAULT_LR_FAN_IN` get :data:`DEFAULT_LR`, wider ones ``DEFAULT_LR · 64 / fan_in``
(:class:`~torchboost.learners.optimizers.OptimizerSpec`'s ``lr_fan_in``; μP's rule for Adam,
Yang et al. 2022, Table 3). An explicit ``optimizer_kwargs={"lr": ...}`` is one rate for every
parameter (add ``lr_fan_in=64`` to keep the rule).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["DEFAULT_LR", "DEFAULT_LR_FAN_IN", "NEWTON_OUTPUT_POWER", "newton_output_scale",
           "with_default_lr"]

#: The learners' Adam learning rate when none is given, for weights with a fan-in up to
#: :data:`DEFAULT_LR_FAN_IN` (wider ones get ``DEFAULT_LR · 64 / fan_in``). Chosen by
#: ``experiments/defaults.py``: its coordinate-wise sweep of one rate for every parameter
#: (``defaults.json``; 1e-4 … 3e-2, ``standardize=True``) ranked 3e-2 first over nine streams
#: after one and three passes (torch's 1e-3: 1.7× worse in geometric mean), but no single rate
#: came within 10 % of each stream's best; with the fan-in rule, 2e-2 does on all nine after one
#: pass, over seeds (``--seeded``, ``seeded.json``).
DEFAULT_LR = 2e-2

#: With the default rate (no ``lr`` given), weights wider than this fan-in get
#: ``DEFAULT_LR · 64 / fan_in``: wide layers (MNIST's conv learners' 720-input head, adult's 108
#: one-hot inputs) move their units as fast as a 64-input layer does; nothing changes where no
#: weight is wider.
DEFAULT_LR_FAN_IN = 64.0


#: Under Newton targets the default rule divides the rate of linear learners (those whose only
#: layer with parameters is their output layer) by ``(N · η) ** NEWTON_OUTPUT_POWER``: N of them
#: sum to one linear model moved N·η times as fast as one, and it overshoots where one linear
#: learner does not; deeper learners keep the rule's rates (on MNIST conv learners lost 0.25
#: points with their output layers slowed the same way). Measured in the README, "One default
#: rule": ``experiments/newton_defaults.py``.
NEWTON_OUTPUT_POWER = 1.0


def newton_output_scale(n_learners: int, step: float) -> float:
    """The output layers' rate factor ``(N · η) ** −NEWTON_OUTPUT_POWER`` for ``N`` learners and
    step ``η`` (1 when ``N · η ≤ 1``)."""
    return min(1.0, (n_learners * step) ** -NEWTON_OUTPUT_POWER)


def with_default_lr(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A booster's keyword arguments with the default rate filled in: for Adam (the default
    optimizer) without an ``lr`` in ``optimizer_kwargs``, ``lr`` = :data:`DEFAULT_LR` and, unless
    given, ``lr_fan_in`` = :data:`DEFAULT_LR_FAN_IN`; other optimizers keep their own defaults."""
    if kwargs.get("optimizer", torch.optim.Adam) is not torch.optim.Adam:
        return kwargs
    given = dict(kwargs.get("optimizer_kwargs") or {})
    out = dict(kwargs)
    if "lr" not in given:  # the default rate is a rule: 2e-2 up to fan-in 64
        out.setdefault("lr_fan_in", DEFAULT_LR_FAN_IN)
    out["optimizer_kwargs"] = {"lr": DEFAULT_LR, **given}
    return out
