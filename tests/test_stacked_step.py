"""The stacked schedule-free learners' eager step (torchboost/boosters/stacked_step.py): the
``schedulefree`` package's ``AdamWScheduleFree.step`` in seven multi-tensor operations, taken by
a default stacked round wherever it is the package's step, and nowhere else."""

from __future__ import annotations

import copy
import functools

import pytest
import schedulefree
import torch

from torchboost import SGB, TwoLayerNet
from torchboost.boosters import stacked_step
from torchboost.boosters.guards import DivergenceError
from torchboost.boosters.stacked_step import (
    applies,
    foreach_schedule_free_step,
    set_counters,
    step_inputs,
)
from torchboost.testing import assert_same

SHAPES = [(4, 3, 5), (4, 3), (4, 1, 3), (4, 1)]


def _pair(dtype: torch.dtype) -> tuple[schedulefree.AdamWScheduleFree, ...]:
    """Two package optimizers over equal stacked tensors in two groups (rates 0.1 and 0.02,
    the second with weight decay and a warm-up), each stepped once by the package (its state
    created), in train mode."""
    torch.manual_seed(0)
    made = []
    tensors = [torch.randn(shape, dtype=dtype) for shape in SHAPES]
    grads = [torch.randn(shape, dtype=dtype) for shape in SHAPES]
    for _ in range(2):
        params = [torch.nn.Parameter(t.clone()) for t in tensors]
        opt = schedulefree.AdamWScheduleFree(
            [{"params": params[:2]},
             {"params": params[2:], "lr": 0.02, "weight_decay": 0.1, "warmup_steps": 3}],
            lr=0.1, betas=(0.9, 0.99))
        opt.train()
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        opt.step()
        made.append(opt)
    return tuple(made)


def test_the_cpu_constants_give_the_numbers_the_number_operands_give(monkeypatch):
    """On a CPU the step's β2, ε·sqrt(b) and decay are 0-dim tensors of the parameters' dtype
    (four ATen operations fewer per tensor each): five steps equal, bit for bit, the same steps
    with the numbers as foreach's own operands (as on a GPU), in float32 and float64, a group
    with weight decay included."""
    for dtype in (torch.float32, torch.float64):
        states = []
        for numbers in (False, True):
            _, ours = _pair(dtype)
            if numbers:
                monkeypatch.setattr(stacked_step, "_operand", lambda value, like: value)
                monkeypatch.setattr(stacked_step, "_add_number",
                                    lambda tensors, value: torch._foreach_add_(tensors, value))
            params = [p for group in ours.param_groups for p in group["params"]]
            for step in range(5):
                torch.manual_seed(step + 1)
                for p in params:
                    p.grad = torch.randn_like(p)
                inputs = step_inputs(ours, [p.detach().clone() for p in params])
                foreach_schedule_free_step(inputs)
                set_counters(ours, inputs.counters)
            states.append([t.detach().clone() for p in params
                           for t in (p, ours.state[p]["z"], ours.state[p]["exp_avg_sq"])])
            monkeypatch.undo()
        assert all(torch.equal(a, b) for a, b in zip(*states, strict=True))


def test_an_epsilon_beyond_float32_makes_the_step_zero_as_the_packages():
    """ε = 1e39 in float32 (beyond its largest number): the package's denominators round to
    inf and its step is 0 but for the average's pull toward ``z``; the eager step (whose CPU
    form adds ε as an ``alpha``, which torch refuses beyond the dtype) does the same, and a
    default booster keeps learning with it."""
    package, ours = _pair(torch.float32)
    for opt in (package, ours):
        for group in opt.param_groups:
            group["eps"] = 1e39
    params = [p for group in ours.param_groups for p in group["params"]]
    theirs = [p for group in package.param_groups for p in group["params"]]
    for p, q in zip(params, theirs, strict=True):
        p.grad, q.grad = torch.ones_like(p), torch.ones_like(q)
    z_before = [ours.state[p]["z"].clone() for p in params]
    package.step()
    inputs = step_inputs(ours, [p.detach().clone() for p in params])
    foreach_schedule_free_step(inputs)
    for p, q in zip(params, theirs, strict=True):
        torch.testing.assert_close(p.detach(), q.detach())
    for p, z in zip(params[:2], z_before[:2], strict=True):  # no decay: z stands still
        assert torch.equal(ours.state[p]["z"], z)
    booster = SGB(lambda: TwoLayerNet(4, 3), n_learners=2, optimizer_kwargs={"eps": 1e39})
    x, y = torch.randn(16, 4), torch.randn(16)
    for _ in range(300):  # past sqrt(b) ≈ 0.34, where 1e39 · sqrt(b) passes float32's largest
        booster.learn(x, y)


