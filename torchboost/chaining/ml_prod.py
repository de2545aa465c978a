"""ML-Prod with sleeping experts: LocAdaBoost's ``weight`` and ``sleeping`` subroutines.

Alg. 2 of Liautaud et al. aggregates its experts with any second-order algorithm satisfying
Assumption 2; ML-Prod (Gaillard, Stoltz & van Erven 2014, "A second-order bound with excess
losses") does, with one adaptive learning rate per expert. This is the scale-free form of the
``opera`` R package's ``MLprod.R`` (the reference implementation by the same group): each expert
``j`` keeps ``R_j`` (log-weight), ``V_j = 1 + Σ r_j²``, ``M_j = max |r_j|`` and ``η_j``;

* weights ``w̃_j ∝ η_j e^{R_j}``, renormalised over the awake experts (eq. 9: sleeping experts get
  weight 0);
* after the instantaneous regrets ``r_j``: ``V_j += r_j²``, ``M_j ← max(M_j, |r_j|)``,
  ``η'_j = min(1/(2M_j), √(ln N / V_j))``, ``R_j ← (η'_j/η_j) R_j + ln(1 + η'_j r_j)``,
  ``η_j ← η'_j`` (so ``η'_j |r_j| ≤ 1/2``).

In LocAdaBoost ``r_j = ℓ'_t(f̂_t)(f̂_t − f̂_{j,t})`` for an awake expert — the linearised regret
``g̃_tᵀw̃_t − g̃_{j,t}`` of eqs. 32–33 — and ``r_j = 0`` for a sleeping one, which is "treated as if
it predicted ``f̂_t``". The rates adapt to the observed range of the regrets, so no bound on them
is needed (a worst-case bound such as ``2BG`` would slow the weights down by its ratio to the
actual regrets). An expert whose regrets have all been 0, in particular one that has always
slept, keeps the state ``R = 0, V = 1, M = 0, η = √(ln N)`` (``opera``'s state after a round
with zero regret); experts are therefore stored lazily — a row is created on an expert's first
non-zero regret — and ``N`` can be astronomically larger than the number of rows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torchboost.chaining.lazy_table import LazyTable, sum_by_key

__all__ = ["MLProd"]


class MLProd(LazyTable):
    """ML-Prod over ``n_experts`` lazily stored experts keyed by int64 ids.

    Args:
        n_experts: ``N``, the number of experts (``ln N`` sets the learning rates); ``≥ 2``.

    Examples:
        >>> import torch
        >>> agg = MLProd(n_experts=4)
        >>> awake = torch.tensor([[0, 1, 2]])  # expert 3 sleeps
        >>> agg.weights(awake)
        tensor([[0.3333, 0.3333, 0.3333]], dtype=torch.float64)
        >>> agg.update(awake.flatten(), torch.tensor([0.5, -0.5, 0.0], dtype=torch.float64))
        >>> w = agg.weights(awake)
        >>> bool(w[0, 0] > w[0, 2] > w[0, 1]), float(w.sum())
        (True, 1.0)
    """

    def __init__(self, n_experts: int) -> None:
        if not n_experts >= 2:
            raise ValueError(f"ML-Prod needs n_experts >= 2, got {n_experts}")
        super().__init__(["log_weight", "sq_regret", "max_regret", "eta"])
        self.n_experts = int(n_experts)
        self.log_n = math.log(n_experts)
        #: ``(R, V, M, η)`` of an expert whose regrets have all been 0
        self.fresh = (0.0, 1.0, 0.0, math.sqrt(self.log_n))

    def log_weights(self, keys: Tensor) -> Tensor:
        """``ln(η_j) + R_j`` of experts ``keys`` (any shape), unnormalised."""
        rows = self.find(keys)
        state = self.data[rows.clamp_min(0)]
        value = state[..., 3].log() + state[..., 0]
        return torch.where(rows >= 0, value, math.log(self.fresh[3]) + self.fresh[0])

    def weights(self, awake: Tensor) -> Tensor:
        """Eq. 9: weights over the awake experts ``awake`` (``(B, A)``, each row the distinct
        experts awake for one point), normalised to sum to 1 along each row."""
        return torch.softmax(self.log_weights(awake), dim=-1)

    def update(self, keys: Tensor, regrets: Tensor, distinct: bool = True) -> None:
        """One ML-Prod step from the instantaneous regrets ``r_j`` of experts ``keys`` (``(M,)``;
        absent experts have ``r = 0``). With ``distinct=False`` repeated keys are summed first
        (one round made of several points, see :mod:`~torchboost.chaining.rounds`)."""
        regrets = regrets.to(self.data.dtype)
        if not distinct:
            keys, regrets, _ = sum_by_key(keys, regrets)
        active = regrets != 0
        if not bool(active.all()):
            keys, regrets = keys[active], regrets[active]
        rows, new = self.find_or_insert(keys)
        if bool(new.any()):
            self.data[rows[new]] = torch.tensor(self.fresh, dtype=self.data.dtype,
                                                device=self.device)
        log_weight, sq_regret, max_regret, eta = self.data[rows].unbind(1)
        sq_regret = sq_regret + regrets.square()
        max_regret = torch.maximum(max_regret, regrets.abs())
        new_eta = torch.minimum(0.5 / max_regret, (self.log_n / sq_regret).sqrt())
        log_weight = new_eta / eta * log_weight + torch.log1p(new_eta * regrets)
        self.data[rows] = torch.stack([log_weight, sq_regret, max_regret, new_eta], 1)

    def extra_repr(self) -> str:
        return f"n_experts={self.n_experts}, stored={len(self)}"
