"""Fixtures of the Lightning tests: tiny seeded streams, booster builders, quiet CPU trainers."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, LRScheduler, SequentialLR

from torchboost import OGB, SGB, Booster, TwoLayerNet
from torchboost.data import Dataset, DataStream, synthetic_classification, synthetic_regression
from torchboost.testing import assert_same

N_FEATURES = 5
N_LEARNERS = 4
BATCH_SIZE = 50
LEARNING_RATE = 0.05


@pytest.fixture(scope="session")
def regression() -> Dataset:
    """2,000 training and 500 test rows of a smooth nonlinear regression."""
    return synthetic_regression(n=2500, d=N_FEATURES, seed=0)


@pytest.fixture(scope="session")
def classification() -> Dataset:
    """2,000 training and 500 test rows of a binary problem with curved boundaries."""
    return synthetic_classification(n=2500, d=N_FEATURES, n_classes=2, seed=0)


@pytest.fixture
def make_stream() -> Callable[[Dataset], DataStream]:
    """A fresh one-pass stream over a data set's training rows (40 batches of 50, seeded)."""
    return lambda data: DataStream.from_dataset(data, batch_size=BATCH_SIZE, seed=0)


@pytest.fixture
def make_booster() -> Callable[[str], Booster]:
    """Identically initialised boosters with N=4 TwoLayerNet(5, 4) learners:
    ``"sgb"`` (squared loss, stacked learners), ``"sgb_logistic"``, ``"ogb_logistic"`` (OGB's
    bounded learners, run one by one), all with the default (schedule-free) learners and rate;
    ``"sgb_scheduled"`` (``"sgb"`` with Adam at ``LEARNING_RATE`` under a torch warm-up then
    cosine schedule over the 40 rounds of a pass: ``SequentialLR`` of ``LinearLR`` and
    ``CosineAnnealingLR``); ``"sgb_chained"`` (``"sgb"`` with chained learners)."""

    def make(kind: str) -> Booster:
        torch.manual_seed(0)
        learner = partial(TwoLayerNet, N_FEATURES, 4)
        common: dict[str, Any] = {"n_learners": N_LEARNERS}  # the default learners and rate
        if kind == "sgb":
            return SGB(learner, "squared", **common)
        if kind == "sgb_logistic":
            return SGB(learner, "logistic", **common)
        if kind == "ogb_logistic":
            return OGB(learner, "logistic", **common)
        if kind == "sgb_chained":
            return SGB(learner, "squared", chained=True, **common)
        if kind == "sgb_scheduled":
            return SGB(learner, "squared", lr_scheduler=_warm_up_then_cosine,
                       optimizer=torch.optim.Adam, optimizer_kwargs={"lr": LEARNING_RATE},
                       **common)
        raise ValueError(kind)

    return make


def _warm_up_then_cosine(optimizer: torch.optim.Optimizer) -> LRScheduler:
    """5 rounds of linear warm-up from 10 % of the rate, then a cosine decay over 35 rounds."""
    return SequentialLR(optimizer, [LinearLR(optimizer, 0.1, total_iters=5),
                                    CosineAnnealingLR(optimizer, T_max=35)], milestones=[5])


@pytest.fixture
def trainer_kwargs() -> dict[str, Any]:
    """A quiet one-epoch CPU trainer without logger or checkpointing (override as needed)."""
    return {"max_epochs": 1, "accelerator": "cpu", "devices": 1, "logger": False,
            "enable_checkpointing": False, "enable_model_summary": False,
            "enable_progress_bar": False, "log_every_n_steps": 10}


@pytest.fixture
def assert_identical() -> Callable[[Any, Any], None]:
    """Recursive exact equality of nested state (:func:`torchboost.testing.assert_same`)."""
    return assert_same
