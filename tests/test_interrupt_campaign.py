"""The interrupt campaign (issue "Nothing left to break"): a ``KeyboardInterrupt`` raised at
random points of a round — at any Python line the round runs, in torchboost or in torch — leaves
every registered booster, and the stacked and chained ones, either exactly as before the round
or exactly as after it, and usable: the next round gives what an uninterrupted one gives.
Interrupts during ``predict`` leave the learners' train/eval modes as they were.

Each point is drawn among the round's line events in the library's files (``sys.settrace``
counts them; the trace function raises at the drawn one), so a failure names the booster and
the event and replays exactly (:data:`_LIBRARY` says which lines are left out, and why)."""

from __future__ import annotations

import ast
import copy
import functools
import random
import sys
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from boost_helpers import assert_identical
from torch import nn

from torchboost import SGB, StagewiseGB, TwoLayerNet, deferred_checks
from torchboost.boosters.registry import BOOSTERS
from torchboost.threads import chosen

#: interrupts per booster (the issue's campaign: 1,400 over 14 boosters)
INTERRUPTS = 100


#: interrupts are drawn among the lines of the library's own files (torch's Python code is not
#: interrupt-safe itself: an interrupt inside ``torch.func.vmap`` leaves its nesting level, kept
#: in C++, unbalanced for every later vmap of the process), except the few lines of the blocks
#: that set process-wide state for a call (torch's threads, the deferred checks) and the lines
#: where Python hands over to clean-up code (:func:`_handovers`): no Python code can protect
#: those, since CPython raises a pending signal as a function starts, so one arriving as a
#: ``with`` block ends is raised before ``__exit__``'s first line
_LIBRARY = "/torchboost/"
_PROCESS_WIDE = ("torchboost/threads.py", "torchboost/deferred_checks.py")


@functools.cache
def _handovers(file: str) -> frozenset[int]:
    """The lines of ``file`` where control passes to clean-up code: a ``with`` statement's line
    (its exit runs there), the first statement of a ``finally`` clause and of an ``__exit__``."""
    lines = set()
    for node in ast.walk(ast.parse(Path(file).read_text())):
        if isinstance(node, ast.With):
            lines.add(node.lineno)
        if isinstance(node, ast.Try) and node.finalbody:
            lines.add(node.finalbody[0].lineno)
        if isinstance(node, ast.FunctionDef) and node.name == "__exit__":
            lines.add(node.body[0].lineno)
    return frozenset(lines)


class _Interrupt:
    """A trace function raising ``KeyboardInterrupt`` at the ``at``-th line event (or only
    counting them with ``at=None``)."""

    def __init__(self, at: int | None) -> None:
        self.at, self.events = at, 0

    def __call__(self, frame: Any, event: str, arg: Any) -> Callable | None:
        if event == "call":  # trace the frame's lines, or not
            file = frame.f_code.co_filename
            left_out = _LIBRARY not in file or (
                frame.f_code.co_name in ("__enter__", "__exit__") and file.endswith(_PROCESS_WIDE))
            return None if left_out else self
        if event == "line" and frame.f_lineno not in _handovers(frame.f_code.co_filename):
            self.events += 1
            if self.events == self.at:
                raise KeyboardInterrupt(f"line event {self.at}")
        return self


def _traced(call: Callable[[], Any], at: int | None) -> tuple[bool, int]:
    """Run ``call`` under :class:`_Interrupt`; whether it was interrupted, and the events."""
    tracer = _Interrupt(at)
    sys.settrace(tracer)
    try:
        call()
    except KeyboardInterrupt:
        return True, tracer.events
    finally:
        sys.settrace(None)
    return False, tracer.events


