"""The two points of a schedule-free learner: where it learns, and what it predicts with.

Schedule-free AdamW (Defazio et al., "The Road Less Scheduled", NeurIPS 2024, Alg. 1; the
``schedulefree`` package is its reference implementation and the learners' default optimizer,
:data:`~torchboost.learners.optimizers.DEFAULT_OPTIMIZER`) keeps three sequences per parameter:
``z`` (the base SGD-like sequence), ``x`` (the running average of the ``z``'s, used to predict)
and ``y = (1 − β1) z + β1 x``, where the gradient is evaluated. The package stores ``y`` in the
parameter while the optimizer is in train mode and ``x`` in eval mode; ``optimizer.train()`` and
``optimizer.eval()`` switch in place (one ``lerp`` per parameter, no copy).

torchboost keeps every schedule-free learner in eval mode at rest, so everything that reads the
parameters — ``predict``, ``evaluate``, anytime prediction, ``export``, Lightning validation and
test, :class:`~torchboost.lightning.StreamingCallback`, ``state_dict``, ``learner(i)`` — sees the
averaged weights ``x`` without knowing about the optimizer. A round switches the learners it
trains to ``y`` for its own forward, backward and step (:func:`learning_point`), then back; the
switching is the library's, never the user's. A round that raises is put back bitwise by the
round's transaction (:mod:`torchboost.boosters.transaction`), so the switch need not undo itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import schedulefree
import torch

from torchboost.without_grad import without_grad

__all__ = ["is_schedule_free", "learning_point", "window_average"]


def is_schedule_free(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` keeps a learning point apart from its prediction point: it has the
    ``train()``/``eval()`` switch of the ``schedulefree`` package (its ``train_mode`` flag)."""
    return "train_mode" in optimizer.defaults and callable(getattr(optimizer, "eval", None))


def window_average(optimizers: Sequence[torch.optim.Optimizer], window: int) -> None:
    """After a step, bound the schedule-free ``optimizers``' average to about its last
    ``window`` steps: the weight sum (Defazio et al.'s ``Σ_{i≤t} w_i``, the ``weight_sum`` of
    each parameter group) is capped at ``window`` times the weight of the step just taken, so
    every later step weighs at least ``1 / (window + 1)`` in ``x``. Up to ``window`` steps this
    is the uniform average of Alg. 1; after it, an exponential average of horizon ``window``.
    The uniform average over a whole stream keeps an old concept in the predicting weights for
    as long again as the stream that taught it: after an abrupt change of river's
    ``FriedmanDrift``, the default learners' error over the next 2,000 examples was 1.4 to 1.7
    times Adam's (no average); with ``window=30`` it is at most Adam's on all three drift
    types, and lower than the uniform average's over the whole stream
    (``experiments/streams.py``). The rounds' transactions restore the sum with the rest
    of the optimizer's settings."""
    for opt in optimizers:
        for group in opt.param_groups:
            if "weight_sum" not in group:
                continue
            step_weight = (group["k"] ** group["r"]) * group["lr_max"] ** group["weight_lr_power"]
            group["weight_sum"] = min(group["weight_sum"], window * step_weight)


@contextmanager
def learning_point(optimizers: Sequence[torch.optim.Optimizer]) -> Iterator[None]:
    """Inside the block, the schedule-free ``optimizers``' parameters hold the learning point
    ``y`` (train mode); on a normal exit, the averaged weights ``x`` again (eval mode).
    Optimizers without the switch are left alone. On an exception nothing is switched back: the
    caller restores the state it saved (the round's transaction does)."""
    switched = [opt for opt in optimizers if is_schedule_free(opt)]
    _switch(switched, train=True)
    yield
    _switch(switched, train=False)


#: schedule-free optimizers whose ``train()``/``eval()`` move every parameter toward its ``z``
#: by ``1 − β1`` / ``1 − 1/β1`` (``schedulefree`` 1.4): switched here in one multi-tensor
#: ``lerp`` per weight instead of one call per parameter
_LERP_SWITCH = (schedulefree.AdamWScheduleFree, schedulefree.RAdamScheduleFree)


def _switch(optimizers: Sequence[torch.optim.Optimizer], train: bool) -> None:
    """``opt.train()`` (or ``opt.eval()``) for every optimizer, as one ``torch._foreach_lerp_``
    per distinct weight for those of :data:`_LERP_SWITCH` (the same arithmetic; in the run of
    ``benchmarks/schedule_free_cost.py`` that chose it, both ways took 67 µs of a 5.8 ms N = 64
    stacked round in the SLICE shape, and one call per parameter, 2 × 4 of them there, 74 µs;
    in loop mode, 8 learners, 60 µs against 176 µs; the file holds the latest run)."""
    moves: dict[float, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
    for opt in optimizers:
        if type(opt) not in _LERP_SWITCH:
            opt.train() if train else opt.eval()  # type: ignore[attr-defined]
            continue
        for group in opt.param_groups:
            if group["train_mode"] == train:
                continue
            beta1 = group["betas"][0]
            params, targets = moves.setdefault(1 - beta1 if train else 1 - 1 / beta1, ([], []))
            for param in group["params"]:
                state = opt.state.get(param)
                if state and "z" in state:
                    params.append(param)
                    targets.append(state["z"])
            group["train_mode"] = train
    with without_grad():
        for weight, (params, targets) in moves.items():
            if params:
                torch._foreach_lerp_(params, targets, weight)
