"""SGB's default step keeps the total step N·η within STEP_BUDGET (the rule, what it fixes, and
states saved under the paper's uncapped step)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchboost import SGB, StagewiseGB, TwoLayerNet
from torchboost.boosters.default_lr import newton_output_scale
from torchboost.boosters.gradient_boosting import STEP_BUDGET
from torchboost.data import load_abalone
from torchboost.harness import DATASETS, LearnerConfig
from torchboost.testing import assert_same


def _net() -> nn.Module:
    return TwoLayerNet(3, 4)


@pytest.mark.parametrize(("n", "squared", "newton"), [
    (1, 0.25, 0.5), (8, 0.25, 0.5), (12, 0.25, 0.5), (16, 0.25, 0.375), (24, 0.25, 0.25),
    (32, 0.1875, 0.1875), (64, 0.09375, 0.09375), (128, 0.046875, 0.046875)])
def test_the_default_step_is_the_papers_capped_at_the_budget_over_n(n, squared, newton):
    assert STEP_BUDGET == 6.0
    assert SGB(_net, n_learners=n).step == squared
    assert SGB(_net, "logistic", targets="newton", n_learners=n).step == newton
    # gradient targets: N·η·β ≤ 6, so logistic (β = ¼, η = 1) and softmax (β = ½, η = ½) are
    # capped from N = 24 on, as squared loss is
    assert SGB(_net, "logistic", targets="gradient", n_learners=n).step == min(1.0, 24.0 / n)
    assert SGB(_net, "softmax", n_outputs=3, targets="gradient", n_learners=n
               ).step == min(0.5, 12.0 / n)
    assert SGB(_net, "softmax", n_outputs=3, n_learners=n).step == newton  # Newton by default


def test_an_explicit_step_a_learned_step_and_stagewise_gb_keep_the_papers():
    assert SGB(_net, n_learners=64, step=0.25).step == 0.25
    learned = SGB(_net, n_learners=64, step="learned")
    assert learned.steps(64).tolist() == pytest.approx([0.25] * 64)  # it finds its own scale
    assert StagewiseGB(_net, n_learners=64).step == 0.25  # one stage at a time: no overshoot


def test_linear_learners_output_rate_follows_the_capped_step():
    """The rule divides linear learners' rate by √(N·η) under Newton targets (schedule-free
    learners; N·η under Adam): the capped η's."""
    booster = SGB(lambda: nn.Linear(3, 1), "logistic", targets="newton", n_learners=64)
    assert booster.step == 0.09375
    assert booster.learners.optimizer_spec.output_scale == newton_output_scale(64, 0.09375)
    assert newton_output_scale(64, 0.09375) == pytest.approx(6 ** -0.5)
    adam = SGB(lambda: nn.Linear(3, 1), "logistic", n_learners=64, optimizer=torch.optim.Adam)
    assert adam.learners.optimizer_spec.output_scale == pytest.approx(1 / 6)


def test_a_state_saved_with_the_full_division_resumes_as_it_was_saved():
    """A state saved when the rule divided schedule-free linear learners' rate by N·η (1/6 for
    64 learners at η = 6/64) loads into a default booster, which adopts that scale and trains
    on exactly as the saved one."""
    def make(**options):
        torch.manual_seed(0)
        return SGB(lambda: nn.Linear(3, 1), "logistic", n_learners=64, **options)

    batches = _batches(3, classes=True)
    old = make(lr_output_scale=1 / 6)
    old.learn(*batches[0])
    resumed = make()
    assert resumed.learners.optimizer_spec.output_scale == pytest.approx(6 ** -0.5)
    resumed.load_state_dict(old.state_dict())
    assert resumed.config() == old.config()
    for x, y in batches[1:]:
        old.learn(x, y), resumed.learn(x, y)
    assert_same(resumed.state_dict(), old.state_dict())


