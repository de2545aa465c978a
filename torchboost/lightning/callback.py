"""A Lightning callback that drives one-pass streaming training and logs against compute."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from matplotlib.figure import Figure
from torch import Tensor

from torchboost.evaluation import (
    HeldOutEvaluator,
    Transform,
    booster_hparams,
    has_weak_learners,
    learner_values,
)
from torchboost.lightning.module import StreamingBoosterModule
from torchboost.lightning.scalars import (
    log_figure,
    log_hparams,
    log_learner_values,
    log_scalars,
    tag,
)

__all__ = ["StreamingCallback", "anytime_figure"]


class StreamingCallback(pl.Callback):
    """Evaluates a :class:`StreamingBoosterModule` on a held-out set every ``eval_every_units``
    compute units and logs the curves against compute, as in Fig. 2 of Hu et al. (2017).

    Compute units are weak-learner predictions of one example, an update counting 2 (Sec. 6.2),
    so a streaming booster with ``N`` learners spends ``3N`` units per example.

    At the start of training (units 0), at the first batch end at or past each multiple of
    ``eval_every_units`` (and, with ``eval_growth``, at geometrically spaced points early on; see
    :class:`~torchboost.lightning.HeldOutEvaluator`), and at the end of the pass, it appends to
    :attr:`history` a dict with ``units``, ``samples``, ``test_loss``, ``test_error``,
    ``progressive_loss`` and ``progressive_error`` (``None`` where it does not apply: errors of
    regressors, progressive scores before the first batch), and logs, with the compute units as
    step:

    * ``test/loss``, ``test/error`` — held-out scores;
    * ``progressive/loss_vs_units``, ``progressive/error_vs_units`` — running progressive
      (test-then-train) means over the stream;
    * ``learners/edge``, ``learners/target_norm``, ``learners/fit_error``, ``learners/lr`` and,
      for OGB, ``learners/sigma`` — one histogram over the ``N`` learners each (flat scalars
      ``learners/<name>/learner_<i>`` for loggers other than TensorBoard); see
      :func:`~torchboost.lightning.learner_values`;
    * ``stall/not_beating_constant``, ``stall/learners_hurt``, ``stall/learners_still`` — 1
      once the booster's
      :class:`~torchboost.boosters.stall.StallMonitor` has seen the symptom.

    At the end it also logs the anytime curve, ``anytime/loss`` (and ``anytime/error``) of the
    first ``k`` learners with step ``k = 1..N`` and as a figure ``anytime/curve``, keeps it in
    :attr:`anytime`; the final per-learner quantities as curves against the learner index,
    ``learner_profile/<name>`` with step ``i = 1..N``; the run's configuration (``hparams``
    over :func:`~torchboost.lightning.booster_hparams`) with its final metrics
    (``final/test_loss``, ``final/test_error``, ``final/progressive_loss``, …,
    ``final/compute_units``) for TensorBoard's HParams tab; and writes
    ``{"history": ..., "anytime": ...}`` as JSON to ``history_path`` if given. The tag scheme
    is that of :mod:`torchboost.lightning.scalars`.

    One pass: at the end of the first training epoch the callback sets ``trainer.should_stop``,
    since a stream is seen once; ``max_epochs=-1`` or a ``max_steps`` beyond the stream's length
    therefore stop when the stream runs out (several passes over a small training set: train on
    a :class:`~torchboost.data.MultiPassStream`, which is one epoch). The schedule, history and
    anytime curve are part of Lightning checkpoints (:meth:`state_dict`), so a resumed run
    continues them exactly.

    Args:
        test_x, test_y: the held-out set (raw features if ``transform`` is given).
        eval_every_units: the evaluation spacing ``K`` in compute units.
        eval_batch_size: examples per forward pass during evaluation.
        eval_growth: evaluate also whenever compute has grown by this factor (``> 1``) since the
            last evaluation, for early points on log-scale plots; ``None``: multiples only.
        transform: applied to held-out features at each evaluation. Default ``"stream"``: the
            training stream's own ``transform`` (a :class:`~torchboost.data.DataStream` that
            standardises its batches: the held-out set is standardised alike, with statistics
            of the training stream only), nothing for a stream without one; ``None``: the
            held-out features are given in the units the booster is fed.
        history_path: where to write the JSON summary at the end of training.
        hparams: the run's configuration for the HParams tab (added to, and overriding,
            :func:`~torchboost.lightning.booster_hparams`); ``log_hparams=False`` logs none.
    """

    def __init__(self, test_x: Tensor, test_y: Tensor, eval_every_units: float, *,
                 eval_batch_size: int = 4096, transform: Transform | str | None = "stream",
                 eval_growth: float | None = None,
                 history_path: str | Path | None = None,
                 hparams: Mapping[str, Any] | None = None, log_hparams: bool = True) -> None:
        super().__init__()
        if isinstance(transform, str) and transform != "stream":
            raise ValueError(f"transform must be a callable, 'stream' or None, got {transform!r}")
        #: take the training stream's transform when training starts
        self._stream_transform = transform == "stream"
        self.evaluator = HeldOutEvaluator(test_x, test_y, eval_every_units,
                                          batch_size=eval_batch_size,
                                          transform=None if self._stream_transform else transform,
                                          growth=eval_growth)
        self.history_path = Path(history_path) if history_path is not None else None
        self.hparams = dict(hparams or {})
        self.log_hparams = log_hparams
        self.history: list[dict[str, float | int | None]] = []
        self.anytime: list[dict[str, float]] = []

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if not isinstance(pl_module, StreamingBoosterModule):
            raise TypeError("StreamingCallback drives a StreamingBoosterModule, got "
                            f"{type(pl_module).__name__}")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._stream_transform:  # the held-out set in the units the stream feeds
            stream_transform = getattr(trainer.train_dataloader, "transform", None)
            self.evaluator.transform = stream_transform if callable(stream_transform) else None
        if not self.history:
            self._evaluate(trainer, pl_module)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.evaluator.due(pl_module.booster.compute_units):
            self._evaluate(trainer, pl_module)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        booster = pl_module.booster
        if self.history[-1]["units"] != float(booster.compute_units):
            self._evaluate(trainer, pl_module)
        self.anytime = []
        for k in range(1, booster.n_learners + 1 if has_weak_learners(booster) else 1):
            scores = self.evaluator.scores(booster, n_learners=k)
            self.anytime.append({"n_learners": k, **scores})
            log_scalars(trainer.loggers, {tag("anytime", key): value
                                          for key, value in scores.items()}, step=k)
        if self.anytime:
            log_figure(trainer.loggers, "anytime/curve", lambda: anytime_figure(self.anytime),
                       step=booster.compute_units)
        for name, vector in learner_values(booster).items():
            for i, value in enumerate(vector, start=1):
                log_scalars(trainer.loggers, {tag("learner_profile", name): value}, step=i)
        if self.log_hparams:
            last = self.history[-1]
            final = {"test_loss": last["test_loss"], "test_error": last["test_error"],
                     "progressive_loss": last["progressive_loss"],
                     "progressive_error": last["progressive_error"],
                     "compute_units": last["units"], "samples": last["samples"]}
            log_hparams(trainer.loggers, {**booster_hparams(booster), **self.hparams}, final,
                        step=booster.compute_units)
        if self.history_path is not None and trainer.is_global_zero:
            self.history_path.parent.mkdir(parents=True, exist_ok=True)
            summary = {"history": self.history, "anytime": self.anytime}
            self.history_path.write_text(json.dumps(summary, indent=2))

    def _evaluate(self, trainer: pl.Trainer, pl_module: StreamingBoosterModule) -> None:
        booster = pl_module.booster
        units = float(booster.compute_units)
        scores = self.evaluator(booster)
        progressive = pl_module.progressive_scores()
        self.history.append({
            "units": units,
            "samples": booster.samples_seen,
            "test_loss": scores["loss"],
            "test_error": scores.get("error"),
            "progressive_loss": progressive["loss"],
            "progressive_error": progressive.get("error"),
        })
        scalars = {
            tag("test", "loss"): scores["loss"],
            tag("test", "error"): scores.get("error"),
            tag("progressive", "loss_vs_units"): progressive["loss"],
            tag("progressive", "error_vs_units"): progressive.get("error"),
        }
        if getattr(booster, "stall", None) is not None:  # 1 once a stall symptom was seen
            scalars.update({tag("stall", name): flag
                            for name, flag in booster.stall.flags().items()})
        log_scalars(trainer.loggers, scalars, step=units)
        if booster.samples_seen > 0:
            log_learner_values(trainer.loggers, learner_values(booster), step=units)

    def state_dict(self) -> dict[str, Any]:
        return {"evaluator": self.evaluator.state_dict(), "history": list(self.history),
                "anytime": list(self.anytime)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.evaluator.load_state_dict(state_dict["evaluator"])
        self.history = list(state_dict["history"])
        self.anytime = list(state_dict["anytime"])


def anytime_figure(anytime: Sequence[Mapping[str, float]]) -> Figure:
    """The anytime curve: held-out loss (and error rate, right axis) of the first ``k``
    learners against ``k``, from :attr:`StreamingCallback.anytime`."""
    fig = Figure(figsize=(5.0, 3.5))  # no pyplot: no global state, works headless
    ax = fig.subplots()
    ks = [point["n_learners"] for point in anytime]
    ax.plot(ks, [point["loss"] for point in anytime], marker="o", label="test loss")
    ax.set_xlabel("learners used (k)")
    ax.set_ylabel("test loss")
    if anytime and "error" in anytime[0]:
        right = ax.twinx()
        right.plot(ks, [point["error"] for point in anytime], marker="s", color="tab:orange",
                   label="test error")
        right.set_ylabel("test error rate")
    ax.set_title("anytime prediction")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
