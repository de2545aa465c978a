"""MNIST loader on tiny IDX files written in the real format (and the real files when present)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from torchboost.data import MNIST_FILES, load_mnist, read_idx

WriteFile = Callable[[Path, bytes | str], Path]


def idx_bytes(array: np.ndarray, magic: int | None = None) -> bytes:
    """A uint8 IDX file: magic ``0x0000080N`` (N = ndim), big-endian uint32 dims, then the data."""
    magic = 0x0800 + array.ndim if magic is None else magic
    dims = struct.pack(f">{array.ndim}I", *array.shape)
    return struct.pack(">I", magic) + dims + array.astype(np.uint8).tobytes()


@pytest.fixture
def arrays() -> dict[str, np.ndarray]:
    """5 train and 3 test images with random pixels, and their labels."""
    rng = np.random.default_rng(0)
    return {
        "train-images-idx3-ubyte": rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.array([5, 0, 4, 1, 9], dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": np.array([7, 2, 1], dtype=np.uint8),
    }


def write_mnist(directory: Path, arrays: dict[str, np.ndarray], write_file: WriteFile) -> Path:
    """Train files gzipped, test files raw (both forms must be accepted)."""
    for name, array in arrays.items():
        write_file(
            directory / (f"{name}.gz" if name.startswith("train") else name), idx_bytes(array)
        )
    return directory


def test_magic_numbers_are_the_standard_ones(arrays: dict[str, np.ndarray]) -> None:
    assert idx_bytes(arrays["train-images-idx3-ubyte"])[:4] == (2051).to_bytes(4, "big")
    assert idx_bytes(arrays["train-labels-idx1-ubyte"])[:4] == (2049).to_bytes(4, "big")


def test_load_mnist_shapes_dtypes_values(
    tmp_path: Path, arrays: dict[str, np.ndarray], write_file: WriteFile
) -> None:
    ds = load_mnist(write_mnist(tmp_path, arrays, write_file))
    assert ds.task == "multiclass" and ds.n_classes == 10 and ds.name == "mnist"
    assert ds.x_train.shape == (5, 1, 28, 28) and ds.x_test.shape == (3, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.y_train.tolist() == [5, 0, 4, 1, 9] and ds.y_test.tolist() == [7, 2, 1]
    pixel = int(arrays["train-images-idx3-ubyte"][2, 13, 7])
    assert ds.x_train[2, 0, 13, 7].item() == pytest.approx(pixel / 255)
    expected = torch.from_numpy(arrays["t10k-images-idx3-ubyte"].astype(np.float32) / 255)
    assert torch.equal(ds.x_test[:, 0], expected)
    assert float(ds.x_train.min()) >= 0.0 and float(ds.x_train.max()) <= 1.0


def test_torchvision_layout(
    tmp_path: Path, arrays: dict[str, np.ndarray], write_file: WriteFile
) -> None:
    write_mnist(tmp_path / "MNIST" / "raw", arrays, write_file)
    assert load_mnist(tmp_path).n_train == 5


def test_missing_files_are_named(
    tmp_path: Path, arrays: dict[str, np.ndarray], write_file: WriteFile
) -> None:
    write_mnist(tmp_path, arrays, write_file)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError) as error:
        load_mnist(tmp_path)
    message = str(error.value)
    assert "t10k-labels-idx1-ubyte" in message and str(tmp_path) in message
    assert "train-images-idx3-ubyte" not in message  # only the missing file is listed
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path / "nowhere")


def test_wrong_magic_and_truncated_files(
    tmp_path: Path, arrays: dict[str, np.ndarray], write_file: WriteFile
) -> None:
    images = arrays["train-images-idx3-ubyte"]
    bad_magic = write_file(tmp_path / "bad", idx_bytes(images, magic=0x12345678))
    with pytest.raises(ValueError, match="magic"):
        read_idx(bad_magic)
    truncated = write_file(tmp_path / "short.gz", idx_bytes(images)[:-10])
    with pytest.raises(ValueError, match="holds"):
        read_idx(truncated)

    write_mnist(tmp_path / "swapped", arrays, write_file)
    labels = arrays["t10k-labels-idx1-ubyte"]
    write_file(tmp_path / "swapped" / "t10k-images-idx3-ubyte", idx_bytes(labels))
    with pytest.raises(ValueError, match="2051"):
        load_mnist(tmp_path / "swapped")


def test_read_idx_roundtrip(tmp_path: Path, write_file: WriteFile) -> None:
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    assert np.array_equal(read_idx(write_file(tmp_path / "a.gz", idx_bytes(array))), array)


def test_real_mnist(real_data: Callable[[str], Path]) -> None:
    root = real_data("mnist")
    assert all((root / f"{name}.gz").exists() for name in MNIST_FILES)
    ds = load_mnist(root)
    assert ds.x_train.shape == (60_000, 1, 28, 28) and ds.x_test.shape == (10_000, 1, 28, 28)
    counts = torch.bincount(ds.y_train, minlength=10).tolist()
    assert counts == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert float(ds.x_train.max()) == 1.0 and float(ds.x_train.min()) == 0.0
