"""Locating and opening local data files (plain or gzip); the loaders never download."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = [
    "find_file",
    "missing_files_error",
    "open_binary",
    "open_text",
    "reading",
    "require_files",
    "resolve_file",
]


def open_binary(path: Path) -> IO[bytes]:
    """Open ``path`` for reading bytes, decompressing when its name ends in ``.gz``."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def open_text(path: Path) -> IO[str]:
    """Open ``path`` as UTF-8 text (a leading byte-order mark is dropped, not read as part of
    the first field), decompressing when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return path.open("r", encoding="utf-8-sig")


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn the errors of a damaged file — a truncated or fake ``.gz``, bytes that are not
    UTF-8, a directory — into a ``ValueError`` naming ``path`` and what to do."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error, UnicodeDecodeError,
            IsADirectoryError) as error:
        raise ValueError(f"{path}: cannot be read ({type(error).__name__}: {error}); the file is "
                         "damaged or not what its name says (a .gz must be gzip-compressed, "
                         "text must be UTF-8): replace it with a fresh copy") from error


def missing_files_error(
    dataset: str, names: Sequence[str], where: str | Path, hint: str
) -> FileNotFoundError:
    """The error every loader raises: which files, where they were looked for, how to get them."""
    listing = ", ".join(names)
    return FileNotFoundError(f"{dataset}: expected {listing} in {where}; {hint}")


def find_file(directory: Path, name: str, gz: bool = True) -> Path | None:
    """``directory/name`` or, when ``gz``, ``directory/name.gz``, whichever exists first."""
    for candidate in (name, f"{name}.gz") if gz else (name,):
        path = directory / candidate
        if path.is_file():
            return path
    return None


def require_files(
    directory: str | Path, names: Sequence[str], dataset: str, hint: str
) -> list[Path]:
    """``directory/<name>`` (or ``<name>.gz``) for every name, or an error listing the missing."""
    directory = Path(directory).expanduser()
    found = [find_file(directory, name) for name in names]
    paths = [path for path in found if path is not None]
    if len(paths) != len(names):
        missing = [f"{n}(.gz)" for n, path in zip(names, found, strict=True) if path is None]
        raise missing_files_error(dataset, missing, directory, hint)
    return paths


def resolve_file(path_or_root: str | Path, dataset: str, names: Sequence[str], hint: str) -> Path:
    """Resolve a loader's single-file argument.

    ``path_or_root`` is either the data file itself or a directory holding one of ``names``
    (each also accepted with a ``.gz`` suffix; the first found wins). A path that does not exist
    and has a file suffix is taken as a file: the error then names it and its directory.
    """
    path = Path(path_or_root).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        for name in names:
            found = find_file(path, name)
            if found is not None:
                return found
        raise missing_files_error(dataset, [f"{n}(.gz)" for n in names], path, hint)
    if path.suffix:
        raise missing_files_error(dataset, [path.name], path.parent, hint)
    raise missing_files_error(dataset, [f"{n}(.gz)" for n in names], path, hint)
