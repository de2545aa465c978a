"""Prodigy: Adam whose learning rate is estimated online, one estimate per weak learner.

Mishchenko & Defazio, "Prodigy: An Expeditiously Adaptive Parameter-Free Learner" (ICML 2024),
Algorithm 4 ("Prodigy, Adam version"). With ``g_k`` the gradient at ``x_k``, ``x_0`` the initial
weights, ``d_0`` the initial estimate and ``β₃ = √β₂``, one step is

* ``m_{k+1} = β₁ m_k + (1 − β₁) d_k g_k``
* ``v_{k+1} = β₂ v_k + (1 − β₂) d_k² g_k²``
* ``r_{k+1} = β₃ r_k + (1 − β₃) γ_k d_k² ⟨g_k, x_0 − x_k⟩``
* ``s_{k+1} = β₃ s_k + (1 − β₃) γ_k d_k² g_k``
* ``d̂_{k+1} = r_{k+1} / ‖s_{k+1}‖₁``  and  ``d_{k+1} = max(d_k, d̂_{k+1})``
* ``x_{k+1} = x_k − γ_k d_k m_{k+1} / (√v_{k+1} + d_k ε)``

``d`` is the learning rate (a lower estimate of the distance from ``x_0`` to a solution) and
``γ_k`` a multiplier, ``lr`` times Adam's bias correction ``√(1 − β₂^{k+1}) / (1 − β₁^{k+1})``
(as the authors' implementation does), so ``lr = 1`` is the method itself. Two additions that
are not in the paper, both off by default: ``d_coef`` scales ``d̂`` (the authors' knob) and
``d_max`` caps ``d``.

``d`` and ``r`` are sums over a whole model, so every learner needs its own: one instance per
learner, or, with ``stacked=True``, one instance over parameters stacked along dim 0 (N
learners), whose sums run over every dim but the first and which then keeps N estimates. The
latter is what :class:`~torchboost.learners.stacked.StackedLearners` builds (see
:data:`~torchboost.learners.optimizers.PER_LEARNER_OPTIMIZERS`), and it is the same as N
separate instances. No step reads a value back to the host.

State: per parameter ``exp_avg`` (``m``), ``exp_avg_sq`` (``v``), ``s`` and ``initial``
(``x_0``); the group's ``d``, ``r`` and ``step`` live in the state of its first parameter (so
that checkpoints, device moves and the boosters' divergence guards carry them), shaped ``()``,
or ``(N,)`` when stacked.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = Prodigy([w], d0=0.1)
    >>> w.grad = torch.tensor([0.5, -0.5]); opt.step()
    >>> w.detach()  # first step: Adam's, at lr d_0 = 0.1
    tensor([ 0.9000, -1.9000])
    >>> opt.estimate()  # r saw x_0 − x_0 = 0, so d̂ = 0 and d stays d_0
    tensor(0.1000)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from torchboost.learners.closure import evaluate_closure

__all__ = ["Prodigy"]


class Prodigy(torch.optim.Optimizer):
    """Prodigy (Mishchenko & Defazio 2024, Alg. 4): Adam with an estimated learning rate ``d``.

    Args:
        params: parameters or parameter groups, as for any ``torch.optim.Optimizer``.
        lr: the multiplier ``γ`` of ``d`` (1, the method itself; schedulers act on it).
        betas: Adam's ``(β₁, β₂)``.
        eps: added to ``√v`` (scaled by ``d``, as in the paper).
        d0: the initial estimate ``d_0 > 0``.
        d_coef: multiplies ``d̂`` (> 1 estimates larger rates, < 1 smaller).
        d_max: a ceiling on ``d`` (``inf``: none, the paper's method).
        stacked: every parameter's dim 0 indexes one of N independent learners, each with its
            own ``d`` and ``r``.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 d0: float = 1e-6, d_coef: float = 1.0, d_max: float = math.inf,
                 stacked: bool = False) -> None:
        if not (math.isfinite(lr) and lr >= 0):
            raise ValueError(f"lr must be a finite number >= 0, got {lr!r}")
        if not all(0 <= b < 1 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        if not (math.isfinite(d0) and d0 > 0 and d_coef > 0 and d_max >= d0):
            raise ValueError(f"need d0 > 0 finite, d_coef > 0 and d_max >= d0; got d0={d0!r}, "
                             f"d_coef={d_coef!r}, d_max={d_max!r}")
        super().__init__(params, {"lr": float(lr), "betas": tuple(betas), "eps": float(eps),
                                  "d0": float(d0), "d_coef": float(d_coef),
                                  "d_max": float(d_max), "stacked": bool(stacked)})

    def estimate(self, group: int = 0) -> Tensor:
        """The current ``d`` of parameter group ``group``: ``()``, or ``(N,)`` when stacked (the
        initial ``d_0`` before the first step)."""
        params = self.param_groups[group]["params"]
        state = self.state.get(params[0]) if params else None
        if not state:
            return torch.tensor(self.param_groups[group]["d0"])
        return state["d"]

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group: dict[str, Any]) -> None:
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        beta1, beta2 = group["betas"]
        beta3 = math.sqrt(beta2)
        stacked = group["stacked"]
        shared = self.state[group["params"][0]]
        if "d" not in shared:
            first = group["params"][0]
            shape = first.shape[:1] if stacked else ()
            shared.update(d=torch.full(shape, group["d0"], dtype=first.dtype, device=first.device),
                          r=torch.zeros(shape, dtype=first.dtype, device=first.device),
                          step=torch.zeros((), dtype=torch.float64))
        shared["step"] += 1
        k = float(shared["step"])  # a CPU scalar: no host sync
        gamma = group["lr"] * math.sqrt(1 - beta2 ** k) / (1 - beta1 ** k)
        d = shared["d"]

        def per_learner(t: Tensor) -> Tensor:  # a sum over each learner's entries
            return t.flatten(1).sum(1) if stacked else t.sum()

        def broadcast(t: Tensor, like: Tensor) -> Tensor:  # (N,) against (N, ...)
            return t.view(-1, *([1] * (like.dim() - 1))) if stacked else t

        weight = (1 - beta3) * gamma * d  # (1 − β₃) γ_k d_k, times d_k g_k below
        shared["r"].mul_(beta3).add_(weight * d * sum(
            per_learner(p.grad * (self._state(p)["initial"] - p)) for p in params))
        s_norm = torch.zeros_like(d)
        for p in params:  # r is in; x_{k+1} uses d_k, as in Alg. 4
            state, d_p = self._state(p), broadcast(d, p)
            scaled = p.grad * d_p  # d_k g_k
            state["exp_avg"].mul_(beta1).add_(scaled, alpha=1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(scaled, scaled, value=1 - beta2)
            state["s"].mul_(beta3).addcmul_(scaled, broadcast(weight, p))
            s_norm = s_norm + per_learner(state["s"].abs())
            denominator = state["exp_avg_sq"].sqrt().add_(d_p * group["eps"])
            p.addcdiv_(state["exp_avg"] * (-gamma * d_p), denominator)
        estimate = group["d_coef"] * shared["r"] / torch.where(s_norm > 0, s_norm, 1.0)
        shared["d"] = torch.maximum(d, estimate).clamp(max=group["d_max"])

    def _state(self, p: Tensor) -> dict[str, Any]:
        state = self.state[p]
        if "exp_avg" not in state:
            state.update(exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p),
                         s=torch.zeros_like(p), initial=p.detach().clone())
        return state
