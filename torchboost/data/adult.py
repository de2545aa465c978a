"""UCI Adult encoded into A9A's 123 binary features (Hu et al. 2017, Sec. 6 use A9A).

LIBSVM's A9A is Platt's binarisation of Adult: every continuous column quantised into
quantile bins, every categorical column one-hot, 123 features in all. The exact LIBSVM file is
not always at hand, so :func:`load_adult` rebuilds an encoding with A9A's layout from the raw
UCI files. Bin edges are this loader's own (train-file quantiles), so individual bits can differ
from LIBSVM's file, but the block structure and the feature count match.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torchboost.data._files import require_files
from torchboost.data._parse import read_string_rows
from torchboost.data.dataset import Dataset
from torchboost.data.folder import dataset_path

__all__ = ["ADULT_LAYOUT", "ADULT_N_FEATURES", "load_adult"]

# Category lists in the order of UCI's adult.names.
_WORKCLASS = (
    "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
    "Without-pay", "Never-worked",
)  # fmt: skip
_EDUCATION = (
    "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc",
    "9th", "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool",
)  # fmt: skip
_MARITAL_STATUS = (
    "Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
    "Married-spouse-absent", "Married-AF-spouse",
)  # fmt: skip
_OCCUPATION = (
    "Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial",
    "Prof-specialty", "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical",
    "Farming-fishing", "Transport-moving", "Priv-house-serv", "Protective-serv", "Armed-Forces",
)  # fmt: skip
_RELATIONSHIP = ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried")
_RACE = ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")
_SEX = ("Female", "Male")
_NATIVE_COUNTRY = (
    "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
    "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
    "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
    "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
    "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
    "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands",
)  # fmt: skip

ADULT_LAYOUT: tuple[tuple[str, int | tuple[str, ...]], ...] = (
    ("age", 5),
    ("workclass", _WORKCLASS),
    ("fnlwgt", 5),
    ("education", _EDUCATION),
    ("education-num", 5),
    ("marital-status", _MARITAL_STATUS),
    ("occupation", _OCCUPATION),
    ("relationship", _RELATIONSHIP),
    ("race", _RACE),
    ("sex", _SEX),
    ("capital-gain", 2),
    ("capital-loss", 2),
    ("hours-per-week", 5),
    ("native-country", _NATIVE_COUNTRY),
)
"""The 14 UCI columns in file order: an ``int`` is a continuous column's number of quantile
bins, a tuple a categorical column's categories (one feature each, in that order)."""

ADULT_N_FEATURES = sum(spec if isinstance(spec, int) else len(spec) for _, spec in ADULT_LAYOUT)
"""Total width of the encoding: 123, as in A9A."""

_HINT = (
    "download adult.data and adult.test from https://archive.ics.uci.edu/dataset/2/adult "
    "and place them there"
)


def _numbers(fields: list[str], name: str, path: Path) -> np.ndarray:
    """A continuous column as float64, ``?`` → NaN."""
    try:
        return np.array([float(field) if field != "?" else np.nan for field in fields])
    except ValueError as error:
        raise ValueError(f"{path}: {name} must be numeric ({error})") from error


def _train_edges(rows: list[list[str]], path: Path) -> list[np.ndarray]:
    """Inner bin edges of every continuous column, from the training rows' non-missing values."""
    edges = []
    for column, (name, spec) in enumerate(ADULT_LAYOUT):
        if isinstance(spec, int):
            values = _numbers([row[column] for row in rows], name, path)
            values = values[~np.isnan(values)]
            if values.size == 0:
                raise ValueError(f"{path}: {name} has no values to compute bin edges from")
            edges.append(np.quantile(values, np.arange(1, spec) / spec))
    return edges


