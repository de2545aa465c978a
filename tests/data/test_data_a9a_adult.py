"""LIBSVM/A9A and raw UCI Adult loaders on small files in the real formats."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from torchboost.data import ADULT_LAYOUT, ADULT_N_FEATURES, load_a9a, load_adult, read_libsvm

WriteFile = Callable[[Path, bytes | str], Path]

# ------------------------------------------------------------------ LIBSVM / A9A


@pytest.fixture
def a9a_dir(tmp_path: Path, write_file: WriteFile) -> Path:
    write_file(tmp_path / "a9a", "-1 3:1 11:1 123:1 \n+1 1:1 5:1\n\n-1 2:1\n")
    write_file(tmp_path / "a9a.t.gz", "+1 4:1 122:1\n-1 7:1 # a comment\n")
    return tmp_path


def test_a9a(a9a_dir: Path) -> None:
    ds = load_a9a(a9a_dir)
    assert ds.task == "binary" and ds.n_classes == 2
    assert ds.x_train.shape == (3, 123) and ds.x_test.shape == (2, 123)  # a9a.t max index 122
    assert ds.y_train.tolist() == [0, 1, 0] and ds.y_test.tolist() == [1, 0]
    assert ds.y_train.dtype == torch.int64 and ds.x_train.dtype == torch.float32
    assert torch.nonzero(ds.x_train[0]).flatten().tolist() == [2, 10, 122]  # 1-based → 0-based
    assert torch.nonzero(ds.x_test[0]).flatten().tolist() == [3, 121]
    assert float(ds.x_train.sum()) == 6.0


def test_a9a_missing_test_file(a9a_dir: Path) -> None:
    (a9a_dir / "a9a.t.gz").unlink()
    with pytest.raises(FileNotFoundError) as error:
        load_a9a(a9a_dir)
    assert "a9a.t" in str(error.value) and str(a9a_dir) in str(error.value)


def test_read_libsvm_generic(tmp_path: Path, write_file: WriteFile) -> None:
    path = write_file(tmp_path / "data.txt", "2 1:0.5 4:-1.25\n# only a comment\n0 2:3\n")
    x, y = read_libsvm(path)
    assert x.shape == (2, 4) and y.tolist() == [2.0, 0.0]
    assert x.tolist() == [[0.5, 0.0, 0.0, -1.25], [0.0, 3.0, 0.0, 0.0]]
    assert read_libsvm(path, n_features=6)[0].shape == (2, 6)
    with pytest.raises(ValueError, match="exceeds n_features=3"):
        read_libsvm(path, n_features=3)
    bad = write_file(tmp_path / "bad.txt", "1 1:1\n1 2-1\n")
    with pytest.raises(ValueError, match="line 2"):
        read_libsvm(bad)
    zero_based = write_file(tmp_path / "zero.txt", "1 0:1\n")
    with pytest.raises(ValueError, match="1-based"):
        read_libsvm(zero_based)


# ------------------------------------------------------------------ raw UCI Adult

DEFAULTS = {
    "age": "30",
    "workclass": "Private",
    "fnlwgt": "100000",
    "education": "Bachelors",
    "education-num": "13",
    "marital-status": "Never-married",
    "occupation": "Sales",
    "relationship": "Not-in-family",
    "race": "White",
    "sex": "Male",
    "capital-gain": "0",
    "capital-loss": "0",
    "hours-per-week": "40",
    "native-country": "United-States",
    "income": "<=50K",
}


def adult_line(**fields: str) -> str:
    """One raw line as in adult.data (``", "``-separated); keyword ``_`` stands for ``-``."""
    values = {**DEFAULTS, **{key.replace("_", "-"): value for key, value in fields.items()}}
    return ", ".join(values.values())


def offset(column: str) -> int:
    """First feature index of ``column`` in the 123-wide encoding."""
    start = 0
    for name, spec in ADULT_LAYOUT:
        if name == column:
            return start
        start += spec if isinstance(spec, int) else len(spec)
    raise KeyError(column)


@pytest.fixture
def adult_dir(tmp_path: Path, write_file: WriteFile) -> Path:
    # Train ages 10, 20, ..., 100 → age edges (linear quantiles) 28, 46, 64, 82.
    train = [adult_line(age=str(10 * (i + 1))) for i in range(10)]
    train[1] = adult_line(age="20", workclass="?", sex="Female", income=">50K")
    train[2] = adult_line(age="30", capital_gain="5000", native_country="Holand-Netherlands")
    test = [
        "|1x3 Cross validator",
        adult_line(age="28", income="<=50K."),  # on an edge: lower bin
        adult_line(age="29", occupation="?", income=">50K."),
        adult_line(age="500", native_country="?", income=">50K."),  # beyond train range
        "",
    ]
    write_file(tmp_path / "adult.data.gz", "\n".join(train) + "\n\n")
    write_file(tmp_path / "adult.test", "\n".join(test))
    return tmp_path


def test_adult_layout_has_123_features() -> None:
    assert ADULT_N_FEATURES == 123
    assert [offset(c) for c in ("workclass", "sex", "native-country")] == [5, 71, 82]


def test_adult_encoding(adult_dir: Path) -> None:
    ds = load_adult(adult_dir)
    assert ds.task == "binary" and ds.n_classes == 2
    assert ds.x_train.shape == (10, 123) and ds.x_test.shape == (3, 123)
    assert ds.y_train.tolist() == [0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert ds.y_test.tolist() == [0, 1, 1]  # trailing "." ignored
    # ages → bins with edges 28, 46, 64, 82 from the TRAIN file only
    age = ds.x_train[:, :5].argmax(dim=1).tolist()
    assert age == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert ds.x_test[:, :5].argmax(dim=1).tolist() == [0, 1, 4]
    # one-hot columns at their documented positions
    private, female, male, usa = offset("workclass"), offset("sex"), offset("sex") + 1, 82
    assert ds.x_train[0, private].item() == 1.0 and ds.x_train[0, male].item() == 1.0
    assert ds.x_train[1, female].item() == 1.0 and ds.x_train[0, usa].item() == 1.0
    assert ds.x_train[2, 122].item() == 1.0  # Holand-Netherlands is the last country
    # capital-gain: median 0 → bins "0" and "> 0"
    gain = offset("capital-gain")
    assert ds.x_train[2, gain : gain + 2].tolist() == [0.0, 1.0]
    assert ds.x_train[0, gain : gain + 2].tolist() == [1.0, 0.0]
    # "?" sets none of its column's features; every complete row has 14 ones
    assert ds.x_train[1, offset("workclass") : offset("fnlwgt")].sum().item() == 0.0
    assert ds.x_test[1, offset("occupation") : offset("relationship")].sum().item() == 0.0
    assert ds.x_test[2, 82:].sum().item() == 0.0
    assert ds.x_train.sum(dim=1).tolist() == [14.0, 13.0, *[14.0] * 8]
    assert ds.x_test.sum(dim=1).tolist() == [14.0, 13.0, 13.0]


def test_adult_errors(adult_dir: Path, write_file: WriteFile) -> None:
    write_file(adult_dir / "adult.test", adult_line(race="Martian"))
    with pytest.raises(ValueError, match="Martian"):
        load_adult(adult_dir)
    (adult_dir / "adult.test").unlink()
    with pytest.raises(FileNotFoundError) as error:
        load_adult(adult_dir)
    assert f"expected adult.test(.gz) in {adult_dir};" in str(error.value)


def test_real_adult(real_data: Callable[[str], Path]) -> None:
    ds = load_adult(real_data("adult"))
    assert (ds.n_train, ds.n_test, ds.n_features) == (32_561, 16_281, 123)
    row_sums = torch.cat([ds.x_train, ds.x_test]).sum(dim=1)
    assert int(row_sums.max()) == 14 and int(row_sums.min()) >= 11  # ≤ 3 columns may be "?"
    assert 0.2 < ds.y_train.float().mean().item() < 0.3  # about 24% earn >50K
