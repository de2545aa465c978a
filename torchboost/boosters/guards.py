"""Numerical guards of :meth:`Booster.learn <torchboost.boosters.base.Booster.learn>`: a round that
produces NaN or inf, or an absurdly large step, raises :class:`DivergenceError`, naming the learner,
and no non-finite value reaches the model.

One round (module docstring of :mod:`torchboost.boosters.base`) is checked four times:

1. :func:`check_round`, before any state changes: the learners' outputs ``h_i(x)``, the partial
   sums ``y^0..y^N`` and the learners' targets must be finite (e.g. SGB, Hu et al. 2017, Alg. 1
   lines 6 and 11: a large step ``η`` makes ``y^i = y^{i−1} − η h_i`` overflow);
2. :func:`guard_step`, after the backward pass and before any optimizer steps: every learner's
   gradient must have a finite norm (per parameter tensor) of at most ``sqrt`` of its dtype's
   largest value (about 1.8e19 in float32), so that no square ``g²`` — Adam's second moment —
   can overflow to inf and silently freeze the learner; parameters and optimizer state are
   still untouched;
3. :func:`guard_step`, after the step: every parameter must be finite, and
4. no learner's parameters may have moved by more than :data:`MAX_RELATIVE_UPDATE` times their
   norm before the round (or 1): a finite but absurd step, such as SGD's with ``lr=1e30``.
   Otherwise the round's transaction restores the stepped learners' parameters *and* their
   optimizers' states from its copies (:mod:`~torchboost.boosters.transaction`), so the booster
   continues once the learning rate is lowered.

Every booster runs its round through :meth:`Booster.learn
<torchboost.boosters.base.Booster.learn>`, so these checks cover them all (SGB, ResidualSGB,
OGB, ConvexHullOGB, SingleLearner, StagewiseGB's stages and the multiclass boosters), and the
round restores the booster's own buffers (σ, α, Hedge, running sums, ...) and the random
generators (its own, torch's global ones) when it raises.

Proof instead of copies. For torch's Adam and AdamW (the default optimizer) the size of every
entry's update is bounded before the step, whatever the gradients
(:mod:`~torchboost.boosters.step_bound`: ``|Δθ| ≤ 14.5 · lr`` with the default betas). When
that bound times the square root of a learner's entry count is within the cap of check 4, checks
3 and 4 cannot fail, so they are skipped: a round then costs check 1, check 2's fused gradient
norm and nothing per parameter beyond it. Any other optimizer (schedule-free AdamW, the default,
included), or an Adam whose ``lr`` is too large for the proof (e.g. ``lr=1e30``), takes the
checked path below.

Cost of the checked path. Each check is one fused pass whose verdict stays on the device
(:mod:`~torchboost.deferred_checks`): a learning round on one process reads all of them, with
the features' and labels' checks, in one host sync once the learners have stepped, and only a
failed verdict runs the scans that name the culprit (before the round's transaction puts
everything back). Check 2 keeps each learner's gradient norm from before the step, since an
optimizer may rescale the gradients in place; check 4 measures the step from the round
transaction's copies of the parameters, so the guards copy nothing themselves. Outside a round
(a data-parallel one, or ``mode="auto"`` before its probe) each check is read at once.

Why the checks there: only Adam-like updates are bounded by ``lr``; SGD's ``lr·g`` or AdamW's
``lr·λ·w`` overflow for a large ``lr`` although every gradient is finite.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor

from torchboost.boosters.step_bound import MomentInvariant, UpdateBound, adam_update_bound
from torchboost.deferred_checks import require_finite, within
from torchboost.distributed import Synchronizer
from torchboost.learners import WeakLearners
from torchboost.without_grad import without_grad

__all__ = ["MAX_RELATIVE_UPDATE", "DivergenceError", "check_round", "guard_step"]


class DivergenceError(FloatingPointError):
    """A boosting round produced NaN or inf; the round was rejected.

    Attributes:
        learner: 0-based index of the first learner whose output, partial sum, target, gradient
            or stepped parameters are not finite.
        detail: what was not finite.
    """

    #: the fix for a learner that training carried away
    LOWER_THE_RATE = ("lower the learners' learning rate (optimizer_kwargs={'lr': ...}) or the "
                      "booster's step")

    def __init__(self, learner: int, detail: str, fix: str = LOWER_THE_RATE) -> None:
        self.learner = learner
        self.detail = detail
        self.fix = fix
        super().__init__(f"learner {learner} diverged: {detail}. The round was rejected; {fix}")

    def __reduce__(self) -> tuple[type[DivergenceError], tuple[int, str, str]]:
        return type(self), (self.learner, self.detail, self.fix)


#: the fix when a learner's output is NaN or inf before any step: its forward makes it
UNTRAINED_OUTPUT_FIX = ("no step has been taken yet, so the learner's forward makes them from "
                        "this batch: look for a log, square root or division of its inputs, "
                        "or inputs it cannot take")


def check_round(h: Tensor, partials: Tensor, targets: Tensor,
                sync: Synchronizer | None = None, first: int = 0,
                trained: Callable[[], bool] | None = None) -> None:
    """Check 1: raise :class:`DivergenceError` if ``h (N, B, m)``, ``partials (N+1, B, m)`` or
    ``targets (N, B, m)`` hold NaN or inf. Partial sum ``y^i`` is charged to learner ``i − 1``
    (0-based), the last one whose output entered it; the smallest learner index wins.

    With a data-parallel ``sync`` the verdict is summed over the replicas (one small all-reduce),
    so that all of them raise together instead of leaving the others waiting in a collective.
    ``first`` is the index of the learner of row 0 (a stage of stagewise boosting). Where an
    output is not finite and ``trained()`` (asked only then, possibly after the round's step:
    it must answer for the time before the round) says that no learner of the round had
    stepped yet, the error points at the learner's forward, not the learning rate.
    """
    if sync is None:  # read at once, or when the round settles (:mod:`.deferred_checks`)
        require_finite(h.sum() + partials.sum() + targets.sum(),
                       lambda: _raise_bad_rows(_bad_rows(h, partials, targets), first, trained))
        return
    found: list[tuple[int, str]] = []
    if not math.isfinite((h.sum() + partials.sum() + targets.sum()).item()):
        found = _bad_rows(h, partials, targets)
    flags = torch.zeros(h.shape[0], device=sync.device)
    for row, _ in found:
        flags[row] = 1.0
    sync.sum_([flags])
    rows = flags.nonzero()
    if len(rows) and not any(row == int(rows[0]) for row, _ in found):
        raise DivergenceError(first + int(rows[0]), "its output, partial sum or target is "
                                                    "NaN or inf on another replica")
    _raise_bad_rows(found, first, trained)


def _bad_rows(h: Tensor, partials: Tensor, targets: Tensor) -> list[tuple[int, str]]:
    """The first non-finite row of each of ``h``, ``partials`` (charged to the learner before)
    and ``targets``, with what it is; empty when every entry is finite (a sum overflowed)."""
    return [(row, what) for row, what in (
        (_first_bad_row(h), "output h_i(x)"),
        (_shifted(_first_bad_row(partials)), "partial sum y^i"),
        (_first_bad_row(targets), "target"),
    ) if row is not None]


def _raise_bad_rows(found: list[tuple[int, str]], first: int,
                    trained: Callable[[], bool] | None) -> None:
    """:class:`DivergenceError` for the smallest learner index in ``found`` (nothing if empty)."""
    if found:
        learner, what = min(found, key=lambda item: item[0])
        untrained = what == "output h_i(x)" and trained is not None and not trained()
        fix = UNTRAINED_OUTPUT_FIX if untrained else DivergenceError.LOWER_THE_RATE
        raise DivergenceError(first + learner, f"its {what} is NaN or inf", fix)


@contextmanager
def guard_step(learners: WeakLearners, index: int | None, before: list[Tensor]) -> Iterator[None]:
    """Checks 2–4 around one step of all learners (``learners.step_outputs(...)``), or of
    learner ``index`` alone (``mode='loop'``). ``before``: copies of the stepped parameters
    taken before the round (the round's transaction keeps them; check 4 measures the step from
    them, and the transaction restores the parameters and optimizer state when a check raises).

    The checks run as step hooks: before the first stepped optimizer steps (all gradients are
    ready) and after the last one has stepped; they are removed on exit. When the step is
    proven safe beforehand (:func:`_proven_safe`), checks 3–4 are skipped.
    """
    stacked = learners.mode == "stacked"
    optimizers = learners.stepped_optimizers(index)
    first = 0 if index is None else index
    groups = [[p for group in opt.param_groups for p in group["params"]] for opt in optimizers]
    params = [p for group in groups for p in group]
    proven: list[bool] = []  # whether the step was proven safe before it was taken
    vouched: list[torch.optim.Optimizer] = []  # Adams whose moments satisfy the invariant

    def before_step(*_: Any) -> None:
        grads = [[p.grad for p in group if p.grad is not None] for group in groups]
        if any(grads):  # read at once, or when the round settles
            ratios, limit, owners = _gradient_ratios(grads, stacked)
            require_finite(within(ratios.max(), limit),
                           lambda: _raise_unbounded_gradient(ratios, limit, owners, first))
        bounds = [adam_update_bound(opt) for opt in optimizers]
        vouched[:] = [opt for opt, bound in zip(optimizers, bounds, strict=True)
                      if bound is not None and _MOMENTS.holds(opt)]
        proven[:] = [len(vouched) == len(optimizers) and _proven_safe(bounds, groups, stacked)]

    def after_step(*_: Any) -> None:
        if not proven[0] and params:
            require_finite(within(_update_norm(params, before), MAX_RELATIVE_UPDATE),
                           lambda: _raise_bad_step(params, groups, before, stacked, first))
        for opt in vouched:
            _MOMENTS.stepped(opt)

    handles = [optimizers[0].register_step_pre_hook(before_step),
               optimizers[-1].register_step_post_hook(after_step)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


#: which Adam optimizers' moments satisfy the invariant of :mod:`~torchboost.boosters.step_bound`
_MOMENTS = MomentInvariant()


def _proven_safe(bounds: list[UpdateBound], groups: list[list[Tensor]], stacked: bool) -> bool:
    """Whether checks 3 and 4 cannot fail for this step of Adam optimizers whose moments satisfy
    the invariant of :mod:`~torchboost.boosters.step_bound`, known before it is taken: the
    update of each is bounded (``bounds``, :func:`~torchboost.boosters.step_bound.
    adam_update_bound`), the parameters are in a dtype whose largest finite value is at least
    1e30 (float32, float64, bfloat16: an update of at most ``MAX_RELATIVE_UPDATE / 2`` cannot
    round a finite entry to inf), and every learner's update norm, at most
    ``bound · sqrt(its entries)`` plus the decay's ``λ·lr·‖θ‖ ≤ ‖θ‖``, is within
    ``MAX_RELATIVE_UPDATE`` times its norm (or 1). The gradients were checked finite and
    square-able, so Adam's moments stay finite."""
    if any(_largest(p.dtype) < 1e30 for group in groups for p in group):
        return False
    if stacked:  # learner i is row i of every stacked tensor
        entries = sum(p.numel() // p.shape[0] for p in groups[0])
    else:
        entries = max(sum(p.numel() for p in group) for group in groups)
    limit = MAX_RELATIVE_UPDATE / 2 / math.sqrt(max(entries, 1))
    return all(bound.relative <= 1 and bound.absolute <= limit for bound in bounds)


@lru_cache
def _largest(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).max


#: Check 4: a step may change a learner's parameters by at most this many times their norm
#: before the step (or 1, for parameters starting at zero); larger is a finite but absurd step
#: (SGD with ``lr=1e30``) that would leave the learner useless, so it is rejected like a
#: non-finite one.
MAX_RELATIVE_UPDATE = 1e6


def _update_norm(params: list[Tensor], before: list[Tensor]) -> Tensor:
    """The norm of the whole update, in one fused pass, on the device: finite (so is every
    parameter, the copies before the round being finite) and at most the cap exactly when
    checks 3 and 4 hold for every learner, each learner's cap being at least it."""
    with without_grad():
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(
            torch._foreach_sub(params, before))))


