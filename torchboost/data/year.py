"""UCI YearPredictionMSD (Hu et al. 2017, Sec. 6): predict a song's release year.

``YearPredictionMSD.txt`` has no header; each of its 515,345 comma-separated rows is the year
(1922–2011) followed by 90 timbre features (12 averages, 78 covariances).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torchboost.data._files import resolve_file
from torchboost.data._parse import read_numeric_csv
from torchboost.data.dataset import Dataset
from torchboost.data.folder import dataset_path
from torchboost.params import positive_int

__all__ = ["YEAR_FILE", "YEAR_N_TRAIN", "load_year"]

YEAR_FILE = "YearPredictionMSD.txt"
"""The file name in UCI's archive (a ``.gz`` copy is accepted too)."""

YEAR_N_TRAIN = 463_715
"""UCI's prescribed split: the first 463,715 rows train, the last 51,630 test."""

_HINT = (
    "download it from https://archive.ics.uci.edu/dataset/203/yearpredictionmsd, unzip and "
    "place it there"
)


def load_year(path_or_root: str | Path | None = None, n_train: int = YEAR_N_TRAIN) -> Dataset:
    """YearPredictionMSD with UCI's standard split: the first ``n_train`` rows train, the rest test.

    UCI's split keeps every artist on one side (no "producer effect"); the default ``n_train``
    (463,715 of 515,345 rows) reproduces it. Pass a smaller ``n_train`` for a shortened file.
    ``path_or_root`` is the text file or the directory holding ``YearPredictionMSD.txt``
    (or ``.txt.gz``); ``None``: the data folder's ``year/`` (:mod:`torchboost.data.folder`).
    Targets are the raw years as ``float32``; features are the 90 columns after
    the year.

    Raises ``ValueError`` when the file has ``n_train`` rows or fewer (no test set) or a row does
    not have 91 numbers.
    """
    n_train = positive_int("n_train", n_train)
    if path_or_root is None:
        path_or_root = dataset_path("year")
    path = resolve_file(path_or_root, "YearPredictionMSD", [YEAR_FILE], _HINT)
    table = read_numeric_csv(path)
    if table.shape[1] != 91:
        raise ValueError(f"{path}: expected 91 columns (year + 90 features), got {table.shape[1]}")
    n = table.shape[0]
    if n <= n_train:
        raise ValueError(
            f"{path}: {n} rows but n_train={n_train}: the file must have more rows than the "
            "training split (the full file has 515,345; pass n_train for a shorter one)"
        )
    return Dataset.from_arrays(
        "year",
        table[:, 1:],
        table[:, 0],
        train=np.arange(n_train),
        test=np.arange(n_train, n),
        task="regression",
    )
