"""One registry entry per data set: its loader, its settings, the paper's numbers, its metric."""

from __future__ import annotations

import gzip

import pytest
import torch

from torchboost.data import Dataset
from torchboost.data.folder import LAYOUT
from torchboost.harness.configs import (
    DATASETS,
    DatasetSpec,
    ExperimentConfig,
    load_dataset,
    register_dataset,
    with_data_dir,
)


def test_the_registry_holds_the_papers_settings():
    assert list(DATASETS)[:7] == ["abalone", "adult", "mnist", "keggundirected", "protein",
                                  "kin40k", "pol"]
    mnist = DATASETS["mnist"]
    assert (mnist.loss, mnist.n_learners, mnist.n_outputs, mnist.metric) == (
        "softmax", 8, 10, "error")
    assert DATASETS["abalone"].paper == (8.2848, 2.1411, 2.1532) and DATASETS["abalone"].bundled
    assert DATASETS["kin40k"].metric == "MSE"
    assert LAYOUT["kin40k"][0] == "regression/kin40k.csv.gz"  # its place in the data folder
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
        load_dataset(ExperimentConfig.for_dataset("csv"))


def test_a_data_set_without_a_path_is_read_from_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBOOST_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"kin40k.csv.gz not found\. Put the CSV "
                       r"\(target last\) there .*TORCHBOOST_DATA"):
        load_dataset(ExperimentConfig.for_dataset("kin40k"))
    (tmp_path / "regression").mkdir()
    rows = torch.randn(40, 4, generator=torch.Generator().manual_seed(0))
    (tmp_path / "regression" / "kin40k.csv.gz").write_bytes(gzip.compress(
        "\n".join(",".join(f"{v:.4f}" for v in row) for row in rows.tolist()).encode()))
    ds = load_dataset(ExperimentConfig.for_dataset("kin40k"))
    assert ds.x_train.shape[1] == 3 and len(ds.y_train) + len(ds.y_test) == 40
    with pytest.raises(FileNotFoundError, match="elsewhere/mnist"):  # --data-dir wins
        with_data_dir(ExperimentConfig.for_dataset("mnist"), tmp_path / "elsewhere")
    (tmp_path / "elsewhere" / "mnist").mkdir(parents=True)
    config = with_data_dir(ExperimentConfig.for_dataset("mnist"), tmp_path / "elsewhere")
    assert config.path == str(tmp_path / "elsewhere" / "mnist")
    given = ExperimentConfig.for_dataset("kin40k", "own.csv")
    assert with_data_dir(given, tmp_path) is given  # a path given stays
