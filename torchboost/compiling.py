"""``torch.compile`` for one object's own use: what ``compile=True`` compiles
(:mod:`~torchboost.boosters.stacked_step`, :class:`~torchboost.boosters.scaling.Standardizer`).

torch keeps a function's compiled versions, and its limit of
``torch._dynamo.config.recompile_limit`` (8) of them, on the function's code object, shared by
every caller in the process: the ninth booster of another width in a sweep would find the
limit reached, and torch would warn and run the function eagerly from then on.
:class:`OwnCompiled` compiles a copy with a code object of its own, so every booster compiles
for its own shapes (once per layout; a batch size that changes becomes symbolic at the first
change) and within its own limit. Where torch cannot compile at all (no C++ compiler for
inductor on a CPU, no Triton for a GPU), it says so once and raises :class:`CompileFailed`;
the caller takes its eager path, this round and every later one.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["CompileFailed", "CompiledOnce", "OwnCompiled"]


class CompileFailed(RuntimeError):
    """torch could not compile (its error is the cause): run the eager path instead."""


class OwnCompiled:
    """``torch.compile(function)`` (sizes made symbolic where they change) on a copy of
    ``function`` whose compiled versions are its own (module docstring)."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.name = function.__name__
        code = function.__code__.replace()  # an equal code object, not the same one
        own = types.FunctionType(code, function.__globals__, function.__name__,
                                 function.__defaults__, function.__closure__)
        self.compiled: Callable[..., Any] | None = torch.compile(own, dynamic=None)

    @property
    def failed(self) -> bool:
        """Whether torch could not compile it (then every call raises :class:`CompileFailed`)."""
        return self.compiled is None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            raise CompileFailed(f"torch.compile could not compile {self.name}")
        try:
            return self.compiled(*args)
        except _compiler_errors() as error:  # raised while compiling: nothing has run yet
            self.compiled = None
            cause = getattr(error, "inner_exception", None) or error
            reason = f"{type(cause).__name__}: {cause}".splitlines()[0]
            warnings.warn(f"torch.compile could not compile {self.name} ({reason}); it runs "
                          "eagerly, with the eager results (compile=False does not try)",
                          RuntimeWarning, stacklevel=2)
            raise CompileFailed(f"torch.compile could not compile {self.name}") from error


def _compiler_errors() -> tuple[type[Exception], ...]:
    """What torch raises when it cannot compile: dynamo's errors, inductor's (a C++ compiler or
    Triton missing); looked up only when something was raised (importing them imports dynamo)."""
    from torch._dynamo.exc import TorchDynamoException
    from torch._inductor.exc import InductorError

    return TorchDynamoException, InductorError


class CompiledOnce:
    """Holds :class:`OwnCompiled` of the class's :attr:`function`, made at its first use and
    not copied: a compiled function does not pickle, so a copy compiles again."""

    #: the function compiled (set by each subclass)
    function: Callable[..., Any]

    def __init__(self) -> None:
        self._compiled: OwnCompiled | None = None

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]

    @property
    def failed(self) -> bool:
        """Whether torch could not compile it (then the caller's eager path runs)."""
        return self._compiled is not None and self._compiled.failed

    def compiled(self) -> OwnCompiled:
        """The compiled function (compiled at its first call)."""
        if self._compiled is None:
            self._compiled = OwnCompiled(type(self).function)
        return self._compiled
