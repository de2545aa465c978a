"""The copy of a booster's buffers that a failed round restores (:meth:`Booster.learn
<torchboost.boosters.base.Booster.learn>` leaves the booster as it was when it raises).

Every round copies every buffer of the booster and its submodules (σ, running sums, BatchNorm
statistics, ...) into tensors kept from the round before, in one multi-tensor copy. Finding the
buffers means walking the module tree: with N learners in ``mode="loop"`` that is O(N) modules,
about 2 % of a stagewise GB round on keggundirected (92 modules). :class:`RoundSnapshot` keeps
the list from the last walk and walks again only when the tree may hold other buffers. Its check
reads, in C loops, the children of every module and the entries of every module's buffer dict as
the last walk found them: a child added, removed or replaced (``add_module``, assignment,
``ModuleList.insert``, ``del``), a buffer registered, assigned, set to ``None`` or replaced
(``.to()``, ``.double()``, ``load_state_dict(assign=True)``) changes one of them, and a buffer
resized in place changes its shape. Values written in place need no walk: the copy reads them.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter, is_

import torch
from torch import Tensor, nn

__all__ = ["RoundSnapshot", "Snapshot"]

#: the buffers and their copies
Snapshot = tuple[list[Tensor], list[Tensor]]

_shape = attrgetter("shape")


class RoundSnapshot:
    """Copies of the buffers of a module tree, taken by :meth:`take`, put back by
    :meth:`restore` (see the module docstring)."""

    def __init__(self) -> None:
        #: the ``_modules`` and ``_buffers`` dicts of every module of the last walk
        self._module_dicts: list[dict] = []
        self._buffer_dicts: list[dict] = []
        #: what they held then: every module's children, every module's buffer entries
        self._children: tuple = ()
        self._entries: tuple = ()
        #: each buffer (``None`` entries left out) and the tensor its copy goes to
        self._buffers: list[Tensor] = []
        self._copies: list[Tensor] = []
        self._shapes: list[torch.Size] = []

    def take(self, module: nn.Module) -> Snapshot:
        """Copy every buffer of ``module`` and its submodules; returns the buffers and their
        copies for :meth:`restore` (lists that a later walk replaces, never changes)."""
        if not self._unchanged():
            self._walk(module)
        if self._buffers:
            torch._foreach_copy_(self._copies, self._buffers)
        return self._buffers, self._copies

    @staticmethod
    def restore(snapshot: Snapshot) -> None:
        """Put the copies of :meth:`take` back into their buffers."""
        with torch.no_grad():
            for buffer, copy in zip(*snapshot, strict=True):
                buffer.copy_(copy)

    def _unchanged(self) -> bool:
        """Whether the tree holds the buffers of the last walk, with their shapes."""
        children = tuple(chain.from_iterable(map(dict.values, self._module_dicts)))
        entries = tuple(chain.from_iterable(map(dict.values, self._buffer_dicts)))
        return (bool(self._module_dicts)
                and len(children) == len(self._children) and all(map(is_, children,
                                                                     self._children))
                and len(entries) == len(self._entries) and all(map(is_, entries, self._entries))
                and list(map(_shape, self._buffers)) == self._shapes)

    def _walk(self, root: nn.Module) -> None:
        """Find every module (each once) and buffer; allocate the copies."""
        modules: list[nn.Module] = []
        stack, seen = [root], set()
        while stack:
            current = stack.pop()
            if current is None or id(current) in seen:
                continue
            seen.add(id(current))
            modules.append(current)
            stack += current._modules.values()
        self._module_dicts = [m._modules for m in modules]
        self._buffer_dicts = [m._buffers for m in modules]
        self._children = tuple(chain.from_iterable(map(dict.values, self._module_dicts)))
        self._entries = tuple(chain.from_iterable(map(dict.values, self._buffer_dicts)))
        self._buffers = [b for b in self._entries if b is not None]
        self._copies = [torch.empty_like(b) for b in self._buffers]
        self._shapes = list(map(_shape, self._buffers))
