"""Schedule-free learners, the default (issue "Streams have no end"): rounds learn at the
learning point ``y``, every prediction uses the averaged weights ``x``, against the
``schedulefree`` package run by hand; stacked = loop; a round that raises changes nothing;
predicting changes nothing; export = predict; one default rule (standardisation) for every
model."""

from __future__ import annotations

import copy
import warnings

import pytest
import schedulefree
import torch
from boost_helpers import regression_stream
from torch import Tensor, nn

from torchboost import SGB, Booster, SingleLearner, StagewiseGB, TwoLayerNet
from torchboost.boosters.default_lr import DEFAULT_BETAS, DEFAULT_LR, DEFAULT_WARMUP
from torchboost.learners.averaging import is_schedule_free
from torchboost.testing import assert_same


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_rounds_learn_at_y_and_predictions_use_the_average_of_a_hand_run(mode):
    """SingleLearner on squared loss = the package's own loop: ``opt.train()``, the forward
    (which ``learn`` returns), the step, ``opt.eval()``; ``predict`` = the eval-mode forward."""
    torch.manual_seed(0)
    net = _net()
    reference = copy.deepcopy(net)
    booster = SingleLearner([net], "squared", standardize=False, mode=mode, stall_window=None,
                            optimizer_kwargs={"lr": 0.05, "warmup_steps": 3})
    opt = schedulefree.AdamWScheduleFree(reference.parameters(), lr=0.05, warmup_steps=3)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(12, 16, 3, generator=g), torch.randn(12, 16, generator=g)
    test = torch.randn(32, 3, generator=g)
    for t in range(12):
        learned = booster.learn(x[t], y[t]).squeeze(1)
        opt.train()
        out = reference(x[t]).squeeze(1)
        torch.testing.assert_close(learned, out, rtol=0, atol=1e-6)  # the learning point y
        opt.zero_grad()
        (0.5 * (out - y[t]).square().mean()).backward()
        opt.step()
        opt.eval()
        with torch.no_grad():
            averaged = reference(test).squeeze(1)
        torch.testing.assert_close(booster.predict(test).squeeze(1), averaged, rtol=0, atol=1e-6)
    with torch.no_grad():  # the learning point predicts differently: predict never uses it
        opt.train()
        at_y = reference(test).squeeze(1)
        opt.eval()
    assert (booster.predict(test).squeeze(1) - at_y).abs().max() > 1e-4


def test_the_default_is_schedule_free_at_the_rule_for_every_registered_booster():
    from torchboost.boosters.registry import BOOSTERS

    for name, spec in BOOSTERS.items():
        outputs = 3 if spec.task == "classification" else 1
        booster = spec.make(lambda o=outputs: TwoLayerNet(4, 3, o), n_learners=2,
                            n_outputs=outputs)
        opt = booster.learners.optimizers[0]
        assert is_schedule_free(opt), name
        assert opt.defaults["lr"] == DEFAULT_LR and opt.defaults["warmup_steps"] == \
            DEFAULT_WARMUP and opt.defaults["betas"] == DEFAULT_BETAS == (0.92, 0.999), name
        assert booster.standardizer is not None, name


def _trained(mode: str, n: int = 4, rounds: int = 6) -> SGB:
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 6), n_learners=n, mode=mode)
    x, y = regression_stream(rounds * 16, seed=2)
    for t in range(rounds):
        booster.learn(x[t * 16:(t + 1) * 16], y[t * 16:(t + 1) * 16])
    return booster