def _boosters() -> dict[str, Callable[[], Any]]:
    makers: dict[str, Callable[[], Any]] = {}
    for name, spec in BOOSTERS.items():
        n_outputs = 3 if spec.task == "classification" else 1
        makers[name] = (lambda spec=spec, m=n_outputs:
                        spec.make(lambda: TwoLayerNet(4, 5, m), n_learners=3, n_outputs=m))
    makers["sgb_chained_stacked"] = lambda: SGB(lambda: TwoLayerNet(4, 5), n_learners=3,
                                                chained=True)
    makers["sgb_dropout_loop"] = lambda: SGB(
        lambda: nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.3), nn.ReLU(), nn.Linear(6, 1)),
        n_learners=3, mode="loop")
    makers["sgb_batchnorm"] = lambda: SGB(
        lambda: nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 1)),
        n_learners=3)
    makers["stagewise_gb_chained"] = lambda: StagewiseGB(lambda: TwoLayerNet(4, 5),
                                                         n_learners=3, chained=True)
    makers["sgb_newton_softmax"] = lambda: SGB(lambda: TwoLayerNet(4, 5, 3), n_learners=3,
                                               loss="softmax", n_outputs=3, targets="newton")
    return makers


def _batch(classification: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(12, 4, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long() if classification else x[:, 0] + x[:, 1]
    return x, y


def _process_state() -> tuple[Any, ...]:
    """What a call of the library sets for the process while it runs and must put back:
    torch's threads and grad mode, the deferred checks and the threads the library chose."""
    return (torch.get_num_threads(), torch.is_grad_enabled(), deferred_checks._ACTIVE.get(),
            chosen())


def _modes(booster: nn.Module) -> list[bool]:
    return [m.training for m in booster.modules()]


def _round(booster: Any, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    torch.manual_seed(7)
    booster.learn(*batch)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(_boosters()))
def test_an_interrupt_anywhere_in_a_round_leaves_it_undone_or_done(name):
    make = _boosters()[name]
    classification = (name in BOOSTERS and BOOSTERS[name].task == "classification") or (
        name == "sgb_newton_softmax")
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = make()
        for seed in range(3):
            _round(base, _batch(classification, seed))
        batch, following = _batch(classification, 10), _batch(classification, 11)
        before = copy.deepcopy(base.state_dict())
        done = copy.deepcopy(base)
        _round(done, batch)
        after = copy.deepcopy(done.state_dict())
        _round(done, following)
        counted = copy.deepcopy(base)
        torch.manual_seed(7)
        _, events = _traced(partial(counted.learn, *batch), None)
        draws = random.Random(name).sample(range(1, events + 1), min(INTERRUPTS, events))
        completed, process = 0, _process_state()
        for at in draws:
            booster = copy.deepcopy(base)
            torch.manual_seed(7)  # as _round, outside the traced call
            interrupted, _ = _traced(partial(booster.learn, *batch), at)
            assert interrupted, at
            where = f"{name}, interrupted at line event {at} of {events}"
            assert _modes(booster) == _modes(base), where
            assert _process_state() == process, where
            if booster.rounds == base.rounds:  # undone: as before, then the round as usual
                _assert_same(booster.state_dict(), before, where)
                _round(booster, batch)
            else:  # done
                assert booster.rounds == base.rounds + 1, where
                completed += 1
            _assert_same(booster.state_dict(), after, where)
            _round(booster, following)
            _assert_same(booster.state_dict(), done.state_dict(), where)
    assert completed < len(draws) / 10  # nearly every draw falls inside the round's body


@pytest.mark.slow
def test_an_interrupt_anywhere_in_predict_leaves_the_modes_and_the_state():
    torch.manual_seed(0)
    booster = _boosters()["sgb_dropout_loop"]()
    for seed in range(3):
        _round(booster, _batch(False, seed))
    x = _batch(False, 10)[0]
    state, modes = copy.deepcopy(booster.state_dict()), _modes(booster)
    process = _process_state()
    _, events = _traced(lambda: booster.predict(x), None)
    for at in random.Random(0).sample(range(1, events + 1), min(INTERRUPTS, events)):
        assert _traced(lambda: booster.predict(x), at)[0]
        assert _modes(booster) == modes, at
        assert _process_state() == process, at
        _assert_same(booster.state_dict(), state, f"predict interrupted at {at}")


def _assert_same(a: dict[str, Any], b: dict[str, Any], where: str) -> None:
    try:
        assert_identical(a, b)
    except AssertionError as error:
        raise AssertionError(where) from error