def test_the_eager_step_is_the_packages_step_to_rounding():
    """Five steps on the same gradients: the parameters (``y``), ``z`` and the second moments
    agree with the package's to a few units in the last place (float64: the same arithmetic
    rearranged), the groups' counters exactly, and the gradients are left as given."""
    for dtype, tolerance in ((torch.float64, 1e-13), (torch.float32, 1e-5)):
        package, ours = _pair(dtype)
        assert applies(ours)
        for step in range(5):
            torch.manual_seed(step + 1)
            grads = [torch.randn(shape, dtype=dtype) for shape in SHAPES]
            params = [p for group in ours.param_groups for p in group["params"]]
            for p, q, g in zip(params, (p for group in package.param_groups
                                        for p in group["params"]), grads, strict=True):
                p.grad, q.grad = g.clone(), g.clone()
            before = [p.detach().clone() for p in params]
            package.step()
            inputs = step_inputs(ours, before)
            foreach_schedule_free_step(inputs)
            set_counters(ours, inputs.counters)
            for p, g in zip(params, grads, strict=True):
                assert torch.equal(p.grad, g)
            for q, p in zip((p for group in package.param_groups for p in group["params"]),
                            params, strict=True):
                for theirs, mine in ((q, p), (package.state[q]["z"], ours.state[p]["z"]),
                                     (package.state[q]["exp_avg_sq"],
                                      ours.state[p]["exp_avg_sq"])):
                    torch.testing.assert_close(mine.detach(), theirs.detach(), rtol=tolerance,
                                               atol=tolerance)
            for theirs, mine in zip(package.param_groups, ours.param_groups, strict=True):
                assert {k: v for k, v in mine.items() if k != "params"} == {
                    k: v for k, v in theirs.items() if k != "params"}


def test_one_entry_by_hand():
    """One weight, by the package's formulas: ``v = β2 v + (1 − β2) g²``, ``ĝ = g / (sqrt(v /
    (1 − β2^(k+1))) + ε)``, ``y ← (1 − c) y + c z + lr (β1 (1 − c) − 1) ĝ``, ``z ← z − lr ĝ``
    with ``c = 1 / (k + 1)`` (constant rate, ``r = 0``)."""
    y, z, v, g, lr, beta1, beta2, eps = 1.0, 0.5, 0.04, 0.3, 0.1, 0.9, 0.99, 1e-8
    p = torch.nn.Parameter(torch.tensor([y], dtype=torch.float64))
    opt = schedulefree.AdamWScheduleFree([p], lr=lr, betas=(beta1, beta2), eps=eps)
    opt.train()
    opt.state[p]["z"] = torch.tensor([z], dtype=torch.float64)
    opt.state[p]["exp_avg_sq"] = torch.tensor([v], dtype=torch.float64)
    group = opt.param_groups[0]
    group["k"], group["weight_sum"], group["lr_max"] = 1, lr ** 2, lr  # one step taken
    p.grad = torch.tensor([g], dtype=torch.float64)
    inputs = step_inputs(opt, [p.detach().clone()])
    foreach_schedule_free_step(inputs)
    v_new = beta2 * v + (1 - beta2) * g * g
    g_hat = g / ((v_new / (1 - beta2 ** 2)) ** 0.5 + eps)
    c = 1 / 2
    assert abs(float(opt.state[p]["exp_avg_sq"]) - v_new) < 1e-17
    y_new = (1 - c) * y + c * z + lr * (beta1 * (1 - c) - 1) * g_hat
    assert abs(float(p.detach()) - y_new) < 1e-15
    assert abs(float(opt.state[p]["z"]) - (z - lr * g_hat)) < 1e-15


