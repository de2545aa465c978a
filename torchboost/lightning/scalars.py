"""Writing scalars to Lightning loggers against an explicit x-axis (compute units, learners)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from lightning.pytorch.loggers import Logger

__all__ = ["log_scalars"]


def log_scalars(loggers: Logger | Iterable[Logger] | None, scalars: Mapping[str, float | None],
                step: float) -> None:
    """Log ``scalars`` at x-axis value ``step`` (rounded down to an int) to every logger.

    ``None`` entries (a score that does not apply, e.g. the error rate of a regressor) are
    skipped. For a :class:`~lightning.pytorch.loggers.TensorBoardLogger`, ``log_metrics`` is
    ``logger.experiment.add_scalar(tag, value, global_step=step)`` per tag, so a tag's curve is
    drawn against ``step`` (compute units, or ``k`` for anytime curves) rather than against
    Lightning's batch counter; other loggers (CSV, ...) record ``step`` as their step column.
    """
    if loggers is None:
        return
    if isinstance(loggers, Logger):
        loggers = [loggers]
    metrics = {tag: float(value) for tag, value in scalars.items() if value is not None}
    if not metrics:
        return
    if not math.isfinite(step):
        raise ValueError(f"step must be finite, got {step}")
    for logger in loggers:
        logger.log_metrics(metrics, step=int(step))
