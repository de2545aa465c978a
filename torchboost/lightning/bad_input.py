"""Logging the rows a screened training stream skipped to the trainer's loggers (TensorBoard)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl

from torchboost.data.batch_groups import BatchGroups
from torchboost.data.screening import ScreenedStream
from torchboost.lightning.module import train_iterables
from torchboost.lightning.scalars import log_scalars

__all__ = ["BadInputLogger", "screened_streams"]

_PREFIX = "bad_input/"


class BadInputLogger(pl.Callback):
    """Logs what the :class:`~torchboost.data.ScreenedStream` training iterable(s) of a fit have
    skipped (``policy="skip"``), against Lightning's step (boosting rounds):

    * ``bad_input/skipped_rows`` — rows skipped so far, all reasons;
    * ``bad_input/skipped_rows/<reason>`` — per reason of :data:`~torchboost.data.REASONS`;
    * ``bad_input/empty_batches`` and ``bad_input/dropped_batches`` — batches read without rows,
      and batches not handed on at all (empty, or every row bad).

    Counts of several screened streams are added up. They are logged at the first batch end and
    whenever they change at a batch end, and once more at the end of the epoch (bad batches after
    the last clean one are read then). The counts live in the streams, whose state Lightning
    checkpoints, so a resumed fit continues them.
    """

    def __init__(self) -> None:
        self._logged: dict[str, int] | None = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        self._log(trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._log(trainer)

    def _log(self, trainer: pl.Trainer) -> None:
        streams = screened_streams(trainer)
        if not streams:
            return
        counts: dict[str, int] = {}
        for stream in streams:
            for key, value in stream.counts().items():
                counts[_PREFIX + key] = counts.get(_PREFIX + key, 0) + value
        if counts != self._logged:
            log_scalars(trainer.loggers, counts, trainer.global_step)
            self._logged = counts


def screened_streams(trainer: pl.Trainer) -> list[ScreenedStream]:
    """The :class:`~torchboost.data.ScreenedStream` objects among the running fit's training
    iterables (one, or a list, tuple or mapping of them; none outside a fit), also when read in
    :class:`~torchboost.data.BatchGroups`."""
    loaders = [loader.stream if isinstance(loader, BatchGroups) else loader
               for loader in train_iterables(trainer)]
    return [loader for loader in loaders if isinstance(loader, ScreenedStream)]
