"""Property tests (hypothesis, the deterministic "ci" profile of conftest.py): loss gradients
against autograd, projections idempotent and non-expansive, OGB's σ in [0, 1], Residual-SGB's
predictions in Y."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor

from torchboost import OGB, Ball, Box, ResidualSGB, TwoLayerNet
from torchboost.losses import (
    AbsoluteLoss,
    HingeLoss,
    HuberLoss,
    LogisticLoss,
    Loss,
    SoftmaxCrossEntropy,
    SquaredLoss,
)
from torchboost.projections import Projection

LOSSES = [SquaredLoss(), AbsoluteLoss(), HuberLoss(0.7), LogisticLoss(), HingeLoss(),
          SoftmaxCrossEntropy()]
seeds = st.integers(0, 2**31 - 1)


def random_labels(loss: Loss, batch: int, m: int, g: torch.Generator) -> Tensor:
    """A valid raw label batch for ``loss``: classes for softmax, {0, 1} or {−1, +1} for the
    binary losses (either encoding), reals otherwise."""
    if isinstance(loss, SoftmaxCrossEntropy):
        return torch.randint(0, m, (batch,), generator=g)
    if loss.is_classifier:
        bits = torch.randint(0, 2, (batch,), generator=g)
        return bits if torch.rand((), generator=g) < 0.5 else 2 * bits - 1
    return torch.randn(batch, m, generator=g, dtype=torch.float64) * 3


@given(loss=st.sampled_from(LOSSES), lead=st.lists(st.integers(1, 3), max_size=2),
       batch=st.integers(1, 6), m=st.integers(2, 5), scale=st.floats(1e-3, 1e3), seed=seeds)
def test_loss_gradient_matches_autograd(loss, lead, batch, m, scale, seed):
    m = m if isinstance(loss, SoftmaxCrossEntropy | SquaredLoss | AbsoluteLoss | HuberLoss) else 1
    g = torch.Generator().manual_seed(seed)
    z = loss.encode_target(random_labels(loss, batch, m, g), m)
    if z.is_floating_point():
        z = z.double()
    # continuous random predictions hit the kinks of L1, Huber and hinge with probability 0
    y = (torch.randn(*lead, batch, m, generator=g, dtype=torch.float64) * scale).requires_grad_()
    value = loss.value(y, z)
    assert value.shape == y.shape[:-1]
    value.sum().backward()
    assert torch.allclose(loss.gradient(y.detach(), z), y.grad, rtol=1e-9, atol=1e-12)


def projections() -> st.SearchStrategy[Projection]:
    box = st.tuples(st.floats(-5, 5), st.floats(1e-3, 10)).map(lambda lw: Box(lw[0], sum(lw)))
    return st.one_of(box, st.floats(1e-3, 10).map(Ball))


@given(projection=projections(), n=st.integers(1, 8), m=st.integers(1, 4),
       scale=st.floats(1e-2, 1e3), seed=seeds)
def test_projection_is_idempotent_and_non_expansive(projection, n, m, scale, seed):
    g = torch.Generator().manual_seed(seed)
    a, b = (torch.randn(2, n, m, generator=g, dtype=torch.float64) * scale).unbind()
    pa, pb = projection(a), projection(b)
    assert bool(projection.contains(pa, atol=1e-9).all())
    assert torch.allclose(projection(pa), pa, rtol=1e-12, atol=1e-12)
    distance = torch.linalg.vector_norm(a - b, dim=-1)
    assert bool((torch.linalg.vector_norm(pa - pb, dim=-1) <= distance * (1 + 1e-12) + 1e-12).all())
    inside = torch.where(projection.contains(a, atol=0.0).unsqueeze(-1), a, pa)
    assert torch.equal(pa, inside)  # Π is the identity on the set


def random_stream(n_batches: int, d: int, seed: int, label: str) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(seed)
    stream = []
    for _ in range(n_batches):
        size = int(torch.randint(1, 9, (), generator=g))
        x = torch.randn(size, d, generator=g)
        y = (torch.randint(0, 2, (size,), generator=g) if label == "binary"
             else torch.rand(size, generator=g) * 2 - 1)
        stream.append((x, y))
    return stream


@given(n=st.integers(1, 5), lr=st.floats(1e-4, 1.0), loss=st.sampled_from(["squared", "logistic"]),
       n_batches=st.integers(1, 6), seed=seeds)
def test_ogb_sigma_stays_in_unit_interval(n, lr, loss, n_batches, seed):
    torch.manual_seed(seed)
    booster = OGB(lambda: TwoLayerNet(3, 2), loss, n_learners=n, optimizer_kwargs={"lr": lr})
    label = "binary" if loss == "logistic" else "real"
    for x, y in random_stream(n_batches, 3, seed, label):
        booster.learn(x, y)
        assert bool(((booster.sigma >= 0) & (booster.sigma <= 1)).all()), booster.sigma
    assert booster.rounds == n_batches


@given(domain=projections(), m=st.integers(1, 3), n=st.integers(1, 4),
       loss=st.sampled_from(["absolute", "hinge", "squared"]), y0=st.floats(-20, 20),
       n_batches=st.integers(1, 5), seed=seeds)
def test_residual_sgb_predictions_stay_in_the_domain(domain, m, n, loss, y0, n_batches, seed):
    m = 1 if loss == "hinge" else m
    torch.manual_seed(seed)
    booster = ResidualSGB(lambda: TwoLayerNet(3, 2, out_features=m), loss, n_learners=n,
                          n_outputs=m, domain=domain, y0=y0, optimizer_kwargs={"lr": 0.1})
    g = torch.Generator().manual_seed(seed)
    for x, _ in random_stream(n_batches, 3, seed, "real"):
        y = random_labels(booster.loss, len(x), m, g)
        prediction = booster.learn(x, y.float() if y.is_floating_point() else y)
        assert bool(domain.contains(prediction, atol=1e-5).all()), prediction
        for k in range(1, n + 1):  # anytime predictions are averages of points of Y too
            assert bool(domain.contains(booster.predict(x, k), atol=1e-5).all())
