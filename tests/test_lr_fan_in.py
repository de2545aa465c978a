"""The default rate's fan-in rule (OptimizerSpec.lr_fan_in, SGB's DEFAULT_LR_FAN_IN)."""

from __future__ import annotations

import pytest
import torch
from boost_helpers import (
    assert_same_learners,
    assert_state_round_trips,
    regression_stream,
    stream_both,
)

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.default_lr import ADAM_LR, DEFAULT_BETAS, DEFAULT_WARMUP
from torchboost.boosters.sgb import DEFAULT_LR, DEFAULT_LR_FAN_IN
from torchboost.learners import ConvNet, OptimizerSpec, Prodigy


def _wide(d: int = 100) -> TwoLayerNet:
    return TwoLayerNet(d, 8)  # Linear(d, 8): fan-in d; Linear(8, 1): fan-in 8


def test_groups_scale_only_weights_wider_than_the_threshold():
    net = _wide(100)
    opt = OptimizerSpec(torch.optim.Adam, {"lr": 0.03}, lr_fan_in=64).build(net.parameters())
    lrs = [(g["lr"], [tuple(p.shape) for p in g["params"]]) for g in opt.param_groups]
    assert lrs == [(pytest.approx(0.03 * 64 / 100), [(8, 100)]),
                   (0.03, [(8,), (1, 8), (1,)])]
    conv = ConvNet(1, 28, 10, channels=5)  # conv fan-in 1·5·5 = 25; head fan-in 5·12·12 = 720
    opt = OptimizerSpec(torch.optim.SGD, {"lr": 0.1}, lr_fan_in=64).build(conv.parameters())
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.1, 0.1 * 64 / 720, 0.1])
    narrow = OptimizerSpec(torch.optim.Adam, {"lr": 0.03}, lr_fan_in=64).build(
        _wide(10).parameters())
    assert len(narrow.param_groups) == 1  # nothing wider: built exactly as without the rule
    # Prodigy's sums span one group; Rprop is not elementwise-registered: both left as they are
    for cls in (Prodigy, torch.optim.Rprop):
        assert len(OptimizerSpec(cls, {}, lr_fan_in=64).build(net.parameters()).param_groups) == 1
    with pytest.raises(ValueError, match="lr_fan_in"):
        OptimizerSpec(torch.optim.Adam, {}, lr_fan_in=0.0)


def test_first_adam_step_moves_each_weight_by_its_scaled_rate():
    torch.manual_seed(0)
    booster = SGB(lambda: _wide(128), n_learners=2, standardize=False, stall_window=None,
                  optimizer=torch.optim.Adam)
    before = {k: v.clone() for k, v in booster.learners.learner_state(0).items()}
    x, y = regression_stream(64, d=128)
    booster.learn(x[:32], y[:32])
    after = booster.learners.learner_state(0)
    moved = {k: float((after[k] - before[k]).abs().max()) for k in before}
    # Adam's first step moves every entry with a non-zero gradient by lr (bias-corrected)
    assert moved["1.weight"] == pytest.approx(ADAM_LR * DEFAULT_LR_FAN_IN / 128, rel=1e-3)
    assert moved["3.weight"] == pytest.approx(ADAM_LR, rel=1e-3)


def test_sgb_applies_the_rule_to_its_default_rate_only():
    default = SGB(lambda: _wide(100), n_learners=2)
    assert default.config()["lr_fan_in"] == DEFAULT_LR_FAN_IN
    explicit = SGB(lambda: _wide(100), n_learners=2, optimizer_kwargs={"lr": 0.03})
    assert "lr_fan_in" not in explicit.config()
    assert len(explicit.learners.optimizers[0].param_groups) == 1
    kept = SGB(lambda: _wide(100), n_learners=2, optimizer_kwargs={"lr": 0.01}, lr_fan_in=64)
    rates = {tuple(p.shape): g["lr"] for g in kept.learners.optimizers[0].param_groups
             for p in g["params"]}  # stacked: (N, ...) shapes
    assert rates == pytest.approx({(2, 8, 100): 0.01 * 64 / 100, (2, 8): 0.01,
                                   (2, 1, 8): 0.01, (2, 1): 0.01})
    narrow = SGB(lambda: _wide(10), n_learners=2)
    assert "lr_fan_in" not in narrow.config()  # changes nothing, so states saved before load
    state = SGB(lambda: _wide(10), n_learners=2, optimizer_kwargs={
        "lr": DEFAULT_LR, "warmup_steps": DEFAULT_WARMUP, "betas": DEFAULT_BETAS}).state_dict()
    narrow.load_state_dict(state)
    with pytest.raises(ValueError, match="lr_fan_in"):  # a wide learner's old state: named
        default.load_state_dict(explicit.state_dict())


def test_stacked_equals_loop_with_scaled_rates():
    x, y = regression_stream(400, d=100)

    def make(mode: str) -> SGB:
        torch.manual_seed(3)
        return SGB(lambda: _wide(100), n_learners=3, mode=mode, stall_window=None)

    stacked, loop = make("stacked"), make("loop")
    assert stacked.learners.mode == "stacked" and stacked.learners.lr_scaled
    stream_both(stacked, loop, x, y, 40)
    assert_same_learners(stacked, loop)
    assert_state_round_trips(stacked, lambda: make("stacked"), x[:40], y[:40])


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_a_frozen_wide_layer_stays_frozen_under_the_rule(mode):
    def learner() -> TwoLayerNet:
        net = _wide(100)
        net[1].weight.requires_grad_(False)  # the layer the rule would scale
        return net

    torch.manual_seed(4)
    booster = SGB(learner, n_learners=2, mode=mode, stall_window=None)
    assert booster.learners.mode == mode and booster.learners.lr_scaled
    before = [{k: v.clone() for k, v in booster.learners.learner_state(i).items()}
              for i in range(2)]
    x, y = regression_stream(200, d=100)
    for t in range(0, 200, 40):
        booster.learn(x[t:t + 40], y[t:t + 40])
    for i in range(2):
        after = booster.learners.learner_state(i)
        assert torch.equal(after["1.weight"], before[i]["1.weight"])
        assert not torch.equal(after["3.weight"], before[i]["3.weight"])


