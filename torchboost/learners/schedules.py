"""Learning-rate schedules of the weak learners' optimizers, stepped once per boosting round.

The default learners need none: schedule-free AdamW averages its iterates instead
(:mod:`~torchboost.learners.averaging`), with no horizon, and measured as well as or better
than Adam under a cosine that knows the end on most of the repository's streams
(``experiments/horizon_free.py``). Schedules are for the other optimizers (``optimizer=
torch.optim.Adam``, to reproduce a paper's setting, or to compare).

Every booster takes ``lr_scheduler=``: a factory ``optimizer -> LRScheduler``, called once for
each of the learners' optimizers (one in stacked mode, one per learner in loop mode, so the two
modes follow the same schedule). Any ``torch.optim.lr_scheduler`` class works, for example::

    from functools import partial
    from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

    SGB(factory, n_learners=8, lr_scheduler=partial(CosineAnnealingLR, T_max=rounds))
    SGB(factory, n_learners=8, lr_scheduler=lambda opt: SequentialLR(
        opt, [LinearLR(opt, 0.01, total_iters=100), CosineAnnealingLR(opt, rounds - 100)],
        milestones=[100]))

and two ready ones cover the common cases with one line each:

* :func:`cosine_schedule` — a stream of known length (``passes × batches`` rounds): an optional
  linear warm-up, then a cosine decay to ``final`` times the rate;
* :func:`decay_schedule` — an open-ended stream: ``(1 + t/τ)^(−power)``, no horizon needed.

Both are :class:`~torch.optim.lr_scheduler.LambdaLR` multipliers, so they scale every parameter
group's own rate (the fan-in rule's per-layer rates keep their ratios). Schedulers that set
absolute rates (``OneCycleLR``'s ``max_lr``, ``CyclicLR``) replace those per-layer rates.
``ReduceLROnPlateau`` is refused: it needs a metric, and the boosters step once per round
without one.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.lr_scheduler import LambdaLR, LRScheduler, ReduceLROnPlateau

__all__ = ["CosineMultiplier", "DecayMultiplier", "LRSchedulerFactory", "build_schedulers",
           "cosine_schedule", "decay_schedule", "describe_schedulers"]

#: ``optimizer -> scheduler``: what ``lr_scheduler=`` takes.
LRSchedulerFactory = Callable[[torch.optim.Optimizer], LRScheduler]


@dataclass(frozen=True)
class CosineMultiplier:
    """The rate's multiplier after ``t`` rounds: ``(t + 1) / warmup`` during the warm-up, then a
    half cosine from 1 down to ``final`` over the remaining ``rounds − warmup`` rounds, and
    ``final`` from round ``rounds`` on. (A class, not a lambda: the booster stays picklable.)"""

    rounds: int
    warmup: int = 0
    final: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise ValueError(f"rounds must be an int >= 1, got {self.rounds!r}")
        if (isinstance(self.warmup, bool) or not isinstance(self.warmup, int)
                or not 0 <= self.warmup < self.rounds):
            raise ValueError(f"warmup must be an int in [0, rounds) = [0, {self.rounds}), "
                             f"got {self.warmup!r}")
        if not (_real(self.final) and 0.0 <= self.final <= 1.0):
            raise ValueError(f"final must be in [0, 1] (a fraction of the rate), got "
                             f"{self.final!r}")

    def __call__(self, t: int) -> float:
        if t < self.warmup:
            return (t + 1) / self.warmup
        progress = min(1.0, (t - self.warmup) / (self.rounds - self.warmup))
        return self.final + (1.0 - self.final) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class DecayMultiplier:
    """The rate's multiplier after ``t`` rounds: ``(1 + t / timescale) ** −power``: the full
    rate at first, half of it after ``3 τ`` rounds for ``power = ½``, and decaying for as long
    as the stream lasts."""

    timescale: float
    power: float = 0.5

    def __post_init__(self) -> None:
        if not (_real(self.timescale) and self.timescale > 0):
            raise ValueError(f"timescale must be a finite number of rounds > 0, got "
                             f"{self.timescale!r}")
        if not (_real(self.power) and self.power > 0):
            raise ValueError(f"power must be finite and > 0, got {self.power!r}")

    def __call__(self, t: int) -> float:
        return (1.0 + t / self.timescale) ** -self.power


def cosine_schedule(rounds: int, *, warmup: int = 0, final: float = 0.0) -> LRSchedulerFactory:
    """A factory for ``lr_scheduler=``: linear warm-up over ``warmup`` rounds, then a cosine
    decay to ``final ×`` the rate at round ``rounds`` (held there afterwards).

    Examples:
        >>> import torch
        >>> from torchboost import SGB
        >>> booster = SGB(lambda: torch.nn.Linear(2, 1), n_learners=2, optimizer=torch.optim.Adam,
        ...               lr_scheduler=cosine_schedule(5, warmup=2))
        >>> x, y = torch.randn(8, 2), torch.randn(8)
        >>> rates = []
        >>> for _ in range(6):  # the rate each round learns with, as a fraction of Adam's 2e-2
        ...     rates.append(booster.learners.optimizers[0].param_groups[0]["lr"] / 2e-2)
        ...     _ = booster.learn(x, y)
        >>> [round(r, 3) for r in rates]
        [0.5, 1.0, 1.0, 0.75, 0.25, 0.0]
    """
    multiplier = CosineMultiplier(rounds, warmup, final)
    return _LambdaFactory(multiplier)


def decay_schedule(timescale: float, power: float = 0.5) -> LRSchedulerFactory:
    """A factory for ``lr_scheduler=`` on an open-ended stream: the rate times
    ``(1 + t / timescale) ** −power`` after ``t`` rounds (no horizon)."""
    return _LambdaFactory(DecayMultiplier(timescale, power))


def _real(value: object) -> bool:
    """Whether ``value`` is a finite real number (not a bool, a string or ``None``)."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


