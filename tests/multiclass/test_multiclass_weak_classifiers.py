"""Weak-learner prediction with cost matrices, importance-weighted training, random ties and
Hedge."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from torchboost.multiclass import Hedge, cross_entropy_gradient, importance_targets, predict_labels
from torchboost.multiclass.voting import argmax_random_ties, cumulative_votes, tie_fraction


def test_predict_labels_argmax_and_cost_sensitive() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 4, generator=g)
    cost = torch.rand(5, 7, 4, 4, generator=g)
    assert torch.equal(predict_labels(logits), logits.argmax(-1))
    expected = torch.einsum("nbr,nbrl->nbl", logits.softmax(-1), cost).argmin(-1)
    assert torch.equal(predict_labels(logits, cost, "cost"), expected)
    with pytest.raises(ValueError, match="cost matrix"):
        predict_labels(logits, None, "cost")


def test_weighted_targets_give_the_weighted_cross_entropy_gradient() -> None:
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 4, generator=g, dtype=torch.float64).requires_grad_()
    labels = torch.randint(0, 4, (5,), generator=g)
    weights = torch.rand(3, 5, generator=g, dtype=torch.float64)
    loss = sum((weights[i] * F.cross_entropy(logits[i], labels, reduction="none")).mean()
               for i in range(3))
    (grad,) = torch.autograd.grad(loss, logits)
    targets = importance_targets(weights, labels, 4)
    torch.testing.assert_close(cross_entropy_gradient(logits.detach(), targets), grad)


def test_sampling_targets_train_with_probability_w() -> None:
    weights = torch.tensor([[0.0, 0.25, 0.9, 3.0]]).expand(20000, 4)
    labels = torch.zeros(4, dtype=torch.long)
    drawn = importance_targets(weights, labels, 2, "sampling",
                               torch.Generator().manual_seed(0))[..., 0]
    assert set(drawn.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(drawn.mean(0), torch.tensor([0.0, 0.25, 0.9, 1.0]), atol=0.01,
                               rtol=0)
    again = importance_targets(weights, labels, 2, "sampling", torch.Generator().manual_seed(0))
    assert torch.equal(drawn, again[..., 0])


def test_random_ties_are_uniform_and_seeded() -> None:
    scores = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0]]).expand(30000, 5)
    picks = argmax_random_ties(scores, torch.Generator().manual_seed(0))
    freq = torch.bincount(picks, minlength=5).double() / 30000
    torch.testing.assert_close(freq, torch.tensor([0, 1 / 3, 1 / 3, 0, 1 / 3],
                                                  dtype=torch.float64), atol=0.015, rtol=0)
    assert torch.equal(picks, argmax_random_ties(scores, torch.Generator().manual_seed(0)))
    torch.testing.assert_close(tie_fraction(scores[:2], torch.tensor([1, 0])),
                               torch.tensor([1 / 3, 0.0]))


def test_cumulative_votes() -> None:
    votes = cumulative_votes(torch.tensor([[0, 1], [1, 1]]), torch.tensor([0.5, -2.0]), 2)
    assert votes.tolist() == [[[0, 0], [0, 0]], [[0.5, 0], [0, 0.5]], [[0.5, -2], [0, -1.5]]]


def test_hedge_draws_in_proportion_and_tracks_losses() -> None:
    hedge = Hedge(3)
    hedge.update(torch.tensor([2.0, 0.0, 1.0]))
    probs = torch.exp(-torch.tensor([2.0, 0.0, 1.0], dtype=torch.float64))
    probs /= probs.sum()
    torch.testing.assert_close(hedge.probabilities(), probs)
    picks = hedge.choose(20000, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(torch.bincount(picks, minlength=3).double() / 20000, probs,
                               atol=0.015, rtol=0)
    assert hedge.choose(3, n_experts=1).tolist() == [0, 0, 0]
    hedge.update(torch.full((3,), 1e6))  # log-weights do not underflow
    torch.testing.assert_close(hedge.probabilities(), probs)
    tied = Hedge(4, randomized=False)
    assert tied.choose(2).tolist() == [3, 3]  # ties go to the expert with more learners
    with pytest.raises(ValueError):
        Hedge(0)
