"""Abalone loader: a small CSV in the real format, the bundled copy, and the real file."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest
import torch

from torchboost.data import load_abalone

WriteFile = Callable[[Path, bytes | str], Path]
HEADER = "sex,length,diameter,height,whole_weight,shucked_weight,viscera_weight,shell_weight,rings"


@pytest.fixture
def abalone_csv(tmp_path: Path, write_file: WriteFile) -> Path:
    """Ten rows; row ``i`` has sex M/F/I cycling, measurements ``i + j/10`` and ``rings = i``."""
    rows = [
        ",".join(["MFI"[i % 3], *(f"{i + j / 10:g}" for j in range(7)), str(i)]) for i in range(10)
    ]
    return write_file(tmp_path / "abalone.csv", "\n".join([HEADER, *rows]) + "\n")


def test_encoding_and_split(abalone_csv: Path) -> None:
    ds = load_abalone(abalone_csv.parent, test_fraction=0.2, seed=0)
    assert ds.task == "regression" and ds.name == "abalone"
    assert ds.x_train.shape == (8, 10) and ds.x_test.shape == (2, 10)
    assert ds.y_train.dtype == torch.float32
    rings = sorted([*ds.y_train.tolist(), *ds.y_test.tolist()])
    assert rings == [float(i) for i in range(10)]  # every row in exactly one split
    x = torch.cat([ds.x_train, ds.x_test])[torch.cat([ds.y_train, ds.y_test]).argsort()]
    assert x[0].tolist()[:4] == [1.0, 0.0, 0.0, 0.0]  # row 0: M, length 0
    assert x[4, :3].tolist() == [0.0, 1.0, 0.0]  # row 4: F
    assert x[5, :3].tolist() == [0.0, 0.0, 1.0]  # row 5: I
    assert x[7, 9].item() == pytest.approx(7.6)  # shell_weight of row 7
    assert ds.y_train.tolist() == sorted(ds.y_train.tolist())  # file order kept


def test_split_is_seeded(abalone_csv: Path) -> None:
    first, again = load_abalone(abalone_csv, seed=3), load_abalone(abalone_csv, seed=3)
    assert torch.equal(first.y_test, again.y_test)
    other_seeds = {tuple(load_abalone(abalone_csv, seed=s).y_test.tolist()) for s in range(5)}
    assert len(other_seeds) > 1


def test_bad_sex_and_missing_file(tmp_path: Path, write_file: WriteFile) -> None:
    bad = write_file(tmp_path / "bad.csv", f"{HEADER}\nX,1,1,1,1,1,1,1,3\nM,1,1,1,1,1,1,1,3\n")
    with pytest.raises(ValueError, match="M, F or I"):
        load_abalone(bad)
    with pytest.raises(FileNotFoundError, match=r"abalone\.csv"):
        load_abalone(tmp_path / "empty_dir")


def test_bundled_copy() -> None:
    ds = load_abalone()
    assert ds.n_train + ds.n_test == 4177 and ds.n_test == 418
    assert ds.n_features == 10
    assert torch.equal(ds.x_train[:1], load_abalone().x_train[:1])  # same seed, same split
    first = ds.x_train[0].tolist()  # file row 1: M,0.455,0.365,0.095,0.514,0.2245,0.101,0.15,15
    assert first[:3] == [1.0, 0.0, 0.0]
    assert first[3] == pytest.approx(0.455) and ds.y_train[0].item() == 15.0


def test_bundled_copy_is_the_real_file(real_data: Callable[[str], Path]) -> None:
    bundled = resources.files("torchboost") / "datasets" / "abalone.csv"
    assert bundled.read_bytes() == real_data("abalone/abalone.csv").read_bytes()
