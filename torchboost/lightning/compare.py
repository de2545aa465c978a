"""One call: a streaming booster through Lightning, then stagewise GB from the same configuration,
both evaluated every ``K`` compute units and logged to one TensorBoard run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from torch import Tensor

from torchboost.boosters import Booster, StagewiseGB
from torchboost.data import DataStream, MultiPassStream, Standardize
from torchboost.lightning.callback import StreamingCallback
from torchboost.lightning.module import StreamingBoosterModule
from torchboost.lightning.stagewise import run_stagewise

__all__ = ["DEFAULT_EVAL_POINTS", "build_seeded", "fit_streaming", "stream_and_compare"]

#: Evaluations over the streaming run when no ``eval_every_units`` is given.
DEFAULT_EVAL_POINTS = 20

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


def fit_streaming(booster: Booster, stream: DataStream | MultiPassStream,
                  callback: StreamingCallback, *, logger: Logger | bool = False,
                  progress: bool = False, description: str = "stream",
                  ckpt_path: str | Path | None = None,
                  trainer_kwargs: Mapping[str, Any] | None = None) -> pl.Trainer:
    """Train ``booster`` on ``stream`` (one :class:`~torchboost.data.DataStream` pass or a
    :class:`~torchboost.data.MultiPassStream`, either way one epoch) as a
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


def stream_and_compare(
    booster_factory: Callable[[], Booster],
    gb_factory: Callable[[], StagewiseGB],
    train_x: Tensor,
    train_y: Tensor,
    test_x: Tensor,
    test_y: Tensor,
    *,
    batch_size: int = 32,
    seed: int = 0,
    standardize: Standardize = "auto",
    eval_every_units: float | None = None,
    log_dir: str | Path = "runs",
    name: str = "stream_and_compare",
    version: int | str | None = None,
    max_gb_epochs: int = 20,
    gb_patience: int = 2,
    gb_tol: float = 1e-3,
    eval_batch_size: int = 4096,
    progress: bool = False,
    history_path: str | Path | None = None,
    trainer_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Streaming boosting vs stagewise GB at equal compute (Hu et al. 2017, Fig. 2).

    1. ``booster_factory()`` (seeded by ``seed``) learns one pass over a
       :class:`~torchboost.data.DataStream` of ``(train_x, train_y)`` (``batch_size``, order
       ``seed``, standardisation ``standardize`` from training rows only) through
       :class:`StreamingBoosterModule` and :class:`StreamingCallback` on a Lightning ``Trainer``;
    2. ``gb_factory()`` (seeded by ``seed`` too, so a factory sharing the learner factory starts
       from the same learners) is trained by :func:`run_stagewise` over re-runs of the same
       stream, at most ``max_gb_epochs`` epochs per stage with patience ``gb_patience``.

    Step 1 is :func:`fit_streaming`; ``trainer_kwargs`` override its ``Trainer`` settings.

    Both are evaluated on ``(test_x, test_y)`` every ``eval_every_units`` compute units (default:
    the streaming run's total units / :data:`DEFAULT_EVAL_POINTS`) and log to one TensorBoard run
    under ``log_dir/name/version`` (tags ``test/loss``, ``gb/test_loss``, ... against units; see
    :class:`StreamingCallback` and :func:`run_stagewise`).

    Returns:
        ``{"sgb": history, "gb": history, "anytime": [...], "gb_stages": [...],
        "eval_every_units": K, "log_dir": str}``, also written as JSON to ``history_path`` if
        given. Each history is a list of evaluation points increasing in ``units``.
    """
    logger = TensorBoardLogger(save_dir=str(log_dir), name=name, version=version,
                               default_hp_metric=False)

    def make_stream() -> DataStream:
        return DataStream(train_x, train_y, batch_size=batch_size, seed=seed,
                          standardize=standardize)

    stream = make_stream()
    booster = build_seeded(booster_factory, seed)
    if eval_every_units is None:
        eval_every_units = booster.units_per_example * stream.n_samples / DEFAULT_EVAL_POINTS
    callback = StreamingCallback(test_x, test_y, eval_every_units,
                                 eval_batch_size=eval_batch_size, transform=stream.transform)
    trainer = fit_streaming(booster, stream, callback, logger=logger, progress=progress,
                            description=name, trainer_kwargs=trainer_kwargs)
    device = trainer.strategy.root_device
    gb = build_seeded(gb_factory, seed).to(device)
    gb_stream = make_stream()

    def gb_epoch() -> Iterator[tuple[Tensor, Tensor]]:
        gb_stream.reset()
        return ((x.to(device), y.to(device)) for x, y in gb_stream)

    gb_run = run_stagewise(gb, gb_epoch, test_x, test_y, eval_every_units=eval_every_units,
                           loggers=logger, transform=gb_stream.transform,
                           eval_batch_size=eval_batch_size, max_epochs=max_gb_epochs,
                           patience=gb_patience, tol=gb_tol, progress=progress)
    logger.finalize("success")
    results = {"sgb": callback.history, "gb": gb_run["history"], "anytime": callback.anytime,
               "gb_stages": gb_run["stages"], "eval_every_units": float(eval_every_units),
               "log_dir": logger.log_dir}
    if history_path is not None:
        path = Path(history_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2))
    return results
