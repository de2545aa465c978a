"""Generic CSV regression, Balance Scale and Mushroom (KEEL) loaders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from torchboost.data import MUSHROOM_CATEGORIES, load_balance, load_csv_regression, load_mushroom

WriteFile = Callable[[Path, bytes | str], Path]


def regression_text(n: int) -> str:
    """Row ``i``: features ``i, -i, i / 4`` and target ``2 i + 0.5``."""
    return "".join(f"{i},{-i},{i / 4},{2 * i + 0.5}\n" for i in range(n))


def test_csv_regression_gz_no_header(tmp_path: Path, write_file: WriteFile) -> None:
    path = write_file(tmp_path / "toy.csv.gz", regression_text(20))
    ds = load_csv_regression(path)
    assert ds.name == "toy" and ds.task == "regression"
    assert ds.x_train.shape == (18, 3) and ds.x_test.shape == (2, 3)
    x = torch.cat([ds.x_train, ds.x_test])
    y = torch.cat([ds.y_train, ds.y_test])
    assert torch.equal(y, 2 * x[:, 0] + 0.5)  # targets stay with their rows
    assert sorted(x[:, 0].tolist()) == [float(i) for i in range(20)]
    assert torch.equal(ds.y_test, load_csv_regression(path, seed=0).y_test)
    assert not torch.equal(ds.y_test, load_csv_regression(path, seed=1).y_test)


def test_csv_regression_header(tmp_path: Path, write_file: WriteFile) -> None:
    path = write_file(tmp_path / "with_header.csv", "a,b,c,target\n" + regression_text(10))
    assert load_csv_regression(path, test_fraction=0.2).n_train == 8  # header inferred
    assert load_csv_regression(path, header=True).n_train + 1 == 10
    with pytest.raises(ValueError, match="numeric"):
        load_csv_regression(path, header=False)
    plain = write_file(tmp_path / "plain.csv", regression_text(10))
    assert load_csv_regression(plain, header=False, test_fraction=0.2).n_train == 8
    with pytest.raises(ValueError, match="test fraction"):
        load_csv_regression(plain, test_fraction=0.01)  # rounds to 0 test rows


def test_csv_regression_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        load_csv_regression(tmp_path / "kin40k.csv.gz")
    assert "kin40k.csv.gz" in str(error.value) and str(tmp_path) in str(error.value)


@pytest.fixture
def balance_csv(tmp_path: Path, write_file: WriteFile) -> Path:
    header = ",".join([*(f'"V{v}.{k}"' for v in range(2, 6) for k in range(1, 6)), '"target"'])
    rows = []
    for i in range(10):
        onehot = ["1" if k == i % 5 else "0" for _ in range(4) for k in range(5)]
        rows.append(",".join(f'"{v}"' for v in [*onehot, str(i % 3 + 1)]))
    return write_file(tmp_path / "balance-scale_onehot.csv", "\n".join([header, *rows]) + "\n")


def test_balance(balance_csv: Path) -> None:
    ds = load_balance(balance_csv.parent)
    assert ds.task == "multiclass" and ds.n_classes == 3
    assert ds.x_train.shape == (8, 20) and ds.x_test.shape == (2, 20)
    labels = torch.cat([ds.y_train, ds.y_test])
    assert sorted(labels.tolist()) == sorted(i % 3 for i in range(10))  # 1/2/3 → 0/1/2
    assert ds.y_train.dtype == torch.int64
    x = torch.cat([ds.x_train, ds.x_test])
    assert torch.all(x.sum(dim=1) == 4)


def test_balance_bad_target(tmp_path: Path, write_file: WriteFile) -> None:
    path = write_file(tmp_path / "b.csv", "a,b,target\n1,0,4\n0,1,1\n")
    with pytest.raises(ValueError, match="1, 2 or 3"):
        load_balance(path)


@pytest.fixture
def mushroom_gz(tmp_path: Path, write_file: WriteFile) -> Path:
    first = "x,s,n,t,p,f,c,n,k,e,e,s,s,w,w,p,w,o,p,k,s,u,p"  # the real file's first line
    second = "b,s,w,t,l,f,c,b,n,e,c,s,s,w,w,p,w,o,p,n,n,m,e"
    lines = [first, second] * 5
    return write_file(tmp_path / "mushroom_keel.csv.gz", "\n".join(lines) + "\n")


def test_mushroom(mushroom_gz: Path) -> None:
    ds = load_mushroom(mushroom_gz)
    width = sum(len(codes) for _, codes in MUSHROOM_CATEGORIES)
    assert width == 125 and ds.n_features == 125
    assert ds.task == "binary" and ds.x_train.shape == (8, 125) and ds.n_test == 2
    x = torch.cat([ds.x_train, ds.x_test])
    y = torch.cat([ds.y_train, ds.y_test])
    assert sorted(y.tolist()) == [0] * 5 + [1] * 5  # e → 0, p → 1
    assert torch.all(x.sum(dim=1) == 22)
    poisonous = x[y == 1][0]
    assert poisonous[:6].tolist() == [0, 0, 1, 0, 0, 0]  # cap-shape x (codes b, c, x, f, k, s)
    assert poisonous[6 + 4 + 10 + 2 + 7].item() == 1.0  # odor p (codes a l c y f m n p s)


def test_mushroom_unknown_code(tmp_path: Path, write_file: WriteFile) -> None:
    path = write_file(tmp_path / "m.csv", ",".join(["z"] * 22 + ["e"]) + "\n")
    with pytest.raises(ValueError, match="cap-shape"):
        load_mushroom(path)


def test_real_multiclass_and_regression(real_data: Callable[[str], Path]) -> None:
    balance = load_balance(real_data("multiclass/balance-scale_onehot.csv"))
    counts = torch.bincount(torch.cat([balance.y_train, balance.y_test])).tolist()
    assert counts == [49, 288, 288] and balance.n_test == 125
    mushroom = load_mushroom(real_data("multiclass/mushroom_keel.csv.gz"))
    assert mushroom.n_train + mushroom.n_test == 5644
    kegg = load_csv_regression(real_data("regression/keggundirected.csv.gz"))
    assert (kegg.n_train + kegg.n_test, kegg.n_features) == (63_608, 27)
