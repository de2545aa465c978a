"""The Dataset container, the seeded split and the synthetic generators."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchboost.data import Dataset, synthetic_classification, synthetic_regression
from torchboost.data._split import random_split


def make(task: str = "regression", n_classes: int | None = None, **overrides: object) -> Dataset:
    fields: dict[str, object] = {
        "name": "toy",
        "x_train": torch.zeros(6, 2),
        "y_train": torch.zeros(6) if task == "regression" else torch.zeros(6, dtype=torch.int64),
        "x_test": torch.zeros(3, 2),
        "y_test": torch.zeros(3) if task == "regression" else torch.ones(3, dtype=torch.int64),
        "task": task,
        "n_classes": n_classes,
    }
    return Dataset(**{**fields, **overrides})  # type: ignore[arg-type]


def test_dataset_fields_and_repr() -> None:
    ds = make()
    assert (ds.n_train, ds.n_test, ds.n_features, ds.input_shape) == (6, 3, 2, (2,))
    assert repr(ds) == "Dataset(name='toy', task='regression', train=6×2, test=3×2)"
    binary = make("binary", 2)
    assert "n_classes=2" in repr(binary)
    with pytest.raises(AttributeError):
        ds.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("task", "n_classes", "overrides", "match"),
    [
        ("ranking", None, {}, "task"),
        ("regression", None, {"x_train": torch.zeros(6, 2, dtype=torch.float64)}, "float32"),
        ("regression", None, {"y_train": torch.zeros(5)}, "y_train"),
        ("regression", None, {"x_test": torch.zeros(3, 4)}, "shape"),
        ("regression", 3, {}, "n_classes=None"),
        ("binary", 3, {}, "n_classes=2"),
        ("multiclass", 3, {"y_test": torch.tensor([0, 1, 3])}, r"\[0, 3\)"),
        ("multiclass", 3, {"y_test": torch.zeros(3)}, "int64"),
    ],
)
def test_dataset_validation(
    task: str, n_classes: int | None, overrides: dict[str, object], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        make(task, n_classes, **overrides)


def test_from_arrays_converts_dtypes_and_takes_rows() -> None:
    x = np.arange(12, dtype=np.float64).reshape(6, 2)
    y = np.array([0, 1, 2, 0, 1, 2])
    ds = Dataset.from_arrays("t", x, y, np.array([0, 2, 4]), np.array([5]), "multiclass", 3)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.x_train[:, 0].tolist() == [0.0, 4.0, 8.0] and ds.y_test.tolist() == [2]


def test_random_split() -> None:
    train, test = random_split(50, 0.1, seed=4)
    assert len(test) == 5 and len(train) == 45
    assert sorted([*train, *test]) == list(range(50))
    assert np.all(np.diff(train) > 0)
    assert np.array_equal(test, random_split(50, 0.1, seed=4)[1])
    with pytest.raises(ValueError):
        random_split(10, 1.0, seed=0)


def test_synthetic_regression() -> None:
    ds = synthetic_regression(n=2000, d=6, seed=1, noise=0.1)
    assert ds.task == "regression" and ds.x_train.shape == (1600, 6) and ds.n_test == 400
    assert torch.equal(ds.y_train, synthetic_regression(n=2000, d=6, seed=1).y_train)
    assert not torch.equal(ds.y_train, synthetic_regression(n=2000, d=6, seed=2).y_train)
    assert 0.5 < ds.y_train.var().item() < 2.0 and abs(ds.y_train.mean().item()) < 0.2
    # the target is not linear: least squares leaves most of the variance unexplained
    x1 = torch.cat([ds.x_train, torch.ones(1600, 1)], dim=1)
    coef = torch.linalg.lstsq(x1, ds.y_train.unsqueeze(1)).solution
    residual = ds.y_train - (x1 @ coef).squeeze(1)
    assert residual.var().item() > 0.5 * ds.y_train.var().item()


@pytest.mark.parametrize(("n_classes", "task"), [(2, "binary"), (4, "multiclass")])
def test_synthetic_classification(n_classes: int, task: str) -> None:
    ds = synthetic_classification(n=1000, d=5, n_classes=n_classes, seed=0)
    assert ds.task == task and ds.n_classes == n_classes
    counts = torch.bincount(ds.y_train, minlength=n_classes)
    assert counts.min().item() > 0.05 * ds.n_train  # no empty or negligible class
    with pytest.raises(ValueError):
        synthetic_classification(n_classes=1)
