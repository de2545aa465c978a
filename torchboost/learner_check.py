"""Does a user's learner behave under boosting as it does in plain PyTorch?
:func:`check_learner`, re-exported by :mod:`torchboost.testing`.

>>> from torch import nn
>>> from torchboost.testing import check_learner
>>> report = check_learner(lambda: nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.2),
...                                              nn.Linear(8, 1)), torch.randn(16, 3))
>>> report["random_in_training"], report["mode"]
(True, 'stacked')

It boosts three copies of the learner (``SGB``, squared loss on seeded random labels of the
learner's output width, a few seeded rounds on batches shaped like ``example``) and checks, each
failure an ``AssertionError`` that names the contract and the fix:

* **stacked = loop**: the learners evaluated at once (``torch.func.vmap``) learn exactly what
  they learn one by one (within 1e-5), or the booster falls back to the loop and says why;
* **eval mode at predict**: ``predict`` runs the learners in ``eval()`` (two predictions agree,
  Dropout off) and gives every module its mode back;
* **frozen parameters stay frozen**: a parameter with ``requires_grad=False`` never moves;
* **export = predict**: ``booster.export()`` predicts what ``booster.predict`` does;
* **the state is in the state_dict**: a booster rebuilt from another's ``state_dict`` trains on
  bit for bit like it. Randomness (Dropout, any draw from torch's generator) is told apart from
  state kept in a plain attribute: the rounds are seeded, so a learner that only draws random
  numbers resumes exactly; one that keeps a counter or a running value in a plain attribute
  does not, and is named;
* **chained**, with ``chained=True``: the same, with the learners chained.

Returns what it found: the mode the booster chose (``"stacked"`` or ``"loop"``), why not stacked
(``""`` when stacked), whether the learner is random in training mode, and its output width.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.learners.stacked import stacking_problem

__all__ = ["check_learner"]

_ROUNDS = 3


def check_learner(factory: Callable[[], nn.Module], example: Tensor, *,
                  chained: bool = False, n_learners: int = 3) -> dict[str, Any]:
    """Check that the learners ``factory()`` builds behave under boosting as in plain PyTorch,
    on a batch shaped like ``example`` (at least 2 rows); see the module docstring. Raises
    ``AssertionError`` naming the first broken contract, ``ValueError`` for bad arguments.
    Torch's global random generator is as it was afterwards (the checks seed their own
    draws)."""
    with torch.random.fork_rng(devices=[]):
        return _check_learner(factory, example, chained, n_learners)


def _check_learner(factory: Callable[[], nn.Module], example: Tensor, chained: bool,
                   n_learners: int) -> dict[str, Any]:
    from torchboost import SGB  # the boosters import this package's modules

    if not callable(factory):
        raise ValueError(f"factory must build a learner: a callable returning an nn.Module, got "
                         f"{factory!r}")
    if not (torch.is_tensor(example) and example.ndim >= 2 and len(example) >= 2
            and example.is_floating_point()):
        raise ValueError("example must be a floating-point batch (B, ...) of at least 2 rows, "
                         f"got {_describe(example)}")
    torch.manual_seed(0)
    probe = factory()
    if not isinstance(probe, nn.Module):
        raise ValueError(f"factory must return an nn.Module, got {type(probe).__name__}")
    with torch.no_grad():
        out = probe(example)
    if not torch.is_tensor(out) or out.ndim not in (1, 2) or len(out) != len(example):
        raise AssertionError(f"the learner's output must be (B,) or (B, m) for B = {len(example)}"
                             f" rows, got {_describe(out)}: end it with a Linear(…, m)")
    width = 1 if out.ndim == 1 else out.shape[1]
    batches = _batches(example, width)
    random = _random_in_training(factory, example)

    def build(mode: str) -> Any:
        torch.manual_seed(0)
        return SGB(factory, n_learners=n_learners, n_outputs=width, mode=mode, chained=chained)

    loop = build("loop")  # the plain-PyTorch reference: one learner after the other
    _train(loop, batches)
    _check_predict(loop, batches[0][0])
    _check_resume(copy.deepcopy(loop), batches, build)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        auto = build("auto")
        frozen = _frozen(auto)
        _train(auto, batches)
    after = _frozen(auto)
    moved = [key for key, value in frozen.items()
             if key not in after or not torch.equal(value, after[key])]
    assert not moved, f"frozen parameters moved or became trainable in training: {moved}"
    report = {"mode": auto.learners.mode, "why_not_stacked": "", "random_in_training": random,
              "outputs": width}
    if auto.learners.mode == "loop":
        torch.manual_seed(0)
        report["why_not_stacked"] = stacking_problem(
            [factory() for _ in range(n_learners)], auto.learners.optimizer_spec) or " ".join(
            str(w.message) for w in caught if "falls back" in str(w.message))
    elif not random:  # a random learner draws its masks differently stacked and in a loop
        x = batches[0][0]
        torch.testing.assert_close(
            auto.predict(x), loop.predict(x), rtol=1e-5, atol=1e-5,
            msg=lambda m: "stacked learners did not learn what the same learners learn one by "
            f"one ({m}); pass mode='loop' to the booster, and report the learner")
    _check_predict(auto, batches[0][0])
    _check_export(auto, batches[0][0])
    if auto.learners.mode == "stacked":
        _check_resume(auto, batches, build)
    return report


def _batches(example: Tensor, width: int) -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(0)
    shape = (len(example),) if width == 1 else (len(example), width)
    return [(torch.randn(example.shape, generator=g, dtype=example.dtype),
             torch.randn(shape, generator=g, dtype=example.dtype)) for _ in range(_ROUNDS + 2)]


def _random_in_training(factory: Callable[[], nn.Module], example: Tensor) -> bool:
    """Whether the learner's training-mode output depends on torch's generator; raises if it
    differs under the same seed (it reads some other source of randomness)."""
    torch.manual_seed(0)
    learner = factory().train()
    outputs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs.append(learner(example))
    if not torch.equal(outputs[0], outputs[1]):
        raise AssertionError("the learner's output in training mode differs under the same seed:"
                             " its forward changes state it keeps (a counter or running value in"
                             " a plain attribute, which state_dict cannot save: keep it in a "
                             "buffer, self.register_buffer(name, tensor)) or draws from a "
                             "source other than torch's generator; runs cannot be reproduced "
                             "or resumed")
    return not torch.equal(outputs[0], outputs[2])


def _train(booster: Any, batches: list[tuple[Tensor, Tensor]]) -> None:
    for seed, (x, y) in enumerate(batches[:_ROUNDS]):
        torch.manual_seed(100 + seed)
        booster.learn(x, y)


def _check_predict(booster: Any, x: Tensor) -> None:
    modes = [m.training for m in booster.modules()]
    first, second = booster.predict(x), booster.predict(x)
    assert torch.equal(first, second), (
        "two predictions of the same batch differ: predict runs the learners in eval() mode, so "
        "a random layer must be off in eval mode (as nn.Dropout is)")
    assert [m.training for m in booster.modules()] == modes, (
        "predict did not give every module its train/eval mode back")


def _frozen(booster: Any) -> dict[str, Tensor]:
    """Copies of every learner's frozen parameters (``requires_grad=False``), by learner and
    name."""
    return {f"learner {i}: {name}": param.detach().clone()
            for i in range(booster.n_learners)
            for name, param in booster.learners.learner(i).named_parameters()
            if not param.requires_grad}


def _check_export(booster: Any, x: Tensor) -> None:
    torch.testing.assert_close(
        booster.export()(x), booster.predict(x), rtol=1e-5, atol=1e-5,
        msg=lambda m: f"export() does not predict what predict does ({m})")


def _check_resume(booster: Any, batches: list[tuple[Tensor, Tensor]],
                  build: Callable[[str], Any]) -> None:
    twin = build(booster.learners.mode)
    twin.load_state_dict(copy.deepcopy(booster.state_dict()))
    for seed, (x, y) in enumerate(batches[_ROUNDS:]):
        for model in (booster, twin):
            torch.manual_seed(200 + seed)
            model.learn(x, y)
    x = batches[0][0]
    assert torch.equal(_seeded_predict(booster, x), _seeded_predict(twin, x)), (
        "a booster rebuilt from the state_dict trains on differently: the learner keeps state in "
        "a plain attribute, which state_dict cannot save (rounds are seeded, so random draws "
        "like Dropout's are not the cause); keep it in a buffer: self.register_buffer(name, t)")


def _seeded_predict(booster: Any, x: Tensor) -> Tensor:
    torch.manual_seed(300)
    return booster.predict(x)


def _describe(value: Any) -> str:
    if torch.is_tensor(value):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__
