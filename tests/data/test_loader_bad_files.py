"""Damaged or unusual local files: every loader names the file and the problem, and none drops
or invents a row silently (a red team's findings, issue 24)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from test_data_mnist import arrays, idx_bytes, write_mnist  # noqa: F401 (a fixture)

from torchboost.data import load_csv_regression, load_mnist, mnist_dataset, read_idx, read_libsvm

WriteFile = Callable[[Path, bytes | str], Path]
ROWS = "".join(f"{i},{i + 1},{2 * i}\n" for i in range(20))


def test_a_byte_order_mark_is_not_read_as_a_header(tmp_path: Path, write_file: WriteFile):
    plain = load_csv_regression(write_file(tmp_path / "plain.csv", ROWS))
    marked = load_csv_regression(write_file(tmp_path / "marked.csv", "\ufeff" + ROWS))
    assert marked.x_train.shape[0] + marked.x_test.shape[0] == 20
    assert np.array_equal(marked.x_train.numpy(), plain.x_train.numpy())


@pytest.mark.parametrize("cell", ["nan", "inf", "-inf"])
def test_missing_or_infinite_cells_are_named_not_loaded(tmp_path: Path, write_file: WriteFile,
                                                        cell: str):
    path = write_file(tmp_path / "holes.csv", ROWS + f"3,{cell},4\n" + ROWS)
    with pytest.raises(ValueError, match=r"holes\.csv: 1 row\(s\) hold NaN .* line\(s\) \[21\]"):
        load_csv_regression(path)


def test_a_hash_does_not_silently_drop_a_row(tmp_path: Path, write_file: WriteFile):
    path = write_file(tmp_path / "hash.csv", ROWS + "#5,6,7\n")
    with pytest.raises(ValueError, match=r"hash\.csv: not an all-numeric CSV"):
        load_csv_regression(path, header=False)


@pytest.mark.parametrize("damage", ["truncated gzip", "not gzip", "latin-1"])
def test_damaged_files_are_named_with_what_to_do(tmp_path: Path, write_file: WriteFile,
                                                 damage: str):
    if damage == "truncated gzip":
        path = tmp_path / "t.csv.gz"
        path.write_bytes(gzip.compress(ROWS.encode() * 50)[:-30])
    elif damage == "not gzip":
        path = write_file(tmp_path / "fake.csv", ROWS).rename(tmp_path / "fake.csv.gz")
    else:
        path = tmp_path / "l1.csv"
        path.write_bytes(ROWS.encode() + "caf\xe9,1,2\n".encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{path.name}: cannot be read .*replace it"):
        load_csv_regression(path)


def test_a_bad_header_option_is_named(tmp_path: Path, write_file: WriteFile):
    with pytest.raises(ValueError, match="header must be True, False or 'infer', got 'x'"):
        load_csv_regression(write_file(tmp_path / "a.csv", ROWS), header="x")


def test_libsvm_refuses_repeated_indices_missing_values_and_absurd_widths(
        tmp_path: Path, write_file: WriteFile):
    with pytest.raises(ValueError, match=r"line 1: .*index 1 after 3: indices must increase"):
        read_libsvm(write_file(tmp_path / "dup.txt", "1 3:1 1:2\n"))
    with pytest.raises(ValueError, match="line 2: NaN or infinite value"):
        read_libsvm(write_file(tmp_path / "nan.txt", "1 1:1\nnan 2:1\n"))
    with pytest.raises(ValueError, match=r"would take .* GiB"):
        read_libsvm(write_file(tmp_path / "wide.txt", "1 99999999999:1\n"))
    with pytest.raises(ValueError, match="n_features must be an integer >= 1, got -1"):
        read_libsvm(write_file(tmp_path / "ok.txt", "1 1:1\n"), n_features=-1)


def test_mnist_dataset_refuses_a_label_count_that_does_not_match(
        tmp_path: Path, arrays: dict[str, np.ndarray], write_file: WriteFile):  # noqa: F811
    arrays["train-labels-idx1-ubyte"] = arrays["train-labels-idx1-ubyte"][:4]
    root = write_mnist(tmp_path, arrays, write_file)
    with pytest.raises(ValueError, match="MNIST train: 5 images but 4 labels"):
        mnist_dataset(root)


def test_torchvisions_layout_gets_the_same_checks(
        tmp_path: Path, arrays: dict[str, np.ndarray], write_file: WriteFile):  # noqa: F811
    raw = tmp_path / "MNIST" / "raw"
    for name, array in arrays.items():
        write_file(raw / name, idx_bytes(array))
    assert load_mnist(tmp_path).x_train.shape == (5, 1, 28, 28)
    images = raw / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte: IDX header promises"):
        load_mnist(tmp_path)
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte: IDX header promises"):
        mnist_dataset(tmp_path)


def test_read_idx_names_what_it_cannot_read(tmp_path: Path, write_file: WriteFile):
    four = write_file(tmp_path / "four.idx", idx_bytes(np.zeros((1, 1, 1, 2), np.uint8)))
    with pytest.raises(ValueError, match="an IDX file of 4 dimensions"):
        read_idx(four)
    empty = write_file(tmp_path / "empty.idx", idx_bytes(np.zeros((0, 28, 28), np.uint8)))
    with pytest.raises(ValueError, match="holds no items"):
        read_idx(empty)


def test_balance_needs_its_header_and_its_columns(tmp_path: Path, write_file: WriteFile):
    from torchboost.data import load_balance

    header = ",".join(f"f{i}" for i in range(20)) + ",target\n"
    row = ",".join(["1"] + ["0"] * 19) + ",2\n"
    assert load_balance(write_file(tmp_path / "ok.csv", header + row * 10)).n_classes == 3
    with pytest.raises(ValueError, match="expected a header row ending in 'target'"):
        load_balance(write_file(tmp_path / "noheader.csv", row * 10))
    with pytest.raises(ValueError, match="expected 20 one-hot feature columns"):
        load_balance(write_file(tmp_path / "narrow.csv", "a,b,c,d,target\n1,0,0,0,2\n" * 1))


def test_header_only_and_bad_split_sizes_are_named(tmp_path: Path, write_file: WriteFile):
    from torchboost.data import load_abalone, load_year
    from torchboost.data.abalone import ABALONE_COLUMNS

    abalone = ",".join(ABALONE_COLUMNS) + "\n"
    with pytest.raises(ValueError, match="a header and no data rows"):
        load_abalone(write_file(tmp_path / "abalone.csv", abalone))
    year = "".join(f"{2000 + i}," + ",".join(["0.5"] * 90) + "\n" for i in range(10))
    with pytest.raises(ValueError, match=r"n_train must be an integer >= 1, got 8\.5"):
        load_year(write_file(tmp_path / "year.txt", year), n_train=8.5)


def test_a_directory_given_as_the_csv_file_is_named_as_one(tmp_path: Path):
    with pytest.raises(IsADirectoryError, match="is a directory; give the CSV file itself"):
        load_csv_regression(tmp_path)
