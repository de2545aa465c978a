"""Held-out evaluation on a compute-unit schedule and per-learner values, for any driver of a
stream (the Lightning callback, the research harness, a plain loop); nothing here needs Lightning.

Compute is counted in the units of Hu et al. (2017), Sec. 6.2: one weak-learner prediction of one
example is 1 unit and one weak-learner update is 2, so a streaming booster with ``N`` learners
spends ``3N`` units per example and stagewise GB's stage ``i`` spends ``i + 3``. Curves against
units compare methods at equal training compute, whatever their number of passes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from torchboost.boosters import Booster
from torchboost.learners import WeakLearners

__all__ = [
    "HeldOutEvaluator",
    "booster_hparams",
    "evaluate_held_out",
    "has_weak_learners",
    "learner_values",
]

Transform = Callable[[Tensor], Tensor]


@torch.no_grad()
def evaluate_held_out(booster: Booster, x: Tensor, y: Tensor, *, batch_size: int = 4096,
                      n_learners: int | None = None,
                      transform: Transform | None = None) -> dict[str, float]:
    """Mean held-out loss (and error rate for classifiers) of ``booster``, in chunks.

    ``transform`` (e.g. a :class:`~torchboost.data.DataStream`'s ``transform``) is applied to each
    chunk of ``x`` first; chunks are moved to the booster's device. ``n_learners`` evaluates the
    first ``k`` learners only (anytime prediction).
    """
    if len(x) == 0:
        raise ValueError("empty held-out set")
    device = next(itertools.chain(booster.parameters(), booster.buffers()),
                  torch.zeros(0)).device  # any model of the protocol, not only a Booster
    totals: dict[str, float] = {}
    for start in range(0, len(x), batch_size):
        x_part, y_part = x[start:start + batch_size], y[start:start + batch_size]
        if transform is not None:
            x_part = transform(x_part)
        # score(predict()), not evaluate(): this runs mid-stream, where the stall monitor's
        # judgement of a short stream's held-out rows (Booster.evaluate) would speak too early
        scores = booster.score(booster.predict(x_part.to(device), n_learners), y_part.to(device))
        for key, value in scores.items():
            totals[key] = totals.get(key, 0.0) + value * len(x_part)
    return {key: value / len(x) for key, value in totals.items()}


def has_weak_learners(model: Any) -> bool:
    """Whether ``model`` boosts weak learners (a :class:`~torchboost.WeakLearners` container):
    the per-learner curves and the anytime curve apply to it."""
    return isinstance(getattr(model, "learners", None), WeakLearners)


def learner_values(booster: Booster) -> dict[str, list[float]]:
    """Per-learner quantities, name → ``N`` values (learner ``i`` at index ``i − 1``): every
    per-learner tensor of :meth:`~torchboost.boosters.base.Booster.diagnostics` (``edge`` γ_i,
    ``target_norm``, ``fit_error``, OGB's ``sigma`` σ_i, a learned ``step`` η_i) and ``lr``,
    each learner's learning rate (one fused optimizer in stacked mode: the same for all).
    Empty for a model without weak learners (the chaining family's
    :class:`~torchboost.chaining.ChainingBooster`)."""
    if not has_weak_learners(booster):
        return {}
    n = booster.n_learners
    values: dict[str, list[float]] = {}
    for name, tensor in booster.diagnostics().items():
        if tensor.ndim == 1 and tensor.numel() == n:
            values[name] = [float(v) for v in tensor.tolist()]
    rates = [float(opt.param_groups[0]["lr"]) for opt in booster.learners.optimizers
             if "lr" in opt.param_groups[0]]
    if len(rates) == 1:
        rates = rates * n
    if len(rates) == n:
        values["lr"] = rates
    return values


def booster_hparams(booster: Booster) -> dict[str, Any]:
    """A booster's configuration for TensorBoard's HParams tab: its class, loss, number of
    learners, learner engine (stacked/loop), optimizer and learning rate (under a schedule, the
    rate it started from, and the schedule), and its step (``η``, ``"learned"``) and targets
    where it has them (a model without weak learners: its class and loss)."""
    if not has_weak_learners(booster):
        return {"booster": type(booster).__name__, "loss": booster.loss.name}
    optimizers = booster.learners.optimizers
    group = optimizers[0].param_groups[0] if optimizers else {}
    params: dict[str, Any] = {"booster": type(booster).__name__, "loss": booster.loss.name,
                              "n_learners": booster.n_learners, "mode": booster.learners.mode,
                              "optimizer": type(optimizers[0]).__name__ if optimizers else "",
                              "lr": float(group.get("initial_lr", group.get("lr", float("nan"))))}
    schedulers = booster.learners.schedulers
    if schedulers:  # the rate above is where the schedule started
        params["lr_scheduler"] = type(schedulers[0]).__name__
    if getattr(booster, "step_rule", None) is not None:
        params["step"] = "learned"
    elif isinstance(getattr(booster, "step", None), int | float):
        params["step"] = float(booster.step)
    if isinstance(getattr(booster, "targets", None), str):
        params["targets"] = booster.targets
    return params


class HeldOutEvaluator:
    """Evaluates a booster on a held-out set at every multiple of ``every_units`` compute units.

    :meth:`due` says whether the booster's compute has reached the next evaluation point;
    :meth:`__call__` evaluates and moves that point to the next multiple of ``every_units``
    strictly above the current compute (so at most one evaluation per training batch, however
    many multiples the batch crossed). The first point is at 0 units. With ``growth`` (a factor
    ``> 1``), the next point is also at most ``growth`` times the current compute, so that the
    start of a run, where ``every_units`` is coarse, is evaluated at geometrically spaced
    points and a log-scale plot has early points too (with ``growth`` the point after 0 units
    is the first batch). The schedule is checkpointable with :meth:`state_dict` /
    :meth:`load_state_dict`.

    Examples:
        >>> import torch
        >>> from torchboost import SGB
        >>> booster = SGB(lambda: torch.nn.Linear(2, 1), n_learners=2)
        >>> evaluator = HeldOutEvaluator(torch.randn(8, 2), torch.randn(8), every_units=100)
        >>> evaluator.due(booster.compute_units), sorted(evaluator(booster))
        (True, ['loss'])
        >>> evaluator.next_at, evaluator.due(60.0)
        (100.0, False)
    """

    def __init__(self, x: Tensor, y: Tensor, every_units: float, *, batch_size: int = 4096,
                 transform: Transform | None = None, growth: float | None = None) -> None:
        if not every_units > 0:
            raise ValueError(f"every_units must be > 0, got {every_units}")
        if growth is not None and not growth > 1:
            raise ValueError(f"growth must be > 1, got {growth}")
        if len(x) != len(y):
            raise ValueError(f"held-out x has {len(x)} rows but y has {len(y)}")
        self.x, self.y = x, y
        self.every_units = float(every_units)
        self.growth = None if growth is None else float(growth)
        self.batch_size = batch_size
        self.transform = transform
        self.next_at = 0.0

    def due(self, units: float) -> bool:
        """Whether ``units`` of compute have reached the next evaluation point."""
        return units >= self.next_at

    def __call__(self, booster: Booster) -> dict[str, float]:
        """Held-out scores of ``booster`` now; schedules the next evaluation."""
        units = float(booster.compute_units)
        self.next_at = (math.floor(units / self.every_units) + 1) * self.every_units
        if self.growth is not None:
            self.next_at = min(self.next_at, self.growth * units)
        return self.scores(booster)

    def scores(self, booster: Booster, n_learners: int | None = None) -> dict[str, float]:
        """Held-out scores of ``booster`` (its first ``n_learners``) without touching the
        schedule."""
        return evaluate_held_out(booster, self.x, self.y, batch_size=self.batch_size,
                                 n_learners=n_learners, transform=self.transform)

    def state_dict(self) -> dict[str, Any]:
        return {"every_units": self.every_units, "growth": self.growth, "next_at": self.next_at}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if float(state["every_units"]) != self.every_units:
            raise ValueError(f"checkpoint evaluated every {state['every_units']} units, this "
                             f"evaluator every {self.every_units}")
        growth = state.get("growth")  # absent from checkpoints older than the growth option
        if growth != self.growth:
            raise ValueError(f"checkpoint's evaluation schedule grew by {growth}, this "
                             f"evaluator's by {self.growth}")
        self.next_at = float(state["next_at"])
