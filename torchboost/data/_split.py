"""Seeded random train/test split used by the loaders without an official split."""

from __future__ import annotations

import numpy as np

__all__ = ["random_split"]


def random_split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(train, test)`` of a seeded random split of ``n`` rows.

    ``round(n * test_fraction)`` rows, drawn by ``numpy.random.default_rng(seed).permutation``,
    form the test set. Both index arrays are sorted, so each split keeps the file's row order;
    the same ``(n, test_fraction, seed)`` always gives the same split.

    Examples:
        >>> train, test = random_split(10, 0.2, seed=0)
        >>> len(train), len(test), sorted([*train, *test]) == list(range(10))
        (8, 2, True)
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    n_test = round(n * test_fraction)
    if not 0 < n_test < n:
        raise ValueError(
            f"a {test_fraction:g} test fraction of {n} rows leaves an empty train or test set"
        )
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_test:]), np.sort(order[:n_test])
