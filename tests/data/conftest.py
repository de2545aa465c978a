"""Shared fixtures for the ``torchboost.data`` tests."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest

REAL_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
"""The project's real data sets: ``../shared/data`` from the repository root."""


@pytest.fixture
def real_data() -> Callable[[str], Path]:
    """``real_data("mnist")`` → that path under ``../shared/data``, or skip when it is absent."""

    def get(relative: str) -> Path:
        path = REAL_DATA / relative
        if not path.exists():
            pytest.skip(
                f"real data not available: {path} is missing (see ../shared/data/README.md)"
            )
        return path

    return get


@pytest.fixture
def write_file() -> Callable[[Path, bytes | str], Path]:
    """``write_file(path, payload)``: write bytes or UTF-8 text, gzipped if the name ends in .gz."""

    def write(path: Path, payload: bytes | str) -> Path:
        data = payload.encode("utf-8") if isinstance(payload, str) else payload
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".gz":
            with gzip.open(path, "wb") as f:
                f.write(data)
        else:
            path.write_bytes(data)
        return path

    return write
