"""Crash-safe checkpoint files: a checkpoint on disk is always a complete old or a complete new one.

Lightning 2.6's :class:`~lightning.fabric.plugins.TorchCheckpointIO` serialises the checkpoint
into memory and lets ``fsspec`` write it to a temporary file made by ``tempfile.mkstemp()`` —
in ``$TMPDIR``, not next to the target — which ``shutil.move`` then puts in place. That is a
rename, hence atomic against a killed process, only when ``$TMPDIR`` and the checkpoint
directory are on one filesystem; otherwise ``shutil.move`` copies the bytes into the target and
a process killed during the copy leaves a truncated checkpoint under the real name. Nothing is
fsynced, so a power loss can also leave a renamed but empty file, and the temporary file of a
killed save stays in ``$TMPDIR`` for good.

:class:`AtomicCheckpointIO` writes next to the target instead: ``torch.save`` into a hidden
temporary file in the same directory, flush, ``fsync``, ``os.replace`` onto the target name (an
atomic rename on POSIX and Windows), then ``fsync`` of the directory so the rename itself is
durable. A reader — a resuming run, :func:`latest_checkpoint` — therefore only ever sees a
complete checkpoint. Temporary files are named ``.<target>.atomic-<random>.tmp``: they never
match ``*.ckpt``, so neither Lightning's ``ckpt_path="last"`` nor :func:`latest_checkpoint`
picks one up, and those a killed save left behind are deleted by the next save in their
directory.

Use it with a ``ModelCheckpoint`` that keeps a ``last.ckpt`` and resume from the newest file::

    saver = ModelCheckpoint(dirpath="ckpt", every_n_train_steps=100, save_last=True)
    trainer = pl.Trainer(max_epochs=1, callbacks=[saver], plugins=[AtomicCheckpointIO()])
    trainer.fit(StreamingBoosterModule(build()), stream, ckpt_path=latest_checkpoint("ckpt"))

(``ckpt_path=None`` when the directory has no checkpoint yet: a fresh start.) With a
:class:`~torchboost.data.DataStream` the resumed run ends in exactly the booster of an
uninterrupted one (see :class:`~torchboost.lightning.StreamingBoosterModule`).

Limits: a directory is assumed to have one writer at a time (Lightning saves from global rank
zero only; ``AsyncCheckpointIO`` runs its saves one after the other), since a save deletes the
temporary files it finds there. Remote paths (``s3://`` and other ``fsspec`` protocols) are
handed to Lightning's own saving unchanged.
"""

from __future__ import annotations

import os
import pickle
import secrets
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from lightning.fabric.plugins import TorchCheckpointIO

__all__ = ["AtomicCheckpointIO", "CorruptCheckpointError", "atomic_save", "check_checkpoint",
           "latest_checkpoint"]

TEMP_MARKER = ".atomic-"
"""Part of every temporary file name, ``.<target name>.atomic-<16 hex digits>.tmp``."""


