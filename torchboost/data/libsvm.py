"""LIBSVM's sparse text format and the A9A data set (Hu et al. 2017, Sec. 6).

A LIBSVM line is ``<label> <index>:<value> <index>:<value> ...`` with 1-based, increasing
feature indices; absent features are 0 and ``#`` starts a comment.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from torchboost.data._files import open_text, reading, require_files
from torchboost.data.dataset import Dataset
from torchboost.params import positive_int

__all__ = ["A9A_N_FEATURES", "load_a9a", "read_libsvm"]

A9A_N_FEATURES = 123
"""A9A's feature count; ``a9a.t`` never uses index 123, so it must be given explicitly."""

_A9A_HINT = (
    "download them from https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a "
    "and place them there (or use load_adult on the raw UCI files)"
)


def read_libsvm(path: str | Path, n_features: int | None = None) -> tuple[Tensor, Tensor]:
    """Read a LIBSVM-format file (plain or ``.gz``) into dense tensors.

    Returns ``(x, y)``: ``x`` is ``float32`` of shape ``(n, n_features)`` and ``y`` the raw
    labels as ``float32`` of shape ``(n,)``. Without ``n_features`` the largest index in the file
    sets the width; a file whose indices exceed ``n_features`` raises ``ValueError``, as does any
    malformed line (reported with its line number).
    """
    path = Path(path)
    labels: list[float] = []
    rows: list[int] = []
    columns: list[int] = []
    values: list[float] = []
    if n_features is not None:
        n_features = positive_int("n_features", n_features)
    with reading(path), open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            tokens = line.split("#", 1)[0].split()
            if not tokens:
                continue
            try:
                labels.append(float(tokens[0]))
                previous = 0
                for token in tokens[1:]:
                    index, value = token.split(":")
                    if int(index) < 1:
                        raise ValueError(f"feature indices must be 1-based, found {index}")
                    if int(index) <= previous:
                        raise ValueError(f"index {index} after {previous}: indices must increase")
                    previous = int(index)
                    columns.append(previous - 1)
                    values.append(float(value))
            except ValueError as error:
                raise ValueError(f"{path}, line {line_no}: not LIBSVM format ({error})") from error
            row_values = values[len(values) - len(tokens) + 1:]
            if not (math.isfinite(labels[-1]) and all(map(math.isfinite, row_values))):
                raise ValueError(f"{path}, line {line_no}: NaN or infinite value (a missing "
                                 "value?); clean or impute it first")
            rows.extend([len(labels) - 1] * (len(tokens) - 1))
    if not labels:
        raise ValueError(f"{path}: no data rows")
    column_array = np.asarray(columns, dtype=np.int64)
    width = int(column_array.max()) + 1 if column_array.size else 0
    if n_features is None:
        n_features = width
    elif width > n_features:
        raise ValueError(f"{path}: feature index {width} exceeds n_features={n_features}")
    gib = len(labels) * n_features * 4 / 2**30
    if gib > 8:
        raise ValueError(f"{path}: the dense ({len(labels)} × {n_features}) float32 array "
                         f"would take {gib:.0f} GiB (largest feature index {width}); is an index "
                         "wrong? read the file with a sparse reader instead")
    x = np.zeros((len(labels), n_features), dtype=np.float32)
    x[np.asarray(rows, dtype=np.int64), column_array] = values
    return torch.from_numpy(x), torch.tensor(labels, dtype=torch.float32)


def load_a9a(root: str | Path) -> Dataset:
    """A9A (LIBSVM's encoding of UCI Adult), binary: income above $50K.

    ``root`` holds ``a9a`` (32,561 rows) and ``a9a.t`` (16,281 rows), plain or gzipped, as
    distributed by LIBSVM. Both are read with ``n_features=123`` (``a9a.t`` never uses the last
    index). Labels ``-1``/``+1`` become classes ``0``/``1``.
    """
    splits = []
    for path in require_files(root, ("a9a", "a9a.t"), "A9A", _A9A_HINT):
        x, y = read_libsvm(path, A9A_N_FEATURES)
        if not bool(((y == 1) | (y == -1)).all()):
            raise ValueError(f"{path}: A9A labels must be -1 or +1")
        splits.append((x, (y > 0).long()))
    (x_train, y_train), (x_test, y_test) = splits
    return Dataset("a9a", x_train, y_train, x_test, y_test, task="binary", n_classes=2)
