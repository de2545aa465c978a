"""SLICE and YearPredictionMSD loaders on small files in the real formats."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from torchboost.data import YEAR_N_TRAIN, load_slice, load_year

WriteFile = Callable[[Path, bytes | str], Path]
SLICE_HEADER = ",".join(["patientId", *(f"value{i}" for i in range(384)), "reference"])


def slice_row(patient: int, k: int) -> str:
    """Feature ``j`` is ``patient + j / 1000 + k / 10``; reference ``10 * patient + k``."""
    values = ",".join(f"{patient + j / 1000 + k / 10:g}" for j in range(384))
    return f"{patient},{values},{10 * patient + k}"


@pytest.fixture
def slice_csv(tmp_path: Path, write_file: WriteFile) -> Path:
    """Five patients (file order 3, 0, 4, 1, 2) with three slices each."""
    rows = [slice_row(p, k) for p in (3, 0, 4, 1, 2) for k in range(3)]
    return write_file(tmp_path / "slice_localization_data.csv", "\n".join([SLICE_HEADER, *rows]))


def test_slice_split_by_patient(slice_csv: Path) -> None:
    ds = load_slice(slice_csv.parent, test_fraction=0.2)  # 1 of 5 patients: id 4
    assert ds.task == "regression" and ds.n_classes is None
    assert ds.x_train.shape == (12, 384) and ds.x_test.shape == (3, 384)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.float32
    assert ds.y_test.tolist() == [40.0, 41.0, 42.0]
    assert ds.y_train.tolist() == [30, 31, 32, 0, 1, 2, 10, 11, 12, 20, 21, 22]  # file order
    assert ds.x_test[2, 5].item() == pytest.approx(4 + 5 / 1000 + 2 / 10)
    assert ds.x_train[0, 0].item() == 3.0  # patientId is not a feature


def test_slice_fraction_and_file_path(slice_csv: Path) -> None:
    ds = load_slice(slice_csv, test_fraction=0.4)  # 2 of 5 patients: ids 3 and 4
    assert sorted(set(ds.y_test.div(10).floor().int().tolist())) == [3, 4]
    assert ds.n_test == 6


def test_slice_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        load_slice(tmp_path)
    assert "slice_localization_data.csv" in str(error.value) and str(tmp_path) in str(error.value)


def year_rows(n: int) -> np.ndarray:
    """Row ``i``: year ``1950 + i`` then features ``i + j / 100``, ``j = 0..89``."""
    i = np.arange(n)[:, None]
    return np.hstack([1950 + i, i + np.arange(90)[None, :] / 100])


def test_year_split_and_values(tmp_path: Path, write_file: WriteFile) -> None:
    table = year_rows(12)
    text = "\n".join(",".join(f"{v:g}" for v in row) for row in table) + "\n"
    path = write_file(tmp_path / "YearPredictionMSD.txt.gz", text)
    ds = load_year(tmp_path, n_train=10)
    assert ds.x_train.shape == (10, 90) and ds.x_test.shape == (2, 90)
    assert ds.y_test.tolist() == [1960.0, 1961.0]
    assert ds.y_train[0].item() == 1950.0
    assert ds.x_test[1, 3].item() == pytest.approx(11.03)
    assert load_year(path, n_train=10).n_test == 2
    with pytest.raises(ValueError, match=f"n_train={YEAR_N_TRAIN}"):
        load_year(path)  # 12 rows ≤ the standard 463,715


def test_year_wrong_width_and_missing(tmp_path: Path, write_file: WriteFile) -> None:
    path = write_file(tmp_path / "short.txt", "2001,1.0,2.0\n2002,3.0,4.0\n")
    with pytest.raises(ValueError, match="91 columns"):
        load_year(path, n_train=1)
    with pytest.raises(FileNotFoundError) as error:
        load_year(tmp_path / "nothing")
    assert "YearPredictionMSD.txt" in str(error.value)
    assert str(tmp_path / "nothing") in str(error.value)
