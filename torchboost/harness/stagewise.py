"""Stagewise gradient boosting evaluated on the same compute-unit schedule as the streaming run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lightning.pytorch.loggers import Logger
from torch import Tensor

from torchboost.boosters import StagewiseGB
from torchboost.evaluation import HeldOutEvaluator, Transform
from torchboost.harness.stopping import TrainingClock
from torchboost.lightning.scalars import log_scalars, tag

__all__ = ["run_stagewise"]

Batches = Iterable[tuple[Tensor, Tensor]] | Callable[[], Iterable[tuple[Tensor, Tensor]]]


def run_stagewise(gb: StagewiseGB, batches: Batches, test_x: Tensor, test_y: Tensor, *,
                  eval_every_units: float, loggers: Logger | Iterable[Logger] | None = None,
                  transform: Transform | None = None, eval_batch_size: int = 4096,
                  eval_growth: float | None = None, max_epochs: int = 20, patience: int = 2,
                  tol: float = 1e-3, progress: bool = False,
                  validation: tuple[Tensor, Tensor] | None = None,
                  val_metric: str = "loss") -> dict[str, Any]:
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
        loggers: where ``test/loss``, ``test/error`` (classifiers) and ``stagewise/stage`` are
            logged with the compute units as step (the tag scheme of
            :mod:`torchboost.lightning.scalars`: give GB a run, i.e. a logger, of its own).
        max_epochs, patience, tol: the per-stage stopping rule of :meth:`StagewiseGB.fit`.
        validation: ``(val_x, val_y)``, a validation split of the training data (``transform``
            applies): each stage is then trained to convergence by early stopping on its
            ``val_metric`` (``"loss"`` or ``"error"``) after every epoch, keeping the best epoch's
            learner (``fit(validate=...)``); without it, on the training fit loss.
        progress: show ``fit``'s progress bar over stages.

    Returns:
        ``{"history": [...], "stages": [...]}``: evaluation points (``units``, ``samples``,
        ``test_loss``, ``test_error``, ``stage``, ``seconds``: training wall time so far,
        evaluations and validations excluded) increasing in units, starting at the booster's
        compute on entry and ending at its final compute, and ``fit``'s per-stage summaries.
    """
    evaluator = HeldOutEvaluator(test_x, test_y, eval_every_units, batch_size=eval_batch_size,
                                 transform=transform, growth=eval_growth)
    history: list[dict[str, float | int | None]] = []
    clock = TrainingClock()
    validate = None
    if validation is not None:
        val_scores = HeldOutEvaluator(*validation, eval_every_units, batch_size=eval_batch_size,
                                      transform=transform)

        def validate(model: StagewiseGB) -> float:
            with clock.paused():
                return val_scores.scores(model)[val_metric]

    def record(model: StagewiseGB) -> None:
        seconds = clock.seconds
        with clock.paused():
            units = float(model.compute_units)
            scores = evaluator(model)
        stage = int(model.stage)
        history.append({"units": units, "samples": model.samples_seen,
                        "test_loss": scores["loss"], "test_error": scores.get("error"),
                        "stage": stage, "seconds": seconds})
        log_scalars(loggers, {tag("test", "loss"): scores["loss"],
                              tag("test", "error"): scores.get("error"),
                              tag("stagewise", "stage"): stage}, step=units)

    def on_batch_end(model: StagewiseGB) -> None:
        if evaluator.due(model.compute_units):
            record(model)

    clock.start()
    record(gb)
    stages = gb.fit(batches, max_epochs=max_epochs, patience=patience, tol=tol,
                    progress=progress, on_batch_end=on_batch_end, validate=validate)
    if history[-1]["units"] == float(gb.compute_units):
        history.pop()  # re-evaluate: early stopping may have restored the last stage's learner
    record(gb)
    return {"history": history, "stages": stages}
