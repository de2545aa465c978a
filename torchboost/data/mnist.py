"""MNIST from the four standard IDX files (Hu et al. 2017, Sec. 6: the CNN experiment).

The IDX format (LeCun et al.): a 4-byte big-endian magic number ``0x0000TTNN`` where ``TT`` is
the element type (``0x08`` = unsigned byte) and ``NN`` the number of dimensions, followed by
``NN`` big-endian ``uint32`` sizes and the data in C order. Image files therefore start with
``2051`` (``0x00000803``) and label files with ``2049`` (``0x00000801``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from torchboost.data._files import find_file, open_binary, require_files
from torchboost.data.dataset import Dataset

__all__ = ["MNIST_FILES", "load_mnist", "read_idx"]

MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
"""The four file names (each also accepted with ``.gz``), as torchvision and LeCun's site use."""

_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_HINT = (
    "download them from https://yann.lecun.com/exdb/mnist/ (or a mirror such as "
    "https://ossci-datasets.s3.amazonaws.com/mnist/, or let torchvision.datasets.MNIST(root, "
    "download=True) fetch them) and place them there"
)


def read_idx(path: str | Path) -> np.ndarray:
    """Parse one IDX file (plain or ``.gz``) into a numpy array of its stored type and shape.

    Raises ``ValueError`` when the magic number is not an IDX one or the payload size does not
    match the header's dimensions (a truncated or corrupt file).
    """
    path = Path(path)
    with open_binary(path) as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {raw[:4].hex() or 'empty'})")
    dtype, ndim = _IDX_DTYPES[raw[2]], raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = math.prod(shape) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path}: IDX header promises {shape} ({expected} bytes of data) but the file "
            f"holds {len(raw) - header} bytes"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)


def _read_checked(path: Path, magic: int, ndim: int) -> np.ndarray:
    array = read_idx(path)
    if array.dtype != np.uint8 or array.ndim != ndim:
        raise ValueError(
            f"{path}: expected an IDX file with magic number {magic} (uint8, {ndim}-D), "
            f"got {array.dtype} {array.ndim}-D data"
        )
    return array


def _images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """``(n, 28, 28)`` uint8 pixels → ``(n, 1, 28, 28)`` float32 in ``[0, 1]``."""
    return torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)


def _mnist_paths(root: Path) -> list[Path]:
    """The four files from ``root/MNIST/raw`` (torchvision) if all are there, else ``root``."""
    torchvision_raw = root / "MNIST" / "raw"
    if all(find_file(torchvision_raw, name) is not None for name in MNIST_FILES):
        return require_files(torchvision_raw, MNIST_FILES, "MNIST", _HINT)
    return require_files(root, MNIST_FILES, "MNIST", f"{_HINT} (or in {torchvision_raw})")


def load_mnist(root: str | Path) -> Dataset:
    """MNIST's canonical 60,000/10,000 train/test split from local IDX files.

    ``root`` holds ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each plain or gzipped; torchvision's
    layout ``root/MNIST/raw/`` is found as well. Images become ``float32`` tensors of shape
    ``(n, 1, 28, 28)`` scaled to ``[0, 1]`` (pixel / 255); labels are ``int64`` digits 0–9.

    Raises ``FileNotFoundError`` naming the missing files and ``ValueError`` for a corrupt file.
    """
    paths = _mnist_paths(Path(root).expanduser())
    x_train, y_train, x_test, y_test = (
        _read_checked(path, magic, ndim)
        for path, (magic, ndim) in zip(paths, [(2051, 3), (2049, 1)] * 2, strict=True)
    )
    for images, labels, split in ((x_train, y_train, "train"), (x_test, y_test, "t10k")):
        if images.shape[0] != labels.shape[0]:
            raise ValueError(
                f"MNIST {split}: {images.shape[0]} images but {labels.shape[0]} labels in "
                f"{paths[0].parent}"
            )
    return Dataset(
        name="mnist",
        x_train=_images_to_tensor(x_train),
        y_train=torch.from_numpy(y_train.astype(np.int64)),
        x_test=_images_to_tensor(x_test),
        y_test=torch.from_numpy(y_test.astype(np.int64)),
        task="multiclass",
        n_classes=10,
    )
