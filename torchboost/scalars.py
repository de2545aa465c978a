"""Python numbers as 0-dim tensors, made once, for the arithmetic of a round.

``t * 0.5`` on a float32 tensor wraps ``0.5`` in a float64 tensor and casts it, four ATen
operations besides the product, every call (``torch.where`` against a number likewise); a
0-dim tensor of the operand's own dtype and device is used as it is. :func:`scalar` keeps one
per value, dtype and device. The arithmetic is the same: a number against a float32 tensor is
rounded to float32 first either way.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import Tensor

__all__ = ["scalar"]


def scalar(value: float, like: Tensor) -> Tensor:
    """``value`` as a 0-dim tensor of ``like``'s dtype and device (cached: never write to it;
    while ``torch.compile`` traces, a constant of the graph, not looked up in the cache)."""
    if torch.compiler.is_compiling():
        return torch.tensor(float(value), dtype=like.dtype, device=like.device)
    return _constant(float(value), like.dtype, like.device)


@lru_cache(maxsize=512)
def _constant(value: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.tensor(value, dtype=dtype, device=device)
