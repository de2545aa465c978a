"""Building boosters alike and one streaming fit on a Lightning ``Trainer``: the pieces of the
comparison driver, :func:`torchboost.harness.driver.run_comparison` (which runs SGB, its variants,
stagewise GB, the base learner and a wide network from one configuration)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import Logger

from torchboost.boosters import Booster
from torchboost.data import BatchGroups, DataStream, MultiPassStream
from torchboost.lightning.callback import StreamingCallback
from torchboost.lightning.module import StreamingBoosterModule

__all__ = ["build_seeded", "fit_streaming"]

BoosterT = TypeVar("BoosterT", bound=Booster)


def build_seeded(factory: Callable[[], BoosterT], seed: int) -> BoosterT:
    """``factory()`` with the global torch RNG seeded by ``seed``, so that two boosters built
    from the same learner factory start from identical learners; the caller's RNG state is
    restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory()


#: Most updates of the progress bar per streaming run (it refreshes every ``len(stream) // 200``
#: batches), so that a long stream neither floods a log file nor pays for redrawing every step.
PROGRESS_UPDATES = 200


class _RunProgressBar(TQDMProgressBar):
    """Lightning's training progress bar labelled ``description`` instead of the epoch number
    (the whole stream is one epoch), without the logger's version number."""

    def __init__(self, description: str, refresh_rate: int) -> None:
        super().__init__(refresh_rate=refresh_rate)
        self.description = description

    def on_train_epoch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        super().on_train_epoch_start(trainer, *args)
        self.train_progress_bar.set_description(self.description)

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           *args: Any) -> None:
        """One draw per update (Lightning's draws twice: the count, then the metrics; in a log
        file every update was printed twice)."""
        bar, n = self.train_progress_bar, args[-1] + 1  # (outputs, batch, batch_idx)
        if bar is None or bar.disable or not (n % self.refresh_rate == 0 or n == bar.total):
            return
        bar.set_postfix(self.get_metrics(trainer, pl_module), refresh=False)
        bar.n = n
        bar.refresh()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """A run stopped before the stream's end (a validation plateau, GB's compute) finishes
        its bar at its own length, not at the fraction of the stream it read."""
        bar = self.train_progress_bar
        if bar is not None and not bar.disable and bar.total and bar.n < bar.total:
            bar.total = bar.n
        super().on_train_epoch_end(trainer, pl_module)


def fit_streaming(booster: Booster, stream: DataStream | MultiPassStream | BatchGroups,
                  callback: StreamingCallback, *, logger: Logger | bool = False,
                  progress: bool = False, description: str = "stream",
                  ckpt_path: str | Path | None = None,
                  trainer_kwargs: Mapping[str, Any] | None = None) -> pl.Trainer:
    """Train ``booster`` on ``stream`` (one :class:`~torchboost.data.DataStream` pass or a
    :class:`~torchboost.data.MultiPassStream`, either way one epoch, possibly read in
    :class:`~torchboost.data.BatchGroups` of several rounds per step) as a
    :class:`StreamingBoosterModule` on a Lightning ``Trainer`` driven by ``callback``; return the
    trainer. ``ckpt_path`` resumes from a Lightning checkpoint of such a fit, exactly (see
    :class:`StreamingBoosterModule`).

    The trainer runs on the CPU, one epoch, with ``logger``, no checkpointing or model summary
    and, if ``progress``, Lightning's progress bar labelled ``description``, showing the
    progressive loss and the compute units (refreshed at most :data:`PROGRESS_UPDATES` times);
    ``trainer_kwargs`` override these settings (``callbacks`` there are added to ``callback``).
    """
    settings: dict[str, Any] = {
        "max_epochs": 1, "accelerator": "cpu", "devices": 1, "enable_checkpointing": False,
        "enable_model_summary": False, "enable_progress_bar": progress,
        "log_every_n_steps": min(50, len(stream)), **(trainer_kwargs or {}),
    }
    callbacks = [callback, *settings.pop("callbacks", [])]
    if settings["enable_progress_bar"]:
        callbacks.append(_RunProgressBar(description, max(1, len(stream) // PROGRESS_UPDATES)))
    trainer = pl.Trainer(logger=logger, callbacks=callbacks, **settings)
    trainer.fit(StreamingBoosterModule(booster), train_dataloaders=stream, ckpt_path=ckpt_path)
    return trainer
