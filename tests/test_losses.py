"""Losses: gradients against autograd, constants against the NOTES table, label checks."""

from __future__ import annotations

import math

import pytest
import torch

from torchboost.losses import (
    AbsoluteLoss,
    HingeLoss,
    HuberLoss,
    LogisticLoss,
    SoftmaxCrossEntropy,
    SquaredLoss,
    get_loss,
)
from torchboost.projections import Ball

SCALAR_LOSSES = [SquaredLoss(), AbsoluteLoss(), HuberLoss(0.7), LogisticLoss(), HingeLoss()]


def _targets(loss, b=64):
    raw = torch.randint(0, 2, (b,)) if loss.is_classifier else torch.randn(b)
    return loss.encode_target(raw, 1)


@pytest.mark.parametrize("loss", SCALAR_LOSSES, ids=lambda loss: loss.name)
def test_gradient_matches_autograd(loss):
    z = _targets(loss)
    # leading dim 3 as for a booster's partial sums; avoid kinks of L1/hinge/Huber
    y = (torch.randn(3, 64, 1, dtype=torch.float64) * 2).requires_grad_()
    z = z.double()
    loss.value(y, z).sum().backward()
    assert torch.allclose(loss.gradient(y.detach(), z), y.grad, atol=1e-12)


def test_softmax_gradient_and_value_match_autograd():
    loss = SoftmaxCrossEntropy()
    z = loss.encode_target(torch.randint(0, 5, (32,)), 5)
    y = torch.randn(2, 32, 5, dtype=torch.float64, requires_grad=True)
    value = loss.value(y, z)
    expected = torch.nn.functional.cross_entropy(y[1], z, reduction="none")
    assert torch.allclose(value[1], expected)
    value.sum().backward()
    assert torch.allclose(loss.gradient(y.detach(), z), y.grad)


def test_values_at_hand_points():
    assert SquaredLoss().value(torch.tensor([[3.0]]), torch.tensor([[1.0]])).item() == 2.0
    assert AbsoluteLoss().value(torch.tensor([[3.0]]), torch.tensor([[1.0]])).item() == 2.0
    assert HuberLoss(1.0).value(torch.tensor([[3.0]]), torch.tensor([[1.0]])).item() == 1.5
    assert LogisticLoss().value(torch.tensor([[0.0]]), torch.tensor([[1.0]])).item() == \
        pytest.approx(math.log(2))
    assert HingeLoss().value(torch.tensor([[0.25]]), torch.tensor([[-1.0]])).item() == 1.25
    assert HingeLoss().gradient(torch.tensor([[1.5]]), torch.tensor([[1.0]])).item() == 0.0


@pytest.mark.parametrize("b", [0.25, 0.5, 1.0, 2.0, 3.0])
def test_ogb_constants_match_table(b):
    """NOTES table (Beygelzimer et al. Sec. 3.1): p-norm row with p=2 halved for ½(y−z)²."""
    sq = SquaredLoss()
    assert sq.lipschitz(b) == pytest.approx(0.5 * 2 * (b + 1))
    assert sq.smoothness_on_ball(b) == pytest.approx(0.5 * 2 * 1)
    assert sq.projection_gap(b) == pytest.approx(0.5 * max(2 * (1 - b), 0))
    lg = LogisticLoss()
    assert lg.lipschitz(b) == pytest.approx(math.exp(b) / (1 + math.exp(b)))
    assert lg.smoothness_on_ball(b) == 0.25
    assert lg.projection_gap(b) == pytest.approx(math.exp(b) / (1 + math.exp(b)))


@pytest.mark.parametrize("loss", [SquaredLoss(), LogisticLoss(), HuberLoss(0.5), AbsoluteLoss()],
                         ids=lambda loss: loss.name)
@pytest.mark.parametrize("b", [0.5, 1.5])
def test_ogb_constants_bound_the_loss_numerically(loss, b):
    """L_b ≥ sup|ℓ'| on the ball; ε_b ≥ the projection ratio, both over a grid of labels."""
    ys = torch.linspace(-b, b, 201, dtype=torch.float64).view(-1, 1)
    labels = [-1.0, 1.0] if loss.is_classifier else torch.linspace(-1, 1, 21).tolist()
    outside = torch.linspace(b + 1e-3, b + 5, 200, dtype=torch.float64).view(-1, 1)
    proj = Ball(b)
    worst_grad, worst_gap = 0.0, 0.0
    for label in labels:
        z = torch.tensor([[label]], dtype=torch.float64)
        worst_grad = max(worst_grad, loss.gradient(ys, z).abs().max().item())
        for y in (outside, -outside):
            ratio = (loss.value(proj(y), z) - loss.value(y, z)) / (proj(y) - y).abs().squeeze(-1)
            worst_gap = max(worst_gap, ratio.max().item())
    assert worst_grad <= loss.lipschitz(b) + 1e-9
    assert worst_gap <= loss.projection_gap(b) + 1e-9
    # and the constants are tight (attained within 2 %) where the table states them exactly
    assert worst_grad >= 0.98 * loss.lipschitz(b)


def test_strong_convexity_and_smoothness():
    assert (SquaredLoss().strong_convexity, SquaredLoss().smoothness) == (1.0, 1.0)
    assert LogisticLoss().smoothness == 0.25
    assert SoftmaxCrossEntropy().smoothness == 0.5
    assert math.isinf(HingeLoss().smoothness) and math.isinf(AbsoluteLoss().smoothness)


def test_binary_label_encodings():
    lg = LogisticLoss()
    assert lg.encode_target(torch.tensor([0, 1, 1]), 1).flatten().tolist() == [-1.0, 1.0, 1.0]
    assert lg.encode_target(torch.tensor([-1.0, 1.0]), 1).flatten().tolist() == [-1.0, 1.0]
    with pytest.raises(ValueError, match="mix"):
        lg.encode_target(torch.tensor([-1, 0, 1]), 1)
    with pytest.raises(ValueError, match=r"\{0, 1\}"):
        lg.encode_target(torch.tensor([0, 2]), 1)


@pytest.mark.parametrize(
    ("loss", "labels", "message"),
    [
        (SquaredLoss(), torch.tensor([1.0, float("nan")]), "NaN"),
        (SquaredLoss(), torch.zeros(3, 2), "shape"),
        (SquaredLoss(), torch.zeros(0), "empty"),
        (SoftmaxCrossEntropy(), torch.tensor([0, 3]), r"\[0, 3\)"),
        (SoftmaxCrossEntropy(), torch.tensor([0.0, 1.0]), "integer"),
        (HingeLoss(), torch.tensor([True, False]), "real"),
    ],
)
def test_bad_labels_raise(loss, labels, message):
    with pytest.raises(ValueError, match=message):
        loss.encode_target(labels, 3 if isinstance(loss, SoftmaxCrossEntropy) else 1)


def test_best_constants():
    p = torch.tensor([0.75])
    assert LogisticLoss().best_constant(p).item() == pytest.approx(math.log(3))
    freq = torch.tensor([0.5, 0.25, 0.25])
    assert torch.allclose(SoftmaxCrossEntropy().best_constant(freq), freq.log())


def test_get_loss():
    assert isinstance(get_loss("hinge"), HingeLoss)
    sq = SquaredLoss()
    assert get_loss(sq) is sq
    with pytest.raises(ValueError, match="unknown loss"):
        get_loss("cauchy")
