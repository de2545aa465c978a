"""The closure convention of ``torch.optim.Optimizer.step`` shared by this package's optimizers."""

from __future__ import annotations

from collections.abc import Callable

import torch


def evaluate_closure(closure: Callable[[], float] | None) -> float | None:
    """``closure()`` with autograd on (``step`` itself runs under ``no_grad``), or ``None``."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()
