"""Numerical guards of :meth:`Booster.learn <torchboost.boosters.base.Booster.learn>`: a round that
produces NaN or inf raises :class:`DivergenceError`, naming the learner, and no non-finite value
reaches the model.

One round (module docstring of :mod:`torchboost.boosters.base`) is checked three times:

1. :func:`check_round`, before any state changes: the learners' outputs ``h_i(x)``, the partial
   sums ``y^0..y^N`` and the learners' targets must be finite (e.g. SGB, Hu et al. 2017, Alg. 1
   lines 6 and 11: a large step ``η`` makes ``y^i = y^{i−1} − η h_i`` overflow);
2. :func:`guard_step`, after the backward pass and before any optimizer steps: every learner's
   gradient must have a finite norm (per parameter tensor) of at most ``sqrt`` of its dtype's
   largest value (about 1.8e19 in float32), so that no square ``g²`` — Adam's second moment —
   can overflow to inf and silently freeze the learner; parameters and optimizer state are
   still untouched;
3. :func:`guard_step`, after the step: every parameter must be finite, otherwise all learners'
   parameters are restored from a copy taken just before the step.

Cost. Each check is one fused pass and one host sync (a fused max-norm of the gradients; the
NaN/inf scan of ``torch.amp.GradScaler`` otherwise); the per-learner scan that names the culprit
runs only after a failure. The pre-step copy is one flat ``torch.cat`` of the parameters.
Measured with the SLICE-shaped step of ``benchmarks/throughput.py`` (one thread, guards on/off
interleaved): about 0.5–3.5 % of a round at N=64 stacked, 4–6 % at N=64 in loop mode, and a
fixed ~60 µs (6–10 %) for N ≤ 8, where a whole round takes well under a millisecond.

Why a copy: only Adam-like updates are bounded by ``lr``; SGD's ``lr·g`` or AdamW's ``lr·λ·w``
overflow for a large ``lr`` although every gradient is finite. Why of the parameters only: the
optimizer state (Adam's moments) would triple the copy, so after check 3 fires the state keeps
the rejected step. Its moments come from gradients that passed check 2, so their squares are
finite and the moments hold no NaN or inf.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor

from torchboost.distributed import Synchronizer
from torchboost.learners import WeakLearners

__all__ = ["DivergenceError", "check_round", "guard_step"]


class DivergenceError(FloatingPointError):
    """A boosting round produced NaN or inf; the round was rejected.

    Attributes:
        learner: 0-based index of the first learner whose output, partial sum, target, gradient
            or stepped parameters are not finite.
        detail: what was not finite.
    """

    def __init__(self, learner: int, detail: str) -> None:
        self.learner = learner
        self.detail = detail
        super().__init__(
            f"learner {learner} diverged: {detail}. The round was rejected; lower the learners' "
            "learning rate (optimizer_kwargs={'lr': ...}) or the booster's step")

    def __reduce__(self) -> tuple[type[DivergenceError], tuple[int, str]]:
        return type(self), (self.learner, self.detail)


def check_round(h: Tensor, partials: Tensor, targets: Tensor,
                sync: Synchronizer | None = None) -> None:
    """Check 1: raise :class:`DivergenceError` if ``h (N, B, m)``, ``partials (N+1, B, m)`` or
    ``targets (N, B, m)`` hold NaN or inf. Partial sum ``y^i`` is charged to learner ``i − 1``
    (0-based), the last one whose output entered it; the smallest learner index wins.

    With a data-parallel ``sync`` the verdict is summed over the replicas (one small all-reduce),
    so that all of them raise together instead of leaving the others waiting in a collective.
    """
    found: list[tuple[int, str]] = []
    if not math.isfinite((h.sum() + partials.sum() + targets.sum()).item()):
        # an empty list here means that the sum overflowed although every entry is finite
        found = [(row, what) for row, what in (
            (_first_bad_row(h), "output h_i(x)"),
            (_shifted(_first_bad_row(partials)), "partial sum y^i"),
            (_first_bad_row(targets), "target"),
        ) if row is not None]
    if sync is not None:
        flags = torch.zeros(h.shape[0], device=sync.device)
        for row, _ in found:
            flags[row] = 1.0
        sync.sum_([flags])
        rows = flags.nonzero()
        if len(rows) and not any(row == int(rows[0]) for row, _ in found):
            raise DivergenceError(int(rows[0]), "its output, partial sum or target is NaN or "
                                                "inf on another replica")
    if found:
        learner, what = min(found, key=lambda item: item[0])
        raise DivergenceError(learner, f"its {what} is NaN or inf")


@contextmanager
def guard_step(learners: WeakLearners) -> Iterator[None]:
    """Checks 2 and 3 around one step of all learners (``learners.step_outputs(...)``).

    The checks run as step hooks: before the first optimizer steps (all gradients are ready) and
    after the last one has stepped; they are removed on exit.
    """
    optimizers = learners.optimizers
    groups = [[p for group in opt.param_groups for p in group["params"]] for opt in optimizers]
    params = [p for group in groups for p in group]
    stacked = learners.mode == "stacked"
    backup: list[Tensor] = []  # one flat copy of all parameters, taken just before the step

    def before_step(*_: Any) -> None:
        grads = [[p.grad for p in group if p.grad is not None] for group in groups]
        if not _norms_bounded([g for group in grads for g in group]):
            learner = _first_unbounded_learner(grads, stacked)
            if learner is not None:  # None: a stack's norm was large, no learner's is
                raise DivergenceError(learner, "its gradient is NaN, inf or too large to square "
                                               "(nothing was stepped)")
        with torch.no_grad():
            backup[:] = [torch.cat([p.reshape(-1) for p in params])]

    def after_step(*_: Any) -> None:
        if _all_finite(params):
            return
        learner = _first_bad_learner(groups, stacked)
        with torch.no_grad():
            for param, saved in zip(params, backup[0].split([p.numel() for p in params]),
                                    strict=True):
                param.copy_(saved.view_as(param))
        raise DivergenceError(learner, "the optimizer step made its parameters NaN or inf "
                                       "(parameters restored)")

    handles = [optimizers[0].register_step_pre_hook(before_step),
               optimizers[-1].register_step_post_hook(after_step)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _all_finite(tensors: list[Tensor]) -> bool:
    """Whether every entry is finite, in one fused pass and one sync: the NaN/inf scan of
    ``torch.amp.GradScaler`` (it rescales in place; with scale 1 every value stays as it is)."""
    if not tensors:
        return True
    device = tensors[0].device
    found = torch.zeros(1, device=device)
    torch._amp_foreach_non_finite_check_and_unscale_(tensors, found, _unit_scale(device))
    return not bool(found)


def _norms_bounded(tensors: list[Tensor]) -> bool:
    """Whether every tensor's 2-norm is at most ``sqrt(max of its dtype)``, so that every
    entry's square is finite: one fused norm pass and one sync (NaN fails the comparison)."""
    if not tensors:
        return True
    norms = torch.stack(torch._foreach_norm(tensors, 2))
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) == 1:  # the usual case: a scalar limit, no host-to-device copy
        return bool((norms <= _square_limit(dtypes.pop())).all())
    limits = torch.tensor([_square_limit(t.dtype) for t in tensors], device=norms.device)
    return bool((norms <= limits).all())


@lru_cache
def _square_limit(dtype: torch.dtype) -> float:
    return math.sqrt(torch.finfo(dtype).max)


@lru_cache
def _unit_scale(device: torch.device) -> Tensor:
    return torch.ones(1, device=device)


def _first_bad_row(t: Tensor) -> int | None:
    """Index of the first row (along dim 0) holding NaN or inf, ``None`` if there is none."""
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


def _first_unbounded_learner(groups: list[list[Tensor]], stacked: bool) -> int | None:
    """First learner one of whose gradient tensors fails :func:`_norms_bounded` (rows of the
    stacked tensors in stacked mode), ``None`` if none does."""
    if stacked:
        rows = [_first_bad_row_norm(t) for t in groups[0]]
        return min((row for row in rows if row is not None), default=None)
    return next((i for i, group in enumerate(groups) if not _norms_bounded(group)), None)


def _first_bad_row_norm(t: Tensor) -> int | None:
    """Index of the first row whose 2-norm is NaN or above ``sqrt(max of the dtype)``."""
    norms = torch.linalg.vector_norm(t.reshape(t.shape[0], -1), dim=1)
    rows = (~(norms <= _square_limit(t.dtype))).nonzero()
    return int(rows[0]) if len(rows) else None
