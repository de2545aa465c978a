"""``compile=True``: a round's arithmetic runs through ``torch.compile`` as one function
(torchboost/boosters/compiled_round.py), or where that does not apply the standardiser update and
the stacked learners' schedule-free step with its guards apart (torchboost/boosters/
stacked_step.py, torchboost/boosters/scaling.py), and gives the eager results, raises the eager
errors and rolls back as eagerly."""

from __future__ import annotations

import copy

import pytest
import torch
from boost_helpers import assert_identical, compiles, ops_and_syncs
from torch import nn

from torchboost import (
    SGB,
    DivergenceError,
    ResidualSGB,
    SingleLearner,
    TwoLayerNet,
    WeakLearners,
)


def _pair(**kwargs):
    torch.manual_seed(0)
    eager = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, **kwargs)
    compiled = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, compile=True, **kwargs)
    compiled.load_state_dict(eager.state_dict())
    return eager, compiled


def _optimizer_state(booster: SGB) -> tuple[list, list]:
    opt = booster.learners.engine.optimizers[0]
    groups = [{k: v for k, v in group.items() if k != "params"} for group in opt.param_groups]
    return groups, [dict(opt.state[p]) for group in opt.param_groups for p in group["params"]]


@compiles
@pytest.mark.parametrize("chained", [False, True])
def test_compiled_rounds_equal_eager_ones_at_the_defaults(chained):
    # schedule-free AdamW at the default rate rule, standardised features and labels, an
    # averaging window (the weight sum capped after the step) and a schedule moving the rate
    # and a stall window ending within the rounds (the monitor's sums from the compiled round)
    eager, compiled = _pair(chained=chained, averaging_window=3, stall_window=40,
                            lr_scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(
                                opt, step_size=2, gamma=0.5))
    assert compiled.learners.compiled and not eager.learners.compiled
    g = torch.Generator().manual_seed(1)
    for _ in range(6):
        x, y = torch.randn(16, 5, generator=g) * 30 + 7, torch.randn(16, generator=g) * 1e3
        assert torch.allclose(compiled.learn(x, y), eager.learn(x, y), rtol=1e-5, atol=1e-3)
    for a, b in zip(compiled.parameters(), eager.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    for a, b in zip(compiled.buffers(), eager.buffers(), strict=True):
        assert torch.allclose(a, b, rtol=1e-6)
    (groups_c, states_c), (groups_e, states_e) = _optimizer_state(compiled), _optimizer_state(
        eager)
    assert groups_c == groups_e  # k, weight_sum, lr_max, lr: the package's arithmetic, exactly
    assert groups_c[0]["k"] == 6 and groups_c[0]["train_mode"] is False  # at rest: averaged
    for a, b in zip(states_c, states_e, strict=True):
        assert a.keys() == b.keys() == {"z", "exp_avg_sq"}
        assert all(torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-5) for k in a)
    assert torch.allclose(compiled.predict(x), eager.predict(x), rtol=1e-5, atol=1e-3)
    windows = compiled.stall.last_window, eager.stall.last_window
    assert windows[0].keys() == windows[1].keys() == {"anytime", "constant"}
    assert all(torch.allclose(windows[0][k], windows[1][k], rtol=1e-5) for k in windows[0])
    assert compiled.stall.seen == eager.stall.seen == 96 and _fused(compiled)
    clone = copy.deepcopy(compiled)  # the compiled functions are not copied; the clone compiles
    assert clone.learners.compiled
    assert torch.allclose(clone.learn(x, y), eager.learn(x, y), rtol=1e-5, atol=1e-3)


def _layout(t: torch.Tensor) -> list[int]:
    """``t``'s strides along its dimensions of more than one entry (the others never step)."""
    return [stride for size, stride in zip(t.shape, t.stride(), strict=True) if size > 1]


def _fused(booster) -> bool:
    """Whether the booster's rounds ran as one compiled function (compiled_round.py)."""
    return booster._transaction._compiled_round._compiled is not None