def _encode(rows: list[list[str]], edges: list[np.ndarray], path: Path) -> np.ndarray:
    """One-hot/bin-encode ``rows`` into ``(n, 123)`` given each continuous column's edges."""
    x = np.zeros((len(rows), ADULT_N_FEATURES), dtype=np.float32)
    offset = 0
    continuous = iter(edges)
    for column, (name, spec) in enumerate(ADULT_LAYOUT):
        fields = [row[column] for row in rows]
        present = np.array([field != "?" for field in fields])
        if isinstance(spec, int):
            index = np.searchsorted(next(continuous), _numbers(fields, name, path), side="left")
            width = spec
        else:
            lookup = {category: i for i, category in enumerate(spec)}
            unknown = {f for f in fields if f != "?" and f not in lookup}
            if unknown:
                raise ValueError(f"{path}: unknown {name} value(s) {sorted(unknown)}")
            index = np.array([lookup.get(field, 0) for field in fields])
            width = len(spec)
        rows_present = np.flatnonzero(present)
        x[rows_present, offset + index[rows_present]] = 1.0
        offset += width
    return x


def _labels(rows: list[list[str]], path: Path) -> np.ndarray:
    labels = [row[14].rstrip(".") for row in rows]
    if not set(labels) <= {"<=50K", ">50K"}:
        raise ValueError(f"{path}: income labels must be <=50K or >50K (optionally with '.')")
    return np.array([label == ">50K" for label in labels], dtype=np.int64)


def load_adult(root: str | Path | None = None) -> Dataset:
    """UCI Adult (``adult.data``/``adult.test``, plain or gzipped) in A9A's 123-feature layout.

    Binary task: label 1 for income ``>50K`` (the test file's trailing ``.`` is ignored), 0 for
    ``<=50K``. The test file's first line (``|1x3 Cross validator``) and blank lines are skipped.
    Train: 32,561 rows; test: 16,281 rows (the rows behind A9A and A9A.t).

    Encoding, in UCI column order (feature indices are 0-based, half-open):

    ==================  =====  ===========================================
    column              width  features
    ==================  =====  ===========================================
    age                 5      0–5, quantile bins
    workclass           8      5–13, one-hot
    fnlwgt              5      13–18, quantile bins
    education           16     18–34, one-hot
    education-num       5      34–39, quantile bins
    marital-status      7      39–46, one-hot
    occupation          14     46–60, one-hot
    relationship        6      60–66, one-hot
    race                5      66–71, one-hot
    sex                 2      71–73, one-hot
    capital-gain        2      73–75, quantile bins (median split)
    capital-loss        2      75–77, quantile bins (median split)
    hours-per-week      5      77–82, quantile bins
    native-country      41     82–123, one-hot
    ==================  =====  ===========================================

    * Categorical columns: one feature per category of UCI's ``adult.names``, in that order
      (see :data:`ADULT_LAYOUT`); ``?`` (missing) sets none of the column's features, an unknown
      category raises ``ValueError``.
    * Continuous columns with ``B`` bins: inner edges ``e_1 ≤ … ≤ e_{B-1}`` are the ``k/B``
      quantiles of the column in the TRAIN file only (``numpy.quantile``, linear method) and
      value ``v`` goes to bin ``#{k : e_k < v}``, i.e. bins are ``(e_{k}, e_{k+1}]``. Tied
      quantiles leave a bin empty (on UCI's train file: education-num's second bin and
      hours-per-week's third; capital-gain/-loss split into "0" and "> 0" since their median
      is 0); the width stays fixed so every feature keeps its A9A position.

    Raises ``FileNotFoundError`` naming the missing file(s).
    """
    if root is None:  # the data folder's adult/ (torchboost.data.folder)
        root = dataset_path("adult")
    train_path, test_path = require_files(root, ("adult.data", "adult.test"), "Adult", _HINT)
    train_rows = read_string_rows(train_path, 15)
    test_rows = read_string_rows(test_path, 15)
    edges = _train_edges(train_rows, train_path)
    x = np.concatenate(
        [_encode(train_rows, edges, train_path), _encode(test_rows, edges, test_path)]
    )
    y = np.concatenate([_labels(train_rows, train_path), _labels(test_rows, test_path)])
    n_train = len(train_rows)
    return Dataset.from_arrays(
        "adult",
        x,
        y,
        train=np.arange(n_train),
        test=np.arange(n_train, len(x)),
        task="binary",
        n_classes=2,
    )
