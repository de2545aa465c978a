"""``compile=True``: a round's arithmetic — standardisation, the learners' forward and backward,
the booster's targets and the schedule-free step with its guards — as one compiled function.

Eager, a default round of :meth:`Booster.learn <torchboost.boosters.base.Booster.learn>` is
about 600 small operations (``benchmarks/round_cost.py``): the standardiser's update
(:func:`~torchboost.boosters.scaling.prepare`), the stacked forward, the partial sums and
targets (:meth:`~torchboost.boosters.base.Booster.plan_round`), check 1's sum
(:func:`~torchboost.boosters.guards.check_round`), the learners' loss gradient, autograd's
backward and the schedule-free AdamW step with checks 2-4
(:func:`~torchboost.boosters.stacked_step.schedule_free_step`), then what the book-keeping
and the stall monitor add up of the round (``Booster._round_sums``,
:meth:`~torchboost.boosters.stall.StallMonitor.batch_sums`). :func:`_round_body` is that
sequence, calling the very same functions: the backward is ``torch.func.vjp`` of the stacked
learners' forward as a function of their parameters
(:meth:`~torchboost.learners.stacked.StackedEngine.functional`) applied to the closed-form
gradient of their losses, which is what ``outputs.backward(output_grad)`` computes.
``torch.compile`` turns it into a few generated kernels; the round's Python around it — the
transaction, the learning point, the checks read once, the book-keeping — stays as it is, and
the verdicts the function returns are stated with the eager explainers in the eager order, so
a failing round raises the eager error and rolls back bitwise.

It applies where the compiled function is the eager round, and faster
(:meth:`CompiledRound.bound`): a booster whose round is
:meth:`~torchboost.boosters.base.Booster.plan_round`'s (SGB and its variants, OGB,
SingleLearner; not the multiclass boosters or StagewiseGB) on one process, stacked learners on
the direct GEMM path of :mod:`~torchboost.learners.stacked_sequential` (multi-layer
perceptrons; convolutions compiled whole were slower through ``vmap`` and no faster on the
direct path, :func:`_plain_learners`) without buffers, hooks or random layers (a compiled
Dropout draws other masks than the eager one), the schedule-free step
:func:`~torchboost.boosters.stacked_step.applies` to with every parameter trainable, and
(standardised boosters) once the first round has sized
the statistics. Elsewhere ``compile=True`` compiles the step and the standardiser apart
(:mod:`~torchboost.boosters.stacked_step`). One difference is visible outside the round, as
there: the parameters' ``.grad`` hold the gradients unscaled. A user's loss whose Python state
changes at every call (a counter) makes torch compile the round again every round, up to its
limit (``torch._dynamo.config.recompile_limit``), after which torch warns and runs it
uncompiled, with the same results.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.boosters.guards import (
    MAX_RELATIVE_UPDATE,
    _bad_rows,
    _raise_bad_rows,
    _square_limit,
)
from torchboost.boosters.scaling import prepare
from torchboost.boosters.stacked_step import (
    applies,
    device_scalars,
    schedule_free_step,
    set_counters,
    state_step_checks,
    step_inputs,
    values_on_device,
)
from torchboost.compiling import CompiledOnce, CompileFailed
from torchboost.deferred_checks import require_finite
from torchboost.learners.averaging import window_average
from torchboost.learners.stacked import StackedEngine
from torchboost.learners.stacked_sequential import CONVOLUTIONS

__all__ = ["CompiledRound", "Trained"]

#: what the compiled round gives the rest of the round: the standardised features and labels,
#: the map of predictions to the user's units (``None``: the identity), and the learners'
#: outputs, the partial sums, the prediction, the targets, their weights and the
#: book-keeping's sums (a :class:`~torchboost.boosters.base.Round`'s)
Trained = tuple[Tensor, Tensor, Callable[[Tensor], Tensor] | None,
                tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None, Any]]


def _round_body(booster: nn.Module, names: list[str], params: list[Tensor],
                zs: list[Tensor], squares: list[Tensor], before: list[Tensor],
                scalars: list[Tensor], x: Tensor, z: Tensor, y0: Tensor, seen: Tensor | None,
                gradient_limit: float) -> tuple[Any, ...]:
    """One round's arithmetic (module docstring) on checked features ``x`` and encoded labels
    ``z``, the stacked ``params`` (named ``names``) at their learning point stepped in place,
    and what the book-keeping and the stall monitor add up of it (``seen``: the examples the
    monitor has seen, a 1-element tensor, as a number would compile once per value; ``None``
    without a monitor)."""
    standardizer = booster.standardizer
    prepared = None
    if standardizer is not None:
        prepared = prepare(standardizer, x, z, None)
        x, z = prepared[:2]
    engine = booster.learners.engine

    def forward(stacked: dict[str, Tensor]) -> Tensor:
        out = engine.functional(stacked, x)
        return out.unsqueeze(-1) if out.ndim == 2 else out

    h, pullback = torch.func.vjp(forward, dict(zip(names, params, strict=True)))
    partials = booster.partial_sums(h, y0)
    targets, weights = booster.learner_objective(h, partials, z)
    finite = h.sum() + partials.sum() + targets.sum()  # check 1 (:func:`check_round`)
    output_grad = booster.learner_loss_grad(h, targets)
    if weights is not None:
        output_grad = output_grad * weights
    named = pullback(output_grad)[0]
    grads = [named[name] for name in names]
    verdicts = schedule_free_step(params, grads, zs, squares, before, scalars, gradient_limit,
                                  MAX_RELATIVE_UPDATE)
    sums = (booster._round_sums(h, targets, z, weights), None if booster.stall is None
            else booster.stall.batch_sums(booster.anytime_predictions(partials), z, seen))
    return (prepared, h, partials, booster.combine(partials), targets, weights, finite, grads,
            verdicts, sums)


class CompiledRound(CompiledOnce):
    """A booster's compiled round (module docstring); one per round transaction, compiled at
    its first call."""

    function = staticmethod(_round_body)

    def bound(self, booster: Any, before: list[Tensor],
              trained: Callable[[], bool]) -> Callable[[Tensor, Tensor], Trained | None] | None:
        """The round's learning part as a call on checked features and encoded labels, inside
        the learners' learning point, when the compiled function is the eager round (module
        docstring); else ``None``. The call returns ``None`` where torch cannot compile (then
        nothing has changed). ``before``: the stepped parameters' copies from before the round;
        ``trained``: whether the learners had stepped before it (check 1's explainer)."""
        learners = booster.learners
        if not learners.compiled or self.failed:
            return None
        engine = learners.engine
        if not (isinstance(engine, StackedEngine) and booster.plain_round()
                and _plain_learners(learners, engine)):
            return None
        opt = engine.optimizers[0]
        if not applies(opt):
            return None
        params = engine.named_stacked()
        if not all(p.requires_grad for p in params.values()):
            return None
        return partial(self._run, booster, opt, params, before, trained)

    def _run(self, booster: Any, opt: torch.optim.Optimizer, params: dict[str, Tensor],
             before: list[Tensor], trained: Callable[[], bool], x: Tensor,
             z: Tensor) -> Trained | None:
        inputs = step_inputs(opt, before, gradients=False)
        names = {id(p): name for name, p in params.items()}
        limit = _square_limit(x.dtype)
        # the monitor's count, (1,), on its device: torch's guards read the value of a 0-dim
        # CPU tensor, a host read on a GPU
        stall = booster.stall
        seen = (None if stall is None
                else values_on_device([float(max(stall.seen, 1))], stall.statistic_sum))
        try:  # without autograd around it (``vjp`` differentiates inside): no graph kept
            with torch.no_grad():
                (prepared, h, partials, prediction, targets, weights, finite, grads, verdicts,
                 sums) = self.compiled()(booster, [names[id(p)] for p in inputs.params],
                                        inputs.params, inputs.zs, inputs.squares, inputs.before,
                                        device_scalars(inputs), x, z, booster.initial_prediction(x),
                                        seen, limit)
        except CompileFailed:  # raised before anything ran: the eager round instead
            return None
        to_user_units = None
        if prepared is not None:
            x, z, to_user_units = booster.standardizer.adopt(prepared)
        booster._check_width(h)
        require_finite(finite, lambda: _raise_bad_rows(_bad_rows(h, partials, targets), 0,
                                                       trained))
        for p, grad in zip(inputs.params, grads, strict=True):  # as the backward leaves
            # them: in the parameter's layout (autograd's gradient layout contract)
            p.grad = grad if grad.stride() == p.stride() else torch.empty_like(p).copy_(grad)
        state_step_checks(opt, before, limit, *verdicts)
        set_counters(opt, inputs.counters)
        if booster.learners.averaging_window is not None:
            window_average([opt], booster.learners.averaging_window)
        return x, z, to_user_units, (h, partials, prediction, targets, weights, sums)


def _plain_learners(learners: nn.Module, engine: StackedEngine) -> bool:
    """Whether the stacked learners compute the same compiled as eagerly — no buffers, no
    hooks (on the learners' modules, the container, its engine, the stacked parameters, or
    every module), no random layers — and faster: multi-layer perceptrons on the direct GEMM
    path. Not convolutions: through ``vmap`` an MNIST round compiled whole was 22 % slower than
    with the step compiled apart; on the direct path no faster beyond the noise (0.98 by the
    median of alternating windows, 1.25 by the fastest, ``benchmarks/versions.py --compile``)
    and 17 s to compile, not 6 s."""
    if not engine.direct or engine.has_buffers or _global_module_hooks():
        return False
    for module in (*learners.modules(), *engine.template.modules()):
        if (type(module) in CONVOLUTIONS or isinstance(module, nn.modules.dropout._DropoutNd)
                or module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks):
            return False
    return not any(p._backward_hooks or p._post_accumulate_grad_hooks
                   for p in learners.parameters())


def _global_module_hooks() -> bool:
    """Whether hooks were registered for every module (``register_module_forward_hook`` and
    its kin)."""
    from torch.nn.modules import module

    return bool(module._global_forward_hooks or module._global_forward_pre_hooks
                or module._global_backward_hooks or module._global_backward_pre_hooks)