def _abalone_one_pass(n: int, seed: int, **options) -> float:
    """Test MSE after one pass of abalone, as ``experiments/step_budget.py`` runs it (its
    loader's rows: the training rows in a permutation, at most 2,000 test rows)."""
    ds = load_abalone()
    rows = torch.Generator().manual_seed(0)
    train = torch.randperm(len(ds.y_train), generator=rows)
    test = torch.randperm(len(ds.y_test), generator=rows)[:2000]
    torch.manual_seed(seed)
    factory = LearnerConfig(**DATASETS["abalone"].learner).factory(ds, 1)
    booster = SGB(factory, "squared", n_learners=n, stall_window=None, **options)
    order = torch.Generator().manual_seed(1 + 1000 * seed)
    for batch in torch.randperm(len(train), generator=order).split(32):
        booster.learn(ds.x_train[train[batch]], ds.y_train[train[batch]])
    prediction = booster.predict(ds.x_test[test]).double().flatten()
    return float((prediction - ds.y_test[test]).square().mean())


def test_64_learners_that_overshoot_at_the_papers_step_learn_at_the_default():
    """Abalone, 64 of the paper's one-unit learners, one pass, four seeds: at η = ¼ the
    ensemble overshoots on every seed (MSE 6.4 to 28.7; predicting the training mean scores
    9.9); at the default η = 6/64 it is where 8 learners are (5.4 to 5.7)."""
    paper = [_abalone_one_pass(64, seed, step=0.25) for seed in range(4)]
    default = [_abalone_one_pass(64, seed) for seed in range(4)]
    eight = [_abalone_one_pass(8, seed) for seed in range(4)]
    assert all(p > 1.1 * d for p, d in zip(paper, default, strict=True)), (paper, default)
    assert sum(paper) > 1.5 * sum(default) and sum(default) < 1.1 * sum(eight), (
        paper, default, eight)