def _raise_bad_step(params: list[Tensor], groups: list[list[Tensor]], before: list[Tensor],
                    stacked: bool, first: int) -> None:
    """Checks 3 and 4 after the whole update's norm (:func:`guard_step`'s one fused pass) was
    not finite or above the cap: :class:`DivergenceError` for the first learner whose
    parameters are not finite, else for the first whose update is beyond its own cap; nothing
    when no learner's is (the whole update was large, no single learner's)."""
    if not _all_finite(params):
        raise DivergenceError(first + _first_bad_learner(groups, stacked),
                              "the optimizer step made its parameters NaN or inf "
                              "(parameters and optimizer state restored)")
    learner = _first_oversized_update(params, groups, before, stacked)
    if learner is not None:
        raise DivergenceError(first + learner, "the optimizer step changed its "
                              f"parameters by more than {MAX_RELATIVE_UPDATE:g} times "
                              "their norm (or 1) (parameters and optimizer state "
                              "restored)")


def _first_oversized_update(params: list[Tensor], groups: list[list[Tensor]],
                            before: list[Tensor], stacked: bool) -> int | None:
    """Check 4, after the whole update's norm failed on finite parameters: the first learner
    whose step exceeds :data:`MAX_RELATIVE_UPDATE` times its norm (or 1), ``None`` if there is
    none (the whole update was large, no single learner's beyond its own bound)."""
    with torch.no_grad():
        steps = torch._foreach_sub(params, before)
        if stacked:  # learner i is row i of every stacked tensor
            rows = params[0].shape[0]
            old = sum(t.reshape(rows, -1).square().sum(1) for t in before)
            new = sum(t.reshape(rows, -1).square().sum(1) for t in steps)
        else:  # learner i owns group i
            owner = [i for i, group in enumerate(groups) for _ in group]
            old = torch.zeros(len(groups), dtype=torch.float64, device=params[0].device)
            new = torch.zeros_like(old)
            for i, b, d in zip(owner, before, steps, strict=True):
                old[i] += b.double().square().sum()
                new[i] += d.double().square().sum()
        limit = MAX_RELATIVE_UPDATE * old.clamp_min(1.0).sqrt()
        bad = (new.sqrt() > limit).nonzero()
    return int(bad[0]) if len(bad) else None


