"""Prodigy (Mishchenko & Defazio 2024, Alg. 4): hand-computed steps, per-learner stacking."""

import math

import pytest
import torch
from boost_helpers import (
    assert_learns_tiny_regression,
    assert_same_learners,
    assert_state_round_trips,
    regression_stream,
    stream_both,
)

from torchboost import SGB
from torchboost.learners import PER_LEARNER_OPTIMIZERS, Prodigy, TwoLayerNet


def _by_hand(x0: list[float], grads: list[list[float]], d0: float, lr: float = 1.0,
             b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, d_max: float = math.inf):
    """Alg. 4 in plain floats: the iterates and the estimates d after every step."""
    b3 = math.sqrt(b2)
    x, m, v, s = list(x0), [0.0] * len(x0), [0.0] * len(x0), [0.0] * len(x0)
    d, r, xs, ds = d0, 0.0, [], []
    for k, g in enumerate(grads, start=1):
        gamma = lr * math.sqrt(1 - b2**k) / (1 - b1**k)
        moved = sum(gi * (a - b) for gi, a, b in zip(g, x0, x, strict=True))  # <g, x0 - x>
        r = b3 * r + (1 - b3) * gamma * d**2 * moved
        m = [b1 * mi + (1 - b1) * d * gi for mi, gi in zip(m, g, strict=True)]
        v = [b2 * vi + (1 - b2) * d**2 * gi**2 for vi, gi in zip(v, g, strict=True)]
        s = [b3 * si + (1 - b3) * gamma * d**2 * gi for si, gi in zip(s, g, strict=True)]
        x = [xi - gamma * d * mi / (math.sqrt(vi) + d * eps)
             for xi, mi, vi in zip(x, m, v, strict=True)]
        d = min(max(d, r / sum(abs(si) for si in s)), d_max)
        xs.append(list(x))
        ds.append(d)
    return xs, ds


GRADS = [[0.5, -0.5, 0.2], [0.4, -0.3, 0.25], [0.3, -0.35, 0.1], [0.35, -0.2, 0.15]] * 3


def test_steps_match_the_papers_algorithm_by_hand():
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    opt = Prodigy([w], d0=0.01)
    xs, ds = _by_hand([1.0, -2.0, 0.5], GRADS, d0=0.01)
    for g, x, d in zip(GRADS, xs, ds, strict=True):
        w.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        assert torch.allclose(w.detach(), torch.tensor(x, dtype=torch.float64), atol=1e-12)
        assert float(opt.estimate()) == pytest.approx(d, rel=1e-12)
    # gradients that keep their sign: d̂ overtakes d0 at step 4 and then grows about 1.5x a step
    assert ds[:3] == [0.01] * 3 and ds == sorted(ds)
    assert ds[3] == pytest.approx(0.010204, abs=1e-6) and ds[-1] == pytest.approx(0.2925, abs=1e-4)


def test_d_max_caps_the_estimate_and_bad_arguments_raise():
    xs, ds = _by_hand([1.0, -2.0, 0.5], GRADS, d0=0.01, d_max=0.05)
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    opt = Prodigy([w], d0=0.01, d_max=0.05)
    for g in GRADS:
        w.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    assert float(opt.estimate()) == pytest.approx(0.05) == pytest.approx(ds[-1])
    assert torch.allclose(w.detach(), torch.tensor(xs[-1], dtype=torch.float64), atol=1e-12)
    for bad in ({"d0": 0.0}, {"d0": 1.0, "d_max": 0.5}, {"lr": -1.0}, {"betas": (1.0, 0.9)}):
        with pytest.raises(ValueError):
            Prodigy([w], **bad)
    assert Prodigy in PER_LEARNER_OPTIMIZERS
    calls = []
    assert opt.step(lambda: calls.append(torch.is_grad_enabled()) or 2.5) == 2.5  # torch's contract
    assert calls == [True]


def test_stacked_instance_keeps_one_estimate_per_learner():
    """One stacked instance over (N, ...) parameters == N instances, one per slice."""
    torch.manual_seed(0)
    w = torch.randn(3, 4, 2, dtype=torch.float64)
    b = torch.randn(3, 2, dtype=torch.float64)
    drift = torch.tensor([1.0, 0.3, 0.0], dtype=torch.float64)  # learner 2: pure noise
    grads = [(drift[:, None, None] + 0.3 * torch.randn_like(w),
              drift[:, None] + 0.3 * torch.randn_like(b)) for _ in range(12)]
    stacked = [torch.nn.Parameter(w.clone()), torch.nn.Parameter(b.clone())]
    opt = Prodigy(stacked, d0=1e-2, stacked=True)
    slices = [[torch.nn.Parameter(w[i].clone()), torch.nn.Parameter(b[i].clone())]
              for i in range(3)]
    opts = [Prodigy(p, d0=1e-2) for p in slices]
    for gw, gb in grads:
        stacked[0].grad, stacked[1].grad = gw, gb
        opt.step()
        for i, (p, o) in enumerate(zip(slices, opts, strict=True)):
            p[0].grad, p[1].grad = gw[i], gb[i]
            o.step()
    assert opt.estimate().shape == (3,)
    assert len({round(float(e), 12) for e in opt.estimate()}) == 3  # three different estimates
    for i, (p, o) in enumerate(zip(slices, opts, strict=True)):
        assert float(opt.estimate()[i]) == pytest.approx(float(o.estimate()), rel=1e-12)
        assert torch.allclose(stacked[0][i], p[0], atol=1e-12)
        assert torch.allclose(stacked[1][i], p[1], atol=1e-12)


def _sgb(mode: str) -> SGB:
    torch.manual_seed(2)
    return SGB(lambda: TwoLayerNet(5, 8), n_learners=4, optimizer=Prodigy,
               optimizer_kwargs={"d0": 1e-3}, mode=mode)


def test_stacked_sgb_equals_loop_sgb():
    x, y = regression_stream(400)
    stacked, loop = _sgb("stacked"), _sgb("loop")
    assert stacked.learners.mode == "stacked" and loop.learners.mode == "loop"
    stream_both(stacked, loop, x, y, 20)
    estimates = stacked.learners.optimizers[0].estimate()
    for i in range(4):
        assert float(estimates[i]) == pytest.approx(
            float(loop.learners.optimizers[i].estimate()), rel=1e-4)
    assert_same_learners(stacked, loop)
    assert float(estimates.min()) > 2e-3  # every learner's rate grew from d0 = 1e-3
    assert torch.allclose(stacked.predict(x[:50]), loop.predict(x[:50]), atol=1e-4)


def test_reduces_loss_on_a_tiny_regression_and_state_round_trips():
    x, y = regression_stream(30)
    booster = _sgb("stacked")
    assert_learns_tiny_regression(booster)
    copy = _sgb("stacked")
    copy.load_state_dict(booster.state_dict())
    assert torch.equal(copy.learners.optimizers[0].estimate(),
                       booster.learners.optimizers[0].estimate())
    assert_state_round_trips(booster, lambda: _sgb("stacked"), x[:25], y[:25])
