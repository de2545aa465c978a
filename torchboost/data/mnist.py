"""MNIST through ``torchvision.datasets.MNIST`` from local files (Hu et al. 2017, Sec. 6: the CNN
experiment); nothing is ever downloaded.

Two layouts are accepted: a folder holding the four IDX files (plain or ``.gz``, the names of
:data:`MNIST_FILES`), or torchvision's own ``root/MNIST/raw/``. torchvision reads only plain files
in its own layout, so files in any other form are first checked (IDX magic number and size: a
clear error for a corrupt or swapped file rather than torchvision's assertion) and staged,
decompressed, in a temporary torchvision layout, which is removed once the data are in memory.

IDX (LeCun et al.): a 4-byte big-endian magic number ``0x0000TTNN`` (``TT`` the element type,
``0x08`` = unsigned byte; ``NN`` the number of dimensions), ``NN`` big-endian ``uint32`` sizes,
then the data in C order; image files start with ``2051`` and label files with ``2049``.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchvision.datasets import MNIST
from torchvision.datasets.mnist import read_sn3_pascalvincent_tensor

from torchboost.data._files import find_file, open_binary, reading, require_files
from torchboost.data.dataset import Dataset
from torchboost.data.folder import dataset_path

__all__ = ["MNIST_FILES", "load_mnist", "mnist_dataset", "read_idx"]

MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
"""The four file names (each also accepted with ``.gz``), as torchvision and LeCun's site use."""

#: IDX element types: code → bytes per element.
_IDX_ITEM_SIZES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}
#: (magic number, dimensions) of each of :data:`MNIST_FILES`.
_EXPECTED = ((2051, 3), (2049, 1), (2051, 3), (2049, 1))

_HINT = (
    "download them from https://yann.lecun.com/exdb/mnist/ (or a mirror such as "
    "https://ossci-datasets.s3.amazonaws.com/mnist/, or let torchvision.datasets.MNIST(root, "
    "download=True) fetch them) and place them there"
)