def _all_finite(tensors: list[Tensor]) -> bool:
    """Whether every entry is finite, in one fused pass and one sync: the NaN/inf scan of
    ``torch.amp.GradScaler`` (it rescales in place; with scale 1 every value stays as it is)."""
    if not tensors:
        return True
    device = tensors[0].device
    found = torch.zeros(1, device=device)
    torch._amp_foreach_non_finite_check_and_unscale_(tensors, found, _unit_scale(device))
    return not bool(found)


def _gradient_ratios(grads: list[list[Tensor]],
                     stacked: bool) -> tuple[Tensor, float, list[int]]:
    """Gradient norms, the limit they must stay within and the learner each belongs to:
    stacked, one norm per tensor and learner, ``(tensors, N)`` (learner ``i`` is row ``i`` of
    every tensor); in a loop one per tensor, learner ``i`` owning group ``i``. The limit is
    ``sqrt(max of the dtype)``; where the dtypes differ each norm is divided by its own and the
    limit is 1. A norm within its limit means every entry's square is finite (NaN for a NaN
    gradient). Kept before the step: an optimizer may rescale the gradients in place
    (schedule-free AdamW does)."""
    flat = [g for group in grads for g in group]
    if stacked:
        norms = torch.stack([_row_norms(g) for g in flat])
        owners = list(range(flat[0].shape[0]))
    else:
        norms = torch.stack(torch._foreach_norm(flat, 2))
        owners = [i for i, group in enumerate(grads) for _ in group]
    dtypes = {g.dtype for g in flat}
    if len(dtypes) == 1:
        return norms, _square_limit(dtypes.pop()), owners
    shape = (-1, 1) if stacked else (-1,)
    limits = torch.tensor([_square_limit(g.dtype) for g in flat], dtype=norms.dtype,
                          device=norms.device).view(shape)
    return norms / limits, 1.0, owners


