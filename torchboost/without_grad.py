"""``torch.no_grad()``'s effect for the round's own arithmetic, at a quarter of its cost.

A default round enters 15 gradient-free blocks (its checks, snapshot, step, statistics and
book-keeping). ``torch.no_grad()`` builds three Python objects per block (itself, and a
``torch.set_grad_enabled`` on entry and on exit): 3.1 µs a block here, 4.4 µs a decorated call,
against 0.8 µs either way for :class:`without_grad`, which sets the same flag directly
(``torch._C._set_grad_enabled``, as ``torch.set_grad_enabled`` does) and puts the previous
value back on exit, whatever raised (``benchmarks/grad_mode.py``, ``benchmarks/grad_mode.json``).
``torch.compile`` traces it as it traces ``torch.no_grad()`` (no graph break:
``tests/test_without_grad.py``). Used where a round runs; elsewhere ``torch.no_grad()``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["without_grad"]

F = TypeVar("F", bound=Callable[..., Any])


class without_grad:
    """``with without_grad(): ...`` or ``@without_grad()``: gradients off inside, the previous
    mode back after (module docstring). Not for generator functions (``torch.no_grad()`` keeps
    its mode across a generator's resumptions; this would not)."""

    __slots__ = ("_previous",)

    def __enter__(self) -> None:
        self._previous = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)

    def __exit__(self, *exc: object) -> None:
        torch._C._set_grad_enabled(self._previous)

    def __call__(self, function: F) -> F:
        if inspect.isgeneratorfunction(function):
            raise TypeError(f"without_grad() cannot decorate the generator function "
                            f"{function.__qualname__}: use torch.no_grad()")

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            previous = torch.is_grad_enabled()
            torch._C._set_grad_enabled(False)
            try:
                return function(*args, **kwargs)
            finally:
                torch._C._set_grad_enabled(previous)

        return call  # type: ignore[return-value]
