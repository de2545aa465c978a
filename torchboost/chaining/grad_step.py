"""The per-node ``grad-step`` of online gradient boosting (Liautaud et al., eq. 5, Assumption 1).

Every node ``n`` of a chaining tree holds one real parameter ``θ_n`` trained by a one-dimensional
online learner, called only on the rounds where its gradient ``g_{n,t}`` is non-zero. Assumption 1
asks for a comparator-adaptive regret ``Σ_{t∈T_n} g_{n,t}(θ_{n,t} − θ) ≤ G|θ − θ_{n,1}|
(C₁√|T_n| + C₂)``. :class:`GradStep` stores that state lazily (one row per node that has received
a non-zero gradient, keyed by the node's int64 id) and implements the part common to every rule:
merging a round's per-point gradients into one gradient per node, creating the rows of new nodes
and clipping to ``[−G, G]``. Subclasses (:class:`~torchboost.chaining.KTCoinBetting`,
:class:`~torchboost.chaining.ProjectedOGD`) define the state and the update.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor

from torchboost.chaining.lazy_table import LazyTable, sum_by_key

__all__ = ["GradStep", "GradStepSpec"]

#: Node gradients below this fraction of ``G`` are zeros up to the rounding of cancelling
#: contributions: their nodes are not in ``T_n``.
_NUMERICAL_ZERO = 1e-12


class GradStep(LazyTable):
    """Base of the per-node gradient steps: lazy rows, round aggregation, clipping.

    Every rule keeps the columns ``theta0`` (``θ_{n,1}``) and ``theta`` (``θ_{n,t}``, kept up to
    date so that predicting is one gather) plus its own.

    Args:
        gradient_bound: ``G``; node gradients are clipped to ``[−G, G]``.
        columns: the rule's own per-node state.
    """

    def __init__(self, gradient_bound: float, columns: Sequence[str]) -> None:
        if not 0 < gradient_bound < math.inf:
            raise ValueError(f"gradient_bound G must be finite and > 0, got {gradient_bound}")
        super().__init__(["theta0", "theta", *columns])
        self.gradient_bound = float(gradient_bound)

    def theta(self, keys: Tensor, initial: Tensor | float = 0.0) -> Tensor:
        """Current ``θ_{n,t}`` of nodes ``keys`` (any shape); ``initial`` for nodes with no row."""
        return self.theta_of_rows(self.find(keys), initial)

    def theta_of_rows(self, rows: Tensor, initial: Tensor | float = 0.0) -> Tensor:
        """``θ_{n,t}`` of rows from :meth:`find`; ``initial`` where the row is ``-1``."""
        value = self.data[rows.clamp_min(0), 1]
        return torch.where(rows >= 0, value, initial)

    def step(self, keys: Tensor, grads: Tensor, initial: Tensor, volume: Tensor,
             diameter: Tensor, rows: Tensor | None = None) -> None:
        """One round of eq. 5, ``θ_{n,t+1} ← grad-step(θ_{n,t}, g_{n,t})``, for the nodes in
        ``keys``.

        Args:
            keys: ``(M,)`` node ids, repeated when several points of the round reach a node.
            grads: ``(M,)`` contributions; a node's gradient ``g_{n,t}`` is the sum of its
                contributions, clipped to ``[−G, G]``. Nodes whose gradient is 0 (up to
                ``1e-12 G``) are not in ``T_n``: they keep their state and get no row.
            initial: ``(M,)`` ``θ_{n,1}`` for nodes without a row yet.
            volume: ``(M,)`` the node's share of the volume of its tree's root,
                ``2^{−d(depth(n) − 1)}`` (1 at a root).
            diameter: ``(M,)`` ``|X_n|``.
            rows: ``find(keys)`` when the caller has it and the keys are distinct (skips the
                merging of repeated keys and a second lookup).
        """
        if rows is None:
            keys, grads, inverse = sum_by_key(keys, grads)
            # Every occurrence of a node carries the same initial data: scatter any of them.
            data = torch.stack([initial, volume, diameter], 1)
            data = data.new_empty(keys.shape[0], 3).scatter_(0, inverse[:, None].expand(-1, 3),
                                                             data)
            initial, volume, diameter = data.unbind(1)
            rows = self.find(keys)
        active = grads.abs() > _NUMERICAL_ZERO * self.gradient_bound
        if not bool(active.all()):
            keys, grads, rows = keys[active], grads[active], rows[active]
            initial, volume, diameter = initial[active], volume[active], diameter[active]
        new = rows < 0
        if bool(new.any()):
            rows = rows.clone()
            rows[new] = self.insert(keys[new])
            dtype = self.data.dtype
            self.initialize(rows[new], initial[new].to(dtype), volume[new].to(dtype),
                            diameter[new].to(dtype))
        grads = grads.to(self.data.dtype).clamp(-self.gradient_bound, self.gradient_bound)
        self.update(rows, grads)

    @abstractmethod
    def initialize(self, rows: Tensor, initial: Tensor, volume: Tensor, diameter: Tensor) -> None:
        """Set the state of newly created rows (``theta0`` and ``theta`` included)."""

    @abstractmethod
    def update(self, rows: Tensor, grad: Tensor) -> None:
        """The rule's step for distinct ``rows`` with gradients ``grad ∈ [−G, G]``, all ≠ 0."""


#: ``"kt"`` (coin betting with ``G`` from the loss and ``B``) or a fresh :class:`GradStep`.
GradStepSpec = str | GradStep

