"""PyTorch Lightning integration: one-pass streaming boosting with exact checkpoint/resume and
curves against compute units (Hu et al. 2017, Sec. 6.2: 1 unit per weak-learner prediction of one
example, 2 per update).

* :class:`StreamingBoosterModule` — a ``LightningModule`` whose training step is one boosting
  round, ``booster.learn(x, y)``, logging the progressive (test-then-train) scores;
* :class:`StreamingCallback` — held-out evaluation every ``K`` compute units, per-learner edges,
  target norms, OGB's σ, learning rates and the anytime curve, logged against units;
* :class:`BadInputLogger` — logs the rows a :class:`~torchboost.data.ScreenedStream` skipped.
* :class:`AtomicCheckpointIO` — checkpoint files that a killed process never leaves
  half-written; :func:`latest_checkpoint` — the newest one in a directory, to resume from.

The research harness built on it (the comparison driver, stopping rules, stagewise GB on the
unit schedule) is :mod:`torchboost.harness`.

Examples:
    >>> import lightning.pytorch as pl
    >>> import torch
    >>> from torchboost import SGB, TwoLayerNet
    >>> from torchboost.data import DataStream, synthetic_regression
    >>> ds = synthetic_regression(n=300, d=4)
    >>> stream = DataStream.from_dataset(ds, batch_size=30)
    >>> booster = SGB(lambda: TwoLayerNet(4, 3), n_learners=3)
    >>> callback = StreamingCallback(ds.x_test, ds.y_test, eval_every_units=2000,
    ...                              transform=stream.transform)
    >>> trainer = pl.Trainer(max_epochs=1, accelerator="cpu", logger=False,
    ...                      callbacks=[callback], enable_checkpointing=False,
    ...                      enable_model_summary=False, enable_progress_bar=False)
    >>> trainer.fit(StreamingBoosterModule(booster), train_dataloaders=stream)
    >>> trainer.global_step, booster.compute_units, [p["units"] for p in callback.history]
    (8, 2160, [0.0, 2160.0])
"""

from torchboost.evaluation import (
    HeldOutEvaluator,
    booster_hparams,
    evaluate_held_out,
    learner_values,
)
from torchboost.lightning.bad_input import BadInputLogger, screened_streams
from torchboost.lightning.callback import StreamingCallback
from torchboost.lightning.checkpoint_io import (
    AtomicCheckpointIO,
    CorruptCheckpointError,
    atomic_save,
    check_checkpoint,
    latest_checkpoint,
)
from torchboost.lightning.module import StreamingBoosterModule
from torchboost.lightning.round_optimizer import BoostingRound
from torchboost.lightning.scalars import (
    SECTIONS,
    learner_scalars,
    log_figure,
    log_hparams,
    log_learner_values,
    log_scalars,
    tag,
)

__all__ = [
    "SECTIONS",
    "AtomicCheckpointIO",
    "BadInputLogger",
    "BoostingRound",
    "CorruptCheckpointError",
    "HeldOutEvaluator",
    "StreamingBoosterModule",
    "StreamingCallback",
    "atomic_save",
    "booster_hparams",
    "check_checkpoint",
    "evaluate_held_out",
    "latest_checkpoint",
    "learner_scalars",
    "learner_values",
    "log_figure",
    "log_hparams",
    "log_learner_values",
    "log_scalars",
    "screened_streams",
    "tag",
]
