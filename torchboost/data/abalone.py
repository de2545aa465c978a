"""UCI Abalone (Hu et al. 2017, Sec. 6): predict the number of shell rings from measurements.

A copy of the data (4177 rows, CC BY 4.0; Nash, Sellers, Talbot, Cawthorn and Ford, 1994,
https://doi.org/10.24432/C55C7W) ships with torchboost as ``torchboost/datasets/abalone.csv``,
so :func:`load_abalone` works without any download.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from torchboost.data._files import resolve_file
from torchboost.data._parse import read_string_rows
from torchboost.data._split import random_split
from torchboost.data.dataset import Dataset

__all__ = ["ABALONE_COLUMNS", "load_abalone"]

ABALONE_COLUMNS = (
    "sex",
    "length",
    "diameter",
    "height",
    "whole_weight",
    "shucked_weight",
    "viscera_weight",
    "shell_weight",
    "rings",
)
"""The CSV header the loader expects."""

_SEXES = ("M", "F", "I")
_HINT = (
    "call load_abalone() without a path for the copy bundled with torchboost, or download "
    "https://archive.ics.uci.edu/dataset/1/abalone and add the header row "
    + ",".join(ABALONE_COLUMNS)
)


def load_abalone(
    path_or_root: str | Path | None = None, test_fraction: float = 0.1, seed: int = 0
) -> Dataset:
    """Abalone as a regression data set with a seeded random 90%/10% train/test split.

    Hu et al. (2017, Sec. 6) use "a random 90%-10% train-test split"; here the test rows are
    chosen by ``numpy.random.default_rng(seed).permutation`` (``round(4177 * 0.1) = 418`` rows by
    default); rows keep the file order within each split.

    ``path_or_root`` is a CSV file, a directory holding ``abalone.csv``, or ``None`` for the
    bundled copy. Ten features: ``sex`` one-hot in the order M, F, I, then the seven
    measurements in header order. Target: ``rings`` as ``float32``.

    Examples:
        >>> ds = load_abalone()
        >>> ds
        Dataset(name='abalone', task='regression', train=3759×10, test=418×10)
        >>> ds.x_train[0].tolist()[:3]  # first row of the file is sex M
        [1.0, 0.0, 0.0]
    """
    if path_or_root is None:
        with resources.as_file(resources.files("torchboost") / "datasets" / "abalone.csv") as path:
            rows = read_string_rows(path, len(ABALONE_COLUMNS))
    else:
        path = resolve_file(path_or_root, "Abalone", ["abalone.csv"], _HINT)
        rows = read_string_rows(path, len(ABALONE_COLUMNS))
    if tuple(rows[0]) != ABALONE_COLUMNS:
        raise ValueError(f"{path}: expected the header {','.join(ABALONE_COLUMNS)}, got {rows[0]}")
    rows = rows[1:]
    if not rows:
        raise ValueError(f"{path}: a header and no data rows")
    try:
        sex = np.array([_SEXES.index(row[0]) for row in rows])
        numbers = np.array([[float(v) for v in row[1:]] for row in rows])
    except ValueError as error:
        raise ValueError(f"{path}: sex must be M, F or I and the rest numbers ({error})") from error
    x = np.concatenate([np.eye(len(_SEXES))[sex], numbers[:, :-1]], axis=1)
    train, test = random_split(len(rows), test_fraction, seed)
    return Dataset.from_arrays("abalone", x, numbers[:, -1], train, test, task="regression")
