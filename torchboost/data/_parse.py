"""Reading delimited text tables (plain or gzip) into numpy arrays or string rows."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from torchboost.data._files import open_text, reading

__all__ = ["check_finite", "read_numeric_csv", "read_string_rows"]


def read_numeric_csv(path: Path, skiprows: int = 0, quotechar: str | None = None) -> np.ndarray:
    """All-numeric comma-separated table as a 2-D float64 array (numpy's C parser).

    Raises ``ValueError`` naming ``path`` when a field is not a number, rows differ in length,
    or a field is NaN or infinite (a missing value: the loaders do not guess one); ``#`` starts
    no comment.
    """
    with reading(path), open_text(path) as f:
        try:
            table = np.loadtxt(f, delimiter=",", skiprows=skiprows, quotechar=quotechar,
                               dtype=np.float64, ndmin=2, comments=None)
        except ValueError as error:
            raise ValueError(f"{path}: not an all-numeric CSV table ({error})") from error
    if table.size == 0:
        raise ValueError(f"{path}: no data rows")
    check_finite(path, table, first_line=skiprows + 1)
    return table


def check_finite(path: Path, table: np.ndarray, first_line: int = 1) -> None:
    """``ValueError`` naming ``path`` and the lines of rows holding NaN or inf."""
    bad = np.flatnonzero(~np.isfinite(table).all(axis=1))
    if bad.size:
        lines = (bad[:10] + first_line).tolist()
        raise ValueError(f"{path}: {bad.size} row(s) hold NaN or infinite values (missing "
                         f"values?), at line(s) {lines}; clean or impute them first")


def read_string_rows(path: Path, n_fields: int) -> list[list[str]]:
    """Comma-separated rows as stripped strings, skipping blank lines and ``|`` comment lines.

    Every row must have exactly ``n_fields`` fields (``ValueError`` naming the line otherwise).
    """
    rows: list[list[str]] = []
    with reading(path), open_text(path) as f:
        for line_no, fields in enumerate(csv.reader(f), start=1):
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if fields[0].startswith("|"):
                continue
            if len(fields) != n_fields:
                raise ValueError(
                    f"{path}, line {line_no}: expected {n_fields} fields, got {len(fields)}"
                )
            rows.append([field.strip() for field in fields])
    if not rows:
        raise ValueError(f"{path}: no data rows")
    return rows
