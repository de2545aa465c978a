"""Cost matrices handed to the weak learners (Jung, Goetz & Tewari 2017).

``C[r, l]`` is the cost of predicting ``l`` when the truth is ``r``; a matrix is passed because
the label is unknown when the learner predicts.

* OnlineMBBM (Alg. 1) uses the potentials of the 0-1 loss: the normalised matrix (5),
  :func:`mbbm_cost_matrix`.
* Adaboost.OLM (Alg. 2) uses the gradient of a surrogate loss at the current vote,
  ``C[r, l] = ∂L^r(s)/∂s(l)``: the logistic loss (8)–(9) and, from Appendix D, the exponential
  loss and the squared hinge. All three have the form ``L^r(s) = Σ_{l≠r} ψ(s(l) − s(r))``, so
  ``C[r, l] = ψ′(s(l) − s(r))`` off the diagonal and ``C[r, r] = −Σ_{l≠r} ψ′(s(l) − s(r))``:
  rows sum to zero and the diagonal is the row minimum. The derivative of the OGD loss
  ``f(α) = L^y(s + α e_l)`` is the cost entry ``C[y, l]`` at ``s + α e_l``
  (eq. (10), with the digest's fix of the printed typo for ``l = y``).

Examples:
    >>> import torch
    >>> loss = LogisticCost()
    >>> C = loss.cost_matrix(torch.zeros(3))
    >>> C
    tensor([[-1.0000,  0.5000,  0.5000],
            [ 0.5000, -1.0000,  0.5000],
            [ 0.5000,  0.5000, -1.0000]])
    >>> C.sum(-1)
    tensor([0., 0., 0.])
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "ExponentialCost",
    "LogisticCost",
    "SquaredHingeCost",
    "SurrogateCost",
    "get_surrogate",
    "mbbm_cost_matrix",
]


def mbbm_cost_matrix(potentials: Tensor) -> tuple[Tensor, Tensor]:
    """Normalised OnlineMBBM cost matrix (5) and its row normalisers.

    Args:
        potentials: raw matrix (4), ``[..., r, l] = φ_{N−i}^r(s^{i−1} + e_l)``.

    Returns:
        ``D[..., r, l] = (φ^r(s + e_l) − φ^r(s + e_r)) / w_r`` and ``w[..., r] = Σ_l (φ^r(s + e_l)
        − φ^r(s + e_r))``. A row with ``w_r = 0`` stays all zeros (any prediction is free).

    Examples:
        >>> D, w = mbbm_cost_matrix(torch.tensor([[0.2, 0.6, 0.4], [0.5, 0.5, 0.5],
        ...                                       [0.9, 0.8, 0.3]]))
        >>> D
        tensor([[0.0000, 0.6667, 0.3333],
                [0.0000, 0.0000, 0.0000],
                [0.5455, 0.4545, 0.0000]])
        >>> w
        tensor([0.6000, 0.0000, 1.1000])
    """
    diagonal = torch.diagonal(potentials, dim1=-2, dim2=-1)
    raised = potentials - diagonal.unsqueeze(-1)
    weights = raised.sum(-1)
    scale = torch.where(weights > 0, 1.0 / weights.clamp_min(torch.finfo(weights.dtype).tiny), 0.0)
    return raised * scale.unsqueeze(-1), weights


class SurrogateCost(ABC):
    """A proper surrogate ``L^r(s) = Σ_{l≠r} ψ(s(l) − s(r))`` for Adaboost.OLM, with its
    projected-OGD set ``F = [−c, c]`` for the weights ``α`` and step size ``η``."""

    name: str = ""

    @abstractmethod
    def psi(self, z: Tensor) -> Tensor:
        """``ψ(z)``, the loss of one wrong label ahead of the truth by ``z``."""

    @abstractmethod
    def psi_prime(self, z: Tensor) -> Tensor:
        """``ψ′(z)``."""

    @abstractmethod
    def alpha_bound(self, n_learners: int) -> float:
        """``c`` of the feasible set ``F = [−c, c]``."""

    @abstractmethod
    def step_size(self, t: Tensor, index: Tensor, n_classes: int, n_learners: int) -> Tensor:
        """OGD step ``η`` at round ``t`` (1-based) for learner ``index`` (1-based); the result
        broadcasts against ``t`` and ``index``."""

    def value(self, s: Tensor, label: Tensor) -> Tensor:
        """``L^y(s)`` for votes ``s (..., k)`` and labels ``label (...)``."""
        gaps = s - s.gather(-1, label.unsqueeze(-1))
        off = 1.0 - F.one_hot(label, s.shape[-1]).to(s.dtype)
        return (self.psi(gaps) * off).sum(-1)

    def gradient(self, s: Tensor, label: Tensor) -> Tensor:
        """``∇_s L^y(s)``, ``(..., k)``: row ``y`` of the cost matrix at ``s``."""
        gaps = s - s.gather(-1, label.unsqueeze(-1))
        off = 1.0 - F.one_hot(label, s.shape[-1]).to(s.dtype)
        slopes = self.psi_prime(gaps) * off
        return slopes - F.one_hot(label, s.shape[-1]).to(s.dtype) * slopes.sum(-1, keepdim=True)

    def cost_matrix(self, s: Tensor) -> Tensor:
        """``C[..., r, l] = ∂L^r(s)/∂s(l)`` for votes ``s (..., k)``: eq. (9) for the logistic
        loss, App. D for the others."""
        k = s.shape[-1]
        rows = torch.arange(k, device=s.device).expand(*s.shape[:-1], k)
        return self.gradient(s.unsqueeze(-2).expand(*s.shape[:-1], k, k), rows)

    def alpha_derivative(self, s: Tensor, alpha: Tensor, vote: Tensor, label: Tensor) -> Tensor:
        """``f′(α)`` for ``f(α) = L^y(s + α e_l)`` (eq. (10), corrected for ``l = y``): the
        cost entry ``C[y, l]`` at ``s + α e_l``."""
        moved = s + alpha.unsqueeze(-1) * F.one_hot(vote, s.shape[-1]).to(s.dtype)
        return self.gradient(moved, label).gather(-1, vote.unsqueeze(-1)).squeeze(-1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LogisticCost(SurrogateCost):
    """Logistic loss (8), ``ψ(z) = log(1 + e^z)``: Alg. 2 with ``F = [−2, 2]`` and
    ``η_t = 2√2 / ((k − 1)√t)`` (regret ``4√2 (k − 1)√T``)."""

    name = "logistic"

    def psi(self, z: Tensor) -> Tensor:
        return F.softplus(z)

    def psi_prime(self, z: Tensor) -> Tensor:
        return torch.sigmoid(z)

    def alpha_bound(self, n_learners: int) -> float:
        return 2.0

    def step_size(self, t: Tensor, index: Tensor, n_classes: int, n_learners: int) -> Tensor:
        return 2.0 * math.sqrt(2.0) / ((n_classes - 1) * t.sqrt())


class ExponentialCost(SurrogateCost):
    """Exponential loss (App. D), ``ψ(z) = e^z``: ``F = [−2, 2]`` and the per-learner step
    ``η_t^i = 2√2 e^{−i} / ((k − 1)√t)`` (regret ``4√2 (k − 1) e^i √T``)."""

    name = "exponential"

    def psi(self, z: Tensor) -> Tensor:
        return torch.exp(z)

    def psi_prime(self, z: Tensor) -> Tensor:
        return torch.exp(z)

    def alpha_bound(self, n_learners: int) -> float:
        return 2.0

    def step_size(self, t: Tensor, index: Tensor, n_classes: int, n_learners: int) -> Tensor:
        return 2.0 * math.sqrt(2.0) * torch.exp(-index) / ((n_classes - 1) * t.sqrt())


class SquaredHingeCost(SurrogateCost):
    """Squared hinge (App. D), ``ψ(z) = ½ (z + 1)_+²``: ``F = [−c, c]`` with ``c = 1/√N`` and
    ``η_t = √2 c / ((k − 1 + cN)√t)`` (regret ``2√2 (k − 1 + cN)√T``)."""

    name = "squared_hinge"

    def psi(self, z: Tensor) -> Tensor:
        return 0.5 * (z + 1.0).clamp_min(0.0).square()

    def psi_prime(self, z: Tensor) -> Tensor:
        return (z + 1.0).clamp_min(0.0)

    def alpha_bound(self, n_learners: int) -> float:
        return 1.0 / math.sqrt(n_learners)

    def step_size(self, t: Tensor, index: Tensor, n_classes: int, n_learners: int) -> Tensor:
        c = self.alpha_bound(n_learners)
        return math.sqrt(2.0) * c / ((n_classes - 1 + c * n_learners) * t.sqrt())


_SURROGATES: dict[str, type[SurrogateCost]] = {
    cls.name: cls for cls in (LogisticCost, ExponentialCost, SquaredHingeCost)
}


def get_surrogate(loss: str | SurrogateCost) -> SurrogateCost:
    """A :class:`SurrogateCost` from an instance or one of ``"logistic"``, ``"exponential"``,
    ``"squared_hinge"``."""
    if isinstance(loss, SurrogateCost):
        return loss
    if isinstance(loss, str) and loss in _SURROGATES:
        return _SURROGATES[loss]()
    raise ValueError(f"unknown surrogate loss {loss!r}; choose one of {sorted(_SURROGATES)}")
