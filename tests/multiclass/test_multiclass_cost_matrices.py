"""Cost matrices: OnlineMBBM's (5) and the surrogate gradients (9) / App. D, and f′ (10)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from torchboost.multiclass import (
    ExactPotentials,
    ExponentialCost,
    LogisticCost,
    SquaredHingeCost,
    SurrogateCost,
    get_surrogate,
    mbbm_cost_matrix,
)

SURROGATES = [LogisticCost(), ExponentialCost(), SquaredHingeCost()]


def votes(batch: int = 20, k: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, k, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


@pytest.mark.parametrize("loss", SURROGATES)
def test_rows_sum_to_zero_with_the_diagonal_as_minimum(loss: SurrogateCost) -> None:
    C = loss.cost_matrix(votes())
    torch.testing.assert_close(C.sum(-1), torch.zeros(20, 5, dtype=torch.float64))
    diagonal = torch.diagonal(C, dim1=-2, dim2=-1).unsqueeze(-1)
    assert (diagonal - 1e-12 <= C).all() and (-diagonal + 1e-12 >= C).all()


@pytest.mark.parametrize("loss", SURROGATES)
def test_cost_matrix_is_the_autograd_gradient(loss: SurrogateCost) -> None:
    s = votes(6, 4).requires_grad_()
    for r in range(4):
        label = torch.full((6,), r)
        (grad,) = torch.autograd.grad(loss.value(s, label).sum(), s)
        torch.testing.assert_close(loss.cost_matrix(s.detach())[:, r], grad)


@pytest.mark.parametrize("loss", SURROGATES)
def test_alpha_derivative_matches_autograd(loss: SurrogateCost) -> None:
    """f′(α) for f(α) = L^y(s + α e_l), both for l ≠ y and the corrected l = y case."""
    s = votes(30, 4, seed=1)
    label = torch.arange(30) % 4
    for vote in (label, (label + 1) % 4):
        alpha = torch.linspace(-2, 2, 30, dtype=torch.float64).requires_grad_()
        moved = s + alpha.unsqueeze(-1) * torch.nn.functional.one_hot(vote, 4)
        (grad,) = torch.autograd.grad(loss.value(moved, label).sum(), alpha)
        torch.testing.assert_close(loss.alpha_derivative(s, alpha.detach(), vote, label), grad)


def test_logistic_derivative_fixes_the_printed_typo() -> None:
    """The printed l = y case, −Σ σ(s(j) + α − s(y)), is not the derivative; ours is and it is
    bounded by k − 1; at α = 0 it equals C(y, y) of (9)."""
    loss, s, label = LogisticCost(), votes(50, 6, seed=2), torch.zeros(50, dtype=torch.long)
    alpha = torch.full((50,), 0.7, dtype=torch.float64)
    ours = loss.alpha_derivative(s, alpha, label, label)
    printed = -torch.sigmoid(s[:, 1:] + 0.7 - s[:, :1]).sum(-1)
    assert not torch.allclose(ours, printed)
    assert (ours.abs() <= 5).all()
    torch.testing.assert_close(loss.alpha_derivative(s, 0 * alpha, label, label),
                               loss.cost_matrix(s)[:, 0, 0])


def test_step_sizes_and_bounds() -> None:
    t, i = torch.tensor([1.0, 4.0], dtype=torch.float64), torch.tensor([[1.0], [2.0]])
    torch.testing.assert_close(LogisticCost().step_size(t, i, 5, 10),
                               torch.tensor([1.0, 0.5], dtype=torch.float64) * 2**1.5 / 4)
    eta = ExponentialCost().step_size(t, i, 5, 10)
    torch.testing.assert_close(eta[1] / eta[0], torch.full((2,), math.exp(-1),
                                                            dtype=torch.float64))
    hinge = SquaredHingeCost()
    assert hinge.alpha_bound(16) == 0.25 and LogisticCost().alpha_bound(16) == 2.0
    c = 0.25
    torch.testing.assert_close(hinge.step_size(t[:1], i, 5, 16),
                               torch.full((1,), 2**0.5 * c / (4 + c * 16), dtype=torch.float64))
    assert isinstance(get_surrogate("squared_hinge"), SquaredHingeCost)
    with pytest.raises(ValueError, match="surrogate"):
        get_surrogate("hinge")


def test_mbbm_matrix_lies_in_the_allowed_set() -> None:
    """(5) normalises each row into C_1^eor: zero diagonal, non-negative, unit ℓ1 norm (or an
    all-zero row when every prediction costs the same)."""
    rng = np.random.default_rng(0)
    phi = ExactPotentials(4, 0.1)
    s = rng.integers(0, 6, (40, 4))
    m = rng.integers(0, 12, 40)
    raw = np.stack([phi.shifted(m, s, np.full(40, r)) for r in range(4)], axis=1)
    D, w = mbbm_cost_matrix(torch.from_numpy(raw))
    assert (torch.diagonal(D, dim1=-2, dim2=-1) == 0).all() and (D >= 0).all()
    sums = D.sum(-1)
    assert torch.all(((sums - 1).abs() < 1e-12) | (sums == 0))
    torch.testing.assert_close(w[:, 2], torch.from_numpy(phi.weight(m, s, np.full(40, 2))))
