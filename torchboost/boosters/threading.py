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
#: not yet in :meth:`ThreadChoice.running`'s choices
_UNSET = object()


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
            device = self.y0_fixed.device
            dense = torch.is_tensor(x) and not x.is_nested and x.layout == torch.strided
            key = (x.shape[0] if dense and x.ndim > 0 else 1, device.type)  # others: refused
            choices = vars(self).get("_auto_threads")
            if choices is None or len(choices) > 64:  # the learners' shapes are fixed once built
                choices = {}
                self._set_plain(_auto_threads=choices)
            count = choices.get(key, _UNSET)
            if count is _UNSET:
                size = sum(p.numel() for p in self.parameters())
                count = choices[key] = auto_threads(device, key[0] * size)
        return threads(count)
