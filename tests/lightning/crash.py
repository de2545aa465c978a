"""A callback that simulates a crash, shared by the Lightning resume tests."""

from __future__ import annotations

import lightning.pytorch as pl


class CrashAt(pl.Callback):
    """Simulates a crash after ``step`` training batches."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError("simulated crash")
