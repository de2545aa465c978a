"""The stall monitor: one warning per symptom, with numbers and the fix, and none when learning."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from boost_helpers import regression_stream

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.stall import BoostingStallWarning, StallMonitor
from torchboost.learners import Prodigy
from torchboost.losses import get_loss

X, Y = regression_stream(6000)


def stream(booster, x=X, y=Y, batch=32):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in range(0, len(x), batch):
            booster.learn(x[t:t + batch], y[t:t + batch])
    return [w for w in caught if issubclass(w.category, BoostingStallWarning)]


def test_window_sums_by_hand():
    monitor = StallMonitor(get_loss("squared"), n_learners=2, out_dim=1, window=4)
    z = torch.tensor([[1.0], [3.0]])
    partials = torch.tensor([[0.0, 0.0], [2.0, 2.0], [1.0, 5.0]]).unsqueeze(-1)
    assert monitor.update(partials, z) == []  # the warm-up (4 examples) learns the label mean 2
    assert monitor.update(partials, z) == []
    assert monitor.update(partials, z) == []  # 2 of the 4 window examples
    assert monitor.update(partials, z) == []  # a first bad window: not yet a warning
    assert monitor.update(partials, z) == []
    # mean per example: y^0 = 0 → ½(1 + 9)/2 = 2.5; y^1 = 2 → ½(1 + 1)/2 = 0.5;
    # y^2 = (1, 5) → ½(0 + 4)/2 = 1; the constant 2 → 0.5. So y^2 is worse than both
    assert monitor.update(partials, z) == ["not_beating_constant", "learners_hurt"]
    assert monitor.last_window["anytime"].tolist() == pytest.approx([2.5, 0.5, 1.0])
    assert float(monitor.last_window["constant"]) == pytest.approx(0.5)
    assert all(monitor.update(partials, z) == [] for _ in range(4))  # once each
    assert monitor.flags() == {"not_beating_constant": 1.0, "learners_hurt": 1.0}


def test_a_booster_that_does_not_learn_warns_once_with_the_fix():
    # learners frozen by a zero learning rate, y0 = 0 while the labels' mean is not 0
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, step=0.25, stall_window=1500,
                  standardize=False,  # y0 = 0 in the labels' own units
                  optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.0})
    caught = stream(booster, y=Y + 3.0)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "no better than the best constant" in text and "lr=0" in text
    assert "over the last 1500 examples" in text
    assert booster.stall.flags()["not_beating_constant"] == 1.0


def test_the_hint_quotes_prodigys_estimates():
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, step=0.25, stall_window=1500,
                  standardize=False, optimizer=Prodigy,
                  optimizer_kwargs={"lr": 0.0, "d0": 2e-3})  # γ = 0: frozen learners
    caught = stream(booster, y=Y + 3.0)
    assert len(caught) == 1
    assert "now Prodigy's lr=0 × estimates d in [0.002, 0.002]" in str(caught[0].message)


def test_overshooting_learners_are_flagged():
    # η = 1.9 on squared loss: each learner that fits its target overshoots past the label
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8), n_learners=6, step=1.9, y0="mean",
                  stall_window=1500, optimizer_kwargs={"lr": 1e-2})
    caught = stream(booster)
    messages = [str(w.message) for w in caught]
    assert any("make the prediction worse" in m and "step η=1.9" in m for m in messages)
    assert booster.stall.flags()["learners_hurt"] == 1.0


def test_a_learning_booster_does_not_warn():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8), n_learners=4, step=0.3, y0="mean",
                  stall_window=1500, optimizer_kwargs={"lr": 1e-2})
    assert stream(booster) == []
    anytime = booster.stall.last_window["anytime"]
    # the second window (examples 3000-4500): well below the constant, falling with k
    assert float(anytime[-1]) < 0.8 * float(booster.stall.last_window["constant"])
    assert anytime.tolist() == sorted(anytime.tolist(), reverse=True)
    assert all(not math.isnan(v) for v in anytime.tolist())
    assert booster.stall.flags() == {"not_beating_constant": 0.0, "learners_hurt": 0.0}


def test_stall_window_none_switches_the_monitor_off():
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=None,
                  optimizer_kwargs={"lr": 0.0}, optimizer=torch.optim.SGD)
    assert booster.stall is None and stream(booster, y=Y + 3.0) == []
    with pytest.raises(ValueError, match="stall window"):
        SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=0)


def test_a_state_saved_before_the_monitor_loads_and_the_window_is_configuration():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500)
    stream(booster, x=X[:2000], y=Y[:2000])
    assert booster.stall.seen == 2000 and booster.stall.in_window > 0
    state = booster.state_dict()
    copy = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500)
    copy.load_state_dict(state)  # the counters travel too
    assert (copy.stall.seen, copy.stall.in_window) == (2000, booster.stall.in_window)
    old = {k: v for k, v in state.items() if not k.startswith("stall.")}
    old["_extra_state"] = {k: v for k, v in old["_extra_state"].items() if k != "config"}
    fresh = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500)
    fresh.load_state_dict(old)  # an older checkpoint: the monitor starts afresh
    assert fresh.stall.seen == 0 and torch.equal(fresh.predict(X[:8]), booster.predict(X[:8]))
    with pytest.raises(ValueError, match="stall_window"):
        SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=None).load_state_dict(state)
