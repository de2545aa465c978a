"""A LightningModule that trains any streaming booster in one pass, test-then-train."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import lightning.pytorch as pl
from lightning.fabric.utilities.data import sized_len
from torch import Tensor

from torchboost.boosters import Booster
from torchboost.lightning.round_optimizer import BoostingRound

__all__ = ["StreamingBoosterModule"]

_CHECKPOINT_KEY = "torchboost_progressive"


class StreamingBoosterModule(pl.LightningModule):
    """Lightning wrapper of a :class:`~torchboost.boosters.base.Booster`: one training step is one
    boosting round, ``booster.learn(x, y)``, on the next mini-batch of the stream.

    **Optimisation.** ``automatic_optimization`` is off: the booster's own per-learner optimizers
    (Adam by default) stay in charge. :meth:`configure_optimizers` returns a
    :class:`~torchboost.lightning.BoostingRound`, a stateless proxy whose ``step`` runs the round,
    so that Lightning counts one step per round (``global_step``, ``max_steps``,
    ``ModelCheckpoint(every_n_train_steps=...)`` work as usual) without touching any parameter.

    **Logging.** Every step logs the progressive-validation scores of the batch — the loss (and
    error rate for classifiers) of the prediction made *before* the update, as returned by
    ``learn`` — and their running means over the stream so far (``progressive/loss``,
    ``progressive/loss_mean``, ``progressive/error``, ``progressive/error_mean``), plus
    ``compute_units``: weak-learner predictions of one example, an update counting 2 (Hu et al.
    2017, Sec. 6.2). Loss and units show in the progress bar. These are drawn against Lightning's
    step (batches); :class:`~torchboost.lightning.StreamingCallback` adds curves against units.

    **Held-out evaluation.** :meth:`validation_step` logs ``val/loss`` (and ``val/error``) of
    ``booster.evaluate`` on validation batches, averaged over examples.

    **Checkpoints and exact resumption.** Resuming with ``trainer.fit(module, stream,
    ckpt_path=...)`` on a freshly built, identical stream gives exactly (bit for bit on CPU) the
    booster of an uninterrupted pass, because a checkpoint holds all three parts of the state:

    1. *the booster* — a submodule, so the ``state_dict`` has all of it: learner parameters,
       algorithm buffers (σ, running label statistics, edge sums) and, as ``_extra_state``, the
       learners' optimizer states and the ``compute_units`` / ``samples_seen`` / ``rounds``
       counters;
    2. *the stream position* — a training iterable with ``state_dict()`` / ``load_state_dict()``,
       such as :class:`~torchboost.data.DataStream`, is "stateful" to Lightning, which saves its
       state (batches consumed, standardisation statistics) in every checkpoint and, when it
       restarts inside an epoch, loads it into the new stream before iterating. Because a
       ``DataStream`` has a length, Lightning does not prefetch from it, so a checkpoint written
       at the end of step ``k`` (``ModelCheckpoint`` saves in ``on_train_batch_end``) records
       exactly ``k`` consumed batches — the ``k`` rounds the saved booster has learned — and
       the resumed run continues with batch ``k``. Lightning loads no loader state when the
       checkpoint's epoch counts as finished (a run stopped by ``max_steps``, resumed by an
       epoch-based trainer); :meth:`on_save_checkpoint` therefore stores the stream states
       too, and :meth:`on_train_start` loads them in that case;
    3. *the progressive sums* — stored by :meth:`on_save_checkpoint`.

    Learning is deterministic given the state and the batches, hence the identical result. To
    use a checkpointed booster outside a fit, pass a freshly built one of the same configuration:
    ``StreamingBoosterModule.load_from_checkpoint(path, booster=build())``.
    Limits, enforced or documented:

    * a non-resumable training iterable (a plain ``DataLoader``) would restart from its first
      batch while Lightning skips the count it has already done — a silently different stream —
      so :meth:`on_train_start` raises instead when a fit resumes mid-pass without one;
    * the iterable must have a length, otherwise Lightning prefetches one batch and the saved
      position is one batch ahead of the booster (:meth:`on_train_start` raises too);
    * a run stopped by ``Trainer(max_steps=k)`` counts its epoch as finished, so a resuming
      ``Trainer(max_epochs=1)`` finds nothing left to do: resume with ``max_epochs=-1`` and
      either a larger ``max_steps`` or a :class:`~torchboost.lightning.StreamingCallback`
      (which stops at the end of the stream).

    Lightning 2.6 warns on every ``ModelCheckpoint(every_n_train_steps=...)`` save under manual
    optimisation that the checkpoint holds the state *after* the step: that is the state that
    matches the saved stream position.
    """

    def __init__(self, booster: Booster) -> None:
        super().__init__()
        if not isinstance(booster, Booster):
            raise TypeError(f"booster must be a torchboost Booster, got {type(booster).__name__}")
        self.booster = booster
        self.automatic_optimization = False
        self._sums = {"loss": 0.0, "error": 0.0}
        self._samples = 0
        self._pending_streams: list[dict[str, Any]] = []

    def forward(self, x: Tensor) -> Tensor:
        """The booster's prediction with all its learners."""
        return self.booster.predict(x)

    def configure_optimizers(self) -> BoostingRound:
        return BoostingRound(self.booster.parameters())

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        prediction = self.optimizers().step(closure=partial(self.booster.learn, x, y))
        scores = self.booster.score(prediction, y)
        size = x.shape[0]
        self._samples += size
        for key, value in scores.items():
            self._sums[key] += value * size
        means = self.progressive_scores()
        self.log("progressive/loss", scores["loss"], prog_bar=True, batch_size=size)
        self.log("progressive/loss_mean", means["loss"], batch_size=size)
        if "error" in scores:
            self.log("progressive/error", scores["error"], batch_size=size)
            self.log("progressive/error_mean", means["error"], batch_size=size)
        self.log("compute_units", float(self.booster.compute_units), prog_bar=True,
                 batch_size=size)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        for key, value in self.booster.evaluate(x, y).items():
            self.log(f"val/{key}", value, batch_size=x.shape[0])

    def progressive_scores(self) -> dict[str, float | None]:
        """Running means of the progressive loss and error rate over the examples trained on
        through this module (``None`` before the first batch; no error for regressors)."""
        keys = ("loss", "error") if self.booster.loss.is_classifier else ("loss",)
        return {key: self._sums[key] / self._samples if self._samples else None for key in keys}

    def on_train_start(self) -> None:
        """Puts the training stream where the checkpoint left it, or refuses to resume."""
        loaders = self._train_iterables()
        pending, self._pending_streams = self._pending_streams, []
        restore_here = bool(pending) and not self.trainer.fit_loop.restarting
        if restore_here:
            # Lightning restored no loader state: the checkpoint's epoch counts as finished
            # (e.g. a run stopped by ``max_steps``) and the trainer starts a new one. Loading
            # here takes effect because a DataStream reads its position when first advanced.
            stateful = [loader for loader in loaders if _is_stateful(loader)]
            if len(stateful) != len(pending):
                raise RuntimeError(f"the checkpoint holds the state of {len(pending)} training "
                                   f"stream(s), this fit has {len(stateful)}")
            for loader, state in zip(stateful, pending, strict=True):
                loader.load_state_dict(state)
        done = self.trainer.fit_loop.epoch_loop.batch_progress.current.completed
        if done or restore_here:
            problems = [f"{type(loader).__name__}: {problem}" for loader in loaders
                        if (problem := _resume_problem(loader)) is not None]
            if problems:
                raise RuntimeError(
                    "cannot resume inside the stream exactly: " + "; ".join(problems) + ". Train "
                    "on a torchboost.data.DataStream (or any sized iterable with "
                    "state_dict/load_state_dict) to resume mid-stream.")

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        streams = [loader.state_dict() for loader in self._train_iterables()
                   if _is_stateful(loader)]
        checkpoint[_CHECKPOINT_KEY] = {"sums": dict(self._sums), "samples": self._samples,
                                       "streams": streams}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint[_CHECKPOINT_KEY]
        self._sums = dict(state["sums"])
        self._samples = int(state["samples"])
        self._pending_streams = state["streams"]

    def _train_iterables(self) -> list[Any]:
        """The training iterables of the running fit (none outside one)."""
        loaders = self.trainer.train_dataloader
        if loaders is None:
            return []
        if isinstance(loaders, Mapping):
            return list(loaders.values())
        return list(loaders) if isinstance(loaders, list | tuple) else [loaders]


def _resume_problem(loader: Any) -> str | None:
    """Why ``loader`` cannot continue exactly from a checkpoint's position, if it cannot."""
    if not _is_stateful(loader):
        return "it has no state_dict/load_state_dict, so it would replay the stream from its start"
    if sized_len(loader) is None:
        return ("it has no length, so Lightning prefetched from it and its saved position is a "
                "batch ahead of the booster")
    return None


def _is_stateful(loader: Any) -> bool:
    """Whether Lightning can checkpoint ``loader``'s position (its ``_Stateful`` protocol)."""
    return callable(getattr(loader, "state_dict", None)) and callable(
        getattr(loader, "load_state_dict", None))
