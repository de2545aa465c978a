"""Lightning fits on 2 CPU processes (``strategy="ddp"``, gloo), run by ``test_distributed.py``.

``python ddp_fit.py OUT_DIR`` runs, with ``Trainer(strategy="ddp", accelerator="cpu",
devices=2)`` (Lightning's launcher re-executes this file for rank 1, and later fits reuse the
two processes), for every kind in :data:`KINDS`:

* ``whole``: one uninterrupted pass of a fresh booster over :func:`make_stream`;
* a run stopped by ``max_steps=STOP_STEP`` whose ``ModelCheckpoint`` (with
  :class:`~torchboost.lightning.AtomicCheckpointIO`) writes ``{kind}_ckpt/step=SAVE_STEP.ckpt``
  mid-epoch and then ``trainer.save_checkpoint`` writes ``{kind}_ckpt/stopped.ckpt``;
* ``mid_epoch``: a fresh module and stream resumed from the ``SAVE_STEP`` checkpoint with
  ``max_epochs=1`` (Lightning restores the stream position itself);
* ``stopped``: one resumed from ``stopped.ckpt``, whose epoch counts as finished, with
  ``max_epochs=-1`` and a :class:`~torchboost.lightning.StreamingCallback`, as the module's
  docstring prescribes (the module restores the stream position);

and ``screened``: an SGB pass over :func:`make_screened_stream` (bad rows skipped). Every rank
saves ``OUT_DIR/{kind}_{run}_rank{r}.pt`` (:func:`save_result`). The test builds the
single-process references from the same :func:`build_booster` and streams.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from torchboost import (
    OGB,
    SGB,
    Booster,
    ConvexHullOGB,
    ResidualSGB,
    SingleLearner,
    TwoLayerNet,
    cosine_schedule,
)
from torchboost.data import (
    BatchGroups,
    Dataset,
    DataStream,
    ScreenedStream,
    synthetic_classification,
    synthetic_regression,
)
from torchboost.lightning import AtomicCheckpointIO, StreamingBoosterModule, StreamingCallback

N_FEATURES = 4
GLOBAL_BATCH = 25  # odd: the ranks' shards have 13 and 12 rows
N_ROWS = 300  # 240 training rows: 9 full global batches and a last one of 15 (shards 8 and 7)
KINDS = ("sgb", "ogb")
#: every booster that supports data-parallel training (the in-process replica test runs them all)
ALL_KINDS = (*KINDS, "sgb_newton_learned", "residual_sgb", "convex_hull_ogb", "single_learner",
             "sgb_cosine", "sgb_chained")


SAVE_STEP = 4  # the ModelCheckpoint's mid-epoch save
STOP_STEP = 6  # the stopped run's max_steps
#: training rows made bad in :func:`make_screened_stream`: NaN features, out-of-range labels
BAD_FEATURE_ROWS = (3, 50, 51, 52, 120)
BAD_LABEL_ROWS = (7, 200)


def make_data(kind: str) -> Dataset:
    """SGB classifies (logistic loss), OGB regresses (squared loss)."""
    make = synthetic_classification if kind.startswith("sgb") else synthetic_regression
    return make(n=N_ROWS, d=N_FEATURES, seed=1)


def make_stream(kind: str) -> DataStream:
    """The global stream."""
    return DataStream.from_dataset(make_data(kind), batch_size=GLOBAL_BATCH, seed=2)


def make_screened_stream(booster: Booster) -> ScreenedStream:
    """The global SGB stream with :data:`BAD_FEATURE_ROWS` and :data:`BAD_LABEL_ROWS` spoilt,
    screened for ``booster`` with ``policy="skip"`` (unstandardised: NaN rows would spoil the
    warm-up statistics)."""
    data = make_data("sgb")
    x, y = data.x_train.clone(), data.y_train.clone()
    x[list(BAD_FEATURE_ROWS), 1] = float("nan")
    y[list(BAD_LABEL_ROWS)] = 5  # not a binary label
    stream = DataStream(x, y, batch_size=GLOBAL_BATCH, seed=2, standardize=None)
    return ScreenedStream(stream, booster, policy="skip")


def build_booster(kind: str) -> Booster:
    """Seeded boosters with TwoLayerNet learners: SGB with stacked learners and ``y0="mean"`` (a
    synchronised label statistic); OGB with learners run one by one (``mode="loop"``) and
    ``η = 1``, where σ moves inside ``(0, 1)``; SGB with Newton targets and learned steps;
    ResidualSGB (L1), ConvexHullOGB, SingleLearner; SGB under a cosine schedule over the 10
    rounds of a pass, warm-up included (``"sgb_cosine"``); SGB with chained learners
    (``"sgb_chained"``)."""
    torch.manual_seed(0)
    learner = partial(TwoLayerNet, N_FEATURES, 3)
    common: dict[str, Any] = {"n_learners": 3, "optimizer_kwargs": {"lr": 0.05}}
    if kind == "sgb":
        return SGB(learner, "logistic", y0="mean", **common)
    if kind == "sgb_newton_learned":  # Hessian weights and the step's Adam use global batches
        return SGB(learner, "logistic", y0="mean", targets="newton", step="learned",
                   step_lr=0.05, **common)
    if kind == "ogb":
        return OGB(learner, "squared", step=1.0, mode="loop", objective="linear", **common)
    if kind == "residual_sgb":
        return ResidualSGB(learner, "absolute", **common)
    if kind == "convex_hull_ogb":
        return ConvexHullOGB(learner, "squared", **common)
    if kind == "sgb_cosine":
        return SGB(learner, "logistic", y0="mean", lr_scheduler=cosine_schedule(10, warmup=2),
                   **common)
    if kind == "sgb_chained":
        return SGB(learner, "logistic", y0="mean", chained=True, **common)
    if kind == "single_learner":
        return SingleLearner(learner, "squared", y0="mean", optimizer_kwargs={"lr": 0.05})
    raise ValueError(kind)


class CountBatches(pl.Callback):
    """Counts the training batches of one fit (a resumed fit learns only the rest)."""

    def __init__(self) -> None:
        self.batches = 0

    def on_train_batch_end(self, *args: Any) -> None:
        self.batches += 1


def trainer(callbacks: tuple[pl.Callback, ...] = (), **overrides: Any) -> pl.Trainer:
    """A 2-process CPU DDP trainer of one pass, without logger, summary or progress bar, that
    counts its batches."""
    kwargs: dict[str, Any] = {"max_epochs": 1, "enable_checkpointing": False, **overrides}
    return pl.Trainer(strategy="ddp", accelerator="cpu", devices=2, logger=False,
                      enable_model_summary=False, enable_progress_bar=False,
                      callbacks=[*callbacks, CountBatches()], **kwargs)


def fit(trainer: pl.Trainer, kind: str, ckpt_path: Path | None = None) -> StreamingBoosterModule:
    """``trainer.fit`` of a fresh module on a fresh :func:`make_stream`."""
    module = StreamingBoosterModule(build_booster(kind))
    trainer.fit(module, train_dataloaders=make_stream(kind), ckpt_path=ckpt_path)
    return module


def save_result(path: Path, trainer: pl.Trainer, module: StreamingBoosterModule,
                **extra: Any) -> None:
    """The booster's ``state_dict`` and counters, the steps, the batches of this fit and the
    progressive scores."""
    booster = module.booster
    counter = next(c for c in trainer.callbacks if isinstance(c, CountBatches))
    torch.save({"state": booster.state_dict(), "steps": trainer.global_step,
                "batches": counter.batches,
                "counters": (booster.compute_units, booster.samples_seen, booster.rounds),
                "progressive": module.progressive_scores(), **extra},
               path.with_name(f"{path.name}_rank{trainer.global_rank}.pt"))


def main(out: Path) -> None:
    for kind in KINDS:
        whole = trainer()
        save_result(out / f"{kind}_whole", whole, fit(whole, kind))

        directory = out / f"{kind}_ckpt"
        saver = ModelCheckpoint(dirpath=directory, filename="{step}", save_top_k=-1,
                                every_n_train_steps=SAVE_STEP)
        stopped = trainer((saver,), max_steps=STOP_STEP, enable_checkpointing=True,
                          plugins=[AtomicCheckpointIO()])
        fit(stopped, kind)
        stopped.save_checkpoint(directory / "stopped.ckpt")

        resumed = trainer()
        module = fit(resumed, kind, ckpt_path=directory / f"step={SAVE_STEP}.ckpt")
        save_result(out / f"{kind}_mid_epoch", resumed, module)
        test = make_data(kind)
        # the callback stops the epoch-unbounded fit at the end of the stream
        tracker = StreamingCallback(test.x_test, test.y_test, eval_every_units=1e9)
        resumed = trainer((tracker,), max_epochs=-1)
        module = fit(resumed, kind, ckpt_path=directory / "stopped.ckpt")
        save_result(out / f"{kind}_stopped", resumed, module)

    grouped = trainer()  # 3 rounds per step: the groups' DataStream is sharded under them
    module = StreamingBoosterModule(build_booster("sgb"))
    grouped.fit(module, train_dataloaders=BatchGroups(make_stream("sgb"), 3))
    save_result(out / "sgb_grouped", grouped, module)

    screened = trainer()
    module = StreamingBoosterModule(build_booster("sgb"))
    stream = make_screened_stream(module.booster)
    screened.fit(module, train_dataloaders=stream)
    save_result(out / "sgb_screened", screened, module, counts=stream.counts())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
