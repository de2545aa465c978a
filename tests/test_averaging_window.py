"""``averaging_window``: the schedule-free average bounded to its last steps, for streams that
change (:func:`torchboost.learners.averaging.window_average`)."""

from __future__ import annotations

import pytest
import schedulefree
import torch
from torch import nn

from torchboost import SGB, TwoLayerNet
from torchboost.learners.averaging import window_average


def test_the_average_weighs_each_step_at_least_one_over_window_plus_one() -> None:
    """Defazio et al.'s x_t = (1 − c_t) x_{t−1} + c_t z_t with c_t = w_t / Σ_{i≤t} w_i: 1, ½, ⅓
    for a constant rate, then ⅓ for ever with window 2 (the uniform average's would be ¼, ⅕)."""
    torch.manual_seed(0)
    param = nn.Parameter(torch.randn(3))
    opt = schedulefree.AdamWScheduleFree([param], lr=0.1)
    opt.eval()
    x_before = param.detach().clone()
    for c in (1.0, 1 / 2, 1 / 3, 1 / 3, 1 / 3):
        opt.train()
        param.grad = torch.randn(3)
        opt.step()
        window_average([opt], 2)
        opt.eval()
        z = opt.state[param]["z"]
        torch.testing.assert_close(param.detach(), (1 - c) * x_before + c * z)
        x_before = param.detach().clone()
    assert opt.param_groups[0]["weight_sum"] == pytest.approx(2 * 0.1**2)
    adam = torch.optim.Adam([nn.Parameter(torch.zeros(1))])
    window_average([adam], 2)  # no average to bound: left alone
    assert "weight_sum" not in adam.param_groups[0]


def drifting(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Batches of ``y = x·w``, ``w`` flipping sign half way (an abrupt, global change)."""
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(4, generator=generator)
    batches = []
    for t in range(n):
        x = torch.randn(32, 4, generator=generator)
        batches.append((x, x @ (w if t < n // 2 else -w)))
    return batches


def test_a_window_recovers_from_an_abrupt_change_sooner() -> None:
    errors = {}
    for window in (None, 10):
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(4, 10), n_learners=4, averaging_window=window)
        after = []
        for t, (x, y) in enumerate(drifting(300, seed=0)):
            prediction = booster.learn(x, y)
            if 150 <= t < 200:  # the 50 rounds after the change, predicted before learning
                after.append(float((prediction[:, 0] - y).square().mean()))
        errors[window] = sum(after) / len(after)
    assert errors[10] < 0.7 * errors[None]  # 2.13 against 3.81


def test_the_window_is_configuration_and_needs_an_average() -> None:
    booster = SGB(lambda: TwoLayerNet(2, 4), n_learners=2, averaging_window=30)
    assert booster.config()["averaging_window"] == 30
    assert "averaging_window" not in SGB(lambda: TwoLayerNet(2, 4), n_learners=2).config()
    booster.learn(torch.randn(8, 2), torch.randn(8))
    plain = SGB(lambda: TwoLayerNet(2, 4), n_learners=2)
    with pytest.raises(ValueError, match="averaging_window: saved 30"):
        plain.load_state_dict(booster.state_dict())
    with pytest.raises(ValueError, match="Adam keeps none"):
        SGB(lambda: TwoLayerNet(2, 4), n_learners=2, optimizer=torch.optim.Adam,
            averaging_window=30)
    with pytest.raises(ValueError, match="averaging_window"):
        SGB(lambda: TwoLayerNet(2, 4), n_learners=2, averaging_window=0)


def test_the_river_estimators_pass_the_window_on() -> None:
    pytest.importorskip("river")
    from torchboost.river import SGBRegressor

    model = SGBRegressor(averaging_window=30, batch_size=4, n_learners=2, n_threads=1)
    for i in range(4):
        model.learn_one({"a": float(i)}, float(i))
    assert model.booster_.learners.averaging_window == 30
    both = SGBRegressor(averaging_window=30, booster_kwargs={"averaging_window": 10},
                        batch_size=1, n_learners=2, n_threads=1)
    with pytest.raises(ValueError, match="disagree: set it in one place"):
        both.learn_one({"a": 1.0}, 1.0)
    with pytest.raises(ValueError, match="averaging_window"):
        SGBRegressor(averaging_window=-1)
