"""``compile=True``: the stacked learners' schedule-free AdamW step and the guards around it, as
one compiled function.

Eager, a default round's step is the ``schedulefree`` package's foreach ``AdamWScheduleFree.step``
(Defazio et al., "The Road Less Scheduled", NeurIPS 2024, Alg. 1, in its ``y``/``z`` form: ten
multi-tensor operations), preceded by check 2's gradient norms and followed by checks 3-4's
update norm (:func:`~torchboost.boosters.guards.guard_step`). On a CPU every ``_foreach_*``
operation loops over the stacked tensors and is one pass over memory; compiled, the whole of it
is one generated kernel per tensor. :class:`CompiledScheduleFreeStep` keeps the package's
arithmetic exactly where it is plain Python — the group's step count ``k``, warm-up, ``lr_max``,
the weight sum and ``c_{k+1}`` — and hands the tensor part its scalars as one tensor, so it
compiles once per layout and not once per step. The gradients are left as the backward wrote
them (the package divides them in place), so check 2's explanation reads the very gradients it
judged; parameters stay at the learning point ``y``, switched back by
:func:`~torchboost.learners.averaging.learning_point` as eagerly, so that checks 3-4's
explanation finds the stepped parameters.

It applies where it is the same step: one :class:`schedulefree.AdamWScheduleFree` over the
stacked learners (stacked mode, every learner stepping, one process), in train mode, with state
(the first step creates ``z`` and the second moment eagerly), a float learning rate, one dtype
(float32 or float64) and device, and no step hooks. Anything else takes the eager step and
:func:`guard_step`. One difference is visible outside the optimizer: after a round the
parameters' ``.grad`` hold the gradients as the backward wrote them, where the package leaves
them divided by its denominator.

Each booster compiles its own (:class:`~torchboost.compiling.OwnCompiled`), once per layout of
its stacked tensors; where torch cannot compile, the package's step runs, guarded.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import schedulefree
import torch
from torch import Tensor

from torchboost.boosters.guards import (
    MAX_RELATIVE_UPDATE,
    _raise_bad_step,
    _raise_unbounded_gradient,
    _row_norms,
    _square_limit,
    _update_norm,
    guard_step,
)
from torchboost.compiling import CompiledOnce, CompileFailed
from torchboost.deferred_checks import require_finite, within
from torchboost.distributed import Synchronizer
from torchboost.learners import WeakLearners

__all__ = ["CompiledScheduleFreeStep", "StepInputs", "applies", "schedule_free_step",
           "set_counters", "state_step_checks", "step_inputs", "values_on_device"]


def schedule_free_step(params: list[Tensor], grads: list[Tensor], zs: list[Tensor],
                        squares: list[Tensor], before: list[Tensor], scalars: list[Tensor],
                        gradient_limit: float, update_limit: float
                        ) -> tuple[Tensor, Tensor, Tensor]:
    """Schedule-free AdamW's foreach step (``schedulefree`` 1.4, ``AdamWScheduleFree.step``) on
    ``params`` (at ``y``) in place, tensor ``i`` with the scalars ``scalars[i]`` of its group
    (:func:`_bookkeeping`'s); returns check 2's gradient norms ``(tensors, N)`` and the verdicts of
    checks 2 and 3-4 (:func:`~torchboost.deferred_checks.within` values)."""
    with torch.no_grad():
        ratios = torch.stack([_row_norms(g) for g in grads])
        for y, grad, z, square, s in zip(params, grads, zs, squares, scalars, strict=True):
            beta2, one_minus_beta2, correction, eps, decay, ckp1, y_step, lr = s.unbind()
            square.mul_(beta2).addcmul_(grad, grad, value=one_minus_beta2)
            normalized = grad / ((square / correction).sqrt() + eps) + y * decay
            y.lerp_(z, ckp1).add_(normalized * y_step)
            z.sub_(normalized * lr)
        return (ratios, within(ratios.max(), gradient_limit),
                within(_update_norm(params, before), update_limit))


class CompiledScheduleFreeStep(CompiledOnce):
    """The compiled, guarded step of stacked schedule-free learners (module docstring); one per
    round transaction, compiled at its first call."""

    function = staticmethod(schedule_free_step)

    def bound(self, learners: WeakLearners, index: int | None, sync: Synchronizer | None,
              before: list[Tensor]) -> Callable[[], None] | None:
        """The step of every learner of ``learners`` as a call for
        :meth:`WeakLearners.step_outputs`'s ``optimizer_step``, stating checks 2-4 like
        :func:`~torchboost.boosters.guards.guard_step`, when it is the one ``opt.step()``
        would take (module docstring); else ``None``. ``before``: the stepped parameters'
        copies from before the round (the round's transaction's)."""
        if not learners.compiled or index is not None or sync is not None or self.failed:
            return None
        optimizers = learners.stepped_optimizers()
        if len(optimizers) != 1 or not applies(optimizers[0]):
            return None
        return partial(self._step, learners, optimizers[0], before)

    def _step(self, learners: WeakLearners, opt: torch.optim.Optimizer,
              before: list[Tensor]) -> None:
        inputs = step_inputs(opt, before)
        if inputs.params:
            limit = _square_limit(inputs.params[0].dtype)
            try:
                verdicts = self.compiled()(inputs.params, inputs.grads, inputs.zs,
                                           inputs.squares, inputs.before, inputs.scalars,
                                           limit, MAX_RELATIVE_UPDATE)
            except CompileFailed:  # torch cannot compile here: the package's step, guarded
                with guard_step(learners, None, before):
                    opt.step()
                return
            state_step_checks(opt, before, limit, *verdicts)
        set_counters(opt, inputs.counters)


class StepInputs(NamedTuple):
    """What :func:`schedule_free_step` takes of one optimizer, in the order of its groups: the
    stepped parameters, their gradients, ``z`` and second moments, their copies from before the
    round and each one's scalars (:func:`_bookkeeping`'s), and every group's counters after the
    step (:func:`set_counters`)."""

    params: list[Tensor]
    grads: list[Tensor]
    zs: list[Tensor]
    squares: list[Tensor]
    before: list[Tensor]
    scalars: list[Tensor]
    counters: list[dict[str, Any]]


def step_inputs(opt: torch.optim.Optimizer, before: list[Tensor],
                gradients: bool = True) -> StepInputs:
    """:class:`StepInputs` of ``opt`` (one :func:`applies`): the parameters with a gradient,
    or (``gradients=False``: the gradients are not computed yet, ``grads`` left empty) every
    trainable one. ``before``: the copies of every parameter ``opt`` steps, in its order."""
    inputs = StepInputs([], [], [], [], [], [], [])
    position = 0
    for group in opt.param_groups:
        group_scalars, after = _bookkeeping(group)
        inputs.counters.append(after)
        on_device = None
        for p in group["params"]:
            position += 1
            if (p.grad is None) if gradients else not p.requires_grad:
                continue
            if on_device is None:
                on_device = values_on_device(group_scalars, p)
            state = opt.state[p]
            inputs.params.append(p), inputs.zs.append(state["z"])
            inputs.squares.append(state["exp_avg_sq"]), inputs.before.append(before[position - 1])
            inputs.scalars.append(on_device)
            if gradients:
                inputs.grads.append(p.grad)
    return inputs


def state_step_checks(opt: torch.optim.Optimizer, before: list[Tensor], limit: float,
                      ratios: Tensor, gradients: Tensor, update: Tensor) -> None:
    """State :func:`schedule_free_step`'s verdicts of checks 2 and 3-4 with the eager
    explainers of :func:`~torchboost.boosters.guards.guard_step` (the stacked learners'), in
    its order."""
    require_finite(gradients, lambda: _raise_unbounded_gradient(
        ratios, limit, list(range(ratios.shape[1])), 0))
    require_finite(update, lambda: _raise_bad_step(
        _stepped(opt), [_stepped(opt)], before, True, 0))


def set_counters(opt: torch.optim.Optimizer, counters: list[dict[str, Any]]) -> None:
    """Set every group's counters after the step (:func:`step_inputs`'), once it has run."""
    for group, after in zip(opt.param_groups, counters, strict=True):
        group.update(after)


def _stepped(opt: torch.optim.Optimizer) -> list[Tensor]:
    """Every parameter ``opt`` steps, in the order of its groups."""
    return [p for group in opt.param_groups for p in group["params"]]


def applies(opt: torch.optim.Optimizer) -> bool:
    """Whether :func:`schedule_free_step` is ``opt.step()`` now (module docstring)."""
    if type(opt) is not schedulefree.AdamWScheduleFree or opt._optimizer_step_pre_hooks \
            or opt._optimizer_step_post_hooks or _global_step_hooks():
        return False
    kinds = set()
    for group in opt.param_groups:
        if not group["train_mode"] or not isinstance(group["lr"], float | int):
            return False
        for p in group["params"]:
            if not p.requires_grad:
                continue
            state = opt.state.get(p)
            if not state or "z" not in state:
                return False
            kinds.add((p.dtype, p.device, state["z"].dtype, state["exp_avg_sq"].dtype))
    return len(kinds) == 1 and next(iter(kinds))[0] in _DTYPES


#: the parameter dtypes the compiled step takes: those whose arithmetic it repeats (bfloat16
#: and float16 compute with the package's scalars in float32, then round: left to the package)
_DTYPES = (torch.float32, torch.float64)


def _bookkeeping(group: dict[str, Any]) -> tuple[list[float], dict[str, Any]]:
    """The package's arithmetic of one group before its tensor step (``AdamWScheduleFree.step``
    up to ``ckp1``): the compiled step's scalars — ``β2``, ``1 − β2``, the bias correction
    ``1 − β2^(k+1)``, ``ε``, the weight decay, ``c_{k+1}``, ``y``'s step ``lr (β1 (1 − c_{k+1})
    − 1)`` and ``lr`` — and the group's ``k``, ``scheduled_lr``, ``lr_max`` and ``weight_sum``
    after the step, as the package sets them (the group is left as it is)."""
    k = group["k"]
    beta1, beta2 = group["betas"]
    warmup_steps = group["warmup_steps"]
    sched = (k + 1) / warmup_steps if k < warmup_steps else 1.0
    bias_correction2 = 1 - beta2 ** (k + 1)
    lr = group["lr"] * sched
    lr_max = max(lr, group["lr_max"])
    weight = ((k + 1) ** group["r"]) * (lr_max ** group["weight_lr_power"])
    weight_sum = group["weight_sum"] + weight
    ckp1 = weight / weight_sum if weight_sum != 0 else 0.0
    scalars = [beta2, 1 - beta2, bias_correction2, group["eps"], group["weight_decay"], ckp1,
               lr * (beta1 * (1 - ckp1) - 1), lr]
    return scalars, {"k": k + 1, "scheduled_lr": lr, "lr_max": lr_max, "weight_sum": weight_sum}


def values_on_device(values: list[float], like: Tensor) -> Tensor:
    """``values`` as a tensor of ``like``'s dtype and device; to a CUDA device from pinned
    memory, queued on the stream (a plain copy from host memory would wait for the device:
    a host sync every round)."""
    values_on_host = torch.tensor(values, dtype=like.dtype)
    if like.device.type == "cuda":
        return values_on_host.pin_memory().to(like.device, non_blocking=True)
    return values_on_host.to(like.device)


def _global_step_hooks() -> bool:
    """Whether hooks were registered for every optimizer's step
    (``torch.optim.optimizer.register_optimizer_step_pre_hook`` and its post twin)."""
    from torch.optim import optimizer as module

    return bool(module._global_optimizer_pre_hooks or module._global_optimizer_post_hooks)
