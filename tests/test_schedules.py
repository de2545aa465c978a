"""Learning-rate schedules (``lr_scheduler=``): stepped once per successful round, the same in
stacked and loop mode, per stage in StagewiseGB, saved and resumed exactly mid-schedule."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from torch import nn
from torch.optim.lr_scheduler import (
    CosineAnnealingLR,
    LambdaLR,
    LinearLR,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
)

from torchboost import (
    SGB,
    StagewiseGB,
    TwoLayerNet,
    cosine_schedule,
    decay_schedule,
)
from torchboost.boosters.default_lr import DEFAULT_LR
from torchboost.boosters.registry import BOOSTERS
from torchboost.learners.schedules import CosineMultiplier, DecayMultiplier

D = 3


def _batches(n: int, seed: int = 0, classes: int | None = None) -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randn(16, D, generator=g)
        y = (torch.randint(0, classes, (16,), generator=g) if classes
             else x.sum(1) + 0.1 * torch.randn(16, generator=g))
        out.append((x, y))
    return out


def _rates(booster) -> list[float]:
    """Every parameter group's rate of every optimizer of the learners."""
    return [g["lr"] for opt in booster.learners.optimizers for g in opt.param_groups]


def test_cosine_multiplier_by_hand():
    m = CosineMultiplier(rounds=10, warmup=2, final=0.1)
    # warm-up: (t + 1) / 2; then 0.1 + 0.9 · (1 + cos(π (t − 2) / 8)) / 2; from t = 10 on: 0.1
    assert [m(0), m(1)] == [0.5, 1.0]
    assert m(2) == 1.0
    assert m(6) == pytest.approx(0.1 + 0.9 * 0.5)
    assert m(10) == pytest.approx(0.1) and m(50) == pytest.approx(0.1)
    d = DecayMultiplier(timescale=100, power=0.5)
    assert d(0) == 1.0 and d(300) == pytest.approx(0.5) and d(9900) == pytest.approx(0.1)
    for bad in (dict(rounds=0), dict(rounds=4, warmup=4), dict(rounds=4, final=1.5),
                dict(rounds=2.5)):
        with pytest.raises(ValueError):
            CosineMultiplier(**bad)
    with pytest.raises(ValueError, match="timescale"):
        decay_schedule(0)


def test_rate_after_k_rounds_by_hand_keeps_the_fan_in_ratios():
    """SGB's default rate is a rule: DEFAULT_LR for fan-in ≤ 64, DEFAULT_LR·64/128 for a
    128-wide weight.
    After k rounds of cosine_schedule(8) every group's rate is its own base times
    (1 + cos(π k / 8)) / 2."""
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(128, 4), n_learners=2,
                  lr_scheduler=cosine_schedule(8))
    bases = _rates(booster)
    assert sorted(set(bases)) == [DEFAULT_LR * 64 / 128, DEFAULT_LR]
    g = torch.Generator().manual_seed(1)
    for k in range(1, 10):
        booster.learn(torch.randn(8, 128, generator=g), torch.randn(8, generator=g))
        factor = 0.5 * (1 + math.cos(math.pi * min(k, 8) / 8))
        assert _rates(booster) == pytest.approx([b * factor for b in bases], abs=1e-15)
    assert booster.learners.schedulers[0].last_epoch == 9


