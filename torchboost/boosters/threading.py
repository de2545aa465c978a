"""How many intra-op threads a booster's own calls use (:class:`ThreadChoice`, a base of
:class:`~torchboost.boosters.base.Booster`; ``n_threads``, :mod:`torchboost.threads`).

A user's plain ``for x, y in stream: booster.learn(x, y)`` runs the library's small operations
under whatever torch's thread pool is set to; on a busy 2-core machine the default pool made
that loop on MNIST up to 16× slower than one thread. ``learn``, ``predict`` (``evaluate``
through it) and ``export`` therefore run inside :meth:`ThreadChoice.running`, which sets the
threads for the call and restores them after, unless an enclosing call of the library (an
estimator's, a Lightning fit's) chose them already.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

from torchboost.threads import auto_threads, chosen, threads

__all__ = ["ThreadChoice"]

#: :meth:`ThreadChoice.running` with nothing to change
_NO_CHANGE = nullcontext()


class ThreadChoice:
    """A booster's ``n_threads`` at work (module docstring); reads its ``n_threads``,
    ``y0_fixed`` (the device) and parameters."""

    def running(self, x: Any = None) -> Any:
        """The context of one call on the batch ``x`` (``None``: one row): torch's threads as
        :attr:`n_threads` says (``"auto"``: :func:`~torchboost.threads.auto_threads` of the rows
        times the parameters), unless an enclosing call of the library chose them already."""
        if chosen() or self.n_threads is None:
            return _NO_CHANGE
        count = self.n_threads
        if count == "auto":
            size = vars(self).get("_parameter_count")
            if size is None:  # the learners' shapes are fixed once built
                size = sum(p.numel() for p in self.parameters())
                self._set_plain(_parameter_count=size)
            dense = torch.is_tensor(x) and not x.is_nested and x.layout == torch.strided
            rows = x.shape[0] if dense and x.ndim > 0 else 1  # others: refused by the checks
            count = auto_threads(self.y0_fixed.device, rows * size)
        return threads(count)
