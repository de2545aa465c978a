"""A checkpointed streaming SGB run that the fault tests kill and resume in subprocesses.

``python fault_run.py CKPT_DIR OUT [--pause-at-step K | --die-in-save N] [--resume]`` trains
SGB (4 two-layer nets) for one pass over a seeded 2,000-row regression stream (40 batches),
single-threaded, with a ``ModelCheckpoint`` writing ``CKPT_DIR/last.ckpt`` every
:data:`EVERY_N_STEPS` steps through :class:`~torchboost.lightning.AtomicCheckpointIO`, then
writes the final booster state to ``OUT`` (:func:`final_state`). Faults:

* ``--pause-at-step K``: before batch ``K`` prints ``paused at step K`` and waits to be killed;
* ``--die-in-save N``: the ``N``-th checkpoint save writes half of its bytes, then the process
  sends itself SIGKILL;
* ``--resume``: continues from :func:`~torchboost.lightning.latest_checkpoint` of ``CKPT_DIR``.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from torchboost import SGB, TwoLayerNet
from torchboost.data import DataStream, synthetic_regression
from torchboost.lightning import AtomicCheckpointIO, StreamingBoosterModule, latest_checkpoint

SEED = 0
N_FEATURES = 5
BATCH_SIZE = 50
N_STEPS = 40
"""Batches in the pass: 2,000 training rows of 2,500 (the rest are test rows) over 50."""
EVERY_N_STEPS = 3
PAUSE_SECONDS = 120.0
"""How long ``--pause-at-step`` waits to be killed before giving up with an error."""


class PauseAt(pl.Callback):
    """Announces on stdout that ``step`` batches are done, then waits to be killed."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        if trainer.global_step == self.step:
            print(f"paused at step {self.step}", flush=True)
            time.sleep(PAUSE_SECONDS)
            sys.exit(f"not killed within {PAUSE_SECONDS} s")


class StartStep(pl.Callback):
    """Records the global step a fit starts (or resumes) at."""

    def __init__(self) -> None:
        self.step: int | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.step = trainer.global_step


def die_in_save(n: int) -> None:
    """Makes the ``n``-th ``torch.save`` call write half of its bytes to its file, flush them to
    disk and SIGKILL the process: a crash in the middle of writing a checkpoint."""
    save, calls = torch.save, 0

    def dying_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        if calls < n:
            save(obj, f, *args, **kwargs)
            return
        buffer = io.BytesIO()
        save(obj, buffer, *args, **kwargs)
        data = buffer.getvalue()
        f.write(data[: len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)

    torch.save = dying_save


def fit(checkpoint_dir: Path | None = None, callbacks: Sequence[pl.Callback] = (),
        ckpt_path: Path | None = None) -> StreamingBoosterModule:
    """One seeded pass (resumed from ``ckpt_path`` if given), checkpointed into
    ``checkpoint_dir`` if given; returns the trained module."""
    torch.manual_seed(SEED)
    data = synthetic_regression(n=2500, d=N_FEATURES, seed=SEED)
    stream = DataStream.from_dataset(data, batch_size=BATCH_SIZE, seed=SEED)
    booster = SGB(partial(TwoLayerNet, N_FEATURES, 4), "squared", n_learners=4,
                  optimizer_kwargs={"lr": 0.05})
    module = StreamingBoosterModule(booster)
    callbacks = list(callbacks)
    if checkpoint_dir is not None:
        callbacks.append(ModelCheckpoint(dirpath=checkpoint_dir, every_n_train_steps=EVERY_N_STEPS,
                                         save_top_k=0, save_last=True))
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=checkpoint_dir is not None,
                         enable_model_summary=False, enable_progress_bar=False,
                         plugins=[AtomicCheckpointIO()], callbacks=callbacks)
    trainer.fit(module, train_dataloaders=stream, ckpt_path=ckpt_path)
    return module


def final_state(module: StreamingBoosterModule) -> dict[str, Any]:
    """What a run hands back: the booster's full state_dict and its compute units."""
    return {"state": module.booster.state_dict(), "compute_units": module.booster.compute_units}


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the command line of the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint_dir", type=Path)
    parser.add_argument("out", type=Path)
    faults = parser.add_mutually_exclusive_group()
    faults.add_argument("--pause-at-step", type=int, metavar="K")
    faults.add_argument("--die-in-save", type=int, metavar="N")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    start = StartStep()
    callbacks: list[pl.Callback] = [start]
    if args.pause_at_step is not None:
        callbacks.append(PauseAt(args.pause_at_step))
    if args.die_in_save is not None:
        die_in_save(args.die_in_save)
    ckpt_path = latest_checkpoint(args.checkpoint_dir) if args.resume else None
    if args.resume and ckpt_path is None:
        parser.error(f"no checkpoint in {args.checkpoint_dir} to resume from")
    module = fit(args.checkpoint_dir, callbacks, ckpt_path)
    torch.save({**final_state(module), "start_step": start.step}, args.out)


if __name__ == "__main__":
    main()