@pytest.mark.parametrize("schedule", ["cosine", "sequential", "one_cycle", "decay"])
def test_stacked_learners_equal_the_loop_under_a_schedule(schedule):
    factories = {
        "cosine": cosine_schedule(12, warmup=3, final=0.1),
        "sequential": lambda opt: SequentialLR(
            opt, [LinearLR(opt, 0.2, total_iters=3), CosineAnnealingLR(opt, T_max=9)],
            milestones=[3]),
        "one_cycle": partial(OneCycleLR, max_lr=0.05, total_steps=12),
        "decay": decay_schedule(4),
    }
    boosters = {}
    for mode in ("stacked", "loop"):
        torch.manual_seed(0)
        boosters[mode] = SGB(lambda: TwoLayerNet(D, 4), n_learners=4, mode=mode,
                             lr_scheduler=factories[schedule])
        for x, y in _batches(12):
            boosters[mode].learn(x, y)
    stacked, loop = boosters["stacked"], boosters["loop"]
    assert stacked.learners.mode == "stacked" and loop.learners.mode == "loop"
    assert len(loop.learners.schedulers) == 4 and len(stacked.learners.schedulers) == 1
    assert set(_rates(loop)) == set(_rates(stacked))
    x = torch.randn(32, D)
    torch.testing.assert_close(stacked.predict(x), loop.predict(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_resume_mid_schedule_is_exact(mode):
    """6 rounds, save, load into a fresh booster, 6 more rounds: bit for bit the 12-round run."""
    def build():
        torch.manual_seed(0)
        return SGB(lambda: TwoLayerNet(D, 4), n_learners=3, mode=mode, lr_scheduler=lambda o:
                   SequentialLR(o, [LinearLR(o, 0.1, total_iters=4),
                                    CosineAnnealingLR(o, T_max=8)], milestones=[4]))

    batches = _batches(12)
    whole = build()
    for x, y in batches:
        whole.learn(x, y)
    first = build()
    for x, y in batches[:6]:
        first.learn(x, y)
    resumed = build()
    resumed.load_state_dict(first.state_dict())
    assert resumed.learners.schedulers[0].last_epoch == 6
    for x, y in batches[6:]:
        resumed.learn(x, y)
    assert _rates(resumed) == _rates(whole)
    x = torch.randn(20, D)
    assert torch.equal(resumed.predict(x), whole.predict(x))
    for key, value in whole.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, resumed.state_dict()[key]), key


def test_stagewise_gb_starts_the_schedule_afresh_for_each_stage():
    torch.manual_seed(0)
    gb = StagewiseGB(lambda: TwoLayerNet(D, 4), n_learners=3,
                     optimizer_kwargs={"lr": 0.01}, lr_scheduler=cosine_schedule(10))
    batches = _batches(4)
    history = gb.fit(batches, max_epochs=2, patience=5)
    assert [stage["epochs"] for stage in history] == [2, 2, 2]
    # each learner's own schedule ran during its own stage only: 8 rounds each
    assert [s.last_epoch for s in gb.learners.schedulers] == [8, 8, 8]
    expected = 0.01 * 0.5 * (1 + math.cos(math.pi * 8 / 10))
    assert _rates(gb) == pytest.approx([expected] * 3)


def test_stagewise_gb_stage_schedule_is_untouched_before_its_stage():
    torch.manual_seed(0)
    gb = StagewiseGB(lambda: TwoLayerNet(D, 4), n_learners=2,
                     optimizer_kwargs={"lr": 0.01}, lr_scheduler=cosine_schedule(10))
    for x, y in _batches(3):
        gb.learn(x, y)
    assert [s.last_epoch for s in gb.learners.schedulers] == [3, 0]
    assert _rates(gb)[1] == 0.01


def _every_booster(kind: str):
    """A registered booster (or SGB with Newton targets, ``sgb_newton``) of 2 learners under
    ``cosine_schedule(8)``, and its number of classes (``None``: regression)."""
    torch.manual_seed(0)
    schedule = cosine_schedule(8)
    if kind == "sgb_newton":
        return SGB(partial(TwoLayerNet, D, 4, 3), "softmax", n_outputs=3, n_learners=2,
                   targets="newton", lr_scheduler=schedule), 3
    spec = BOOSTERS[kind]
    if spec.task == "classification":
        return spec.make(partial(nn.Linear, D, 3), n_learners=2, n_outputs=3,
                         lr_scheduler=schedule), 3
    return spec.make(partial(TwoLayerNet, D, 4), n_learners=2, lr_scheduler=schedule), None


@pytest.mark.filterwarnings("ignore:OGB. labels reach norm")
@pytest.mark.parametrize("kind", [*BOOSTERS, "sgb_newton"])
def test_every_booster_steps_its_schedule_once_per_round(kind):
    booster, classes = _every_booster(kind)
    bases = _rates(booster)
    for x, y in _batches(3, classes=classes):
        booster.learn(x, y)
    assert booster.learners.schedulers[0].last_epoch == 3
    factor = 0.5 * (1 + math.cos(math.pi * 3 / 8))
    assert _rates(booster)[:len(bases)] != bases
    assert booster.learners.optimizers[0].param_groups[0]["lr"] == pytest.approx(
        bases[0] * factor)
    assert booster.config()["lr_scheduler"]["class"] == "LambdaLR"
    assert booster.config()["lr_scheduler"]["lr_lambdas"][0] == {
        "class": "CosineMultiplier", "rounds": 8, "warmup": 0, "final": 0.0}


def test_a_failed_round_leaves_the_schedule_where_it_was():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(D, 4), n_learners=2, lr_scheduler=cosine_schedule(8))
    x, y = _batches(1)[0]
    booster.learn(x, y)
    rates = _rates(booster)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        booster.learn(bad, y)
    huge = SGB(lambda: TwoLayerNet(D, 4), n_learners=2, optimizer_kwargs={"lr": 1e30},
               lr_scheduler=cosine_schedule(8))
    with pytest.raises(FloatingPointError):  # DivergenceError: the step overflows
        huge.learn(x * 1e30, y)
    assert huge.learners.schedulers[0].last_epoch == 0
    assert booster.learners.schedulers[0].last_epoch == 1 and _rates(booster) == rates


