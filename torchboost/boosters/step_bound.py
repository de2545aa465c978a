"""A proven bound on every entry of Adam's next update, so that :func:`~torchboost.boosters.guards.
guard_step` can tell *before* a step that it can neither overflow nor be absurd, and skip the
copies of parameters and optimizer state that a rejected step would need.

Adam (Kingma & Ba 2015, Alg. 1; torch's ``Adam``/``AdamW``) moves an entry by
``lr · m̂ / (sqrt(v̂) + ε)`` with ``m_t = β1 m_{t−1} + (1 − β1) g_t``, ``v_t = β2 v_{t−1} +
(1 − β2) g_t²``, ``m̂ = m_t / (1 − β1^t)``, ``v̂ = v_t / (1 − β2^t)``. By Cauchy–Schwarz on the two
terms of ``m_t``, ``|m_{t−1}| ≤ K sqrt(v_{t−1})`` implies ``|m_t| ≤ K' sqrt(v_t)`` with
``K'² = (β1²/β2) K² + (1 − β1)²/(1 − β2)``. From ``m_0 = v_0 = 0`` and ``β1² < β2`` the constant
never exceeds the fixed point ``K∞ = (1 − β1) / sqrt((1 − β2)(1 − β1²/β2))`` (the *moment
invariant* ``|m| ≤ K∞ sqrt(v)``; 7.3 for the default betas), so every update is at most
``lr · K∞ · max_t sqrt(1 − β2^t) / (1 − β1^t)`` per entry (Kingma & Ba's Sec. 2.1 "|Δ| ≲ lr",
made exact), whatever the gradients. :func:`adam_update_bound` returns twice that (a margin for
rounding), plus the decoupled weight decay ``lr · λ · |θ|`` of AdamW as a relative term.

:class:`~torchboost.learners.Prodigy` keeps Adam's moments of the scaled gradients ``d_k g_k``,
so the invariant holds for them too, and its update ``γ_k d_k m / (sqrt(v) + d_k ε)`` (``γ_k``:
``lr`` times the bias correction above) is at most ``lr · d_k · K∞ · sqrt(1 − β2^k) / (1 − β1^k)``
per entry, with ``d_k ≤ d_max``. The bound uses ``d_max``, which lives on the host; an uncapped
Prodigy has none (reading ``d`` would sync a device every round).

The invariant is a property of the moments, not of the hyper-parameters: a state that Adam built
from zero with the current betas has it; a loaded state, or one stepped with other betas, is
checked once, entry by entry (:class:`MomentInvariant`). Writing into ``exp_avg``/``exp_avg_sq``
in place between rounds is outside this contract.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, repeat
from operator import is_, is_not

import torch
from torch import Tensor

from torchboost.learners.prodigy import Prodigy

__all__ = ["MomentInvariant", "UpdateBound", "adam_update_bound"]


@dataclass(frozen=True)
class UpdateBound:
    """``|Δθ| ≤ absolute + relative · |θ|`` entrywise for the next step."""

    absolute: float
    relative: float


def _fixed_point(beta1: float, beta2: float) -> float:
    """``K∞ = (1 − β1) / sqrt((1 − β2)(1 − β1²/β2))``."""
    return (1 - beta1) / math.sqrt((1 - beta2) * (1 - beta1 ** 2 / beta2))


@lru_cache
def _adam_constant(beta1: float, beta2: float) -> float:
    """``2 · K∞ · max_t sqrt(1 − β2^t) / (1 − β1^t)`` (the factor 2: rounding)."""
    worst, t = 0.0, 1
    while True:  # until both powers are negligible; the ratio then stays below 1 / (1 − 1e-15)
        p1, p2 = beta1 ** t, beta2 ** t
        worst = max(worst, math.sqrt(1 - p2) / (1 - p1))
        if p1 < 1e-15 and p2 < 1e-15:
            break
        t = t + 1 if t < 1000 else int(t * 1.01)  # the ratio varies slowly for large t
    return 2.0 * _fixed_point(beta1, beta2) * max(worst, 1.0 / (1 - 1e-15))


def _group_bound(opt: torch.optim.Optimizer, group: dict) -> UpdateBound | None:
    beta1, beta2 = (float(b) if not torch.is_tensor(b) or b.device.type == "cpu" else math.nan
                    for b in group["betas"])
    lr, eps, decay = group["lr"], float(group["eps"]), float(group["weight_decay"])
    if torch.is_tensor(lr):
        if lr.device.type != "cpu":
            return None  # reading it would sync a device every round
        lr = float(lr)
    decoupled = isinstance(opt, torch.optim.AdamW) or group.get("decoupled_weight_decay", False)
    if not (0 <= beta1 < 1 and 0 < beta2 < 1 and beta1 ** 2 < beta2 and eps > 0
            and math.isfinite(lr) and lr >= 0 and not group.get("differentiable", False)):
        return None
    if decay != 0 and not (decoupled and 0 <= lr * decay <= 1):
        return None  # L2 decay adds λθ to the gradient: not bounded by the argument above
    return UpdateBound(lr * _adam_constant(beta1, beta2), lr * decay)


def _prodigy_bound(group: dict) -> UpdateBound | None:
    beta1, beta2 = group["betas"]
    if not (0 <= beta1 < 1 and 0 < beta2 < 1 and beta1 ** 2 < beta2 and group["eps"] > 0
            and math.isfinite(group["d_max"])):
        return None
    return UpdateBound(group["lr"] * group["d_max"] * _adam_constant(beta1, beta2), 0.0)


def adam_update_bound(opt: torch.optim.Optimizer) -> UpdateBound | None:
    """The weakest :class:`UpdateBound` over ``opt``'s parameter groups, ``None`` unless ``opt``
    is torch's ``Adam``/``AdamW`` with ``0 ≤ β1 < 1``, ``0 < β2 < 1``, ``β1² < β2``, ``ε > 0``,
    a finite ``lr`` on the host and no L2 (coupled) weight decay, or a
    :class:`~torchboost.learners.Prodigy` with those betas, ``ε > 0`` and a finite ``d_max``.
    Valid only while the moments satisfy the invariant (:class:`MomentInvariant`)."""
    if isinstance(opt, Prodigy):
        bounds = [_prodigy_bound(group) for group in opt.param_groups]
        if any(b is None for b in bounds):
            return None
        return UpdateBound(max(b.absolute for b in bounds), 0.0)
    if type(opt) not in (torch.optim.Adam, torch.optim.AdamW):
        return None
    bounds = [_group_bound(opt, group) for group in opt.param_groups]
    if any(b is None for b in bounds):
        return None
    return UpdateBound(max(b.absolute for b in bounds), max(b.relative for b in bounds))


class MomentInvariant:
    """Whether an Adam optimizer's moments satisfy ``|m| ≤ K∞ sqrt(v)`` for its current betas.

    Moments that Adam created from zero with those betas satisfy it (the module docstring); the
    record remembers the moment tensors and betas seen at the last step it vouched for. New
    tensors (a loaded state, a restored one) or other betas are checked once, entry by entry.
    """

    def __init__(self) -> None:
        self._records: weakref.WeakKeyDictionary[torch.optim.Optimizer, tuple] = (
            weakref.WeakKeyDictionary())

    @staticmethod
    def _signature(opt: torch.optim.Optimizer) -> tuple:
        """Every group's betas, and every parameter's two moment tensors (``None`` before its
        first step) in one flat tuple."""
        betas = tuple(tuple(map(float, g["betas"])) for g in opt.param_groups)
        states = map(opt.state.get, chain.from_iterable(g["params"] for g in opt.param_groups))
        moments = tuple(chain.from_iterable(
            (state.get("exp_avg"), state.get("exp_avg_sq")) if state else (None, None)
            for state in states))
        return betas, moments

    def holds(self, opt: torch.optim.Optimizer) -> bool:
        """Whether the invariant holds now (checking new moments or betas once)."""
        betas, moments = self._signature(opt)
        record = self._records.get(opt)
        if (record is not None and record[0] == betas and len(record[1]) == len(moments)
                and all(map(is_, record[1], moments))):
            return record[2]
        holds = all(_moments_within(m, v, *betas[i])
                    for i, g in enumerate(opt.param_groups) for p in g["params"]
                    for m, v in ((opt.state.get(p, {}).get("exp_avg"),
                                  opt.state.get(p, {}).get("exp_avg_sq")),))
        self._records[opt] = (betas, moments, holds)
        return holds

    def stepped(self, opt: torch.optim.Optimizer) -> None:
        """After a step taken while the invariant held: it still holds (the Cauchy–Schwarz
        step of the module docstring), for the moments as they are now. When every moment
        existed before the step, the record already names them (Adam updates them in place;
        had the step replaced one, :meth:`holds` would see a new tensor and check it)."""
        record = self._records.get(opt)
        if record is not None and record[2] and all(map(is_not, record[1], repeat(None))):
            return
        self._records[opt] = (*self._signature(opt), True)


def _moments_within(m: Tensor | None, v: Tensor | None, beta1: float, beta2: float) -> bool:
    if m is None or v is None:
        return m is None and v is None  # a parameter not stepped yet: Adam starts it at zero
    with torch.no_grad():
        limit = (1 + 1e-3) * _fixed_point(beta1, beta2) * v.sqrt()
        return bool((m.abs() <= limit).all())
