"""Potentials of the multiclass 0-1 loss (Jung et al. 2017, eq. (2), (3), (16), Lemma 9)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from torchboost.multiclass import ExactPotentials, MonteCarloPotentials, Potentials


def zero_one(s: np.ndarray, r: int) -> float:
    """Eq. (2): 1 when some other label ties or beats ``r``."""
    return float(max(s[j] for j in range(len(s)) if j != r) >= s[r])


def recursion(k: int, gamma: float, m: int, s: tuple[int, ...], r: int) -> float:
    """Recursion (3) evaluated literally (independent of the closed form)."""
    u = [(1 - gamma) / k + gamma * (j == r) for j in range(k)]

    @functools.cache
    def phi(left: int, state: tuple[int, ...]) -> float:
        if left == 0:
            return zero_one(np.array(state), r)
        return sum(u[vote] * phi(left - 1, tuple(v + (j == vote) for j, v in enumerate(state)))
                   for vote in range(k))

    return phi(m, tuple(s))


def random_queries(rng: np.random.Generator, k: int, count: int, max_m: int, max_s: int,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (rng.integers(0, max_m + 1, count), rng.integers(0, max_s + 1, (count, k)),
            rng.integers(0, k, count))


@pytest.mark.parametrize("make", [lambda k: ExactPotentials(k, 0.1),
                                  lambda k: MonteCarloPotentials(k, 0.1, n_samples=50)])
def test_phi_zero_is_the_zero_one_loss(make) -> None:
    rng = np.random.default_rng(0)
    for k in (2, 3, 6):
        phi = make(k)
        _, s, r = random_queries(rng, k, 200, 0, 3)  # small counts: many ties
        expected = [zero_one(row, label) for row, label in zip(s, r, strict=True)]
        np.testing.assert_array_equal(phi(np.zeros(200, dtype=int), s, r), expected)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
@pytest.mark.parametrize("gamma", [0.0, 0.05, 0.3])
def test_closed_form_matches_the_literal_recursion(k: int, gamma: float) -> None:
    rng = np.random.default_rng(k)
    phi = ExactPotentials(k, gamma)
    m, s, r = random_queries(rng, k, 25, 7, 5)
    expected = [recursion(k, gamma, int(a), tuple(b), int(c)) for a, b, c in zip(m, s, r,
                                                                                 strict=True)]
    np.testing.assert_allclose(phi(m, s, r), expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("k", [3, 10])
def test_recursion_three_holds_for_large_states(k: int) -> None:
    """φ_{m+1}^r(s) = Σ_l u_γ^r(l) φ_m^r(s + e_l) far beyond brute-force reach."""
    rng = np.random.default_rng(1)
    phi = ExactPotentials(k, 0.1)
    m, s, r = random_queries(rng, k, 60, 60, 12)
    u = np.full((60, k), phi.p_other)
    u[np.arange(60), r] = phi.p_right
    np.testing.assert_allclose(phi(m + 1, s, r), (u * phi.shifted(m, s, r)).sum(1),
                               rtol=0, atol=1e-13)


def test_potentials_are_proper_and_symmetric() -> None:
    rng = np.random.default_rng(2)
    k = 5
    phi = ExactPotentials(k, 0.2)
    m, s, r = random_queries(rng, k, 100, 20, 8)
    shifted = phi.shifted(m, s, r)
    base = phi(m, s, r)
    right = shifted[np.arange(100), r]
    assert (shifted >= base[:, None] - 1e-15).sum(1).min() >= k - 1  # decreasing in s(r) ...
    assert (right <= base + 1e-15).all()  # ... increasing in the others
    np.testing.assert_allclose(phi(m, s + 7, r), base, atol=1e-15)  # constant shift
    order = rng.permutation(k)
    np.testing.assert_allclose(phi(m, s[:, order], np.argsort(order)[r]), base, atol=1e-15)


def test_exact_agrees_with_monte_carlo() -> None:
    rng = np.random.default_rng(3)
    k, draws = 6, 4000
    exact = ExactPotentials(k, 0.1)
    mc = MonteCarloPotentials(k, 0.1, n_samples=draws, seed=1)
    m, s, r = random_queries(rng, k, 30, 30, 6)
    value = exact(m, s, r)
    error = np.abs(mc(m, s, r) - value)
    assert (error <= 5 * np.sqrt(value * (1 - value) / draws) + 1e-12).all()


@pytest.mark.parametrize("potentials", [ExactPotentials(4, 0.05),
                                        MonteCarloPotentials(4, 0.05, n_samples=30)])
def test_weights_lie_in_zero_k_minus_one(potentials: Potentials) -> None:
    """Alg. 1 line 11: every term of w is ≥ 0 (for MC thanks to common random numbers)."""
    rng = np.random.default_rng(4)
    m, s, r = random_queries(rng, 4, 300, 25, 10)
    shifted = potentials.shifted(m, s, r)
    assert (shifted >= shifted[np.arange(300), r][:, None]).all()
    w = potentials.weight(m, s, r)
    assert ((w >= 0) & (w <= 3)).all() and w.max() > 0.5


def test_exact_weight_shortcut_equals_the_definition() -> None:
    rng = np.random.default_rng(5)
    phi = ExactPotentials(7, 0.1)
    m, s, r = random_queries(rng, 7, 200, 30, 9)
    np.testing.assert_allclose(phi.weight(m, s, r), Potentials.weight(phi, m, s, r), atol=1e-12)


@pytest.mark.parametrize("k", [2, 3, 10])
@pytest.mark.parametrize("gamma", [0.1, 0.3])
def test_lemma_nine_bound(k: int, gamma: float) -> None:
    phi = ExactPotentials(k, gamma)
    for n in (1, 10, 50, 150):
        value = phi([n], [[0] * k], [0])[0]
        assert value <= (k - 1) * math.exp(-gamma**2 * n / 2)


def test_figure_one_shape() -> None:
    """Fig. 1 (N = 20): φ_N(0) increases in k for γ = 0.01; for γ = 0.1 it rises, then falls
    (the right label's mass stays above γ while each wrong label's vanishes)."""
    ks = (2, 5, 10, 20, 40)
    small = [ExactPotentials(k, 0.01)([20], [[0] * k], [0])[0] for k in ks]
    large = [ExactPotentials(k, 0.1)([20], [[0] * k], [0])[0] for k in ks]
    assert np.all(np.diff(small) > 0)
    assert large[1] > large[0] and large[-1] < large[-2]


def test_cache_and_large_m() -> None:
    phi = ExactPotentials(3, 0.1)
    first = phi([400, 400], [[3, 1, 0], [3, 0, 1]], [0, 0])  # one reduced state
    assert phi.misses == 1 and len(phi) == 1
    assert np.array_equal(phi([400], [[3, 1, 0]], [0]), first[:1]) and phi.hits == 1
    assert 0 < first[0] < 1 and first[0] == first[1]


def test_invalid_queries_raise() -> None:
    phi = ExactPotentials(3, 0.1)
    with pytest.raises(ValueError, match="shape"):
        phi([1], [[0, 0]], [0])
    with pytest.raises(ValueError, match="labels"):
        phi([1], [[0, 0, 0]], [3])
    with pytest.raises(ValueError, match="integers"):
        phi([1], [[0.5, 0, 0]], [0])
    with pytest.raises(ValueError, match=">= 0"):
        phi([-1], [[0, 0, 0]], [0])
    with pytest.raises(ValueError, match="gamma"):
        ExactPotentials(3, 1.0)
    with pytest.raises(ValueError, match="n_classes"):
        MonteCarloPotentials(1, 0.1)
