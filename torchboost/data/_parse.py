"""Reading delimited text tables (plain or gzip) into numpy arrays or string rows."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from torchboost.data._files import open_text

__all__ = ["read_numeric_csv", "read_string_rows"]


def read_numeric_csv(path: Path, skiprows: int = 0, quotechar: str | None = None) -> np.ndarray:
    """All-numeric comma-separated table as a 2-D float64 array (numpy's C parser).

    Raises ``ValueError`` naming ``path`` when a field is not a number or rows differ in length.
    """
    with open_text(path) as f:
        try:
            table = np.loadtxt(
                f, delimiter=",", skiprows=skiprows, quotechar=quotechar, dtype=np.float64, ndmin=2
            )
        except ValueError as error:
            raise ValueError(f"{path}: not an all-numeric CSV table ({error})") from error
    if table.size == 0:
        raise ValueError(f"{path}: no data rows")
    return table


def read_string_rows(path: Path, n_fields: int) -> list[list[str]]:
    """Comma-separated rows as stripped strings, skipping blank lines and ``|`` comment lines.

    Every row must have exactly ``n_fields`` fields (``ValueError`` naming the line otherwise).
    """
    rows: list[list[str]] = []
    with open_text(path) as f:
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
