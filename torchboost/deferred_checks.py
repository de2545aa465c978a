"""Checks that stay on the device until the round reads them, once.

Every check of a boosting round — finite features and labels, finite learner outputs, partial
sums and targets (:func:`~torchboost.boosters.guards.check_round`), gradients that can be
squared and a step within its cap (:func:`~torchboost.boosters.guards.guard_step`) — is a
reduction whose verdict lives on the device. Read one by one, each is a host sync: five per
round, each a stall of the CUDA stream, where the same-size network trained end to end needs
none of its own. :func:`require_finite` is how a check states itself: a 0-dim tensor that is
finite exactly when the check holds (a sum of the values it guards; a comparison folded in with
:func:`within`) and a function that names what failed, raising the check's own error.

Outside :func:`deferring` the value is read at once and the error raised, as a check always did.
Inside it (:meth:`Booster.learn <torchboost.boosters.base.Booster.learn>` on one process) the
values are kept and summed, and :meth:`DeferredChecks.settle` reads the sum once: if it is
finite, every check held (a sum is finite only if each of its terms is); if not, the checks
are explained in the order they were stated, so the first that fails raises its own error —
the features' ``ValueError`` before a learner's :class:`~torchboost.boosters.guards.
DivergenceError` — and one whose sum merely overflowed raises nothing. The round's transaction
(:mod:`~torchboost.boosters.transaction`) restores everything the round changed before the
error reaches the caller, so raising later in the round changes nothing the caller can see.
An exception raised inside the block while checks are pending (a learner that cannot take NaN
inputs, say) is preceded by the same explanation: the pending check's error wins, naming the
cause, not the symptom.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from torch import Tensor

from torchboost.scalars import scalar

__all__ = ["DeferredChecks", "deferring", "require_finite", "require_true", "within"]


class DeferredChecks:
    """The checks a round stated and has not read yet (module docstring)."""

    def __init__(self) -> None:
        self._total: Tensor | None = None
        self._explanations: list[Callable[[], None]] = []

    def add(self, value: Tensor, explain: Callable[[], None]) -> None:
        self._total = value if self._total is None else self._total + value
        self._explanations.append(explain)

    def settle(self) -> None:
        """Read the pending checks in one host sync; raise the first failed one's error."""
        total, self._total = self._total, None
        if total is None or math.isfinite(total.item()):
            self._explanations = []
            return
        self.explain()

    def explain(self) -> None:
        """Run the pending explanations in order (each raises if its check failed)."""
        explanations, self._total, self._explanations = self._explanations, None, []
        for explain in explanations:
            explain()


#: the round whose checks are being deferred (``None``: checks are read at once)
_ACTIVE: ContextVar[DeferredChecks | None] = ContextVar("torchboost_deferred_checks",
                                                        default=None)


def require_finite(value: Tensor, explain: Callable[[], None]) -> None:
    """State a check: ``value`` (0-dim) is finite when it holds; ``explain()`` raises its error
    when it does not (and returns when ``value`` only overflowed). Read now, or by the
    enclosing :func:`deferring` block's :meth:`~DeferredChecks.settle`."""
    checks = _ACTIVE.get()
    if checks is not None:
        checks.add(value, explain)
    elif not math.isfinite(value.item()):
        explain()


def require_true(holds: Tensor, explain: Callable[[], None]) -> None:
    """:func:`require_finite` for a check given as a 0-dim bool tensor (its value: ``1 /
    holds``, 1 or inf)."""
    require_finite(holds.double().reciprocal(), explain)


def within(value: Tensor, limit: float) -> Tensor:
    """A value finite exactly when ``0 <= value <= limit``: ``sqrt(limit − value)``, NaN for a
    value above the limit, inf or NaN. A comparison as a value for :func:`require_finite`,
    without reading it (for norms, which are never negative)."""
    return (scalar(limit, value) - value).sqrt()


class deferring:  # used as a function: ``with deferring() as checks:``
    """Keep the checks stated inside for :meth:`DeferredChecks.settle` (``active=False``: read
    each at once, as outside). On leaving normally the rest are settled; on an ``Exception``
    the pending checks are explained first, so that a failed check's error replaces the one it
    caused. (A class, not a generator: entered once per round.)"""

    __slots__ = ("active", "checks", "token")

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.checks = DeferredChecks()

    def __enter__(self) -> DeferredChecks:
        self.token = _ACTIVE.set(self.checks if self.active else None)
        return self.checks

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: Any) -> None:
        _ACTIVE.reset(self.token)
        if kind is None:
            self.checks.settle()
        elif issubclass(kind, Exception):
            self.checks.explain()  # raises the pending check's error instead, if one failed
