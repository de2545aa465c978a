"""One registry entry per data set: its loader, its settings, the paper's numbers, its metric."""

from __future__ import annotations

import pytest
import torch

from torchboost.data import Dataset
from torchboost.harness.configs import (
    DATASETS,
    DatasetSpec,
    ExperimentConfig,
    load_dataset,
    register_dataset,
)


def test_the_registry_holds_the_papers_settings():
    assert list(DATASETS)[:7] == ["abalone", "adult", "mnist", "keggundirected", "protein",
                                  "kin40k", "pol"]
    mnist = DATASETS["mnist"]
    assert (mnist.loss, mnist.n_learners, mnist.n_outputs, mnist.metric) == (
        "softmax", 8, 10, "error")
    assert DATASETS["abalone"].paper == (8.2848, 2.1411, 2.1532) and DATASETS["abalone"].bundled
    assert DATASETS["kin40k"].metric == "MSE"
    assert DATASETS["kin40k"].shared_path == "regression/kin40k.csv.gz"
    config = ExperimentConfig.for_dataset("kin40k", "unused.csv", batch_size=64)
    generic = ExperimentConfig.for_dataset("csv", "unused.csv", name="kin40k", batch_size=64)
    assert {**config.to_dict(), "dataset": "csv"} == generic.to_dict()


def test_a_new_data_set_is_one_loader_and_one_registry_line():
    def load_tiny(path):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(64, 3, generator=g)
        y = x.sum(1)
        return Dataset("tiny", x[:48], y[:48], x[48:], y[48:], "regression", None)

    spec = register_dataset(DatasetSpec("tiny_registry_test", load_tiny, "squared", 2, 1e-2,
                                        {"kind": "two_layer", "hidden": 3}, bundled=True))
    try:
        config = ExperimentConfig.for_dataset("tiny_registry_test", n_learners=3)
        assert (config.n_learners, config.learner.hidden, config.lr) == (3, 3, 1e-2)
        assert load_dataset(config).x_train.shape == (48, 3)
        with pytest.raises(ValueError, match="registered already"):
            register_dataset(spec)
    finally:
        del DATASETS["tiny_registry_test"]


def test_unknown_and_pathless_data_sets_are_refused():
    with pytest.raises(ValueError, match="unknown data set 'nope'"):
        ExperimentConfig.for_dataset("nope")
    with pytest.raises(ValueError, match="needs path="):
        load_dataset(ExperimentConfig.for_dataset("kin40k"))
