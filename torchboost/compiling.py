"""``torch.compile`` for one object's own use: what ``compile=True`` compiles
(:mod:`~torchboost.boosters.compiled_step`, :class:`~torchboost.boosters.scaling.Standardizer`).

torch keeps a function's compiled versions, and its limit of
``torch._dynamo.config.recompile_limit`` (8) of them, on the function's code object, shared by
every caller in the process: the ninth booster of another width in a sweep would find the
limit reached, and torch would warn and run the function eagerly from then on.
:func:`compile_own` compiles a copy with a code object of its own, so every booster compiles
for its own shapes (once per layout; a batch size that changes becomes symbolic at the first
change) and within its own limit.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["compile_own"]


def compile_own(function: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(function)`` (sizes made symbolic where they change) on a copy of
    ``function`` whose compiled versions are its own (module docstring)."""
    code = function.__code__.replace()  # an equal code object, not the same one
    copy = types.FunctionType(code, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    return torch.compile(copy, dynamic=None)