def test_output_layer_size_names_the_last_module_with_parameters():
    from torchboost.learners.optimizers import output_layer_size

    assert output_layer_size(["0.weight", "0.bias", "2.weight", "2.bias"]) == 2
    assert output_layer_size(["conv.weight", "conv.bias", "head.weight"]) == 1
    assert output_layer_size(["weight", "bias"]) == 2  # a bare nn.Linear
    assert output_layer_size([]) == 0


def test_newton_targets_scale_linear_learners_rate_by_the_ensembles_speed():
    """Under Newton targets the default rule divides the rate of linear learners (their only
    layer with parameters is the output layer) by (N·η)^NEWTON_OUTPUT_POWER: N of them sum to
    one linear model moved N·η times as fast. Deeper learners keep their rates, and nothing
    changes with gradient targets, an explicit rate, or in StagewiseGB."""
    from torch import nn

    from torchboost import StagewiseGB
    from torchboost.boosters.default_lr import NEWTON_OUTPUT_POWER

    scale = (20 * 0.3) ** -NEWTON_OUTPUT_POWER  # the default η = min(½, STEP_BUDGET / 20)
    linear = lambda: nn.Sequential(nn.Flatten(), nn.Linear(100, 3))  # noqa: E731
    for mode in ("stacked", "loop"):
        loop = SGB(linear, "softmax", n_outputs=3, n_learners=20, targets="newton", mode=mode)
        rates = sorted(g["lr"] for g in loop.learners.optimizers[0].param_groups)
        # the fan-in rule (weight: 64 / 100) times the ensemble's speed, the bias: the latter
        assert rates == pytest.approx([DEFAULT_LR * 64 / 100 * scale, DEFAULT_LR * scale])
        assert loop.config()["lr_output_scale"] == pytest.approx(scale)
    deep = SGB(lambda: TwoLayerNet(100, 8, 3), "softmax", n_outputs=3, n_learners=20,
               targets="newton", mode="loop")
    assert [g["lr"] for g in deep.learners.optimizers[0].param_groups] == pytest.approx(
        [DEFAULT_LR * 64 / 100, DEFAULT_LR])  # the fan-in rule alone
    assert "lr_output_scale" not in deep.config()
    for other in (SGB(linear, "softmax", n_outputs=3, n_learners=20, targets="gradient"),
                  SGB(linear, "softmax", n_outputs=3, n_learners=20, targets="newton",
                      optimizer_kwargs={"lr": 0.01}),
                  StagewiseGB(linear, "softmax", n_outputs=3, n_learners=20, targets="newton")):
        assert "lr_output_scale" not in other.config()
    small = SGB(linear, "softmax", n_outputs=3, n_learners=2, targets="newton", step=0.5)
    assert "lr_output_scale" not in small.config()  # N·η = 1: nothing to slow down


def test_boosting_linear_learners_with_newton_targets_at_defaults_matches_one_learner():
    """The collapse the rule fixes: 20 linear learners with Newton targets at the default rate
    of every layer fall far below one linear learner on a 5-class stream; with the output
    layers' rate divided by N·η they end within 2.5 points of it (two passes, seed 0; over
    three seeds and passes ``experiments/newton_defaults.py`` measures −0.5 to −1 point)."""
    from torch import nn

    from torchboost import SingleLearner

    g = torch.Generator().manual_seed(0)
    w = torch.randn(12, 5, generator=g)
    x = torch.randn(10000, 12, generator=g) * torch.rand(12, generator=g) * 3
    y = (x @ w + 0.5 * torch.randn(10000, 5, generator=g)).argmax(1)
    x_test, y_test, x, y = x[8000:], y[8000:], x[:8000], y[:8000]

    def accuracy(build):
        torch.manual_seed(0)
        booster = build()
        order = torch.Generator().manual_seed(1)
        for _ in range(2):
            for rows in torch.randperm(len(y), generator=order).split(32):
                booster.learn(x[rows], y[rows])
        return 1.0 - booster.evaluate(x_test, y_test)["error"]

    linear = lambda: nn.Linear(12, 5)  # noqa: E731
    adam = torch.optim.Adam  # the rule was measured with Adam (schedule-free: see the notes)
    single = accuracy(lambda: SingleLearner(linear, "softmax", n_outputs=5, optimizer=adam))
    boosted = accuracy(lambda: SGB(linear, "softmax", n_outputs=5, n_learners=20,
                                   targets="newton", optimizer=adam))
    every_layer = accuracy(lambda: SGB(linear, "softmax", n_outputs=5, n_learners=20,
                                       targets="newton", lr_output_scale=1.0, optimizer=adam))
    # measured: one learner 0.9255, boosted 0.908, boosted with every layer at the rate 0.857
    assert single > 0.9
    assert boosted > single - 0.025
    assert every_layer < single - 0.05  # the old rule
