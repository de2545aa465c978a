"""How many intra-op threads torch uses where the library owns the call: a booster's ``learn``,
``predict``, ``evaluate`` and ``export`` (its ``n_threads``), the estimators' ``fit``,
``partial_fit`` and predictions, and a Lightning fit of
:class:`~torchboost.lightning.StreamingBoosterModule`.

The outermost choice wins: inside an estimator's fit or a Lightning fit (which chose the threads
with their own ``n_threads``), a booster's calls leave the count as it is (:func:`chosen`)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import torch

__all__ = ["AUTO_THREADS_WORK", "auto_threads", "check_threads", "chosen", "thread_count",
           "threads"]


#: ``n_threads="auto"``: one intra-op thread for a CPU round or prediction whose work (rows ×
#: the model's parameters) is at most this; torch's own setting above it. On a quiet 2-core
#: machine (``benchmarks/threads.py``, ``benchmarks/threads.json``) torch's default threads
#: took 0.96-1.07× the one-thread time of an SGB round up to 4 million (the papers' shapes,
#: MNIST's conv learners included) and 0.59-0.83× from 25 million up; on a loaded machine one
#: thread was up to 19× faster for the small shapes.
AUTO_THREADS_WORK = 8_000_000


def thread_count(n_threads: int | str | None, device: str | torch.device, booster: Any,
                 rows: int) -> int | None:
    """The intra-op threads for ``rows`` rows through ``booster``: ``n_threads`` itself, or for
    ``"auto"`` one thread on a CPU where the work is at most :data:`AUTO_THREADS_WORK` (the
    papers' learners at their batch sizes: a thread pool costs more than it saves there, up to
    19× on a loaded machine) and torch's setting (``None``) otherwise."""
    if n_threads != "auto":
        return _checked(n_threads)
    return auto_threads(device, rows * sum(p.numel() for p in booster.parameters()))


def auto_threads(device: str | torch.device, work: int) -> int | None:
    """``"auto"``'s choice for ``work`` (rows × parameters) on ``device``: 1 on a CPU up to
    :data:`AUTO_THREADS_WORK`, else ``None`` (torch's setting)."""
    if work > AUTO_THREADS_WORK or torch.device(device).type != "cpu":
        return None
    return 1


#: whether an enclosing call of the library chose the threads (:func:`threads`, a Lightning fit)
_CHOSEN: ContextVar[bool] = ContextVar("torchboost_threads_chosen", default=False)


def chosen() -> bool:
    """Whether an enclosing estimator call, booster call or Lightning fit chose torch's threads
    (its ``n_threads``, ``None`` included): a booster's own ``n_threads`` then stands aside."""
    return _CHOSEN.get()


class threads:  # used as a function: ``with threads(n):``
    """Run with ``torch.set_num_threads(n_threads)`` and restore the previous count after;
    ``None`` leaves torch's setting alone. Either way the calls inside see :func:`chosen`.
    Small mini-batches gain nothing from intra-op threads, and on a busy machine waiting for
    them can cost far more than the work itself. (A class, not a generator: entered once per
    booster call.)"""

    __slots__ = ("n_threads", "previous", "token")

    def __init__(self, n_threads: int | None) -> None:
        self.n_threads = _checked(n_threads)
        self.previous: int | None = None

    def __enter__(self) -> None:
        self.token = _CHOSEN.set(True)
        if self.n_threads is not None:
            previous = torch.get_num_threads()
            if previous != self.n_threads:
                torch.set_num_threads(self.n_threads)
                self.previous = previous

    def __exit__(self, *error: Any) -> None:
        if self.previous is not None:
            torch.set_num_threads(self.previous)
        _CHOSEN.reset(self.token)


def check_threads(n_threads: Any) -> int | str | None:
    """``n_threads`` if it is ``"auto"``, ``None`` or an int >= 1, else a ``ValueError`` naming
    it: for constructors that take ``n_threads``, so that a bad value fails before anything."""
    return n_threads if n_threads == "auto" else _checked(n_threads)


def _checked(n_threads: Any) -> int | None:
    """``n_threads`` if it is ``None`` or an int >= 1, else a ``ValueError``."""
    if n_threads is None or (isinstance(n_threads, int) and not isinstance(n_threads, bool)
                             and n_threads >= 1):
        return n_threads
    raise ValueError(f"n_threads must be an int >= 1, 'auto' or None, got {n_threads!r}")