def test_stacked_equals_loop_at_the_defaults():
    """The update is elementwise and the averaging scalars are one per group, equal for
    learners that step in lockstep: N optimizers and one stacked optimizer agree."""
    stacked, loop = _trained("stacked"), _trained("loop")
    for i in range(4):
        for name, value in loop.learners.learner_state(i).items():
            torch.testing.assert_close(stacked.learners.learner_state(i)[name], value,
                                       rtol=1e-5, atol=1e-6)
    groups = [opt.param_groups[0] for opt in loop.learners.optimizers]
    stacked_group = stacked.learners.optimizers[0].param_groups[0]
    for key in ("k", "weight_sum", "lr_max"):
        assert {g[key] for g in groups} == {stacked_group[key]}, key
    x = regression_stream(50, seed=5)[0]
    torch.testing.assert_close(stacked.predict(x), loop.predict(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_predicting_between_rounds_changes_nothing(mode):
    """``predict``/``evaluate``/anytime prediction read the averaged weights where they rest:
    no switch, so a run that predicts every round equals one that never does, bitwise."""
    quiet, chatty = _trained(mode, rounds=0), _trained(mode, rounds=0)
    x, y = regression_stream(96, seed=2)
    for t in range(6):
        rows = slice(t * 16, (t + 1) * 16)
        quiet.learn(x[rows], y[rows])
        chatty.learn(x[rows], y[rows])
        chatty.predict(x[:8])
        chatty.predict(x[:8], n_learners=2)
        chatty.evaluate(x[:8], y[:8])
    assert_same(quiet.state_dict(), chatty.state_dict())


def test_the_switch_moves_the_parameters_in_place():
    """No copy of the parameters per round: the same tensors, written in place."""
    booster = _trained("stacked", rounds=2)
    pointers = [p.data_ptr() for p in booster.learners.parameters()]
    x, y = regression_stream(16, seed=9)
    booster.learn(x, y)
    assert [p.data_ptr() for p in booster.learners.parameters()] == pointers


@pytest.mark.parametrize("mode", ["stacked", "loop"])
@pytest.mark.parametrize("where", ["forward", "after_step", "interrupt"])
def test_a_round_that_raises_after_the_switch_changes_nothing(mode, where, monkeypatch):
    """Whatever raises inside a round, the learners are back at their averaged weights,
    bitwise, with the optimizer state and averaging scalars as they were; the next round
    equals the uninterrupted run's."""
    booster, reference = _trained(mode), _trained(mode)
    before = copy.deepcopy(booster.state_dict())
    x, y = regression_stream(16, seed=7)
    error = KeyboardInterrupt if where == "interrupt" else RuntimeError

    def fail(*args, **kwargs):
        raise error("injected")

    target = "after_step" if where != "forward" else "learner_loss_grad"
    with monkeypatch.context() as patch:
        patch.setattr(booster, target, fail)
        with pytest.raises(error, match="injected"):
            booster.learn(x, y)
    assert_same(booster.state_dict(), before)
    assert all(not opt.param_groups[0]["train_mode"] for opt in booster.learners.optimizers)
    booster.learn(x, y)
    reference.learn(x, y)
    assert_same(booster.state_dict(), reference.state_dict())


def test_stagewise_switches_only_the_stage_it_trains():
    """Frozen stages keep their averaged weights bitwise while a later stage learns."""
    torch.manual_seed(0)
    gb = StagewiseGB(lambda: TwoLayerNet(5, 4), n_learners=3, step=0.5)
    x, y = regression_stream(64, seed=3)
    for t in range(4):
        gb.learn(x[t * 16:(t + 1) * 16], y[t * 16:(t + 1) * 16])
    gb.next_stage()
    frozen = copy.deepcopy(gb.learners.learner_state(0))
    for t in range(4):
        gb.learn(x[t * 16:(t + 1) * 16], y[t * 16:(t + 1) * 16])
    assert_same(gb.learners.learner_state(0), frozen)
    assert gb.learners.optimizers[1].param_groups[0]["k"] == 4


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_export_equals_predict_on_the_averaged_weights(mode):
    booster = _trained(mode)
    x = regression_stream(40, seed=11)[0]
    exported = booster.export()
    with torch.no_grad():
        torch.testing.assert_close(exported(x), booster.predict(x), rtol=1e-5, atol=1e-5)


def test_a_resumed_booster_continues_and_exports_as_the_original():
    original = _trained("stacked")
    resumed = SGB(lambda: TwoLayerNet(5, 6), n_learners=4)
    resumed.load_state_dict(copy.deepcopy(original.state_dict()))
    x, y = regression_stream(48, seed=4)
    for t in range(3):
        original.learn(x[t * 16:(t + 1) * 16], y[t * 16:(t + 1) * 16])
        resumed.learn(x[t * 16:(t + 1) * 16], y[t * 16:(t + 1) * 16])
    assert_same(original.state_dict(), resumed.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(resumed.export()(x), original.predict(x), rtol=1e-5,
                                   atol=1e-5)


def test_stepping_the_container_at_its_averaged_weights_is_refused_in_our_words():
    booster = _trained("stacked", rounds=1)
    out = booster.learners(torch.randn(4, 5))
    with pytest.raises(ValueError, match="learning_point"):
        booster.learners.step(out.sum())


class _Mean(Booster):
    """A user's booster: the mean of the learners' outputs, each fitting the label."""

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        return torch.cat([y0.unsqueeze(0), y0 + h.cumsum(0) / torch.arange(
            1, h.shape[0] + 1, dtype=h.dtype).view(-1, 1, 1)])

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        return (z - partials[0]).expand_as(h)


@pytest.mark.parametrize("build", [
    lambda: SingleLearner(lambda: TwoLayerNet(5, 16), stall_window=None),
    lambda: _Mean(lambda: TwoLayerNet(5, 8), n_learners=3, y0="mean", stall_window=None),
], ids=["SingleLearner", "user_booster"])
def test_every_model_standardises_by_default(build):
    """The same learner on raw features (scale 1e3, offset 50) and on standardised ones ends
    within 2 % of the same test loss: the base class standardises for every model."""
    x, y = regression_stream(6000, seed=6)
    train, test = slice(0, 5000), slice(5000, None)
    mean, std = x[train].mean(0), x[train].std(0)
    raw = x * 1e3 + 50.0
    losses = {}
    for name, features in (("raw", raw), ("scaled", (x - mean) / std)):
        torch.manual_seed(0)
        model = build()
        for t in range(0, 5000, 32):
            model.learn(features[t:t + 32], y[t:t + 32])
        losses[name] = model.evaluate(features[test], y[test])["loss"]
    assert losses["raw"] == pytest.approx(losses["scaled"], rel=0.02), losses
    assert losses["scaled"] < 0.6 * float(y[test].var()) / 2  # and it learnt


def _stall_text(scale: float) -> str:
    """The stall warnings of a booster that cannot learn (rate 0) on its own units, fed a
    regression stream multiplied by ``scale``."""
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, standardize=False, stall_window=64,
                  optimizer_kwargs={"lr": 0.0})
    x, y = regression_stream(512, seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in range(0, 512, 16):
            booster.learn(x[t:t + 16] * scale, y[t:t + 16] * scale)
    return " ".join(str(w.message) for w in caught)


def test_the_stall_hint_names_the_optimizer_and_unscaled_inputs():
    """Features and labels 1e4 times unit scale are named as the likely cause; on unit-scale
    inputs the same stall is not blamed on the scale."""
    text = _stall_text(1e4)
    assert "schedule-free lr=0" in text and "standardize=True" in text
    assert "features of root mean square up to" in text and "labels of root mean square up" in text
    unit = _stall_text(1.0)
    assert "schedule-free lr=0" in unit and "standardize" not in unit


def test_off_unit_scale_by_hand():
    """A column of root mean square 20 (values ±20), labels of 0.005, all within bounds."""
    from torchboost.boosters.scaling import off_unit_scale

    x = torch.tensor([[20.0, 1.0], [-20.0, -1.0]])
    assert off_unit_scale(x, torch.tensor([0.005, -0.005])) == (
        "features of root mean square up to 20 and labels of root mean square up to 0.005")
    two_outputs = torch.tensor([[1.0, 30.0], [-1.0, -30.0]])  # one output far off, by output
    assert off_unit_scale(x / 20, two_outputs) == "labels of root mean square up to 30"
    assert off_unit_scale(x / 20, torch.tensor([1.0, -3.0])) == ""
    assert off_unit_scale(x / 1e4, None) == "features of root mean square up to 0.002"
    assert off_unit_scale(torch.zeros(2, 3), torch.zeros(2)) == ""


def _betas_of(booster) -> set:
    return {tuple(group["betas"]) for opt in booster.learners.optimizers
            for group in [opt.defaults, *opt.param_groups]}


def test_a_state_of_the_rule_before_beta_092_resumes_as_it_was_saved():
    """A state saved by the default rule at schedule-free's own β₁ = 0.9 (a checkpoint, a
    pickled estimator) loads into today's default booster, which adopts 0.9 and trains on as
    the saved one would; other differences are still refused, and a refused load leaves the
    booster's betas as they were."""
    def make(**options):
        torch.manual_seed(0)
        return SGB(lambda: TwoLayerNet(3, 4), n_learners=2, **options)

    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(8, 3, generator=g), torch.randn(8, generator=g)) for _ in range(4)]
    old = make(optimizer_kwargs={"betas": (0.9, 0.999)})  # the rule before, written out
    old.learn(*batches[0])
    resumed = make()
    resumed.load_state_dict(old.state_dict())
    assert _betas_of(resumed) == {(0.9, 0.999)} and resumed.config() == old.config()
    for x, y in batches[1:]:
        old.learn(x, y), resumed.learn(x, y)
    assert_same(resumed.state_dict(), old.state_dict())

    explicit = make(optimizer_kwargs={"lr": 0.05})  # the package's β₁ too, but not the rule
    damaged = dict(old.state_dict())
    damaged["label_statistic_sum"] = torch.zeros(5, dtype=torch.float64)
    for target, state in ((make(optimizer_kwargs={"betas": (0.8, 0.999)}), old.state_dict()),
                          (make(), explicit.state_dict()), (make(), damaged)):
        before = (_betas_of(target), target.config())
        with pytest.raises(ValueError, match="nothing was loaded"):
            target.load_state_dict(state)
        assert (_betas_of(target), target.config()) == before


@pytest.mark.parametrize("betas", [(1.2, 0.9), (1.0, 0.999), (-0.1, 0.999), (0.9, 1.5), (0.9,),
                                   0.95, (float("nan"), 0.9), "ab"])
def test_bad_betas_are_refused_when_the_booster_is_built(betas):
    with pytest.raises(ValueError, match=r"betas must be two numbers in \[0, 1\)"):
        SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer_kwargs={"betas": betas})


def test_betas_given_as_a_list_are_the_same_configuration_as_a_tuple():
    as_list = SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer_kwargs={"betas": [0.9, 0.99]})
    as_tuple = SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer_kwargs={"betas": (0.9, 0.99)})
    assert _betas_of(as_list) == {(0.9, 0.99)}
    as_tuple.load_state_dict(as_list.state_dict())