@compiles
@pytest.mark.parametrize("build, labels", [
    (lambda compile: SGB(lambda: TwoLayerNet(5, 4, 3), n_learners=3, loss="softmax",
                         n_outputs=3, step="learned", compile=compile), "classes"),
    (lambda compile: ResidualSGB(lambda: TwoLayerNet(5, 4), n_learners=3, loss="absolute",
                                 compile=compile), "numbers"),
    (lambda compile: SingleLearner(lambda: TwoLayerNet(5, 4), compile=compile), "numbers"),
], ids=["newton-learned-step", "residual-sgb", "single-learner"])
def test_the_whole_compiled_round_equals_the_eager_one(build, labels):
    torch.manual_seed(0)
    eager = build(False)
    torch.manual_seed(0)
    compiled = build(True)
    compiled.load_state_dict(eager.state_dict())
    g = torch.Generator().manual_seed(2)
    for _ in range(5):
        x = torch.randn(16, 5, generator=g) * 30 + 7
        y = (torch.randint(0, 3, (16,), generator=g) if labels == "classes"
             else torch.randn(16, generator=g) * 1e3)
        assert torch.allclose(compiled.learn(x, y), eager.learn(x, y), rtol=1e-5, atol=1e-3)
    assert _fused(compiled)
    assert ops_and_syncs(lambda: compiled.learn(x, y))[1] == 1  # its checks, read once
    eager.learn(x, y)
    for a, b in zip(compiled.parameters(), eager.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
        assert _layout(a.grad) == _layout(a) == _layout(b.grad)  # as the backward lays it out
    for a, b in zip(compiled.buffers(), eager.buffers(), strict=True):
        assert torch.allclose(a, b, rtol=1e-5)
    assert _optimizer_state(compiled)[0] == _optimizer_state(eager)[0]


@compiles
@pytest.mark.parametrize("corrupt, message", [
    (lambda engine: engine.stacked_params["3__bias"][1].fill_(float("inf")),
     r"learner 1 diverged: its output h_i\(x\) is NaN or inf"),
    (lambda engine: engine.stacked_params["3__weight"][2].fill_(1e10),
     r"learner 2 diverged: its gradient is NaN, inf or too large to square"),
    (lambda engine: [group.update(lr=1e30) for group in engine.optimizers[0].param_groups],
     r"learner 0 diverged: the optimizer step changed its parameters by more than"),
], ids=["check-1", "check-2", "checks-3-4"])
def test_the_whole_compiled_round_raises_the_eager_errors_and_rolls_back(corrupt, message):
    x, y = torch.randn(16, 5), torch.randn(16)
    for compile in (False, True):
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=4, standardize=False, step=0.5,
                      compile=compile)
        booster.learn(x, y), booster.learn(x, y)  # the first step creates the state eagerly
        with torch.no_grad():
            corrupt(booster.learners.engine)
        before = copy.deepcopy(booster.state_dict())
        with pytest.raises(DivergenceError, match=message):
            booster.learn(x, y)
        assert_identical(booster.state_dict(), before)
        assert booster.rounds == 2 and _fused(booster) is compile


@compiles
@pytest.mark.parametrize("change", ["dropout", "hook", "container hook", "tensor hook",
                                    "global hook", "convolution"])
def test_the_round_compiles_whole_only_where_it_is_the_eager_one_and_faster(change):
    # a compiled Dropout draws other masks than the eager one; a hook runs the user's code; a
    # convolution was slower compiled through vmap and no faster on the direct path
    torch.manual_seed(0)
    factory = {"dropout": lambda: nn.Sequential(nn.Linear(5, 4), nn.Dropout(0.1),
                                                nn.Linear(4, 1)),
               "convolution": lambda: nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten(),
                                                    nn.Linear(6, 1))}.get(
        change, lambda: TwoLayerNet(5, 4))
    booster = SGB(factory, n_learners=3, compile=True)
    assert booster.learners.engine.direct
    shape = (8, 1, 5) if change == "convolution" else (8, 5)
    calls = []
    if change == "hook":  # on a learner's layer
        booster.learners.engine.template[2].register_forward_hook(lambda *_: calls.append(1))
    if change == "container hook":
        booster.learners.register_forward_hook(lambda *_: calls.append(1))
    if change == "tensor hook":  # gradient clipping, say
        booster.learners.engine.stacked_params["1__weight"].register_hook(
            lambda grad: calls.append(1))
    handle = (nn.modules.module.register_module_forward_hook(lambda *_: None)
              if change == "global hook" else None)
    try:
        for _ in range(3):
            booster.learn(torch.randn(shape), torch.randn(8))
    finally:
        if handle is not None:
            handle.remove()
    assert not _fused(booster)
    assert booster._transaction._stacked_step._compiled is not None  # the step, compiled
    assert (len(calls) >= 3) is ("hook" in change and change != "global hook")  # every round
    # ran the user's hook


