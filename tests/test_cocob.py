"""COCOB-Backprop (Orabona & Tommasi 2017, Alg. 2): hand-computed steps, stacking, learning."""

from __future__ import annotations

import pytest
import torch
from boost_helpers import (
    assert_learns_tiny_regression,
    assert_same_learners,
    assert_state_round_trips,
    regression_stream,
    stream_both,
)

from torchboost import SGB, TwoLayerNet, WeakLearners
from torchboost.learners import ELEMENTWISE_OPTIMIZERS, COCOBBackprop


def test_two_steps_match_the_papers_formulas_by_hand():
    """α = 4, w_1 = (1, −2, 0.5); gradients (2, −0.5, 0) then (1, 1, 0), so the paper's
    negative gradients are g_1 = (−2, 0.5, 0), g_2 = (−1, −1, 0).

    Step 1: L = G = (2, .5, 0), Reward = 0, θ = (−2, .5, 0);
    w_2 − w_1 = θ / (L max(G + L, 4L)) · L = (−2/16 · 2, .5/1 · .5, 0) = (−.25, .25, 0).
    Step 2: L = (2, 1, 0), G = (3, 1.5, 0), Reward = max((−.25)(−1), 0), max(.25 · (−1), 0), 0)
    = (.25, 0, 0), θ = (−3, −.5, 0);
    w_3 − w_1 = (−3/(2 · max(5, 8)) · 2.25, −.5/(1 · max(2.5, 4)) · 1, 0) = (−.421875, −.125, 0).
    """
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    opt = COCOBBackprop([w], alpha=4.0)
    w.grad = torch.tensor([2.0, -0.5, 0.0])
    opt.step()
    assert w.tolist() == [0.75, -1.75, 0.5]
    w.grad = torch.tensor([1.0, 1.0, 0.0])
    opt.step()
    assert w.tolist() == [0.578125, -2.125, 0.5]
    state = opt.state[w]
    assert state["initial"].tolist() == [1.0, -2.0, 0.5]
    assert state["max_abs_grad"].tolist() == [2.0, 1.0, 0.0]
    assert state["abs_grad_sum"].tolist() == [3.0, 1.5, 0.0]
    assert state["reward"].tolist() == [0.25, 0.0, 0.0]
    assert state["grad_sum"].tolist() == [-3.0, -0.5, 0.0]


def test_first_step_is_one_over_alpha_against_the_gradient_sign():
    w = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    opt = COCOBBackprop([w])
    w.grad = torch.tensor([3.0, -1e-3, 0.0, 1e6], dtype=torch.float64)
    opt.step()
    assert w.tolist() == pytest.approx([-0.01, 0.01, 0.0, -0.01], rel=1e-12)


def test_rejects_bad_alpha_and_is_registered_elementwise():
    with pytest.raises(ValueError, match="alpha"):
        COCOBBackprop([torch.nn.Parameter(torch.zeros(1))], alpha=0.0)
    assert COCOBBackprop in ELEMENTWISE_OPTIMIZERS
    assert WeakLearners(lambda: TwoLayerNet(3, 4), 3, optimizer=COCOBBackprop).mode == "stacked"


def _sgb(mode: str) -> SGB:
    torch.manual_seed(2)
    return SGB(lambda: TwoLayerNet(5, 8), n_learners=4, optimizer=COCOBBackprop, mode=mode)


def test_stacked_sgb_equals_loop_sgb():
    x, y = regression_stream(400)
    stacked, loop = _sgb("stacked"), _sgb("loop")
    stream_both(stacked, loop, x[:200], y[:200], 20)
    assert_same_learners(stacked, loop)
    assert torch.allclose(stacked.predict(x[200:]), loop.predict(x[200:]), atol=1e-4)


def test_reduces_loss_on_a_tiny_regression_and_state_round_trips():
    x, y = regression_stream(30)
    booster = _sgb("stacked")
    # the loss 1.27 -> 0.73 (Adam at lr 3e-2: 0.72); the training mean scores 1.18
    assert_learns_tiny_regression(booster)
    assert_state_round_trips(booster, lambda: _sgb("stacked"), x[:25], y[:25])