def _batches(width: int, classes: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(4):
        x = torch.randn(16, width, generator=g)
        out.append((x, (x[:, 0] > 0).long() if classes else torch.randn(16, generator=g)))
    return out


@pytest.mark.parametrize("kind", ["two_layer", "linear_newton"])
def test_a_state_saved_at_the_papers_step_resumes_as_it_was_saved(kind):
    """A default booster of 64 learners (η = 6/64) loads a state saved by the default before the
    cap (η = ¼, or ½ and a linear learner's output rate 1/32 under Newton targets), adopts its
    step and trains on exactly as the saved booster would; also with the betas of the rule
    before (β₁ = 0.9)."""
    if kind == "two_layer":
        def make(**options):
            torch.manual_seed(0)
            return SGB(_net, n_learners=64, **options)
        paper, batches = 0.25, _batches(3)
    else:
        def make(**options):
            torch.manual_seed(0)
            return SGB(lambda: nn.Linear(3, 1), "logistic", targets="newton", n_learners=64,
                       **options)
        paper, batches = 0.5, _batches(3, classes=True)
    for old_rule in ({"step": paper}, {"step": paper,
                                       "optimizer_kwargs": {"betas": (0.9, 0.999)}}):
        old = make(**old_rule)
        old.learn(*batches[0])
        resumed = make()
        assert resumed.step == 0.09375
        resumed.load_state_dict(old.state_dict())
        assert resumed.step == paper and resumed.config() == old.config()
        for x, y in batches[1:]:
            old.learn(x, y), resumed.learn(x, y)
        assert_same(resumed.state_dict(), old.state_dict())


def test_a_given_step_is_not_adopted_and_a_refused_load_keeps_the_capped_step():
    def make(**options):
        torch.manual_seed(0)
        return SGB(_net, n_learners=64, **options)

    old = make(step=0.25)
    old.learn(*_batches(3)[0])
    damaged = dict(old.state_dict())
    damaged["label_statistic_sum"] = torch.zeros(5, dtype=torch.float64)
    for target, state in ((make(step=0.09375), old.state_dict()),  # the user's η: refused
                          (make(), make(step=0.2).state_dict()),  # not the paper's η
                          (make(), damaged)):
        before = (target.step, target.config())
        with pytest.raises(ValueError, match="nothing was loaded"):
            target.load_state_dict(state)
        assert (target.step, target.config()) == before


@pytest.mark.parametrize("make", [
    lambda: SGB(_net, "absolute", n_learners=8, step=0.1),
    lambda: SGB(_net, "hinge", n_learners=8, step=0.1),
    lambda: StagewiseGB(_net, "absolute", n_learners=8, step=0.1)])
def test_a_non_smooth_loss_with_its_step_loads_its_own_state(make):
    """The paper's step is undefined for a non-smooth loss: the adoption never asks for it where
    the step was given."""
    booster = make()
    x, y = _batches(3, classes=True)[0]
    booster.learn(x, y * 2 - 1)
    before = booster.state_dict()
    booster.load_state_dict(before)
    assert_same(booster.state_dict(), before)


def test_a_refused_load_through_a_parent_module_changes_nothing():
    """A parent module's load_state_dict reaches the booster's _load_from_state_dict directly:
    a state refused there (hessian_floor differs) leaves the step, betas, output scale and
    configuration as they were, and the message names what differs."""
    def make(**options):
        torch.manual_seed(0)
        return SGB(lambda: nn.Linear(3, 1), "logistic", targets="newton", n_learners=64,
                   **options)

    old = make(step=0.5, optimizer_kwargs={"betas": (0.9, 0.999)}, hessian_floor=0.05)
    old.learn(*_batches(3, classes=True)[0])
    parent, saved = nn.ModuleDict({"b": make()}), nn.ModuleDict({"b": old})
    booster = parent["b"]
    before = (booster.step, booster.config(), booster.learners.optimizer_spec,
              [g["lr"] for g in booster.learners.optimizers[0].param_groups])
    with pytest.raises(ValueError, match="hessian_floor") as refused:
        parent.load_state_dict(saved.state_dict())
    assert "step" in str(refused.value) and "betas" in str(refused.value)
    assert (booster.step, booster.config(), booster.learners.optimizer_spec,
            [g["lr"] for g in booster.learners.optimizers[0].param_groups]) == before


def test_an_output_scale_the_user_set_is_never_adopted():
    def make(**options):
        torch.manual_seed(0)
        return SGB(lambda: nn.Linear(3, 1), "logistic", targets="newton", n_learners=64,
                   **options)

    batch = _batches(3, classes=True)[0]
    old_default = make(step=0.5)  # the rule's scale for η = ½: 1/32
    old_default.learn(*batch)
    rule_off = make(step=0.5, lr_output_scale=1.0)  # the user turned the rule's slow-down off
    rule_off.learn(*batch)
    for target, state in ((make(lr_output_scale=0.3), old_default.state_dict()),
                          (make(), rule_off.state_dict())):
        before = (target.step, target.config())
        with pytest.raises(ValueError, match="lr_output_scale"):
            target.load_state_dict(state)
        assert (target.step, target.config()) == before


def test_a_booster_pickled_before_the_default_step_flag_loads_its_own_state():
    booster = SGB(_net, n_learners=64)
    booster.learn(*_batches(3)[0])
    del booster.__dict__["_step_was_default"]  # as unpickled from a file saved before it
    state = booster.state_dict()
    booster.load_state_dict(state)
    assert_same(booster.state_dict(), state)


def test_a_refused_state_saved_in_loop_mode_leaves_an_auto_stacked_booster_stacked():
    """An auto-stacked booster adopts a loop-mode state's mode only once nothing else differs:
    StagewiseGB's state (loop) into SGB is refused for what really differs, and the booster
    stays stacked and trains as before."""
    torch.manual_seed(0)
    stagewise = StagewiseGB(_net, n_learners=4)
    stagewise.learn(*_batches(3)[0])
    booster = SGB(_net, n_learners=4)
    assert booster.learners.mode == "stacked" and stagewise.config()["mode"] == "loop"
    with pytest.raises(ValueError, match="booster: saved 'StagewiseGB'") as refused:
        booster.load_state_dict(stagewise.state_dict())
    assert "mode" not in str(refused.value)
    assert booster.learners.mode == "stacked"
    booster.learn(*_batches(3)[1])


def test_a_failed_load_after_adopting_the_loop_mode_leaves_the_booster_stacked_and_learning():
    """A fresh auto-stacked booster adopts a loop-mode state's mode before torch finds that its
    learners have another size: the refusal names the real cause, and the booster is stacked,
    unchanged and learns as before."""
    torch.manual_seed(0)
    saved = SGB(lambda: TwoLayerNet(3, 8), n_learners=4, mode="loop")
    saved.learn(*_batches(3)[0])
    booster = SGB(_net, n_learners=4)
    before = booster.state_dict()
    with pytest.raises(ValueError, match=r"nothing was loaded.*other shapes"):
        booster.load_state_dict(saved.state_dict())
    assert booster.learners.mode == "stacked"
    assert_same(booster.state_dict(), before)
    booster.learn(*_batches(3)[1])