def _spied(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = stacked_step.foreach_schedule_free_step
    monkeypatch.setattr(stacked_step, "foreach_schedule_free_step",
                        lambda inputs: calls.append(1) or original(inputs))
    return calls


def test_a_default_stacked_round_takes_it_and_the_loop_the_package(monkeypatch):
    calls = _spied(monkeypatch)
    x, y = torch.randn(16, 5), torch.randn(16)
    for mode, expected in (("stacked", 2), ("loop", 0)):
        calls.clear()
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode)
        for _ in range(3):  # the first round creates the optimizer state: the package's step
            booster.learn(x, y)
        assert len(calls) == expected, mode


def test_hooks_or_a_replaced_step_take_the_package(monkeypatch):
    """A step hook or an ``opt.step`` replaced on the instance runs as the user set it up; a
    learning-rate scheduler's wrapper (it only counts the calls) does not stand in the way."""
    calls = _spied(monkeypatch)
    x, y = torch.randn(16, 5), torch.randn(16)
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3)
    booster.learn(x, y)
    opt = booster.learners.engine.optimizers[0]
    hooked = []
    handle = opt.register_step_post_hook(lambda *_: hooked.append(1))
    booster.learn(x, y)
    handle.remove()
    assert (len(calls), len(hooked)) == (0, 1)
    replaced = []
    package_step = opt.step
    opt.step = lambda *args: replaced.append(1) or package_step(*args)
    booster.learn(x, y)
    assert (len(calls), len(replaced)) == (0, 1)
    del opt.step

    @functools.wraps(type(opt).step)  # a user's wrapper, written as torch writes its own
    def clipped(*args, **kwargs):
        replaced.append(1)
        return type(opt).step(opt, *args, **kwargs)

    opt.step = clipped
    booster.learn(x, y)
    assert (len(calls), len(replaced)) == (0, 2)
    del opt.step
    torch.optim.lr_scheduler.StepLR(opt, step_size=100)
    booster.learn(x, y)
    assert len(calls) == 1


def test_an_optimizer_with_options_it_does_not_know_takes_the_package(monkeypatch):
    """A ``schedulefree`` whose AdamW takes options this step does not repeat (a later version
    adds ``inner_momentum``) keeps the package's step."""
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3)
    x, y = torch.randn(16, 5), torch.randn(16)
    booster.learn(x, y)
    opt = booster.learners.engine.optimizers[0]
    with booster.learners.learning_point():
        assert applies(opt)
        known = schedulefree.AdamWScheduleFree.__init__

        def later(self, params, lr=0.0025, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                  warmup_steps=0, r=0.0, weight_lr_power=2.0, foreach=True,
                  inner_momentum=0.0):
            known(self, params, lr, betas, eps, weight_decay, warmup_steps, r,
                  weight_lr_power, foreach)

        monkeypatch.setattr(schedulefree.AdamWScheduleFree, "__init__", later)
        stacked_step._known_options.cache_clear()
        assert not applies(opt)
    monkeypatch.undo()
    stacked_step._known_options.cache_clear()


def test_a_rejected_eager_step_leaves_the_learners_as_they_were():
    """A rate of 1e30 moves the learners by far more than 1e6 times their norm: checks 3-4
    reject the step and the round is undone bitwise, optimizer counters included."""
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3)
    x, y = torch.randn(16, 5), torch.randn(16)
    booster.learn(x, y), booster.learn(x, y)
    for group in booster.learners.engine.optimizers[0].param_groups:
        group["lr"] = 1e30
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match="changed its parameters by more than"):
        booster.learn(x, y)
    assert_same(booster.state_dict(), before)
