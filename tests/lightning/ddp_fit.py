"""Lightning fits on 2 CPU processes (``strategy="ddp"``, gloo), run by ``test_distributed.py``.

``python ddp_fit.py OUT_DIR`` trains a fresh booster of every kind in :data:`KINDS` on
:func:`make_stream` with ``Trainer(strategy="ddp", accelerator="cpu", devices=2)``; Lightning's
launcher re-executes this file for rank 1. Every rank saves ``OUT_DIR/{kind}_rank{r}.pt``: the
booster's ``state_dict``, its counters and the module's progressive scores. The test builds the
single-process reference from the same :func:`build_booster` and :func:`make_stream`.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from torchboost import OGB, SGB, Booster, ConvexHullOGB, ResidualSGB, SingleLearner, TwoLayerNet
from torchboost.data import DataStream, synthetic_classification, synthetic_regression
from torchboost.lightning import StreamingBoosterModule

N_FEATURES = 4
GLOBAL_BATCH = 25  # odd: the ranks' shards have 13 and 12 rows
N_ROWS = 300  # 240 training rows: 9 full global batches and a last one of 15 (shards 8 and 7)
KINDS = ("sgb", "ogb")
#: every booster that supports data-parallel training (the in-process replica test runs them all)
ALL_KINDS = (*KINDS, "residual_sgb", "convex_hull_ogb", "single_learner")


def make_stream(kind: str) -> DataStream:
    """The global stream: SGB classifies (logistic loss), OGB regresses (squared loss)."""
    make = synthetic_classification if kind == "sgb" else synthetic_regression
    data = make(n=N_ROWS, d=N_FEATURES, seed=1)
    return DataStream.from_dataset(data, batch_size=GLOBAL_BATCH, seed=2)


def build_booster(kind: str) -> Booster:
    """Seeded boosters with TwoLayerNet learners: SGB with stacked learners and ``y0="mean"`` (a
    synchronised label statistic); OGB with learners run one by one (``mode="loop"``) and
    ``η = 1``, where σ moves inside ``(0, 1)``; ResidualSGB (L1), ConvexHullOGB, SingleLearner."""
    torch.manual_seed(0)
    learner = partial(TwoLayerNet, N_FEATURES, 3)
    common: dict[str, Any] = {"n_learners": 3, "optimizer_kwargs": {"lr": 0.05}}
    if kind == "sgb":
        return SGB(learner, "logistic", y0="mean", **common)
    if kind == "ogb":
        return OGB(learner, "squared", step=1.0, mode="loop", **common)
    if kind == "residual_sgb":
        return ResidualSGB(learner, "absolute", **common)
    if kind == "convex_hull_ogb":
        return ConvexHullOGB(learner, "squared", **common)
    if kind == "single_learner":
        return SingleLearner(learner, "squared", y0="mean", optimizer_kwargs={"lr": 0.05})
    raise ValueError(kind)


def main(out: Path) -> None:
    for kind in KINDS:
        trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=2, max_epochs=1,
                             logger=False, enable_checkpointing=False,
                             enable_model_summary=False, enable_progress_bar=False)
        module = StreamingBoosterModule(build_booster(kind))
        trainer.fit(module, train_dataloaders=make_stream(kind))
        booster = module.booster
        torch.save({"state": booster.state_dict(), "steps": trainer.global_step,
                    "counters": (booster.compute_units, booster.samples_seen, booster.rounds),
                    "progressive": module.progressive_scores()},
                   out / f"{kind}_rank{trainer.global_rank}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
