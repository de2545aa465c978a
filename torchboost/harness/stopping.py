"""When a streaming method has converged: a plateau of its validation curve, a compute budget or a
cap on passes — and a Lightning callback that applies the rule to passes over a training set.

The rule (:class:`StoppingRule`) for a streaming method (the base learner, a wide network, SGB)
that streams seeded passes over the training rows one after another and is evaluated on a
validation split at every evaluation point:

* **budget** — stop as soon as its compute units reach ``max_units`` (after any batch, so that
  methods compared "at GB's compute" stop within one batch of it; within one group of batches
  for a stream read in :class:`~torchboost.data.BatchGroups`);
* at the end of a pass, **plateau** — stop once at least ``min_passes`` passes are done and the
  best validation score within the last quarter of the units spent so far is not at least a
  relative ``plateau_tol`` (1 %) better than the best score before that quarter;
* at the end of a pass, **max_passes** — stop after ``max_passes`` passes.

Scores are "lower is better" (a loss or an error rate).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
from torch import Tensor

from torchboost.data.batch_groups import BatchGroup
from torchboost.evaluation import HeldOutEvaluator, Transform
from torchboost.lightning.callback import StreamingCallback
from torchboost.lightning.module import StreamingBoosterModule

__all__ = ["STOP_REASONS", "ConvergenceCallback", "StoppingRule", "TrainingClock"]

#: Why a streaming run stopped (see :class:`StoppingRule`).
STOP_REASONS = ("budget", "plateau", "max_passes")


@dataclass(frozen=True)
class StoppingRule:
    """The stopping rule of the module docstring.

    Examples:
        >>> rule = StoppingRule(plateau_tol=0.01, min_passes=2, max_passes=50, max_units=None)
        >>> curve = [(0, 1.0), (100, 0.5), (200, 0.4), (300, 0.399), (400, 0.398)]
        >>> rule.plateaued(curve)  # best of (300, 400] is 0.398, before it 0.399: < 1 % better
        True
        >>> rule.check(curve, units=400, passes=4, end_of_pass=True)
        'plateau'
        >>> rule.check(curve, units=400, passes=1, end_of_pass=True) is None  # min_passes
        True
    """

    plateau_tol: float = 0.01
    min_passes: int = 2
    max_passes: int = 50
    max_units: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.plateau_tol < 1:
            raise ValueError(f"plateau_tol must lie in [0, 1), got {self.plateau_tol}")
        if not 1 <= self.min_passes <= self.max_passes:
            raise ValueError(f"need 1 <= min_passes <= max_passes, got {self.min_passes}, "
                             f"{self.max_passes}")
        if self.max_units is not None and not self.max_units > 0:
            raise ValueError(f"max_units must be > 0, got {self.max_units}")

    def plateaued(self, curve: Sequence[tuple[float, float]]) -> bool:
        """Whether the best score in the last quarter of the units of ``curve`` (``(units,
        score)`` pairs in increasing units) improves on the best score before it by less than a
        relative ``plateau_tol``. ``False`` while either part of the curve is empty."""
        if not curve:
            return False
        cut = 0.75 * curve[-1][0]
        before = [score for units, score in curve if units <= cut]
        recent = [score for units, score in curve if units > cut]
        if not before or not recent:
            return False
        best_before = min(before)
        return best_before - min(recent) < self.plateau_tol * abs(best_before)

    def check(self, curve: Sequence[tuple[float, float]], *, units: float, passes: int,
              end_of_pass: bool) -> str | None:
        """The reason to stop now (one of :data:`STOP_REASONS`) or ``None``; ``passes`` is the
        number of completed passes, ``curve`` the validation curve so far."""
        if self.max_units is not None and units >= self.max_units:
            return "budget"
        if not end_of_pass:
            return None
        if passes >= self.max_passes:  # the cap first: a run told to do P passes did them
            return "max_passes"
        if passes >= self.min_passes and self.plateaued(curve):
            return "plateau"
        return None


class TrainingClock:
    """Wall-clock seconds of training: running from :meth:`start`, paused inside
    :meth:`paused` blocks (held-out evaluations), so curves against wall time exclude them."""

    def __init__(self) -> None:
        self._started: float | None = None
        self._paused = 0.0

    def start(self, seconds: float = 0.0) -> None:
        """Start counting from ``seconds`` already trained (a resumed run)."""
        self._started, self._paused = time.perf_counter() - seconds, 0.0

    @property
    def seconds(self) -> float:
        """Training seconds so far (0 before :meth:`start`)."""
        if self._started is None:
            return 0.0
        return time.perf_counter() - self._started - self._paused

    @contextmanager
    def paused(self) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self._paused += time.perf_counter() - began


class ConvergenceCallback(StreamingCallback):
    """A :class:`~torchboost.lightning.StreamingCallback` over consecutive passes of a training
    set (a :class:`~torchboost.data.MultiPassStream` of ``pass_batches`` batches per pass, one
    epoch) that stops the fit by ``rule`` (:class:`StoppingRule`).

    At every held-out evaluation point (every ``eval_every_units``, geometrically early on with
    ``eval_growth``) and at the end of every pass it scores the booster on the validation split
    ``(val_x, val_y)`` as well — ``val_metric``, ``"loss"`` or ``"error"`` — and checks the rule
    against that validation curve; the held-out (test) set is only reported. Each :attr:`history`
    entry gains ``seconds`` (training wall time so far, evaluations excluded, see
    :class:`TrainingClock`) and ``val`` (the validation score). :attr:`stop_reason` says which
    rule stopped the run, :attr:`passes` how many passes it completed (a run stopped by the
    budget may end inside a pass).

    A stream read in :class:`~torchboost.data.BatchGroups` is checked at group ends: the batches
    of each group count towards the passes, and a pass that ends inside a group is evaluated,
    and may stop the run, at the group's end.
    """

    def __init__(self, test_x: Tensor, test_y: Tensor, eval_every_units: float, *,
                 val_x: Tensor, val_y: Tensor, rule: StoppingRule, pass_batches: int,
                 val_metric: str = "loss", eval_batch_size: int = 4096,
                 transform: Transform | None = None, eval_growth: float | None = None) -> None:
        super().__init__(test_x, test_y, eval_every_units, eval_batch_size=eval_batch_size,
                         transform=transform, eval_growth=eval_growth)
        if pass_batches < 1:
            raise ValueError(f"pass_batches must be >= 1, got {pass_batches}")
        self.validation = HeldOutEvaluator(val_x, val_y, eval_every_units,
                                           batch_size=eval_batch_size, transform=transform)
        self.rule, self.pass_batches, self.val_metric = rule, pass_batches, val_metric
        self.clock = TrainingClock()
        self._resumed_seconds = 0.0
        self.val_curve: list[tuple[float, float]] = []
        self.stop_reason: str | None = None
        self.batches = 0

    @property
    def passes(self) -> int:
        """Completed passes over the training set."""
        return self.batches // self.pass_batches

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.clock.start(self._resumed_seconds)
        super().on_train_start(trainer, pl_module)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        passes = self.passes
        self.batches += batch.read if isinstance(batch, BatchGroup) else 1
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        units = float(pl_module.booster.compute_units)
        end_of_pass = self.passes > passes
        if end_of_pass and self.history[-1]["units"] != units:
            self._evaluate(trainer, pl_module)
        reason = self.rule.check(self.val_curve, units=units, passes=self.passes,
                                 end_of_pass=end_of_pass)
        if reason is not None:
            self.stop_reason = reason
            trainer.should_stop = True

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self.stop_reason is None:  # the stream ran out: all its passes were streamed
            self.stop_reason = "max_passes"

    def _evaluate(self, trainer: pl.Trainer, pl_module: StreamingBoosterModule) -> None:
        seconds = self.clock.seconds
        with self.clock.paused():
            super()._evaluate(trainer, pl_module)
            booster = pl_module.booster
            score = self.validation.scores(booster)[self.val_metric]
        self.history[-1].update(seconds=seconds, val=score)
        self.val_curve.append((float(booster.compute_units), score))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "val_curve": list(self.val_curve),
                "stop_reason": self.stop_reason, "batches": self.batches,
                "seconds": self.clock.seconds}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.val_curve = [tuple(point) for point in state_dict["val_curve"]]
        self.stop_reason = state_dict["stop_reason"]
        self.batches = int(state_dict["batches"])
        self._resumed_seconds = float(state_dict.get("seconds", 0.0))
