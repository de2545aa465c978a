"""Writing to Lightning loggers against an explicit x-axis (compute units, learners), in one
tag scheme that every writer can share.

**The tag scheme.** A tag is ``<section>/<quantity>`` (:func:`tag`); the method (SGB, GB, the
base learner, …) is the *run* — its own log directory, e.g. ``TensorBoardLogger(name=...,
version=method)`` — never part of the tag, so TensorBoard overlays the methods on one chart per
quantity. The sections (:data:`SECTIONS`) and their x-axes:

==================  ==========================================================================
``test/``           held-out scores (``loss``, ``error``); step = compute units
``progressive/``    test-then-train scores over the stream; step = compute units
                    (``*_vs_units``) or Lightning's batch counter (the module's own)
``learners/``       per-learner quantities (``edge``, ``target_norm``, ``fit_error``,
                    ``sigma``, ``step``, ``lr``): ONE histogram over the N learners per
                    quantity (TensorBoard's Histograms/Distributions tabs); step = units
``learner_profile/``  the same quantities at the end of training as one curve against the
                    learner index ``i = 1..N`` (which learner has which edge)
``anytime/``        held-out scores of the first ``k`` learners; step = ``k``; with a figure
                    ``anytime/curve`` (Images tab)
``final/``          the run's final metrics, shown with its configuration in the HParams tab
``stall/``          1 once the booster's stall monitor saw a symptom (``not_beating_constant``,
                    ``learners_hurt``, ``learners_still``); step = compute units
``stagewise/``      stagewise GB's ``stage`` (the learner in training); step = compute units
==================  ==========================================================================

Loggers other than TensorBoard (CSV, …) get per-learner quantities as flat scalars
``learners/<quantity>/learner_<i>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from matplotlib.figure import Figure

from torchboost.boosters import Booster
from torchboost.evaluation import learner_values

__all__ = ["SECTIONS", "learner_scalars", "log_figure", "log_hparams", "log_learner_values",
           "log_scalars", "tag"]

#: The sections of the tag scheme (see the module docstring).
SECTIONS = ("test", "progressive", "learners", "learner_profile", "anytime", "final", "stall",
            "stagewise")

Loggers = Logger | Iterable[Logger] | None


def tag(section: str, quantity: str) -> str:
    """``"<section>/<quantity>"`` for one of :data:`SECTIONS`.

    Examples:
        >>> tag("test", "loss"), tag("learners", "edge")
        ('test/loss', 'learners/edge')
    """
    if section not in SECTIONS:
        raise ValueError(f"unknown tag section {section!r}; use one of {SECTIONS}")
    if not quantity or "/" in quantity:
        raise ValueError(f"a quantity is one non-empty path component, got {quantity!r}")
    return f"{section}/{quantity}"


def _loggers(loggers: Loggers) -> list[Logger]:
    if loggers is None:
        return []
    return [loggers] if isinstance(loggers, Logger) else list(loggers)


def _step(step: float) -> int:
    if not math.isfinite(step):
        raise ValueError(f"step must be finite, got {step}")
    return int(step)


def log_scalars(loggers: Loggers, scalars: Mapping[str, float | None], step: float) -> None:
    """Log ``scalars`` at x-axis value ``step`` (rounded down to an int) to every logger.

    ``None`` entries (a score that does not apply, e.g. the error rate of a regressor) are
    skipped. For a :class:`~lightning.pytorch.loggers.TensorBoardLogger`, ``log_metrics`` is
    ``logger.experiment.add_scalar(tag, value, global_step=step)`` per tag, so a tag's curve is
    drawn against ``step`` (compute units, or ``k`` for anytime curves) rather than against
    Lightning's batch counter; other loggers (CSV, ...) record ``step`` as their step column.
    """
    metrics = {name: float(value) for name, value in scalars.items() if value is not None}
    if not metrics:
        return
    step = _step(step)
    for logger in _loggers(loggers):
        logger.log_metrics(metrics, step=step)


def log_learner_values(loggers: Loggers, values: Mapping[str, Sequence[float]],
                       step: float) -> None:
    """Per-learner quantities (name → N values) at ``step``: one histogram over the learners
    per quantity, ``learners/<name>``, in TensorBoard; flat scalars
    ``learners/<name>/learner_<i>`` (``i = 1..N``) for other loggers."""
    if not values:
        return
    step = _step(step)
    for logger in _loggers(loggers):
        if isinstance(logger, TensorBoardLogger):
            for name, vector in values.items():
                logger.experiment.add_histogram(tag("learners", name),
                                                np.asarray(vector, dtype=np.float64),
                                                global_step=step)
        else:
            logger.log_metrics({f"{tag('learners', name)}/learner_{i}": float(v)
                                for name, vector in values.items()
                                for i, v in enumerate(vector, start=1)}, step=step)


def log_hparams(loggers: Loggers, params: Mapping[str, Any],
                metrics: Mapping[str, float | None], step: float = 0) -> None:
    """The run's configuration ``params`` with its final ``metrics`` (logged as
    ``final/<name>`` scalars at ``step``): TensorBoard's HParams tab shows one row per run.
    Values that are not numbers, strings or booleans are written as strings."""
    final = {tag("final", name): float(value) for name, value in metrics.items()
             if value is not None}
    clean = {key: value if isinstance(value, bool | int | float | str) else str(value)
             for key, value in params.items()}
    step = _step(step)
    for logger in _loggers(loggers):
        if isinstance(logger, TensorBoardLogger):
            logger.log_hyperparams(clean, metrics=final, step=step)
        else:
            logger.log_hyperparams(clean)
            if final:
                logger.log_metrics(final, step=step)


def log_figure(loggers: Loggers, name: str, figure: Figure | Callable[[], Figure],
               step: float = 0) -> None:
    """A matplotlib figure as an image ``name`` (TensorBoard only; other loggers skip it).
    ``figure`` may be a function making it, called only when some logger takes images."""
    step = _step(step)
    writers = [logger for logger in _loggers(loggers) if isinstance(logger, TensorBoardLogger)]
    if not writers:
        return
    if callable(figure) and not isinstance(figure, Figure):
        figure = figure()
    for logger in writers:
        logger.experiment.add_figure(name, figure, global_step=step, close=False)

def learner_scalars(booster: Booster) -> dict[str, float]:
    """:func:`learner_values` as flat scalars ``learners/<name>/learner_<i>`` (``i = 1..N``,
    as in the papers), for loggers without histograms; see
    :mod:`torchboost.lightning.scalars` for the tag scheme."""
    return {f"{tag('learners', name)}/learner_{i}": value
            for name, vector in learner_values(booster).items()
            for i, value in enumerate(vector, start=1)}