class Scaled(nn.Module):
    """A linear learner on ``scale · x`` (``scale`` a buffer: one learner can blow up)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 1)
        self.register_buffer("scale", torch.tensor(1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x * self.scale)


@compiles
def test_the_compiled_step_raises_the_eager_errors_and_rolls_back():
    torch.manual_seed(0)
    booster = SGB([Scaled() for _ in range(4)], standardize=False, step=0.5, compile=True)
    x, y = torch.randn(16, 3), torch.randn(16)
    booster.learn(x, y), booster.learn(x, y)  # the first step creates the state eagerly
    # check 2: learner 2's gradient ≈ 1e20 cannot be squared in float32
    booster.learners.engine.buffer__scale[2] = 1e10
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match=r"learner 2 diverged: its gradient") as info:
        booster.learn(x, y)
    assert info.value.learner == 2
    assert_identical(booster.state_dict(), before)
    booster.learners.engine.buffer__scale[2] = 1.0
    booster.learn(x, y)
    # checks 3-4: a rate of 1e30 moves learner 0 by about 3e31 times its norm
    for group in booster.learners.engine.optimizers[0].param_groups:
        group["lr"] = 1e30
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match=r"learner 0 diverged: the optimizer step changed "
                                              "its parameters by more than"):
        booster.learn(x, y)
    assert_identical(booster.state_dict(), before)
    assert booster.rounds == 3


def test_compile_needs_the_stacked_mode():
    with pytest.raises(ValueError, match="compile=True compiles the stacked computation"):
        WeakLearners(lambda: torch.nn.Linear(2, 1), 2, mode="loop", compile=True)
    with pytest.raises(ValueError, match="compile must be True or False"):
        WeakLearners(lambda: torch.nn.Linear(2, 1), 2, compile="yes")  # type: ignore[arg-type]


def test_a_booster_checks_compile_and_takes_it_from_built_learners():
    with pytest.raises(ValueError, match="compile must be True or False"):
        SGB(WeakLearners(lambda: TwoLayerNet(3, 2), 2), compile="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="built already, not compiled: pass compile=True"):
        SGB(WeakLearners(lambda: TwoLayerNet(3, 2), 2), compile=True)
    booster = SGB(WeakLearners(lambda: TwoLayerNet(3, 2), 2, compile=True))
    assert booster.learners.compiled and booster.standardizer.compiled  # the whole round


@compiles
def test_a_changing_batch_size_compiles_once_more_not_every_round():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, compile=True)
    booster.learn(torch.randn(2, 5), torch.randn(2))  # the first step creates the state
    booster.learn(torch.randn(2, 5), torch.randn(2))
    booster.learn(torch.randn(3, 5), torch.randn(3))  # a new size: symbolic from now on
    graphs = counters["stats"]["unique_graphs"]
    for size in (4, 7, 16, 5, 40):
        booster.learn(torch.randn(size, 5), torch.randn(size))
    assert counters["stats"]["unique_graphs"] == graphs


def test_the_compiled_step_leaves_what_it_does_not_repeat_to_the_package():
    from torchboost.boosters.stacked_step import applies as step_applies

    torch.manual_seed(0)
    for dtype, applies in ((torch.float32, True), (torch.bfloat16, False)):
        booster = SGB(lambda: TwoLayerNet(3, 2), n_learners=2, standardize=False).to(dtype)
        booster.learn(torch.randn(4, 3, dtype=dtype), torch.randn(4, dtype=dtype))
        opt = booster.learners.engine.optimizers[0]
        with booster.learners.learning_point():
            assert step_applies(opt) is applies
            handle = opt.register_step_post_hook(lambda *_: None)  # a user's hook: the package
            assert not step_applies(opt)
            handle.remove()


def test_stagewise_gb_says_compile_does_not_apply():
    from torchboost import StagewiseGB

    with pytest.raises(ValueError, match="StagewiseGB steps one learner at a time"):
        StagewiseGB(lambda: TwoLayerNet(3, 2), n_learners=2, compile=True)


def test_where_torch_cannot_compile_the_round_runs_eagerly_and_says_so(monkeypatch):
    from torch._dynamo.exc import BackendCompilerFailed

    def no_compiler(function, **kwargs):
        def fails(*args):
            raise BackendCompilerFailed("inductor", RuntimeError("no C++ compiler found"), None)
        return fails

    monkeypatch.setattr(torch, "compile", no_compiler)
    eager, compiled = _pair()
    x, y = torch.randn(16, 5), torch.randn(16)
    eager.learn(x, y), compiled.learn(x, y)  # the first round steps eagerly (state created)
    with pytest.warns(RuntimeWarning, match="could not compile") as said:
        assert torch.equal(compiled.learn(x, y), eager.learn(x, y))
    # the whole round first, then its two parts apart
    assert [str(w.message).split()[4] for w in said] == ["_round_body", "prepare",
                                                           "schedule_free_step"]
    assert "(RuntimeError: no C++ compiler found); it runs eagerly" in str(said[0].message)
    assert compiled._transaction._compiled_round._compiled.failed  # not tried again
    assert compiled._transaction._stacked_step._compiled.failed
    assert compiled.standardizer._prepare.failed
    for _ in range(2):  # said once; the same numbers as eager, bit for bit
        assert torch.equal(compiled.learn(x, y), eager.learn(x, y))
    assert_identical(compiled.state_dict(), eager.state_dict())
