"""ML-Prod with sleeping experts (LocAdaBoost's weight/sleeping subroutines, eqs. 9, 32–33)."""

from __future__ import annotations

import math

import pytest
import torch

from torchboost.chaining import MLProd


def test_weights_sum_to_one_over_the_awake_experts() -> None:
    agg = MLProd(n_experts=50)
    for _ in range(100):
        awake = torch.randperm(50)[:7].reshape(1, 7).repeat(3, 1)
        awake[1] = torch.randperm(50)[:7]
        w = agg.weights(awake)
        assert w.shape == (3, 7) and bool((w >= 0).all())
        assert torch.allclose(w.sum(1), torch.ones(3, dtype=torch.float64), atol=1e-12)
        agg.update(awake[0], 2 * torch.rand(7, dtype=torch.float64) - 1)


def test_sleeping_trick_eq_33() -> None:
    """With sleeping experts predicting f̂_t, g̃ᵀw_t = g̃ᵀw̃_t: the awake renormalisation is the
    full-weight prediction, and sleepers have zero linearised regret."""
    n = 12
    agg = MLProd(n_experts=n)
    agg.update(torch.arange(n), 0.5 * torch.randn(n, dtype=torch.float64))
    full = agg.weights(torch.arange(n)[None])[0]                  # w̃_t over all experts
    awake = torch.tensor([1, 4, 5, 9])
    w = agg.weights(awake[None])[0]                               # eq. 9
    experts = torch.randn(n, dtype=torch.float64)
    prediction = float((w * experts[awake]).sum())
    gradient = 0.7                                                # ℓ'_t(f̂_t)
    g = torch.full((n,), gradient * prediction, dtype=torch.float64)  # eq. 32, sleepers
    g[awake] = gradient * experts[awake]
    assert float((w * g[awake]).sum()) == pytest.approx(float((full * g).sum()), abs=1e-12)
    sleeping = torch.ones(n, dtype=torch.bool)
    sleeping[awake] = False
    assert torch.allclose(float((full * g).sum()) - g[sleeping],
                          torch.zeros(int(sleeping.sum()), dtype=torch.float64), atol=1e-12)


def test_sleeping_and_zero_regret_experts_are_not_stored() -> None:
    agg = MLProd(n_experts=10**12)
    agg.update(torch.tensor([3, 10**11, 7]), torch.tensor([0.1, 0.0, -0.2], dtype=torch.float64))
    assert sorted(agg.keys().tolist()) == [3, 7]
    w = agg.weights(torch.tensor([[10**11, 5]]))
    assert w.tolist() == [[0.5, 0.5]]


def test_repeated_experts_in_one_round_are_merged() -> None:
    a, b = MLProd(n_experts=5), MLProd(n_experts=5)
    a.update(torch.tensor([1, 2, 1]), torch.tensor([0.2, -0.1, 0.3], dtype=torch.float64),
             distinct=False)
    b.update(torch.tensor([1, 2]), torch.tensor([0.5, -0.1], dtype=torch.float64))
    assert torch.equal(a.weights(torch.arange(5)[None]), b.weights(torch.arange(5)[None]))


def test_second_order_regret_against_the_best_expert() -> None:
    """Assumption 2's flavour: regret ≤ C √(ln N · Σ r²) + C' against every expert."""
    n, rounds = 16, 3000
    agg = MLProd(n_experts=n)
    mean_loss = torch.linspace(0.3, 0.7, n, dtype=torch.float64)
    total = torch.zeros(n, dtype=torch.float64)
    squares = torch.zeros(n, dtype=torch.float64)
    for _ in range(rounds):
        w = agg.weights(torch.arange(n)[None])[0]
        losses = (mean_loss + 0.2 * torch.randn(n, dtype=torch.float64)).clamp(0, 1)
        regrets = float((w * losses).sum()) - losses
        total += regrets
        squares += regrets**2
        agg.update(torch.arange(n), regrets)
    bound = 4 * torch.sqrt(math.log(n) * squares) + 4
    assert bool((total <= bound).all())
    assert float(total[0]) / rounds < 0.03  # the average loss approaches the best expert's


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=">= 2"):
        MLProd(n_experts=1)
