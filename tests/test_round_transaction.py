"""A failed round restores every buffer, also those the module tree gained or replaced since the
last round (the cached buffer list of :class:`~torchboost.boosters.transaction.RoundSnapshot`
is walked again)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from torchboost import SGB, StagewiseGB
from torchboost.boosters.guards import DivergenceError


class Counting(nn.Module):
    """A linear learner whose forward adds 1 to every buffer it holds (as BatchNorm updates its
    statistics), and returns NaN while ``fail`` is set: the round then raises after the
    buffers were written."""

    fail = False

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 1)
        self.register_buffer("count", torch.zeros(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            for buffer in self.buffers():
                buffer.add_(1)
        out = self.linear(x)
        return out * float("nan") if self.fail else out


def booster(kind: str) -> SGB:
    torch.manual_seed(0)
    if kind == "StagewiseGB":
        return StagewiseGB(Counting, "squared", n_learners=2, step=0.5)
    return SGB(Counting, "squared", n_learners=2, mode="loop", standardize=False)


@contextmanager
def failing(learner: type) -> Iterator[None]:
    """Inside the block, learners of class ``learner`` fail (their ``fail`` flag is set)."""
    learner.fail = True
    try:
        yield
    finally:
        learner.fail = False


def failed_round_keeps(gb: SGB, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """The buffers before a failing round, checked unchanged after it."""
    before = {k: v.clone() for k, v in gb.named_buffers()}
    with failing(Counting), pytest.raises(DivergenceError):
        gb.learn(x, y)
    after = dict(gb.named_buffers())
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert torch.equal(after[key], value), key
    return before


@pytest.mark.parametrize("kind", ["SGB", "StagewiseGB"])
def test_a_failed_round_restores_buffers_added_or_replaced_since_the_last_round(kind):
    x, y = torch.randn(8, 3), torch.randn(8)
    gb = booster(kind)
    gb.learn(x, y)
    learner = gb.learners.learner(0)
    assert float(learner.count[0]) == 1.0
    failed_round_keeps(gb, x, y)  # the cached list, unchanged

    learner.register_buffer("late", torch.zeros(3))  # a new buffer
    assert "learners.engine.modules_.0.late" in failed_round_keeps(gb, x, y)
    learner.late = torch.full((3,), 5.0)  # a buffer replaced by assignment
    failed_round_keeps(gb, x, y)
    learner.count.resize_(4).zero_()  # resized in place
    failed_round_keeps(gb, x, y)
    learner.extra = nn.BatchNorm1d(2)  # a new submodule with buffers
    assert "learners.engine.modules_.0.extra.running_mean" in failed_round_keeps(gb, x, y)
    del learner.extra  # a submodule removed: its buffers are no longer the booster's
    failed_round_keeps(gb, x, y)
    learner.blocks = nn.ModuleList()
    failed_round_keeps(gb, x, y)
    learner.blocks.insert(0, nn.BatchNorm1d(2))  # written into the list's dict directly
    assert "learners.engine.modules_.0.blocks.0.running_var" in failed_round_keeps(gb, x, y)
    gb.double()  # every buffer replaced by a float64 copy
    assert failed_round_keeps(gb, x.double(), y)["learners.engine.modules_.0.count"].dtype == (
        torch.float64)
    count = gb.learners.learner(0).count.clone()
    gb.learn(x.double(), y)  # and a successful round still writes them
    assert torch.equal(gb.learners.learner(0).count, count + 1)


def test_a_copied_booster_restores_its_own_buffers():
    x, y = torch.randn(8, 3), torch.randn(8)
    gb = booster("SGB")
    gb.learn(x, y)
    copied = copy.deepcopy(gb)
    failed_round_keeps(copied, x, y)
    copied.learn(x, y)
    assert float(copied.learners.learner(0).count[0]) == 2.0
    assert float(gb.learners.learner(0).count[0]) == 1.0  # the original's buffers untouched


class Dropping(nn.Module):
    """A learner with Dropout (its masks come from torch's global generator) whose backward
    raises ``KeyboardInterrupt`` while ``fail`` is set: after the masks were drawn."""

    fail = False

    def __init__(self, outputs: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.5),
                                  nn.Linear(8, outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.body(x)
        if self.fail and out.requires_grad:
            out.register_hook(lambda grad: (_ for _ in ()).throw(KeyboardInterrupt))
        return out


@pytest.mark.parametrize("kind", ["SGB", "SingleLearner", "OzaBoost"])
def test_a_failed_round_puts_back_the_global_generator_its_dropout_drew_from(kind):
    """The next round of a booster whose round failed after its learners' Dropout drew masks
    equals that of a twin that never failed (a red-team finding: the global generator had
    moved on, so the masks and every later round differed)."""
    from torchboost import OzaBoost, SingleLearner

    def build():
        torch.manual_seed(0)
        if kind == "OzaBoost":
            return OzaBoost(lambda: Dropping(3), n_classes=3, n_learners=2, mode="loop")
        if kind == "SingleLearner":
            return SingleLearner(Dropping, mode="loop")
        return SGB(Dropping, n_learners=2, mode="loop")

    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 3, generator=g)
    y = torch.randint(0, 3, (16,), generator=g) if kind == "OzaBoost" else torch.randn(16)
    booster, twin = build(), build()
    start = torch.get_rng_state()
    booster.learn(x, y)
    torch.set_rng_state(start)  # the same masks for the twin's first round
    twin.learn(x, y)
    before = torch.get_rng_state()
    with failing(Dropping), pytest.raises(KeyboardInterrupt):
        booster.learn(x, y)
    assert torch.equal(torch.get_rng_state(), before)
    torch.set_rng_state(before)  # the twin's round draws from the same generator state
    expected = twin.learn(x, y)
    torch.set_rng_state(before)
    assert torch.equal(booster.learn(x, y), expected)