class CorruptCheckpointError(RuntimeError):
    """A checkpoint file is truncated or corrupted; the message names it and what to do."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"checkpoint {self.path} is truncated or corrupted ({problem}); move it "
                         "away or delete it and resume from an intact one, e.g. "
                         "ckpt_path=latest_checkpoint(directory), which skips corrupted files")

    def __reduce__(self) -> tuple[type[CorruptCheckpointError], tuple[str, str]]:
        return type(self), (self.path, self.problem)


def check_checkpoint(path: str | os.PathLike[str]) -> None:
    """Raise :class:`CorruptCheckpointError` unless ``path`` is an intact ``torch.save`` file:
    a complete zip archive whose every member passes its CRC check (a truncated file, a
    zero-filled one, and a flipped bit that ``torch.load`` would read without complaint all
    fail). Files in torch's legacy (non-zip) format are checked by loading them with
    ``weights_only=True``: a check never runs the pickled code of the file it checks, so a
    legacy file holding other objects than tensors and plain containers is refused (re-save it
    in the default format). A missing file raises ``FileNotFoundError``, a directory
    ``IsADirectoryError``."""
    target = Path(path)
    size = target.stat().st_size  # FileNotFoundError for a missing file
    if target.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a checkpoint file (for the newest "
                                "checkpoint in a directory, use latest_checkpoint)")
    if size == 0:
        raise CorruptCheckpointError(path, "the file is empty")
    try:
        if zipfile.is_zipfile(target):
            with zipfile.ZipFile(target) as archive:
                bad = archive.testzip()
            if bad is not None:
                raise CorruptCheckpointError(path, f"member {bad!r} fails its CRC check")
            # torch.load reads the archive with its own, stricter reader (miniz): open it with
            # that too (a flipped bit in the central directory that Python's zipfile ignores
            # makes torch.load fail); nothing is unpickled
            torch._C.PyTorchFileReader(str(target))
            return
        if _only_zero_bytes(target):
            raise CorruptCheckpointError(path, f"all its {size} bytes are zero, as a power loss "
                                               "during a write can leave a file")
        torch.load(target, map_location="cpu", weights_only=True)
    except CorruptCheckpointError:
        raise
    except pickle.UnpicklingError as error:
        raise CorruptCheckpointError(
            path, "a legacy-format file that cannot be read without running its pickled code "
                  f"({str(error).splitlines()[0]}); a check never runs it: re-save the "
                  "checkpoint with torch.save in the default (zip) format") from error
    except Exception as error:  # any other failure to read it: not an intact checkpoint
        raise CorruptCheckpointError(path, f"{type(error).__name__}: "
                                           f"{str(error).splitlines()[0]}") from error


def _only_zero_bytes(path: Path, chunk: int = 1 << 20) -> bool:
    """Whether every byte of ``path`` is zero, read a megabyte at a time."""
    with open(path, "rb") as file:
        while block := file.read(chunk):
            if block.count(0) != len(block):
                return False
    return True


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's ``TorchCheckpointIO`` with saves that never leave a half-written checkpoint
    under its name, even when the process is killed while writing (see the module docstring).

    Pass it as ``pl.Trainer(plugins=[AtomicCheckpointIO()])``; loading and removal are
    Lightning's.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str],
                        storage_options: Any | None = None) -> None:
        """Saves ``checkpoint`` to ``path`` with :func:`atomic_save` (local paths; others go
        to Lightning's save). ``storage_options`` are not supported, as in the parent class."""
        filesystem, local_path = url_to_fs(str(path))
        if not isinstance(filesystem, LocalFileSystem):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} does not support storage_options")
        atomic_save(checkpoint, local_path)

    def load_checkpoint(self, path: str | os.PathLike[str], *args: Any,
                        **kwargs: Any) -> dict[str, Any]:
        """Lightning's load, after :func:`check_checkpoint` for local files: a truncated or
        corrupted checkpoint raises :class:`CorruptCheckpointError` naming the file."""
        filesystem, local_path = url_to_fs(str(path))
        if isinstance(filesystem, LocalFileSystem):
            check_checkpoint(local_path)
        try:
            return super().load_checkpoint(path, *args, **kwargs)
        except (EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as error:
            raise CorruptCheckpointError(path, f"{type(error).__name__}: {error}") from error


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save(obj, path)`` through a fsynced temporary file in ``path``'s directory that
    is renamed onto ``path``: a reader sees the old file or the new one, never part of one.

    Creates the directory if needed and first deletes the temporary files a killed save left
    there. The new file gets the usual ``0o666 & ~umask`` permissions. Returns the path.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"cannot save a checkpoint to {path}: it is a directory; give "
                                "a file name in it (e.g. directory / 'last.ckpt')")
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(f".*{TEMP_MARKER}*.tmp"):
        stale.unlink(missing_ok=True)
    temp = directory / f".{target.name}{TEMP_MARKER}{secrets.token_hex(8)}.tmp"
    try:
        with open(temp, "xb") as file:
            torch.save(obj, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(directory)
    return target


def latest_checkpoint(dirpath: str | os.PathLike[str], suffix: str = ".ckpt") -> Path | None:
    """The most recently written intact ``*<suffix>`` file in ``dirpath`` (``None`` if there is
    none or no such directory), for ``trainer.fit(..., ckpt_path=latest_checkpoint(dirpath))``.

    Temporary files of :func:`atomic_save` end in ``.tmp`` and are never returned; with
    :class:`AtomicCheckpointIO` every ``*.ckpt`` file is complete. Newer files that fail
    :func:`check_checkpoint` (truncated or corrupted by something else) are skipped with a
    warning naming them. Ties of modification time go to the later name.
    """
    if Path(dirpath).is_file():
        raise NotADirectoryError(f"latest_checkpoint looks in a directory; {dirpath} is a file "
                                 "(pass its directory, or the file itself as ckpt_path)")
    candidates = [path for path in Path(dirpath).glob(f"*{suffix}") if path.is_file()]
    candidates.sort(key=lambda path: (path.stat().st_mtime_ns, path.name), reverse=True)
    for path in candidates:
        try:
            check_checkpoint(path)
        except CorruptCheckpointError as error:
            warnings.warn(f"latest_checkpoint skips {error}", stacklevel=2)
            continue
        return path
    return None


def _fsync_directory(directory: Path) -> None:
    """Makes a rename in ``directory`` durable (POSIX; Windows cannot open a directory)."""
    if os.name == "nt":
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
