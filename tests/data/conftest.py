"""Shared fixtures for the ``torchboost.data`` tests."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest

from torchboost.data.folder import LAYOUT, data_dir, missing


@pytest.fixture
def real_data() -> Callable[[str], Path]:
    """``real_data("mnist")`` → that path in the data folder (``TORCHBOOST_DATA``, see
    :mod:`torchboost.data.folder`), or skip saying how to fill it when it is absent."""

    def get(relative: str) -> Path:
        path = data_dir() / relative
        if not path.exists():
            name = next((n for n, (place, _) in LAYOUT.items() if place == relative), None)
            pytest.skip(f"real data not available: {missing(name, path)}" if name else
                        f"real data not available: {path} is missing (docs/guide/data.md)")
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
