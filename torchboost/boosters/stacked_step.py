"""The stacked learners' schedule-free AdamW step and the guards around it: in seven multi-tensor
operations eagerly, or as one compiled function with ``compile=True``.

The step is the ``schedulefree`` package's ``AdamWScheduleFree.step`` (Defazio et al., "The
Road Less Scheduled", NeurIPS 2024, Alg. 1, in its ``y``/``z`` form), preceded by check 2's
gradient norms and followed by checks 3-4's update norm, the checks of
:func:`~torchboost.boosters.guards.guard_step`. The package's arithmetic of a group's scalars
— the step count ``k``, warm-up, ``lr_max``, the weight sum and ``c_{k+1}`` — is kept exactly,
in Python (:func:`_bookkeeping`); the tensor part is done here in one of two forms:

* eagerly, :func:`foreach_schedule_free_step`: seven multi-tensor operations where the
  package's foreach step takes ten. With the bias correction ``b = 1 − β2^(k+1)``, the
  package's ``g / (sqrt(v / b) + ε)`` is ``sqrt(b) · g / (sqrt(v) + ε sqrt(b))``: the
  correction moves into two scalars, and ``y`` and ``z`` each take the normalised gradient in
  one ``addcdiv`` without it being written (a weight decay adds three operations). On a CPU
  each is a loop over the stacked tensors, one pass over memory each: default rounds 0.94× as
  long for the small shape, 0.96× for SLICE N = 64 and MNIST N = 8
  (``benchmarks/versions.py 5b30060 e2a7112 --shapes small slice mnist``). The same numbers
  to rounding (a few units in the last place, ``tests/test_stacked_step.py``);
* with ``compile=True``, :func:`schedule_free_step`: the package's operations tensor by tensor,
  the scalars handed over as one tensor per group (so it compiles once per layout, not once per
  step), one generated kernel per tensor
  (:class:`StackedScheduleFreeStep` here; the whole round,
  :mod:`~torchboost.boosters.compiled_round`).

Either way the gradients are left as the backward wrote them (the package divides them in
place), so check 2's explanation reads the very gradients it judged, and parameters stay at the
learning point ``y``, switched back by :func:`~torchboost.learners.averaging.learning_point`
as after the package's step, so that checks 3-4's explanation finds the stepped parameters.

It applies where it is the same step: one :class:`schedulefree.AdamWScheduleFree` taking the
options of ``schedulefree`` 1.4 over the stacked learners (stacked mode, every learner
stepping, one process), in train mode, with state (the first step creates ``z`` and the second
moment: the package's), a float learning rate, one dtype (float32 or float64) and device, its
class's ``step`` (a learning-rate scheduler's wrapper allowed) and no step hooks. Anything else
takes the package's step and :func:`~torchboost.boosters.guards.guard_step`. One difference is
visible outside the optimizer: after a round the parameters' ``.grad`` hold the gradients as
the backward wrote them, where the package leaves them divided by its denominator.

Each booster compiles its own (:class:`~torchboost.compiling.OwnCompiled`), once per layout of
its stacked tensors; where torch cannot compile, the eager step runs.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable
from functools import lru_cache, partial
from typing import Any, NamedTuple

import schedulefree
import torch
from torch import Tensor

from torchboost.boosters.guards import (
    MAX_RELATIVE_UPDATE,
    _largest,
    _raise_bad_step,
    _raise_unbounded_gradient,
    _row_norms,
    _square_limit,
    _update_norm,
)
from torchboost.compiling import CompiledOnce, CompileFailed
from torchboost.deferred_checks import require_finite, within
from torchboost.distributed import Synchronizer
from torchboost.learners import WeakLearners
from torchboost.scalars import scalar
from torchboost.without_grad import without_grad

__all__ = ["StackedScheduleFreeStep", "StepInputs", "applies", "device_scalars",
           "foreach_schedule_free_step", "schedule_free_step", "set_counters",
           "state_step_checks", "step_inputs", "values_on_device"]


def schedule_free_step(params: list[Tensor], grads: list[Tensor], zs: list[Tensor],
                        squares: list[Tensor], before: list[Tensor], scalars: list[Tensor],
                        gradient_limit: float, update_limit: float
                        ) -> tuple[Tensor, Tensor, Tensor]:
    """Schedule-free AdamW's step (``schedulefree`` 1.4, ``AdamWScheduleFree.step``) on
    ``params`` (at ``y``) in place, tensor by tensor, tensor ``i`` with the scalars
    ``scalars[i]`` of its group (:func:`device_scalars`): the form ``torch.compile`` takes,
    between the checks (:func:`_checked`'s returns)."""

    def step() -> None:
        for y, grad, z, square, s in zip(params, grads, zs, squares, scalars, strict=True):
            beta2, one_minus_beta2, correction, eps, decay, ckp1, y_step, lr = s.unbind()
            square.mul_(beta2).addcmul_(grad, grad, value=one_minus_beta2)
            normalized = grad / ((square / correction).sqrt() + eps) + y * decay
            y.lerp_(z, ckp1).add_(normalized * y_step)
            z.sub_(normalized * lr)

    return _checked(step, params, grads, before, gradient_limit, update_limit)


def foreach_schedule_free_step(inputs: StepInputs) -> None:
    """:func:`schedule_free_step`'s step eagerly, without the checks, group by group in
    multi-tensor operations with the group's scalars as numbers (``inputs.groups``): ``v ← β2 v
    + (1 − β2) g²``, ``d = sqrt(v) + ε sqrt(b)``, ``y ← y + c (z − y) + sqrt(b) y_step · g / d``
    and ``z ← z − sqrt(b) lr · g / d`` (module docstring), the weight decay's ``λ y`` (at ``y``
    before the step, as the package) in three operations more where a group has one."""
    with without_grad():
        for tensors, scalars in inputs.groups:
            params, grads = inputs.params[tensors], inputs.grads[tensors]
            if not params:  # every parameter of the group frozen
                continue
            zs, squares = inputs.zs[tensors], inputs.squares[tensors]
            beta2, one_minus_beta2, correction, eps, decay, ckp1, y_step, lr = scalars
            root = math.sqrt(correction)
            torch._foreach_mul_(squares, _operand(beta2, squares[0]))
            torch._foreach_addcmul_(squares, grads, grads, value=one_minus_beta2)
            denominators = torch._foreach_sqrt(squares)
            _add_number(denominators, eps * root)
            decayed = (torch._foreach_mul(params, _operand(decay, params[0])) if decay != 0
                       else None)
            torch._foreach_lerp_(params, zs, ckp1)
            if decayed is not None:
                torch._foreach_add_(params, decayed, alpha=y_step)
                torch._foreach_add_(zs, decayed, alpha=-lr)
            torch._foreach_addcdiv_(params, grads, denominators, value=y_step * root)
            torch._foreach_addcdiv_(zs, grads, denominators, value=-lr * root)


def _operand(value: float, like: Tensor) -> Tensor | float:
    """``value`` as the operand of a multi-tensor product with ``like``'s tensors: on the CPU a
    cached 0-dim tensor of their dtype (a number costs four ATen operations more per tensor
    there, :mod:`~torchboost.scalars`), elsewhere the number (foreach's one-launch form)."""
    return scalar(value, like) if like.device.type == "cpu" else value


def _add_number(tensors: list[Tensor], value: float) -> None:
    """``t += value`` for every tensor, the number rounded to their dtype as ``t.add_(value)``
    does; on the CPU as ``t + value · 1`` with a cached 0-dim one (:func:`_operand`), where the
    dtype holds the number (torch refuses an ``alpha`` beyond it, where the number itself rounds
    to inf: an ε of 1e39 in float32 makes the step 0, as the package's)."""
    if tensors[0].device.type == "cpu" and abs(value) <= _largest(tensors[0].dtype):
        one = scalar(1.0, tensors[0])
        torch._foreach_add_(tensors, [one] * len(tensors), alpha=value)
    else:
        torch._foreach_add_(tensors, value)


def _checked(step: Callable[[], None], params: list[Tensor], grads: list[Tensor],
             before: list[Tensor], gradient_limit: float,
             update_limit: float) -> tuple[Tensor, Tensor, Tensor]:
    """``step()`` between the checks of :func:`~torchboost.boosters.guards.guard_step`, on the
    device: returns check 2's gradient norms ``(tensors, N)``, taken before the step, and the
    verdicts of checks 2 and 3-4 (:func:`~torchboost.deferred_checks.within` values)."""
    with without_grad():
        ratios = torch.stack([_row_norms(g) for g in grads])
        step()
        return (ratios, within(ratios.max(), gradient_limit),
                within(_update_norm(params, before), update_limit))


class StackedScheduleFreeStep(CompiledOnce):
    """The guarded step of stacked schedule-free learners (module docstring), eager or compiled
    (at its first call); one per round transaction."""

    function = staticmethod(schedule_free_step)

    def bound(self, learners: WeakLearners, index: int | None, sync: Synchronizer | None,
              before: list[Tensor]) -> Callable[[], None] | None:
        """The step of every learner of ``learners`` as a call for
        :meth:`WeakLearners.step_outputs`'s ``optimizer_step``, stating checks 2-4 like
        :func:`~torchboost.boosters.guards.guard_step`, when it is the one ``opt.step()``
        would take (module docstring); else ``None``. ``before``: the stepped parameters'
        copies from before the round (the round's transaction's)."""
        if index is not None or sync is not None or learners.mode != "stacked":
            return None
        optimizers = learners.stepped_optimizers()
        if len(optimizers) != 1 or not applies(optimizers[0]):
            return None
        return partial(self._step, learners.compiled and not self.failed, optimizers[0],
                       before)

    def _step(self, compiled: bool, opt: torch.optim.Optimizer, before: list[Tensor]) -> None:
        inputs = step_inputs(opt, before)
        if inputs.params:
            limit = _square_limit(inputs.params[0].dtype)
            verdicts = None
            if compiled:
                with contextlib.suppress(CompileFailed):  # torch cannot compile here: eagerly
                    verdicts = self.compiled()(inputs.params, inputs.grads, inputs.zs,
                                               inputs.squares, inputs.before,
                                               device_scalars(inputs), limit,
                                               MAX_RELATIVE_UPDATE)
            if verdicts is None:
                verdicts = _checked(partial(foreach_schedule_free_step, inputs), inputs.params,
                                    inputs.grads, inputs.before, limit, MAX_RELATIVE_UPDATE)
            state_step_checks(opt, before, limit, *verdicts)
        set_counters(opt, inputs.counters)
        if "step" in vars(opt):  # what a scheduler's wrapper of ``opt.step`` records
            opt._opt_called = True  # type: ignore[attr-defined]


class StepInputs(NamedTuple):
    """What the step takes of one optimizer, in the order of its groups: the stepped
    parameters, their gradients, ``z`` and second moments and their copies from before the
    round; every group's share of them (a slice of these lists) and its scalars
    (:func:`_bookkeeping`'s); and every group's counters after the step
    (:func:`set_counters`)."""

    params: list[Tensor]
    grads: list[Tensor]
    zs: list[Tensor]
    squares: list[Tensor]
    before: list[Tensor]
    groups: list[tuple[slice, list[float]]]
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
        first = len(inputs.params)
        for p in group["params"]:
            position += 1
            if (p.grad is None) if gradients else not p.requires_grad:
                continue
            state = opt.state[p]
            inputs.params.append(p), inputs.zs.append(state["z"])
            inputs.squares.append(state["exp_avg_sq"]), inputs.before.append(before[position - 1])
            if gradients:
                inputs.grads.append(p.grad)
        inputs.groups.append((slice(first, len(inputs.params)), group_scalars))
    return inputs


def device_scalars(inputs: StepInputs) -> list[Tensor]:
    """Every stepped tensor's group scalars as one tensor on its device, made once per group:
    what :func:`schedule_free_step` takes."""
    scalars: list[Tensor] = []
    for tensors, values in inputs.groups:
        params = inputs.params[tensors]
        if params:
            scalars += [values_on_device(values, params[0])] * len(params)
    return scalars


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
    """Whether the step here is ``opt.step()`` now (module docstring)."""
    if type(opt) is not schedulefree.AdamWScheduleFree or not _known_options(type(opt)) \
            or not _own_step(opt) or opt._optimizer_step_pre_hooks \
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


def _own_step(opt: torch.optim.Optimizer) -> bool:
    """Whether ``opt.step`` is its class's: not replaced on the instance, or wrapped only by a
    learning-rate scheduler (which counts the calls, for its order warning: the flag torch's
    ``LRScheduler`` sets on its wrapper, around the class's step itself)."""
    step = vars(opt).get("step")
    return step is None or (getattr(step, "_wrapped_by_lr_sched", False)
                            and getattr(step, "__wrapped__", None) is type(opt).step)


#: the options of ``schedulefree.AdamWScheduleFree`` whose step this module repeats (1.4); a
#: version that takes others (a later one adds ``inner_momentum``) keeps its own step
_OPTIONS = ("params", "lr", "betas", "eps", "weight_decay", "warmup_steps", "r",
            "weight_lr_power", "foreach")


@lru_cache
def _known_options(kind: type) -> bool:
    """Whether the optimizer class ``kind`` takes exactly :data:`_OPTIONS`."""
    return tuple(inspect.signature(kind.__init__).parameters)[1:] == _OPTIONS


#: the parameter dtypes the step takes: those whose arithmetic it repeats (bfloat16 and
#: float16 compute with the package's scalars in float32, then round: left to the package)
_DTYPES = (torch.float32, torch.float64)


def _bookkeeping(group: dict[str, Any]) -> tuple[list[float], dict[str, Any]]:
    """The package's arithmetic of one group before its tensor step (``AdamWScheduleFree.step``
    up to ``ckp1``): the step's scalars — ``β2``, ``1 − β2``, the bias correction
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