def _checked_idx_bytes(path: Path) -> tuple[bytes, int, int]:
    """The decompressed contents of an IDX file, its magic number and dimensions; ``ValueError``
    for a bad magic number or a payload that does not match the header."""
    with reading(path), open_binary(path) as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_ITEM_SIZES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {raw[:4].hex() or 'empty'})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = tuple(int(s) for s in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = math.prod(shape) * _IDX_ITEM_SIZES[raw[2]]
    if len(raw) - header != expected:
        raise ValueError(f"{path}: IDX header promises {shape} ({expected} bytes of data) but "
                         f"the file holds {len(raw) - header} bytes")
    return raw, int.from_bytes(raw[:4], "big"), ndim


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (plain or ``.gz``, 1–3 dimensions) as a numpy array of its stored type and
    shape, parsed by torchvision after the header is checked (``ValueError`` for a bad magic
    number or a truncated file)."""
    path = Path(path)
    raw, _, ndim = _checked_idx_bytes(path)
    if not 1 <= ndim <= 3:
        raise ValueError(f"{path}: an IDX file of {ndim} dimensions; read_idx reads 1 to 3")
    if len(raw) == 4 + 4 * ndim:
        raise ValueError(f"{path}: the IDX file holds no items")
    with tempfile.TemporaryDirectory() as staging:
        plain = Path(staging) / "file.idx"
        plain.write_bytes(raw)
        return read_sn3_pascalvincent_tensor(str(plain), strict=True).numpy()


def _mnist_paths(root: Path) -> list[Path]:
    """The four files from ``root/MNIST/raw`` (torchvision) if all are there, else ``root``."""
    torchvision_raw = root / "MNIST" / "raw"
    if all(find_file(torchvision_raw, name) is not None for name in MNIST_FILES):
        return require_files(torchvision_raw, MNIST_FILES, "MNIST", _HINT)
    return require_files(root, MNIST_FILES, "MNIST", f"{_HINT} (or in {torchvision_raw})")


def _checked_files(paths: list[Path]) -> list[bytes]:
    """The four files' decompressed bytes, each checked: complete, with the magic number and
    the dimensions its name promises (images 3-D, labels 1-D)."""
    out = []
    for path, (magic, ndim) in zip(paths, _EXPECTED, strict=True):
        raw, found_magic, found_ndim = _checked_idx_bytes(path)
        if found_magic != magic or found_ndim != ndim:
            raise ValueError(f"{path}: expected an IDX file with magic number {magic} (uint8, "
                             f"{ndim}-D), got magic number {found_magic} ({found_ndim}-D)")
        out.append(raw)
    return out


def _stage(paths: list[Path], staging: Path) -> None:
    """Check the four files and write them, decompressed, in torchvision's layout."""
    raw_dir = staging / "MNIST" / "raw"
    raw_dir.mkdir(parents=True)
    for name, raw in zip(MNIST_FILES, _checked_files(paths), strict=True):
        (raw_dir / name).write_bytes(raw)


def _torchvision_ready(root: Path) -> bool:
    """Whether ``root`` is torchvision's layout with the four plain files, used as they are
    once checked like the others."""
    paths = [root / "MNIST" / "raw" / name for name in MNIST_FILES]
    if not all(path.is_file() for path in paths):
        return False
    _checked_files(paths)
    return True


def _check_counts(dataset: MNIST, split: str, where: Path) -> MNIST:
    if dataset.data.shape[0] != dataset.targets.shape[0]:
        raise ValueError(f"MNIST {split}: {dataset.data.shape[0]} images but "
                         f"{dataset.targets.shape[0]} labels in {where}")
    return dataset


def mnist_dataset(root: str | Path, train: bool = True, transform: Callable[..., Any] | None = None,
                  target_transform: Callable[..., Any] | None = None) -> MNIST:
    """``torchvision.datasets.MNIST`` (``download=False``) from local files in either layout
    (see the module docstring): a map-style dataset to stream with
    :meth:`DataStream.from_dataset <torchboost.data.DataStream.from_dataset>` or
    :class:`~torchboost.data.LoaderStream`, e.g. with ``transform=ToTensor()``.

    Raises ``FileNotFoundError`` naming the missing files and where to put them, and
    ``ValueError`` for a corrupt file.
    """
    root = Path(root).expanduser()
    split = "train" if train else "t10k"
    if _torchvision_ready(root):
        return _check_counts(MNIST(root, train=train, transform=transform,
                                   target_transform=target_transform, download=False),
                             split, root / "MNIST" / "raw")
    paths = _mnist_paths(root)
    with tempfile.TemporaryDirectory() as staging:
        _stage(paths, Path(staging))
        # torchvision reads the files into memory on construction: the staging can go.
        return _check_counts(MNIST(staging, train=train, transform=transform,
                                   target_transform=target_transform, download=False),
                             split, paths[0].parent)


def _split(dataset: MNIST) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n, 28, 28)`` uint8 pixels → ``(n, 1, 28, 28)`` float32 in ``[0, 1]``; int64 labels."""
    return dataset.data.unsqueeze(1).float().div_(255.0), dataset.targets.long()


def load_mnist(root: str | Path | None = None) -> Dataset:
    """MNIST's canonical 60,000/10,000 train/test split from local files (either layout, see
    the module docstring) as a :class:`~torchboost.data.Dataset`: images are ``float32``
    tensors of shape ``(n, 1, 28, 28)`` scaled to ``[0, 1]`` (pixel / 255) — what
    ``torchvision.transforms.ToTensor`` gives — and labels ``int64`` digits 0–9.

    ``root=None``: the data folder's ``mnist/`` (:func:`~torchboost.data.folder.data_dir`).
    Raises ``FileNotFoundError`` naming the missing files and ``ValueError`` for a corrupt file.
    """
    root = dataset_path("mnist") if root is None else Path(root).expanduser()
    if _torchvision_ready(root):
        train, test = MNIST(root, train=True), MNIST(root, train=False)
        where = root / "MNIST" / "raw"
    else:
        paths = _mnist_paths(root)
        where = paths[0].parent
        with tempfile.TemporaryDirectory() as staging:
            _stage(paths, Path(staging))
            train, test = MNIST(staging, train=True), MNIST(staging, train=False)
    for dataset, split in ((train, "train"), (test, "t10k")):
        _check_counts(dataset, split, where)
    (x_train, y_train), (x_test, y_test) = _split(train), _split(test)
    return Dataset(name="mnist", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
                   task="multiclass", n_classes=10)
