"""Small seeded synthetic data sets for tests, examples and smoke runs.

Examples:
    >>> ds = synthetic_regression(n=500, d=4, seed=0)
    >>> ds
    Dataset(name='synthetic_regression', task='regression', train=400×4, test=100×4)
    >>> synthetic_classification(n=300, d=5, n_classes=3).task
    'multiclass'
"""

from __future__ import annotations

import torch

from torchboost.data.dataset import Dataset, Task

__all__ = ["synthetic_classification", "synthetic_regression"]


def _split(
    name: str,
    x: torch.Tensor,
    y: torch.Tensor,
    test_fraction: float,
    task: Task,
    n_classes: int | None,
) -> Dataset:
    """The last ``round(n * test_fraction)`` rows test, the others train."""
    n_test = round(x.shape[0] * test_fraction)
    if not 0 < n_test < x.shape[0]:
        raise ValueError(f"test_fraction={test_fraction} leaves an empty train or test set")
    n_train = x.shape[0] - n_test
    return Dataset(name, x[:n_train], y[:n_train], x[n_train:], y[n_train:], task, n_classes)


def synthetic_regression(
    n: int = 1000, d: int = 8, seed: int = 0, noise: float = 0.1, test_fraction: float = 0.2
) -> Dataset:
    """``y = sin(2 x·w₁) + ½ (x·w₂)² − ½ + noise · ε`` with ``x, ε ~ N(0, I)``.

    ``w₁, w₂`` are random unit vectors, so ``x·w`` is standard normal and ``y`` has mean about 0
    and variance about 1 (plus ``noise²``) whatever ``d`` is: a smooth nonlinear target that a
    linear model fits poorly and boosting improves on. Everything is drawn from one
    ``torch.Generator`` seeded with ``seed``; the first ``n - round(n * test_fraction)`` rows
    train, the rest test (the rows are i.i.d., so this split is random).
    """
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(2, d, generator=generator)
    w = w / w.norm(dim=1, keepdim=True)
    x = torch.randn(n, d, generator=generator)
    projections = x @ w.T
    y = torch.sin(2.0 * projections[:, 0]) + 0.5 * projections[:, 1] ** 2 - 0.5
    y = y + noise * torch.randn(n, generator=generator)
    return _split("synthetic_regression", x, y, test_fraction, "regression", None)


def synthetic_classification(
    n: int = 1000,
    d: int = 8,
    n_classes: int = 2,
    seed: int = 0,
    noise: float = 0.1,
    test_fraction: float = 0.2,
) -> Dataset:
    """Labels ``argmax_k (x·u_k + sin(2 x·v_k) + noise · ε_k)`` with ``x, ε ~ N(0, I)``.

    ``u_k, v_k`` are random unit vectors: class boundaries are curved, and ``noise`` flips labels
    near them. ``task`` is ``"binary"`` for ``n_classes=2``, else ``"multiclass"``; labels are
    ``int64`` in ``[0, n_classes)``. Seeding and splitting as in :func:`synthetic_regression`.
    """
    if n_classes < 2:
        raise ValueError(f"n_classes must be at least 2, got {n_classes}")
    generator = torch.Generator().manual_seed(seed)
    u = torch.randn(n_classes, d, generator=generator)
    v = torch.randn(n_classes, d, generator=generator)
    u, v = u / u.norm(dim=1, keepdim=True), v / v.norm(dim=1, keepdim=True)
    x = torch.randn(n, d, generator=generator)
    scores = x @ u.T + torch.sin(2.0 * x @ v.T)
    scores = scores + noise * torch.randn(n, n_classes, generator=generator)
    y = scores.argmax(dim=1)
    task: Task = "binary" if n_classes == 2 else "multiclass"
    return _split("synthetic_classification", x, y, test_fraction, task, n_classes)
