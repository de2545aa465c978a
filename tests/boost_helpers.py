"""Test helpers: scripted weak learners and synthetic streams."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@contextlib.contextmanager
def imported_experiment(monkeypatch: Any, name: str) -> Iterator[ModuleType]:
    """``experiments/<name>.py`` imported as a module; afterwards it and the experiment modules
    it imported are forgotten, so that the next test imports them afresh."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    before = set(sys.modules)
    try:
        yield importlib.import_module(name)
    finally:
        for module in set(sys.modules) - before:
            if str(EXPERIMENTS) in str(getattr(sys.modules[module], "__file__", "")):
                del sys.modules[module]


def linear_learners(weights: list[list[float]]) -> list[nn.Module]:
    """Bias-free linear learners h_i(x) = w_i · x with the given weights (hand-checkable)."""
    modules = []
    for w in weights:
        lin = nn.Linear(len(w), 1, bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor([w]))
        modules.append(lin)
    return modules


def regression_stream(n: int, d: int = 5, seed: int = 0, noise: float = 0.1):
    """y = 2 sin(x·a) + 0.5 (x·b)² + noise: smooth, nonlinear, learnable by small nets."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(d, generator=torch.Generator().manual_seed(99)), torch.randn(
        d, generator=torch.Generator().manual_seed(98)) / d**0.5
    x = torch.randn(n, d, generator=g)
    y = 2 * torch.sin(x @ a) + 0.5 * (x @ b) ** 2 + noise * torch.randn(n, generator=g)
    return x, y


def ogb_over_stumps(device: str = "cpu", dtype: torch.dtype = torch.float32,
                    **options) -> torch.Tensor:
    """OGB over 4 regression stumps (linear learner loss) after 10 batches of 20 rows of
    :func:`regression_stream`; its predictions of the 200 rows, in float64 on the CPU."""
    from torchboost import OGB, StumpRegressor

    xs, ys = regression_stream(200, d=4, seed=2)
    torch.manual_seed(0)
    booster = OGB(lambda: StumpRegressor(4, curvature=0.0, bound=1.0), n_learners=4,
                  bound_outputs=False, objective="linear", optimizer_kwargs={"lr": 0.05},
                  **options).to(device)
    if dtype != torch.float32:
        booster = booster.to(dtype)
    for x, y in zip(xs.split(20), ys.split(20), strict=True):
        booster.learn(x.to(device, dtype), y.to(device, dtype))
    return booster.predict(xs.to(device, dtype)).double().cpu()


def stream_both(a, b, x: torch.Tensor, y: torch.Tensor, batch: int) -> None:
    """Feed the same stream, batch by batch, to two boosters."""
    for t in range(0, len(y), batch):
        a.learn(x[t:t + batch], y[t:t + batch])
        b.learn(x[t:t + batch], y[t:t + batch])


def assert_same_learners(stacked, loop) -> None:
    """Every learner's parameters and buffers agree between two boosters (up to rounding)."""
    for i in range(loop.n_learners):
        for name, value in loop.learners.learner_state(i).items():
            assert torch.allclose(stacked.learners.learner_state(i)[name], value,
                                  atol=1e-5, rtol=1e-4), (i, name)


def assert_state_round_trips(booster, make, x: torch.Tensor, y: torch.Tensor) -> None:
    """A copy built by ``make()`` and loaded from ``booster``'s saved state takes the next round
    on ``(x, y)`` exactly as the original does."""
    import io

    buffer = io.BytesIO()
    torch.save(booster.state_dict(), buffer)
    copy = make()
    copy.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=False))
    booster.learn(x, y)
    copy.learn(x, y)
    assert torch.equal(copy.predict(x), booster.predict(x))


def assert_learns_tiny_regression(booster) -> None:
    """One pass over 2,500 rows of :func:`regression_stream` (batch 25) cuts the held-out loss
    below 0.6× the untrained booster's and 0.7× the training mean's."""
    x, y = regression_stream(3000)
    before = booster.evaluate(x[2500:], y[2500:])["loss"]
    for t in range(0, 2500, 25):
        booster.learn(x[t:t + 25], y[t:t + 25])
    after = booster.evaluate(x[2500:], y[2500:])["loss"]
    constant = float((y[2500:] - y[:2500].mean()).square().mean()) / 2
    assert after < 0.6 * before and after < 0.7 * constant, (before, after, constant)


def assert_identical(a: Any, b: Any) -> None:
    """``a`` and ``b`` (states, nested dicts and lists of tensors) equal bit for bit."""
    assert type(a) is type(b)
    if torch.is_tensor(a):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_identical(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_identical(x, y)
    else:
        assert a == b


class InterruptedLinear(nn.Module):
    """A linear learner ``(d, m)`` whose training forward raises ``KeyboardInterrupt`` while the
    class's ``fail`` is set (an interrupted round, for the all-or-nothing tests)."""

    fail = False

    def __init__(self, d: int, m: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d, m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if type(self).fail and torch.is_grad_enabled():
            raise KeyboardInterrupt("interrupted")
        return self.linear(x)


#: a host read of a tensor's value (``.item()``, ``bool()``, ``float()``) as torch.profiler names it
SYNC = "aten::_local_scalar_dense"


def ops_and_syncs(step: Any) -> tuple[int, int]:
    """ATen operations and host syncs of one call of ``step``, as torch.profiler records them
    (nested operations included; syncs inside a fused optimizer kernel left out: on a CPU
    torch's fused Adam reads each step count as a number inside the kernel, on CUDA it reads
    none, so there is no device to wait for). dynamo's guards are not excused: they would read
    the value of a 0-dim float64 CPU tensor, which is why the standardiser's counts have one
    element."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    return len(events), sum(e.name == SYNC and not _in_fused_kernel(e) for e in events)


def _in_fused_kernel(event: Any) -> bool:
    while event is not None:
        if event.name.startswith("aten::_fused_"):
            return True
        event = event.cpu_parent
    return False


def _compiles() -> bool:
    try:
        return bool(torch.compile(torch.sin)(torch.zeros(1)) == 0)
    except Exception:  # no dynamo on this platform or no C++ compiler for inductor
        return False


#: marks a test that needs ``torch.compile`` to work here (dynamo and a C++ compiler)
compiles = pytest.mark.skipif(not _compiles(), reason="torch.compile is unavailable here")