@dataclass(frozen=True)
class _LambdaFactory:
    """``optimizer -> LambdaLR(optimizer, multiplier)``, picklable."""

    multiplier: CosineMultiplier | DecayMultiplier

    def __call__(self, optimizer: torch.optim.Optimizer) -> LRScheduler:
        # a copy each: LambdaLR.load_state_dict writes a saved multiplier's fields into the
        # object it holds, which must never be the factory's (shared by every booster built
        # from it)
        return LambdaLR(optimizer, copy.copy(self.multiplier))


def build_schedulers(factory: LRSchedulerFactory | None,
                     optimizers: list[torch.optim.Optimizer]) -> list[LRScheduler]:
    """One scheduler per optimizer from ``factory`` (none without one), each checked to be a
    ``torch.optim.lr_scheduler`` scheduler of that optimizer that steps without a metric."""
    if factory is None:
        return []
    if not callable(factory):
        raise ValueError(f"lr_scheduler must be a factory optimizer -> LRScheduler (e.g. "
                         f"functools.partial(CosineAnnealingLR, T_max=rounds) or "
                         f"torchboost.cosine_schedule(rounds)), got {factory!r}")
    schedulers = []
    for optimizer in optimizers:
        try:
            scheduler = factory(optimizer)
        except TypeError as error:  # e.g. partial(CosineAnnealingLR) without its T_max
            raise ValueError(f"lr_scheduler(optimizer) could not build a scheduler: {error} "
                             "(give the scheduler's arguments, e.g. partial(CosineAnnealingLR, "
                             "T_max=rounds))") from error
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError("ReduceLROnPlateau needs a metric at every step; the boosters step "
                             "their schedulers once per round without one (use a schedule of "
                             "the round count: cosine_schedule, decay_schedule, LambdaLR, ...)")
        if not isinstance(scheduler, LRScheduler):
            raise ValueError(f"lr_scheduler(optimizer) must return a torch.optim.lr_scheduler "
                             f"scheduler, got {type(scheduler).__name__}")
        if scheduler.optimizer is not optimizer:
            raise ValueError("lr_scheduler(optimizer) returned a scheduler of another optimizer; "
                             "the factory must build it on the optimizer it is given")
        schedulers.append(scheduler)
    return schedulers


#: a scheduler's state that counts rounds or caches rates, not its configuration
_RUNTIME_KEYS = ("last_epoch", "_step_count", "_last_lr", "_get_lr_called_within_step",
                 "verbose", "_is_initial", "_initial_step")

#: what schedulers write into the optimizer's parameter groups as their configuration
_GROUP_KEYS = ("initial_lr", "max_lr", "min_lr", "base_momentum", "max_momentum")


def describe_schedulers(schedulers: list[LRScheduler]) -> dict[str, Any] | None:
    """The schedule for a booster's configuration (``None`` without one): the scheduler's
    class and its whole configuration, e.g. ``cosine_schedule``'s horizon, warm-up and final
    rate, ``OneCycleLR``'s ``total_steps`` and ``max_lr``, a ``SequentialLR``'s schedulers
    and milestones; a ``LambdaLR`` of a plain function is named as a function (its code
    cannot be compared). A state saved under another configuration is refused on loading,
    naming the difference."""
    if not schedulers:
        return None
    scheduler = schedulers[0]
    out = _configuration(scheduler.state_dict(), type(scheduler).__name__)
    lambdas = getattr(scheduler, "lr_lambdas", None)
    if lambdas:  # with the multipliers' classes (the state keeps their fields only)
        out["lr_lambdas"] = ["function" if hasattr(fn, "__code__") else
                             {"class": type(fn).__name__, **_plain(vars(fn))} for fn in lambdas]
    out["groups"] = [{key: _plain(group[key]) for key in _GROUP_KEYS if key in group}
                     for group in scheduler.optimizer.param_groups]
    return out


def _configuration(state: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"class": name}
    for key, value in sorted(state.items()):
        if key in _RUNTIME_KEYS or key == "base_lrs":
            continue
        if key == "_schedulers":  # SequentialLR, ChainedScheduler: their schedulers' own
            out[key] = [_configuration(s, "scheduler") for s in value]
        elif key == "lr_lambdas":  # callable objects' fields; plain functions are None
            out[key] = ["function" if fn is None else _plain(fn) for fn in value]
        else:
            out[key] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """A comparable copy: tuples as lists, dicts and lists recursively, other objects by
    class name (a callable's code cannot be compared)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if torch.is_tensor(value):
        return value.tolist()
    return type(value).__name__
