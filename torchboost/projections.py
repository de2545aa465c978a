"""Euclidean projections onto convex prediction domains.

``Π_Y`` of the residual-projection SGB (Hu et al. 2017, Alg. 2 line 6) and ``Π_B`` of OGB
(Beygelzimer et al. 2015, Alg. 1 line 8). Both act on the last dimension of ``(..., m)`` tensors.

Examples:
    >>> import torch
    >>> Ball(1.0)(torch.tensor([[3.0, 4.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    >>> Box(-1.0, 1.0)(torch.tensor([[-3.0, 0.5]])).tolist()
    [[-1.0, 0.5]]
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch import Tensor

__all__ = ["Ball", "Box", "Projection"]


class Projection(ABC):
    """A Euclidean projection onto a closed convex set; callable on ``(..., m)`` tensors."""

    @abstractmethod
    def __call__(self, y: Tensor) -> Tensor:
        """Project every row of ``y`` onto the set."""

    @abstractmethod
    def contains(self, y: Tensor, atol: float = 1e-6) -> Tensor:
        """Boolean mask over rows: which rows of ``y`` lie in the set (to ``atol``)."""


class Box(Projection):
    """The box ``[low, high]^m`` (per-coordinate clipping)."""

    def __init__(self, low: float, high: float) -> None:
        if not low < high:
            raise ValueError(f"Box needs low < high, got [{low}, {high}]")
        self.low, self.high = float(low), float(high)

    def __call__(self, y: Tensor) -> Tensor:
        return y.clamp(self.low, self.high)

    def contains(self, y: Tensor, atol: float = 1e-6) -> Tensor:
        return ((y >= self.low - atol) & (y <= self.high + atol)).all(-1)

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high})"


class Ball(Projection):
    """The Euclidean ball ``{y : ‖y‖₂ ≤ radius}``."""

    def __init__(self, radius: float) -> None:
        if not (radius > 0 and math.isfinite(radius)):
            raise ValueError(f"Ball radius must be a finite number > 0 (no bound: leave the "
                             f"domain out), got {radius}")
        self.radius = float(radius)

    def __call__(self, y: Tensor) -> Tensor:
        norm = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
        return y * (self.radius / norm.clamp_min(self.radius))

    def contains(self, y: Tensor, atol: float = 1e-6) -> Tensor:
        return torch.linalg.vector_norm(y, dim=-1) <= self.radius + atol

    def __repr__(self) -> str:
        return f"Ball({self.radius})"