def test_bad_schedules_and_mismatched_states_are_refused():
    net = partial(TwoLayerNet, D, 4)
    with pytest.raises(ValueError, match="ReduceLROnPlateau needs a metric"):
        SGB(net, n_learners=2, lr_scheduler=ReduceLROnPlateau)
    with pytest.raises(ValueError, match=r"must return a torch\.optim\.lr_scheduler"):
        SGB(net, n_learners=2, lr_scheduler=lambda opt: 0.5)
    other = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="another optimizer"):
        SGB(net, n_learners=2, lr_scheduler=lambda opt: LambdaLR(other, lambda t: 1.0))
    with pytest.raises(ValueError, match="factory"):
        SGB(net, n_learners=2, lr_scheduler=0.5)
    scheduled = SGB(net, n_learners=2, lr_scheduler=cosine_schedule(8))
    plain = SGB(net, n_learners=2)
    with pytest.raises(ValueError, match="lr_scheduler"):
        plain.load_state_dict(scheduled.state_dict())
    with pytest.raises(ValueError, match="lr_scheduler"):
        scheduled.load_state_dict(plain.state_dict())


def test_a_scheduled_booster_deep_copies_and_pickles_apart_from_the_original():
    import copy
    import pickle

    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(D, 4), n_learners=2, lr_scheduler=cosine_schedule(8),
                  optimizer=torch.optim.Adam)
    x, y = _batches(1)[0]
    booster.learn(x, y)
    for twin in (copy.deepcopy(booster), pickle.loads(pickle.dumps(booster))):
        twin.learn(x, y)
        twin.learn(x, y)
        assert twin.learners.schedulers[0].last_epoch == 3
        assert booster.learners.schedulers[0].last_epoch == 1
        assert int(booster.learners.optimizers[0].state_dict()["state"][0]["step"]) == 1


@pytest.mark.parametrize("build", [
    lambda: cosine_schedule(10, final=None), lambda: cosine_schedule(10, final="0.1"),
    lambda: cosine_schedule(10, final=True), lambda: decay_schedule(None),
    lambda: decay_schedule("300"), lambda: decay_schedule(True),
    lambda: decay_schedule(300, power=None),
])
def test_schedule_arguments_of_the_wrong_type_are_refused_in_our_words(build):
    """Issue 31: None raised a raw TypeError, '300' and True were accepted."""
    with pytest.raises(ValueError):
        build()


def test_a_schedule_has_an_identity_and_loading_never_touches_the_factory():
    """Issue 31: a cosine_schedule(10) state loaded into a cosine_schedule(1000) booster (by
    class name) and overwrote the user's factory, so another booster built from it dropped to
    rate 0 after 10 rounds; OneCycleLR's max_lr 0.02 into 0.5 named a difference that does not
    exist (lr_fan_in), and 0.02 into 0.03 loaded silently."""
    from torch.optim.lr_scheduler import OneCycleLR

    net = partial(TwoLayerNet, D, 4)
    x, y = _batches(1)[0]
    short = SGB(net, n_learners=2, lr_scheduler=cosine_schedule(10), optimizer=torch.optim.Adam)
    short.learn(x, y)
    factory = cosine_schedule(1000)
    long = SGB(net, n_learners=2, lr_scheduler=factory, optimizer=torch.optim.Adam)
    with pytest.raises(ValueError, match=r"lr_scheduler: saved .*'rounds': 10"):
        long.load_state_dict(short.state_dict())
    assert factory.multiplier.rounds == 1000
    same = SGB(net, n_learners=2, lr_scheduler=cosine_schedule(10), optimizer=torch.optim.Adam)
    same.load_state_dict(short.state_dict())  # the same schedule loads
    other = SGB(net, n_learners=2, lr_scheduler=factory, optimizer=torch.optim.Adam)
    assert other.learners.schedulers[0].lr_lambdas[0].rounds == 1000

    def one_cycle(max_lr: float) -> SGB:
        return SGB(net, n_learners=2, optimizer=torch.optim.Adam,
                   lr_scheduler=partial(OneCycleLR, max_lr=max_lr, total_steps=20))

    saved = one_cycle(0.02)
    saved.learn(x, y)
    for max_lr in (0.5, 0.03):
        with pytest.raises(ValueError, match="max_lr") as info:
            one_cycle(max_lr).load_state_dict(saved.state_dict())
        assert "lr_fan_in" not in str(info.value)
    one_cycle(0.02).load_state_dict(saved.state_dict())
