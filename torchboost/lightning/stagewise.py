"""Stagewise gradient boosting evaluated on the same compute-unit schedule as the streaming run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lightning.pytorch.loggers import Logger
from torch import Tensor

from torchboost.boosters import StagewiseGB
from torchboost.lightning.evaluation import HeldOutEvaluator, Transform
from torchboost.lightning.scalars import log_scalars

__all__ = ["run_stagewise"]

Batches = Iterable[tuple[Tensor, Tensor]] | Callable[[], Iterable[tuple[Tensor, Tensor]]]


def run_stagewise(gb: StagewiseGB, batches: Batches, test_x: Tensor, test_y: Tensor, *,
                  eval_every_units: float, loggers: Logger | Iterable[Logger] | None = None,
                  transform: Transform | None = None, eval_batch_size: int = 4096,
                  eval_growth: float | None = None, max_epochs: int = 20, patience: int = 2,
                  tol: float = 1e-3, progress: bool = False,
                  prefix: str = "gb") -> dict[str, Any]:
    """Train ``gb`` stage by stage with :meth:`StagewiseGB.fit` and evaluate it every
    ``eval_every_units`` compute units — the GB baseline of Hu et al. (2017), Sec. 6.2.

    GB re-reads its training batches for many epochs per stage and recomputes the frozen
    learners' predictions for every example (stage ``i`` costs ``i + 3`` units per example), so
    against compute units it is directly comparable with a one-pass streaming curve from
    :class:`~torchboost.lightning.StreamingCallback` evaluated with the same ``K``.

    Args:
        gb: the stagewise booster (built like the streaming one: same learner factory, loss,
            optimizer settings and seed).
        batches: a re-iterable of ``(x, y)`` batches or a function returning a fresh pass (see
            :meth:`StagewiseGB.fit`); they must be on ``gb``'s device.
        test_x, test_y: the held-out set; ``transform`` is applied to ``test_x`` at each
            evaluation.
        eval_every_units: the evaluation spacing ``K``; ``eval_growth`` adds geometrically
            spaced early points (see :class:`~torchboost.lightning.HeldOutEvaluator`).
        loggers: where ``{prefix}/test_loss``, ``{prefix}/test_error`` (classifiers) and
            ``{prefix}/stage`` are logged with the compute units as step.
        max_epochs, patience, tol: the per-stage stopping rule of :meth:`StagewiseGB.fit`.
        progress: show ``fit``'s progress bar over stages.

    Returns:
        ``{"history": [...], "stages": [...]}``: evaluation points (``units``, ``samples``,
        ``test_loss``, ``test_error``, ``stage``) increasing in units, starting at the booster's
        compute on entry and ending at its final compute, and ``fit``'s per-stage summaries.
    """
    evaluator = HeldOutEvaluator(test_x, test_y, eval_every_units, batch_size=eval_batch_size,
                                 transform=transform, growth=eval_growth)
    history: list[dict[str, float | int | None]] = []

    def record(model: StagewiseGB) -> None:
        units = float(model.compute_units)
        scores = evaluator(model)
        stage = int(model.stage)
        history.append({"units": units, "samples": model.samples_seen,
                        "test_loss": scores["loss"], "test_error": scores.get("error"),
                        "stage": stage})
        log_scalars(loggers, {f"{prefix}/test_loss": scores["loss"],
                              f"{prefix}/test_error": scores.get("error"),
                              f"{prefix}/stage": stage}, step=units)

    def on_batch_end(model: StagewiseGB) -> None:
        if evaluator.due(model.compute_units):
            record(model)

    record(gb)
    stages = gb.fit(batches, max_epochs=max_epochs, patience=patience, tol=tol,
                    progress=progress, on_batch_end=on_batch_end)
    if history[-1]["units"] != float(gb.compute_units):
        record(gb)
    return {"history": history, "stages": stages}
