"""Projected online gradient descent per node: the tuned (not parameter-free) ``grad-step``.

Zinkevich's OGD on ``[θ_{n,1} − D_n, θ_{n,1} + D_n]`` with step ``η_τ = D_n / (G √τ)`` after the
node's ``τ``-th non-zero gradient has regret ``≤ 3 G D_n √|T_n|`` against every ``θ`` of that
interval. Assumption 1 (Liautaud et al.) holds for the comparators the proof of Theorem 1 needs
once ``D_n`` bounds the chaining coefficients of eq. 17, ``|θ_n| ≤ L 2^{−α} |X_n|^α``, and ``B`` at
a root; so this rule needs the Hölder constants ``L`` and ``α`` that coin betting
(:class:`~torchboost.chaining.KTCoinBetting`) does without. It is the "tuned" baseline.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchboost.chaining.grad_step import GradStep

__all__ = ["ProjectedOGD"]


class ProjectedOGD(GradStep):
    """Per-node projected OGD with radius ``D_n`` from eq. 17 and step ``D_n / (G √τ)``.

    Args:
        gradient_bound: ``G``.
        lipschitz: ``L``, the Hölder constant of the target: ``D_n = L (|X_n| / 2)^α`` below the
            root.
        root_radius: ``D`` at a root (``B``, the bound on the target).
        smoothness: ``α ∈ (0, 1]``.

    Examples:
        >>> import torch
        >>> ogd = ProjectedOGD(gradient_bound=4.0, lipschitz=1.0, root_radius=2.0)
        >>> node, one = torch.tensor([0]), torch.ones(1)
        >>> for _ in range(3):
        ...     ogd.step(node, -one, initial=0 * one, volume=one, diameter=one)
        ...     print(round(float(ogd.theta(node)), 4))
        0.5
        0.8536
        1.1422
    """

    def __init__(self, gradient_bound: float, lipschitz: float, root_radius: float,
                 smoothness: float = 1.0) -> None:
        if not lipschitz > 0 or not root_radius > 0:
            raise ValueError(f"lipschitz and root_radius must be > 0, got {lipschitz}, "
                             f"{root_radius}")
        if not 0 < smoothness <= 1:
            raise ValueError(f"smoothness α must be in (0, 1], got {smoothness}")
        super().__init__(gradient_bound, ["radius", "count"])
        self.lipschitz = float(lipschitz)
        self.root_radius = float(root_radius)
        self.smoothness = float(smoothness)

    def initialize(self, rows: Tensor, initial: Tensor, volume: Tensor, diameter: Tensor) -> None:
        radius = self.lipschitz * (diameter / 2.0) ** self.smoothness
        radius = radius.masked_fill(volume == 1.0, self.root_radius)
        self.data[rows] = torch.stack([initial, initial, radius, torch.zeros_like(initial)], 1)

    def update(self, rows: Tensor, grad: Tensor) -> None:
        center, theta, radius, count = self.data[rows].unbind(1)
        count = count + 1.0
        theta = theta - radius / (self.gradient_bound * count.sqrt()) * grad
        theta = theta.clamp(center - radius, center + radius)
        self.data[rows] = torch.stack([center, theta, radius, count], 1)

    def extra_repr(self) -> str:
        return (f"G={self.gradient_bound}, L={self.lipschitz}, root_radius={self.root_radius}, "
                f"alpha={self.smoothness}, nodes={len(self)}")
