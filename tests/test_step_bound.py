"""The proven bound on Adam's update (torchboost/boosters/step_bound.py) and the guard's use of it:
no copies when the step is proven safe, the checked path otherwise."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchboost import SGB, TwoLayerNet
from torchboost.boosters import guards, stacked_step
from torchboost.boosters.step_bound import MomentInvariant, adam_update_bound
from torchboost.learners import Prodigy


def _adversarial_gradients(steps: int, shape: tuple[int, ...], seed: int) -> list[torch.Tensor]:
    """Magnitudes over twelve decades, long quiet stretches, then spikes of one sign: the
    sequences that push ``|m| / sqrt(v)`` towards its bound."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in range(steps):
        scale = 10.0 ** (torch.randint(-6, 7, (), generator=g).item())
        grad = scale * torch.randn(shape, generator=g)
        if 20 <= t % 60 < 40:
            grad = 1e-9 * grad  # quiet: v decays faster than m ...
        elif t % 60 == 40:
            grad = grad.abs() * 1e3  # ... then one sign for a while
        out.append(grad)
    return out


@pytest.mark.parametrize("optimizer, kwargs", [
    (torch.optim.Adam, {}),
    (torch.optim.Adam, {"betas": (0.5, 0.9), "lr": 0.1}),
    (torch.optim.Adam, {"betas": (0.99, 0.9999), "amsgrad": True}),
    (torch.optim.AdamW, {"weight_decay": 0.5, "lr": 0.01}),
    (torch.optim.Adam, {"fused": True}),
    (Prodigy, {"d0": 0.1, "d_max": 0.1}),  # d pinned at its cap: the bound's worst case
])
def test_every_adam_update_is_within_the_bound(optimizer, kwargs):
    param = nn.Parameter(torch.randn(50, 7))
    opt = optimizer([param], **kwargs)
    bound = adam_update_bound(opt)
    assert bound is not None
    worst = 0.0
    for grad in _adversarial_gradients(300, param.shape, seed=1):
        before = param.detach().clone()
        param.grad = grad
        opt.step()
        step = (param.detach() - before).abs()
        assert bool((step <= bound.absolute + bound.relative * before.abs()).all())
        worst = max(worst, float((step / (bound.absolute + bound.relative * before.abs())).max()))
        assert MomentInvariant().holds(opt)  # a fresh record checks the moments entry by entry
    assert worst > 0.05  # the gradients reach a sizeable fraction of the bound


@pytest.mark.parametrize("optimizer, kwargs", [
    (torch.optim.SGD, {"lr": 0.1}),
    (torch.optim.Adam, {"weight_decay": 0.1}),  # L2 decay enters the gradient
    (torch.optim.Adam, {"eps": 0.0}),
    (torch.optim.Adam, {"betas": (0.99, 0.9)}),  # β1² > β2: no fixed point
    (torch.optim.NAdam, {}),
    (Prodigy, {}),  # no cap: d is not known on the host
])
def test_no_bound_where_the_argument_does_not_apply(optimizer, kwargs):
    assert adam_update_bound(optimizer([nn.Parameter(torch.zeros(3))], **kwargs)) is None


def _copies(booster: SGB, rounds: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Rounds that took the checked path (checks 3 and 4 after the step; the pre-step copies
    they read are the round transaction's): calls of the update norm, by the guard's hooks or
    by the stacked schedule-free step."""
    calls = []
    original = guards._update_norm
    for module in (guards, stacked_step):
        monkeypatch.setattr(module, "_update_norm",
                            lambda *args: calls.append(1) or original(*args))
    x, y = torch.randn(rounds, 16, 5), torch.randn(rounds, 16)
    for xb, yb in zip(x, y, strict=True):
        booster.learn(xb, yb)
    return len(calls)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_the_guard_copies_nothing_when_the_step_is_proven_safe(mode, monkeypatch):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode, optimizer=torch.optim.Adam)
    assert _copies(booster, 4, monkeypatch) == 0
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode)  # schedule-free: checked
    assert _copies(booster, 2, monkeypatch) == 2
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode,
                  optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.01})
    assert _copies(booster, 4, monkeypatch) > 0
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode, optimizer=torch.optim.Adam,
                  optimizer_kwargs={"lr": 1e5})  # 14.5 · lr · sqrt(29) > 1e6 / 2: checked
    assert _copies(booster, 1, monkeypatch) > 0
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode, optimizer=Prodigy,
                  optimizer_kwargs={"d0": 1e-3, "d_max": 3e-2})
    assert _copies(booster, 4, monkeypatch) == 0
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, mode=mode, optimizer=Prodigy)
    assert _copies(booster, 2, monkeypatch) > 0


def test_loaded_moments_that_break_the_invariant_take_the_checked_path(monkeypatch):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, optimizer=torch.optim.Adam)
    assert _copies(booster, 2, monkeypatch) == 0
    state = booster.learners.optimizers[0].state_dict()
    for entry in state["state"].values():
        entry["exp_avg"] = entry["exp_avg"] + 1.0  # |m| far above K∞ sqrt(v)
    booster.learners.optimizers[0].load_state_dict(state)
    assert _copies(booster, 1, monkeypatch) == 1
    assert _copies(booster, 1, monkeypatch) == 1  # judged once per state: still the same tensors


def test_the_moment_record_vouches_for_the_tensors_it_saw_and_checks_new_ones():
    """``holds`` checks new moments entry by entry once; ``stepped`` after an in-place step
    keeps the record; moments replaced (a loaded or edited state) or other betas are checked
    again, and a state that breaks the invariant is not vouched for."""
    param = nn.Parameter(torch.randn(4, 3))
    opt = torch.optim.Adam([param], lr=0.01)
    record = MomentInvariant()
    assert record.holds(opt)  # no state yet: Adam starts the moments at zero
    param.grad = torch.randn(4, 3)
    opt.step()
    record.stepped(opt)  # the moments were created by the step: recorded now
    assert record.holds(opt)
    for _ in range(3):
        param.grad = torch.randn(4, 3)
        opt.step()
        record.stepped(opt)
        assert record.holds(opt)
    state = opt.state[param]
    state["exp_avg"] = state["exp_avg"] + 100 * state["exp_avg_sq"].sqrt() + 1.0  # |m| >> sqrt(v)
    assert not record.holds(opt)  # a new tensor: checked, and it breaks the invariant
    state["exp_avg"] = torch.zeros_like(param)
    assert record.holds(opt)
    state["exp_avg"] = state["exp_avg_sq"].sqrt() * 5.0  # within K∞ = 7.3 of the defaults ...
    assert record.holds(opt)
    opt.param_groups[0]["betas"] = (0.5, 0.6)  # ... not of these (K∞ = 1.04): checked again
    assert not record.holds(opt)
