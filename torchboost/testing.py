"""Conformance checks for boosters, in the style of river's ``check_estimator``: every contract
the library promises, run on any registered booster (:mod:`torchboost.boosters.registry`); and
:func:`~torchboost.learner_check.check_learner` for a user's learner
(:mod:`torchboost.learner_check`).

>>> from torchboost.boosters.registry import BOOSTERS
>>> check_booster(BOOSTERS["sgb"])   # raises AssertionError naming the broken contract

Each check builds small boosters of the spec (3 learners ``Linear(3, 4) → Tanh → Linear(4, m)``,
Adam at 0.05, seeded) and streams a few seeded batches of 16 rows (real labels for regression,
3 classes for classification; real labels in [−1, 1], OGB's default ball):

* :func:`check_learn_returns_scores` — ``learn`` and ``predict`` return scores ``(B, m)``,
  ``predict_label`` a classifier's labels; the counters count the round;
* :func:`check_bad_input_changes_nothing` — NaN features, a wrong feature shape, a wrong
  number of labels, an empty batch (and out-of-range classes) raise a ``ValueError`` and leave
  the state as it was;
* :func:`check_failed_round_restores_everything` — a round whose step diverges raises
  :class:`~torchboost.DivergenceError` and restores parameters, optimizer state and buffers;
  the booster then trains on;
* :func:`check_state_dict_resumes_exactly` — a booster loaded from another's ``state_dict``
  predicts the same and, trained on, stays bit-identical to it: everything a round changes is in
  the state (buffers, parameters, optimizer and schedule state, extra state), not in plain
  attributes;
* :func:`check_schedule_steps_once_per_round` — ``lr_scheduler=`` steps once per round;
* :func:`check_seeded_runs_are_identical` — the same seed, the same batches: the same state;
* :func:`check_options_are_recorded` — a class adding constructor options declares the
  ``config_keys`` that save them with the state;
* :func:`check_export_equals_predict` — ``export()`` equals ``predict`` (all learners and the
  first), or refuses with a ``ValueError`` for a booster without ``combination_weights``;
* :func:`check_anytime_predictions_match_combine` — what the stall monitor judges is the
  prediction of the first ``k`` learners for every ``k`` (``combine`` of the partial sums);
* :func:`check_raise_anywhere_restores_everything` — whatever raises in a round (the learners'
  forward, their objective, backward, after the optimizer step, ``after_step``, the schedule;
  ``KeyboardInterrupt`` too, :func:`raise_in_round`), the booster is bitwise as it was and its
  next round equals that of a twin that never failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from torchboost.boosters.base import Booster
from torchboost.boosters.guards import DivergenceError
from torchboost.boosters.registry import BoosterSpec
from torchboost.learner_check import check_learner

__all__ = [
    "CHECKS",
    "ROUND_POINTS",
    "assert_same",
    "check_anytime_predictions_match_combine",
    "check_bad_input_changes_nothing",
    "check_booster",
    "check_export_equals_predict",
    "check_failed_round_restores_everything",
    "check_learn_returns_scores",
    "check_learner",
    "check_options_are_recorded",
    "check_raise_anywhere_restores_everything",
    "check_schedule_steps_once_per_round",
    "check_seeded_runs_are_identical",
    "check_state_dict_resumes_exactly",
    "example_batch",
    "example_booster",
    "raise_in_round",
]

_FEATURES, _CLASSES, _BATCH = 3, 3, 16


def _outputs(spec: BoosterSpec) -> int:
    return _CLASSES if spec.task == "classification" else 1


def example_booster(spec: BoosterSpec, seed: int = 0, **options: Any) -> Booster:
    """A small booster of ``spec`` built with the torch RNG seeded by ``seed``."""
    m = _outputs(spec)

    def learner() -> nn.Module:
        return nn.Sequential(nn.Linear(_FEATURES, 4), nn.Tanh(), nn.Linear(4, m))

    torch.manual_seed(seed)
    options.setdefault("optimizer_kwargs", {"lr": 0.05})
    return spec.make(learner, n_learners=3, n_outputs=m, **options)


def example_batch(spec: BoosterSpec, seed: int) -> tuple[Tensor, Tensor]:
    """Seeded features ``(16, 3)`` and labels: reals ``(16,)`` or classes in ``[0, 3)``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(_BATCH, _FEATURES, generator=g)
    if spec.task == "classification":
        return x, torch.randint(0, _CLASSES, (_BATCH,), generator=g)
    return x, torch.tanh(x.sum(1)) * 0.8 + 0.05 * torch.randn(_BATCH, generator=g)


