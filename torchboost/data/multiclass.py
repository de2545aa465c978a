"""Small UCI classification sets in their on-disk forms: Balance Scale (one-hot CSV) and
Mushroom (KEEL's version). Both get a seeded random train/test split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torchboost.data._files import open_text, reading, resolve_file
from torchboost.data._parse import read_numeric_csv, read_string_rows
from torchboost.data._split import random_split
from torchboost.data.dataset import Dataset

__all__ = ["MUSHROOM_CATEGORIES", "load_balance", "load_mushroom"]

MUSHROOM_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("cap-shape", "bcxfks"),
    ("cap-surface", "fgys"),
    ("cap-color", "nbcgrpuewy"),
    ("bruises", "tf"),
    ("odor", "alcyfmnps"),
    ("gill-attachment", "adfn"),
    ("gill-spacing", "cwd"),
    ("gill-size", "bn"),
    ("gill-color", "knbhgropuewy"),
    ("stalk-shape", "et"),
    ("stalk-root", "bcuezr"),
    ("stalk-surface-above-ring", "fyks"),
    ("stalk-surface-below-ring", "fyks"),
    ("stalk-color-above-ring", "nbcgopewy"),
    ("stalk-color-below-ring", "nbcgopewy"),
    ("veil-type", "pu"),
    ("veil-color", "nowy"),
    ("ring-number", "not"),
    ("ring-type", "ceflnpsz"),
    ("spore-print-color", "knbhrouwy"),
    ("population", "acnsvy"),
    ("habitat", "glmpuwd"),
)
"""The 22 attributes and their one-letter codes, in the order of UCI's
``agaricus-lepiota.names``; one feature per code (125 in all)."""

_BALANCE_HINT = (
    "one-hot encode https://archive.ics.uci.edu/dataset/12/balance+scale (20 0/1 columns, then "
    "'target' 1-3, with a header row) and place it there"
)
_MUSHROOM_HINT = (
    "download the mushroom data set from KEEL (https://sci2s.ugr.es/keel/) or UCI "
    "(https://archive.ics.uci.edu/dataset/73/mushroom, class moved to the last column)"
)


#: 20 one-hot features and the target
_BALANCE_COLUMNS = 21


def load_balance(path: str | Path, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """UCI Balance Scale from a one-hot CSV (``balance-scale_onehot.csv``), 3 classes.

    The file has a header row (values may be quoted), 20 one-hot feature columns and a last
    column ``target`` in {1, 2, 3}, mapped to classes ``target - 1``. ``path`` is the file or its
    directory. Split: seeded random, ``round(n * test_fraction)`` test rows
    (``numpy.random.default_rng(seed).permutation``).
    """
    path = resolve_file(path, "Balance Scale", ["balance-scale_onehot.csv"], _BALANCE_HINT)
    with reading(path), open_text(path) as f:
        header = f.readline().strip().replace('"', "").split(",")
    if header[-1:] != ["target"]:
        raise ValueError(f"{path}: expected a header row ending in 'target' (the file's first "
                         f"line is {','.join(header)[:60]!r})")
    table = read_numeric_csv(path, skiprows=1, quotechar='"')
    target = table[:, -1]
    if not np.isin(target, (1, 2, 3)).all():
        raise ValueError(f"{path}: the last column (target) must be 1, 2 or 3")
    if table.shape[1] != _BALANCE_COLUMNS:
        raise ValueError(f"{path}: expected {_BALANCE_COLUMNS - 1} one-hot feature columns and "
                         f"'target', got {table.shape[1]} columns")
    train, test = random_split(table.shape[0], test_fraction, seed)
    return Dataset.from_arrays(
        "balance", table[:, :-1], target - 1, train, test, task="multiclass", n_classes=3
    )


def load_mushroom(path: str | Path, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """UCI Mushroom in KEEL's layout (no header; 22 categorical columns, then class ``e``/``p``).

    Features: each attribute one-hot over the fixed code lists of :data:`MUSHROOM_CATEGORIES`
    (125 features; codes absent from the data give all-zero columns, ``?`` sets none of its
    attribute's features, any other unknown code raises ``ValueError``). Labels: ``e``
    (edible) → 0, ``p`` (poisonous) → 1. ``path`` is the file (plain or ``.gz``) or a directory
    holding ``mushroom_keel.csv``. Split: seeded random, ``round(n * test_fraction)`` test rows
    (``numpy.random.default_rng(seed).permutation``).
    """
    path = resolve_file(path, "Mushroom", ["mushroom_keel.csv"], _MUSHROOM_HINT)
    rows = read_string_rows(path, len(MUSHROOM_CATEGORIES) + 1)
    n_features = sum(len(codes) for _, codes in MUSHROOM_CATEGORIES)
    x = np.zeros((len(rows), n_features), dtype=np.float32)
    offset = 0
    for column, (name, codes) in enumerate(MUSHROOM_CATEGORIES):
        for i, row in enumerate(rows):
            code = row[column]
            if code == "?":
                continue
            if len(code) != 1 or code not in codes:
                raise ValueError(f"{path}, row {i + 1}: unknown {name} code {code!r}")
            x[i, offset + codes.index(code)] = 1.0
        offset += len(codes)
    labels = [row[-1] for row in rows]
    if not set(labels) <= {"e", "p"}:
        raise ValueError(f"{path}: the class (last column) must be 'e' or 'p'")
    y = np.array([label == "p" for label in labels], dtype=np.int64)
    train, test = random_split(len(rows), test_fraction, seed)
    return Dataset.from_arrays("mushroom", x, y, train, test, task="binary", n_classes=2)
