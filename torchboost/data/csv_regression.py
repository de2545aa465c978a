"""Generic numeric CSV regression data (target in the last column), e.g. the UCI streams
``protein``, ``kin40k``, ``keggundirected`` and ``pol`` that stand in for SLICE and
YearPredictionMSD (Hu et al. 2017, Sec. 6) where those are not available.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from torchboost.data._files import open_text, reading
from torchboost.data._parse import read_numeric_csv
from torchboost.data._split import random_split
from torchboost.data.dataset import Dataset

__all__ = ["load_csv_regression"]


def _has_header(path: Path) -> bool:
    """Whether the first line has a field that is not a number."""
    with reading(path), open_text(path) as f:
        first = f.readline()
    try:
        [float(field.strip().strip('"')) for field in first.split(",")]
    except ValueError:
        return True
    return False


def load_csv_regression(
    path: str | Path,
    test_fraction: float = 0.1,
    seed: int = 0,
    header: bool | Literal["infer"] = "infer",
) -> Dataset:
    """A comma-separated numeric table (plain or ``.gz``) as regression data.

    Every column but the last is a feature; the last is the target. ``header=True`` skips the
    first line, ``False`` reads it as data, and ``"infer"`` skips it when any of its fields is not
    a number. Split: seeded random, ``round(n * test_fraction)`` test rows chosen by
    ``numpy.random.default_rng(seed).permutation``; rows keep the file order within each split.
    The data set's name is the file name without ``.csv``/``.gz``.

    Raises ``FileNotFoundError`` naming the file and its directory when it does not exist.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise IsADirectoryError(f"CSV: {path} is a directory; give the CSV file itself")
    if not path.is_file():
        raise FileNotFoundError(f"CSV: expected {path.name} in {path.parent}; no such file")
    if header not in (True, False, "infer") or (isinstance(header, int | float) and not \
            isinstance(header, bool)):
        raise ValueError(f"header must be True, False or 'infer', got {header!r}")
    skip = int(_has_header(path)) if header == "infer" else int(header)
    table = read_numeric_csv(path, skiprows=skip)
    if table.shape[1] < 2:
        raise ValueError(f"{path}: need at least one feature column and the target column")
    train, test = random_split(table.shape[0], test_fraction, seed)
    name = path.name.removesuffix(".gz").removesuffix(".csv")
    return Dataset.from_arrays(name, table[:, :-1], table[:, -1], train, test, task="regression")