def _state(booster: Booster) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in booster.state_dict().items()
            if torch.is_tensor(v)}


def _optimizer_states(booster: Booster) -> list[Any]:
    import copy
    return copy.deepcopy([opt.state_dict() for opt in booster.learners.optimizers])


def assert_same(a: Any, b: Any, what: str = "state") -> None:
    """Assert that ``a`` and ``b`` are bitwise the same, walking dicts, lists and tuples: tensors
    and numpy arrays of one dtype and shape with equal entries (NaN where the other has NaN),
    floats likewise, anything else by ``==``. ``what`` names the place in the message."""
    if torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and a.shape == b.shape, what
        same = torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                     and torch.equal(a.nan_to_num(), b.nan_to_num()))
        assert same, what
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, what
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), what
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), what
        for key in a:
            assert_same(a[key], b[key], f"{what}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), what
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            assert_same(u, v, f"{what}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), what
    else:
        assert a == b, what


def check_learn_returns_scores(spec: BoosterSpec) -> None:
    booster = example_booster(spec)
    x, y = example_batch(spec, 0)
    out = booster.learn(x, y)
    assert out.is_floating_point() and out.shape == (_BATCH, booster.out_dim), (
        f"{spec.name}: learn returned {out.dtype} {tuple(out.shape)}, not float (B, m) = "
        f"{(_BATCH, booster.out_dim)}")
    shape = tuple(booster.predict(x).shape)
    assert shape == (_BATCH, booster.out_dim), f"{spec.name}: predict returned {shape}"
    counted = (booster.rounds, booster.samples_seen)
    assert counted == (1, _BATCH) and booster.compute_units > 0, (
        f"{spec.name}: after one learn() of {_BATCH} rows the counters read rounds, "
        f"samples_seen = {counted}, compute_units = {booster.compute_units}, not (1, {_BATCH}) "
        "and > 0: rounds, samples_seen and compute_units belong to the base class (does the "
        "booster assign one of these names itself?)")
    if spec.task == "classification":
        labels = booster.predict_label(x)
        assert labels.dtype == torch.int64 and labels.shape == (_BATCH,), (
            f"{spec.name}: predict_label returned {labels.dtype} {tuple(labels.shape)}")


def check_bad_input_changes_nothing(spec: BoosterSpec) -> None:
    booster = example_booster(spec)
    x, y = example_batch(spec, 0)
    booster.learn(x, y)
    before = _state(booster)
    nan = x.clone()
    nan[3, 1] = float("nan")
    bad: list[tuple[str, Tensor, Tensor]] = [
        ("NaN features", nan, y), ("a wrong feature shape", x[:, :2], y),
        ("a wrong number of labels", x, y[:-1]), ("an empty batch", x[:0], y[:0])]
    if spec.task == "classification":
        bad.append(("a class out of range", x, torch.full_like(y, _CLASSES)))
    for what, bx, by in bad:
        try:
            booster.learn(bx, by)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{spec.name}: {what} was accepted")
        assert_same(before, _state(booster), f"{spec.name}: state after {what}")
        assert booster.rounds == 1, f"{spec.name}: {what} counted a round"


def _plain_attributes(booster: Booster) -> dict[str, Any]:
    """The booster's own plain attributes (numbers, strings, tensors not registered as buffers,
    tuples and lists of them), deep-copied: state a failed round would leave changed."""
    import copy
    kinds = (int, float, bool, str, Tensor, tuple, list)
    return {name: copy.deepcopy(value) for name, value in vars(booster).items()
            if not name.startswith("_") and isinstance(value, kinds)}


def check_failed_round_restores_everything(spec: BoosterSpec) -> None:
    booster = example_booster(spec)
    booster.learn(*example_batch(spec, 0))
    state, optimizers = _state(booster), _optimizer_states(booster)
    plain = _plain_attributes(booster)
    rates = [g["lr"] for opt in booster.learners.optimizers for g in opt.param_groups]
    for group in (g for opt in booster.learners.optimizers for g in opt.param_groups):
        group["lr"] = 1e30  # finite parameters of ~1e29 after one step: useless, not NaN
    try:
        booster.learn(*example_batch(spec, 1))
    except DivergenceError:
        pass
    else:
        raise AssertionError(f"{spec.name}: a step of 1e30 was accepted")
    assert_same(state, _state(booster), f"{spec.name}: state after a rejected round")
    for name, value in _plain_attributes(booster).items():
        assert_same(plain.get(name), value, f"{spec.name}: the plain attribute {name!r} was "
                     "changed by a rejected round (only buffers, parameters and optimizer "
                     "state are restored: keep round state in a registered buffer)")
    after = _optimizer_states(booster)
    for saved, now in zip(optimizers, after, strict=True):
        assert_same(saved["state"], now["state"], f"{spec.name}: optimizer state")
    assert booster.rounds == 1
    groups = [g for opt in booster.learners.optimizers for g in opt.param_groups]
    for group, rate in zip(groups, rates, strict=True):
        group["lr"] = rate
    booster.learn(*example_batch(spec, 2))
    assert booster.rounds == 2 and all(torch.isfinite(p).all() for p in booster.parameters())


def check_state_dict_resumes_exactly(spec: BoosterSpec) -> None:
    booster = example_booster(spec, seed=0)
    for seed in range(3):
        booster.learn(*example_batch(spec, seed))
    copy = example_booster(spec, seed=1)  # other initial weights: the state must overwrite them
    copy.load_state_dict(booster.state_dict())
    x, _ = example_batch(spec, 9)
    hint = " (state in a plain attribute? state_dict saves buffers, parameters, extra state)"
    assert_same(booster.predict(x), copy.predict(x), f"{spec.name}: loaded prediction" + hint)
    for seed in (3, 4):  # each round from one seed of torch's generator: a learner's Dropout
        a, b = (_seeded(model.learn, 100 + seed, *example_batch(spec, seed))  # draws alike
                for model in (booster, copy))
        assert_same(a, b, f"{spec.name}: prediction of a round after loading" + hint)
    assert_same(booster.diagnostics(), copy.diagnostics(),
                 f"{spec.name}: diagnostics of a round after loading" + hint)
    assert_same(booster.state_dict(), copy.state_dict(), f"{spec.name}: state after loading")


def _seeded(call: Callable[..., Any], seed: int, *args: Any) -> Any:
    """``call(*args)`` with torch's generators seeded by ``seed`` and put back after: random
    draws inside (a learner's Dropout masks) come out the same for two models, so that what
    differs between them is state, not randomness."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return call(*args)


def check_schedule_steps_once_per_round(spec: BoosterSpec) -> None:
    def halve(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: 0.5 ** t)

    booster = example_booster(spec, lr_scheduler=halve)
    for seed in range(3):
        booster.learn(*example_batch(spec, seed))
    rate = booster.learners.optimizers[0].param_groups[0]["lr"]
    assert abs(rate - 0.05 * 0.5 ** 3) < 1e-12, f"{spec.name}: rate {rate} after 3 rounds"


def check_seeded_runs_are_identical(spec: BoosterSpec) -> None:
    runs = []
    for _ in range(2):
        booster = example_booster(spec, seed=0)
        for seed in range(3):
            booster.learn(*example_batch(spec, seed))
        runs.append(booster.state_dict())
    assert_same(runs[0], runs[1], f"{spec.name}: two seeded runs")


def check_options_are_recorded(spec: BoosterSpec) -> None:
    """A class that adds constructor options must name the attributes holding them in
    ``config_keys`` (they are saved with the state, and a state saved with other options is
    refused); without any, a state of another configuration would load silently."""
    import inspect
    own: set[str] = set()
    declared = False
    for cls in spec.cls.__mro__:
        if cls is Booster or not issubclass(cls, Booster):
            break
        declared = declared or bool(vars(cls).get("config_keys"))
        if "__init__" in vars(cls):  # beyond self, the learners (first) and the loss
            names = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            own |= set(names[2:]) - {"loss"}
    own -= set(inspect.signature(Booster.__init__).parameters)
    assert declared or not own, (
        f"{spec.name}: {spec.cls.__name__}'s constructor takes {sorted(own)} but the class "
        "declares no config_keys: a state saved with other values would load silently; list "
        "the attributes that hold these options in config_keys")


def check_export_equals_predict(spec: BoosterSpec) -> None:
    """A booster whose prediction is ``y^0 + Σ w_i h_i`` (``combination_weights``) exports a
    module equal to ``predict``, for all learners and the first one (anytime); any other
    refuses to export with a ``ValueError``."""
    booster = example_booster(spec)
    for seed in range(3):
        booster.learn(*example_batch(spec, seed))
    x, _ = example_batch(spec, 7)
    if booster.combination_weights(booster.prediction_learners) is None:
        try:
            booster.export()
        except ValueError:
            return
        raise AssertionError(f"{spec.name}: exported without combination_weights")
    with torch.no_grad():
        for k in (None, 1):
            module = booster.export(n_learners=k)
            gap = float((module(x) - booster.predict(x, k)).abs().max())
            assert gap <= 1e-5 * max(1.0, float(booster.predict(x, k).abs().max())), (
                f"{spec.name}: export(n_learners={k}) differs from predict by {gap:.3g} "
                "(combination_weights must give predict's weights of the learners' outputs)")


#: where :func:`raise_in_round` can make a round fail
ROUND_POINTS = ("forward", "objective", "backward", "optimizer_step", "after_step", "schedule")


class _Injected(Exception):
    """The failure :func:`raise_in_round` injects (or KeyboardInterrupt)."""


def check_anytime_predictions_match_combine(spec: BoosterSpec) -> None:
    """What the stall monitor judges (``anytime_predictions``) is, for every ``k``, the
    prediction of the first ``k`` learners (``combine`` of the partial sums up to ``y^k``): a
    booster that overrides ``combine`` overrides ``anytime_predictions`` too."""
    booster = example_booster(spec)
    if not booster.monitors_stall:
        return
    g = torch.Generator().manual_seed(0)
    partials = torch.randn(booster.n_learners + 1, _BATCH, booster.out_dim, generator=g)
    anytime = booster.anytime_predictions(partials)
    for k in range(booster.n_learners + 1):
        assert torch.allclose(anytime[k], booster.combine(partials[:k + 1]), atol=1e-6), (
            f"{spec.name}: anytime_predictions(partials)[{k}] is not combine(partials[:{k + 1}]):"
            " a booster that overrides combine must override anytime_predictions (the "
            "prediction of the first k learners for every k, which the stall monitor judges)")


def raise_in_round(booster: Booster, point: str, interrupt: bool = False) -> Callable[[], None]:
    """Make the next rounds of ``booster`` raise at ``point`` (:data:`ROUND_POINTS`; a
    ``KeyboardInterrupt`` with ``interrupt``): the learners' forward, the learners' objective,
    their backward pass, after the optimizer step has moved the parameters, the booster's
    ``after_step`` hook, or its schedule's step (boosters built with ``lr_scheduler``). Returns
    the function that removes the failure."""
    error: type[BaseException] = KeyboardInterrupt if interrupt else _Injected

    def fail(*_: Any, **__: Any) -> Any:
        raise error(f"injected at {point}")

    if point in ("forward", "objective", "after_step"):
        engine = booster.learners.engine
        patched = {"forward": [(engine, "forward"), (engine, "forward_one")],
                   "objective": [(booster, "learner_objective"), (booster, "learner_targets")],
                   "after_step": [(booster, "after_step")]}[point]
        saved = [(owner, name, name in vars(owner), vars(owner).get(name))
                 for owner, name in patched]
        for owner, name in patched:
            object.__setattr__(owner, name, fail)

        def remove() -> None:
            for owner, name, had, original in saved:
                if had:
                    object.__setattr__(owner, name, original)
                else:
                    object.__delattr__(owner, name)
        return remove
    if point == "backward":  # a hook on the learners' outputs: it runs inside backward()
        learners = booster.learners
        step_outputs = learners.step_outputs

        def failing_step(outputs: Tensor, *args: Any, **kwargs: Any) -> None:
            outputs.register_hook(fail)
            step_outputs(outputs, *args, **kwargs)

        object.__setattr__(learners, "step_outputs", failing_step)
        return lambda: object.__delattr__(learners, "step_outputs")
    if point == "optimizer_step":  # after the step has moved the parameters
        handles = [opt.register_step_post_hook(fail) for opt in booster.learners.optimizers]

        def remove_hooks() -> None:
            for handle in handles:
                handle.remove()
        return remove_hooks
    if point == "schedule":
        schedulers = booster.learners.schedulers
        if not schedulers:
            raise ValueError("point='schedule' needs a booster built with lr_scheduler")
        steps = [s.step for s in schedulers]
        for scheduler in schedulers:
            scheduler.step = fail  # type: ignore[method-assign]

        def restore_steps() -> None:
            for scheduler, step in zip(schedulers, steps, strict=True):
                scheduler.step = step  # type: ignore[method-assign]
        return restore_steps
    raise ValueError(f"point must be one of {ROUND_POINTS}, got {point!r}")


def _constant_schedule(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, _one)


def _one(_: int) -> float:
    return 1.0


def check_raise_anywhere_restores_everything(spec: BoosterSpec, point: str | None = None,
                                             interrupt: bool = False, rounds: int = 1) -> None:
    """Whatever raises in a round (every point of :func:`raise_in_round`, or ``point`` alone;
    ``KeyboardInterrupt`` with ``interrupt``) after ``rounds`` good rounds, the booster is
    bitwise as it was (state, optimizer state, plain attributes, counters) and its next round
    equals that of a twin that never failed."""
    for where in ROUND_POINTS if point is None else (point,):
        options = {"lr_scheduler": _constant_schedule} if where == "schedule" else {}
        booster, twin = (example_booster(spec, **options) for _ in range(2))
        for seed in range(rounds):
            booster.learn(*example_batch(spec, seed))
            twin.learn(*example_batch(spec, seed))
        for model in (booster, twin):  # mode="auto" settled, as after any first round
            model.learners.probe(example_batch(spec, rounds)[0])
        state, optimizers = _state(booster), _optimizer_states(booster)
        plain = _plain_attributes(booster)
        remove = raise_in_round(booster, where, interrupt)
        try:
            booster.learn(*example_batch(spec, rounds))
        except (_Injected, KeyboardInterrupt):
            pass
        else:
            raise AssertionError(f"{spec.name}: the failure at {where} did not raise")
        finally:
            remove()
        what = f"{spec.name}: after a failure at {where}"
        assert_same(state, _state(booster), f"{what}, the state")
        assert_same(optimizers, _optimizer_states(booster), f"{what}, the optimizer state")
        for name, value in _plain_attributes(booster).items():
            assert_same(plain.get(name), value, f"{what}, the plain attribute {name!r}")
        assert_same(booster.learn(*example_batch(spec, rounds)),
                    twin.learn(*example_batch(spec, rounds)), f"{what}, the next round")
        assert_same(_state(booster), _state(twin), f"{what}, the state after the next round")


#: Every check, in order.
CHECKS: tuple[Callable[[BoosterSpec], None], ...] = (
    check_learn_returns_scores, check_bad_input_changes_nothing,
    check_failed_round_restores_everything, check_state_dict_resumes_exactly,
    check_schedule_steps_once_per_round, check_seeded_runs_are_identical,
    check_options_are_recorded, check_export_equals_predict,
    check_anytime_predictions_match_combine, check_raise_anywhere_restores_everything)


def check_booster(spec: BoosterSpec) -> None:
    """Run every check of :data:`CHECKS` on ``spec``; the first broken contract raises an
    ``AssertionError`` naming it."""
    for check in CHECKS:
        check(spec)
