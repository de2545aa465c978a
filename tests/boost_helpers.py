"""Test helpers: scripted weak learners and synthetic streams."""

from __future__ import annotations

import torch
from torch import nn


def linear_learners(weights: list[list[float]]) -> list[nn.Module]:
    """Bias-free linear learners h_i(x) = w_i · x with the given weights (hand-checkable)."""
    modules = []
    for w in weights:
        lin = nn.Linear(len(w), 1, bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor([w]))
        modules.append(lin)
    return modules


def regression_stream(n: int, d: int = 5, seed: int = 0, noise: float = 0.1):
    """y = 2 sin(x·a) + 0.5 (x·b)² + noise: smooth, nonlinear, learnable by small nets."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(d, generator=torch.Generator().manual_seed(99)), torch.randn(
        d, generator=torch.Generator().manual_seed(98)) / d**0.5
    x = torch.randn(n, d, generator=g)
    y = 2 * torch.sin(x @ a) + 0.5 * (x @ b) ** 2 + noise * torch.randn(n, generator=g)
    return x, y
