"""COCOB-Backprop: a learning-rate-free, per-coordinate optimizer (coin betting).

Orabona & Tommasi, "Training Deep Networks without Learning Rates Through Coin Betting"
(NeurIPS 2017), Algorithm 2. Every weight ``i`` bets a fraction of its accumulated reward on the
sign of its negative gradient ``g_{t,i} = −∂f/∂w_{t,i}``; with ``L`` the largest ``|g|`` seen,
``G`` the sum of ``|g|``, ``θ`` the sum of ``g`` and ``w_1`` the initial weights, one step is

* ``L_{t,i} = max(L_{t−1,i}, |g_{t,i}|)``                            (maximum observed scale)
* ``G_{t,i} = G_{t−1,i} + |g_{t,i}|``                                (sum of absolute gradients)
* ``Reward_{t,i} = max(Reward_{t−1,i} + (w_{t,i} − w_{1,i}) g_{t,i}, 0)``
* ``θ_{t,i} = θ_{t−1,i} + g_{t,i}``                                  (sum of negative gradients)
* ``w_{t+1,i} = w_{1,i} + θ_{t,i} / (L_{t,i} max(G_{t,i} + L_{t,i}, α L_{t,i})) · (L_{t,i}
  + Reward_{t,i})``

starting from ``L = G = Reward = θ = 0``. The first step moves every weight with a non-zero
gradient by exactly ``1/α`` against its gradient's sign; ``α = 100`` is the paper's default.
A weight whose gradients have all been zero (``L = 0``, hence ``θ = 0``) stays at ``w_1``.

The update of an entry depends only on that entry's own gradient history, so one instance over
N stacked learners is N independent instances (it is in
:data:`~torchboost.learners.optimizers.ELEMENTWISE_OPTIMIZERS`); every step is a handful of
multi-tensor (``torch._foreach_*``) calls over all parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from torchboost.learners.closure import evaluate_closure

__all__ = ["COCOBBackprop"]

#: per-parameter state, in the order of the paper's Alg. 2: ``w_1``, ``L``, ``G``, ``Reward``, ``θ``
STATE_KEYS = ("initial", "max_abs_grad", "abs_grad_sum", "reward", "grad_sum")


class COCOBBackprop(torch.optim.Optimizer):
    """COCOB-Backprop (Orabona & Tommasi 2017, Alg. 2): no learning rate to tune.

    Args:
        params: parameters or parameter groups, as for any ``torch.optim.Optimizer``.
        alpha: ``α > 0``, which caps the bet while ``G`` is small (the first step is ``1/α``
            per coordinate); default 100, the paper's.

    State per parameter (see :data:`STATE_KEYS`): ``initial`` (``w_1``), ``max_abs_grad``
    (``L``), ``abs_grad_sum`` (``G``), ``reward`` and ``grad_sum`` (``θ``, the sum of the
    *negative* gradients), each shaped like the parameter.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]],
                 alpha: float = 100.0) -> None:
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
        super().__init__(params, {"alpha": float(alpha)})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            if any(p.grad.is_sparse for p in params):
                raise RuntimeError("COCOBBackprop does not support sparse gradients")
            for p in params:
                if not self.state[p]:
                    self.state[p] = {"initial": p.detach().clone(),
                                     **{key: torch.zeros_like(p) for key in STATE_KEYS[1:]}}
            w1, big_l, big_g, reward, theta = (
                [self.state[p][key] for p in params] for key in STATE_KEYS)
            _cocob_step(params, [p.grad for p in params], w1, big_l, big_g, reward, theta,
                        group["alpha"])
        return loss


def _cocob_step(params: list[Tensor], grads: list[Tensor], w1: list[Tensor], big_l: list[Tensor],
                big_g: list[Tensor], reward: list[Tensor], theta: list[Tensor],
                alpha: float) -> None:
    """One step of Alg. 2 for every tensor at once (``grads`` are the losses' gradients, so
    the paper's ``g`` is ``−grads``)."""
    abs_grads = torch._foreach_abs(grads)
    torch._foreach_maximum_(big_l, abs_grads)                   # L = max(L, |g|)
    torch._foreach_add_(big_g, abs_grads)                       # G = G + |g|
    moved = torch._foreach_sub(params, w1)                      # w_t − w_1
    torch._foreach_addcmul_(reward, moved, grads, value=-1.0)  # Reward + (w_t − w_1) g
    torch._foreach_clamp_min_(reward, 0.0)
    torch._foreach_sub_(theta, grads)                           # θ = θ + g
    scale = torch._foreach_add(big_g, big_l)                    # max(G + L, α L)
    torch._foreach_maximum_(scale, torch._foreach_mul(big_l, alpha))
    torch._foreach_mul_(scale, big_l)                           # L max(G + L, α L), 0 iff L = 0
    torch._foreach_clamp_min_(scale, [torch.finfo(p.dtype).tiny for p in params])  # 0/0 → 0
    bet = torch._foreach_add(reward, big_l)                     # L + Reward
    torch._foreach_mul_(bet, theta)
    torch._foreach_div_(bet, scale)
    torch._foreach_add_(bet, w1)                                # w_{t+1} = w_1 + ...
    torch._foreach_copy_(params, bet)
