"""Faults: a streaming run killed with SIGKILL — between steps or in the middle of writing a
checkpoint — resumes from its last complete checkpoint to exactly the uninterrupted model.

The runs are ``fault_run.py`` in subprocesses; the uninterrupted reference is the same
:func:`fault_run.fit` in this process (single-threaded like the subprocesses, so bit for bit
comparable on CPU).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fault_run import EVERY_N_STEPS, N_STEPS, final_state, fit

from torchboost.lightning import atomic_save, latest_checkpoint

SCRIPT = Path(__file__).with_name("fault_run.py")
TIMEOUT = 120.0
KILL_STEP = random.Random(5).randint(EVERY_N_STEPS + 1, N_STEPS - 1)
"""The step the first run is killed at, drawn by a seeded RNG from the steps past the first
checkpoint: 20, so the resumed run starts from the checkpoint of step 18 and redoes 2 steps."""


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    """The final state of an uninterrupted run, computed here single-threaded."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return final_state(fit())
    finally:
        torch.set_num_threads(threads)


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """Starts ``fault_run.py`` on ``tmp_path/ckpt`` writing ``tmp_path/out.pt``; its stderr goes
    to ``tmp_path/stderr.txt``."""
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(tmp_path / "ckpt"), str(tmp_path / "out.pt"), *args],
        stdout=subprocess.PIPE, stderr=(tmp_path / "stderr.txt").open("w"), text=True)


def _stderr(tmp_path: Path) -> str:
    return (tmp_path / "stderr.txt").read_text()[-3000:]


def _lines(process: subprocess.Popen[str]) -> Iterator[str]:
    assert process.stdout is not None
    yield from process.stdout


def _resume(tmp_path: Path) -> dict[str, Any]:
    """Runs ``fault_run.py --resume`` to the end; returns what it wrote."""
    process = _start(tmp_path, "--resume")
    assert process.wait(TIMEOUT) == 0, _stderr(tmp_path)
    return torch.load(tmp_path / "out.pt", weights_only=False)


def _assert_same_final_model(resumed: dict[str, Any], reference: dict[str, Any],
                             assert_identical: Any) -> None:
    assert_identical(reference["state"], resumed["state"])
    assert resumed["compute_units"] == reference["compute_units"] == 2000 * 4 * 3


def test_sigkill_at_a_random_step_then_resume_is_exact(tmp_path, reference, assert_identical):
    process = _start(tmp_path, "--pause-at-step", str(KILL_STEP))
    try:
        announced = next((line for line in _lines(process) if line.startswith("paused")), None)
    finally:
        process.send_signal(signal.SIGKILL)
    assert announced == f"paused at step {KILL_STEP}\n", _stderr(tmp_path)
    assert process.wait(TIMEOUT) == -signal.SIGKILL
    assert not (tmp_path / "out.pt").exists()

    last = latest_checkpoint(tmp_path / "ckpt")
    assert last == tmp_path / "ckpt" / "last.ckpt"
    saved_step = KILL_STEP - KILL_STEP % EVERY_N_STEPS
    assert torch.load(last, weights_only=False)["global_step"] == saved_step

    resumed = _resume(tmp_path)
    assert resumed["start_step"] == saved_step  # resumed from the checkpoint, not from scratch
    _assert_same_final_model(resumed, reference, assert_identical)


def test_death_while_writing_a_checkpoint_keeps_the_previous_one(tmp_path, reference,
                                                                 assert_identical):
    saves = 4  # the 4th save, at step 12, dies halfway through writing last.ckpt
    process = _start(tmp_path, "--die-in-save", str(saves))
    assert process.wait(TIMEOUT) == -signal.SIGKILL, _stderr(tmp_path)

    directory = tmp_path / "ckpt"
    last = directory / "last.ckpt"
    (partial,) = directory.glob(".last.ckpt.atomic-*.tmp")
    assert sorted(directory.iterdir()) == sorted([last, partial])
    size = last.stat().st_size
    assert partial.stat().st_size == size // 2  # the dead save's bytes are in its temp file,
    with pytest.raises((OSError, RuntimeError)):  # which does not load (truncated zip),
        torch.load(partial, weights_only=False)
    # while last.ckpt is the complete checkpoint of the save before
    assert torch.load(last, weights_only=False)["global_step"] == (saves - 1) * EVERY_N_STEPS
    assert latest_checkpoint(directory) == last

    resumed = _resume(tmp_path)
    assert resumed["start_step"] == (saves - 1) * EVERY_N_STEPS
    _assert_same_final_model(resumed, reference, assert_identical)
    assert [path.name for path in directory.iterdir()] == ["last.ckpt"]  # temp file cleaned


class Unpicklable:
    """Raises while ``torch.save`` serialises it: a save failing after its temp file exists."""

    def __reduce__(self) -> tuple:
        raise RuntimeError("cannot pickle")


def test_atomic_save_keeps_the_old_file_and_latest_skips_temp_files(tmp_path):
    assert latest_checkpoint(tmp_path / "missing") is None
    last = atomic_save({"step": 1, "x": torch.arange(1000)}, tmp_path / "last.ckpt")
    assert last == tmp_path / "last.ckpt"
    with pytest.raises(RuntimeError, match="cannot pickle"):
        atomic_save({"x": torch.arange(1000), "y": Unpicklable()}, last)
    assert list(tmp_path.iterdir()) == [last]  # no temp file left, the old file intact
    assert torch.load(last)["step"] == 1

    stale = tmp_path / ".last.ckpt.atomic-0123456789abcdef.tmp"
    stale.write_bytes(b"half a checkpoint")
    other = atomic_save({"step": 0}, tmp_path / "epoch=0-step=0.ckpt")
    assert not stale.exists()  # cleaned by the next save in the directory
    stale.write_bytes(b"half a checkpoint")
    os.utime(last, ns=(10**9, 10**9))
    os.utime(other, ns=(2 * 10**9, 2 * 10**9))
    assert latest_checkpoint(tmp_path) == other  # newest complete file; the newer .tmp skipped
    atomic_save({"step": 2}, last)
    assert latest_checkpoint(tmp_path) == last
    assert sorted(path.name for path in tmp_path.iterdir()) == ["epoch=0-step=0.ckpt",
                                                                "last.ckpt"]
    assert torch.load(last)["step"] == 2