def _row_norms(t: Tensor) -> Tensor:
    """The 2-norm of every row (dimension 0) of ``t``, one trailing dimension at a time: each
    a reduction along memory where the last dimension is contiguous (a stacked weight's
    gradient is laid out learner-second; reducing its dimensions 1 and 2 at once took 6× as
    long for 64 learners of 384 × 10)."""
    if t.ndim == 1:
        return t.abs()
    while t.ndim > 1:
        t = torch.linalg.vector_norm(t, dim=-1)
    return t


def _raise_unbounded_gradient(ratios: Tensor, limit: float, owners: list[int],
                              first: int) -> None:
    """Check 2's :class:`DivergenceError` for the first learner with a norm of
    :func:`_gradient_ratios` above its ``limit`` (or NaN); nothing if there is none."""
    per_learner = ratios.amax(0) if ratios.ndim == 2 else ratios
    bad = (~(per_learner <= limit)).nonzero()
    if len(bad):
        raise DivergenceError(first + owners[int(bad[0])], "its gradient is NaN, inf or too "
                                                            "large to square (nothing was "
                                                            "stepped)")


@lru_cache
def _square_limit(dtype: torch.dtype) -> float:
    return math.sqrt(torch.finfo(dtype).max)


@lru_cache
def _unit_scale(device: torch.device) -> Tensor:
    return torch.ones(1, device=device)


def _first_bad_row(t: Tensor) -> int | None:
    """Index of the first row (along dim 0) holding NaN or inf, ``None`` if there is none."""
    if t.numel() == 0:  # no rows checked (a round without partial sums or targets)
        return None
    rows = (~torch.isfinite(t.reshape(t.shape[0], -1))).any(1).nonzero()
    return int(rows[0]) if len(rows) else None


def _shifted(row: int | None) -> int | None:
    return None if row is None else max(row - 1, 0)


def _first_bad_learner(groups: list[list[Tensor]], stacked: bool) -> int:
    """First learner owning a non-finite tensor entry (the caller knows there is one). Stacked
    learners share one optimizer and learner ``i`` is row ``i`` of each of its tensors; in loop
    mode learner ``i`` owns optimizer ``i``'s tensors."""
    if stacked:
        return min(row for t in groups[0] if (row := _first_bad_row(t)) is not None)
    return next(i for i, group in enumerate(groups) if not _all_finite(group))
