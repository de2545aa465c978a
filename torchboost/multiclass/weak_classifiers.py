"""Neural weak learners in the protocol of Jung, Goetz & Tewari (2017, Sec. 2).

A weak learner is an ``nn.Module`` returning ``k`` logits, kept with the others in one
:class:`~torchboost.learners.WeakLearners` container (stacked when homogeneous). The paper
leaves two things open (digest §5, items 6 and 7); both choices are offered here:

* **Prediction given a cost matrix** ``C`` (``C[r, l]`` = cost of saying ``l`` when the truth is
  ``r``): ``"argmax"`` ignores ``C`` and returns the most likely label, ``"cost"`` returns the
  cost-sensitive ``argmin_l Σ_r p̂(r | x) C[r, l]`` with ``p̂ = softmax(logits)``.
* **Training with an importance weight** ``w`` (Alg. 1 line 12, Alg. 2 line 14, Poisson counts
  for OzaBoost): ``"weighted"`` takes one step on the weighted cross-entropy ``w · CE``;
  ``"sampling"`` trains unweighted with probability ``min(w, 1)`` (the sampling variant the
  paper mentions for learners that cannot take weights, after Beygelzimer et al., Lemma 1).

Both training rules are written as soft targets ``t = w e_y`` (``w ∈ {0, 1}`` when sampling), and
the learners minimise ``Σ_b (Σ_l t_bl) logsumexp(h_b) − ⟨t_b, h_b⟩`` averaged over the batch,
whose gradient in the logits is closed-form (:func:`cross_entropy_gradient`), so all learners
train in one fused step.

Examples:
    >>> import torch
    >>> logits = torch.tensor([[2.0, 1.0, 0.0]])
    >>> predict_labels(logits).tolist()
    [0]
    >>> cost = torch.tensor([[[0.0, 0.1, 0.1], [0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]])
    >>> predict_labels(logits, cost, rule="cost").tolist()  # saying 0 risks the costly row 2
    [1]
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "PredictionRule",
    "TrainingRule",
    "cross_entropy_gradient",
    "importance_targets",
    "predict_labels",
]

PredictionRule = Literal["argmax", "cost"]
TrainingRule = Literal["weighted", "sampling"]


def predict_labels(logits: Tensor, cost: Tensor | None = None,
                   rule: PredictionRule = "argmax") -> Tensor:
    """Each weak learner's label from its logits ``(..., k)`` and cost matrix ``(..., k, k)``."""
    if rule == "argmax":
        return logits.argmax(-1)
    if cost is None:
        raise ValueError("the cost-sensitive rule needs a cost matrix")
    probs = torch.softmax(logits, dim=-1).to(cost.dtype)
    return (probs.unsqueeze(-2) @ cost).squeeze(-2).argmin(-1)


def importance_targets(weights: Tensor, labels: Tensor, n_classes: int,
                       rule: TrainingRule = "weighted",
                       generator: torch.Generator | None = None) -> Tensor:
    """Soft targets ``w e_y`` ``(N, B, k)`` from importance weights ``(N, B)`` and labels ``(B,)``.

    ``rule="sampling"`` replaces ``w`` by a ``Bernoulli(min(w, 1))`` draw (from ``generator``,
    on the CPU).

    Examples:
        >>> importance_targets(torch.tensor([[0.5, 2.0]]), torch.tensor([1, 0]), 2).tolist()
        [[[0.0, 0.5], [2.0, 0.0]]]
    """
    if rule == "sampling":
        keep = torch.rand(weights.shape, generator=generator, dtype=torch.float64)
        weights = (keep.to(weights.device) < weights.clamp(max=1.0)).to(weights.dtype)
    return weights.unsqueeze(-1) * F.one_hot(labels, n_classes).to(weights.dtype)


def cross_entropy_gradient(logits: Tensor, targets: Tensor) -> Tensor:
    """Gradient in ``logits (N, B, k)`` of ``Σ_i mean_b [(Σ_l t_ibl) logsumexp(h_ib) −
    ⟨t_ib, h_ib⟩]``: ``((Σ_l t) softmax(h) − t) / B``. For ``t = w e_y`` this is the
    ``w``-weighted cross-entropy.

    Examples:
        >>> h = torch.zeros(1, 1, 2, requires_grad=True)
        >>> t = torch.tensor([[[0.0, 3.0]]])
        >>> loss = (t.sum(-1) * torch.logsumexp(h, -1) - (t * h).sum(-1)).mean(-1).sum()
        >>> loss.backward()
        >>> torch.equal(h.grad, cross_entropy_gradient(h.detach(), t))
        True
    """
    mass = targets.sum(-1, keepdim=True)
    return (mass * torch.softmax(logits, dim=-1) - targets) / logits.shape[1]
