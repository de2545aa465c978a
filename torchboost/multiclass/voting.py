"""Weighted votes ``s^i = Σ_{j≤i} α_j e_{l_j}`` and the arg-max decision with random ties.

Jung, Goetz & Tewari (2017) predict ``argmax_l s(l)`` (Alg. 1 line 9, Alg. 2 line 8) without a
tie-break rule; ties are common (integer votes, and all ``α = 0`` at ``t = 1``). The theory counts
a tie as an error whatever the rule, so ties are broken uniformly at random with a seeded
generator (digest §5, item 5).

Examples:
    >>> import torch
    >>> votes = cumulative_votes(torch.tensor([[2], [0], [2]]), torch.ones(3), 3)
    >>> votes[:, 0].tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 2.0]]
    >>> argmax_random_ties(votes[-1]).tolist()
    [2]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["argmax_random_ties", "cumulative_votes", "tie_fraction"]


def cumulative_votes(labels: Tensor, alpha: Tensor, n_classes: int) -> Tensor:
    """Partial votes ``s^0..s^N`` ``(N + 1, B, k)`` of labels ``(N, B)`` with weights ``(N,)``;
    ``s^0 = 0``."""
    steps = alpha.view(-1, 1, 1) * F.one_hot(labels, n_classes).to(alpha.dtype)
    return torch.cat([steps.new_zeros(1, *steps.shape[1:]), steps.cumsum(0)])


def argmax_random_ties(scores: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """``argmax`` over the last dimension, ties broken uniformly at random (draws on the CPU)."""
    ties = scores == scores.amax(-1, keepdim=True)
    noise = torch.rand(scores.shape, generator=generator).to(scores.device)
    return torch.where(ties, noise, -1.0).argmax(-1)


def tie_fraction(scores: Tensor, labels: Tensor) -> Tensor:
    """Probability that :func:`argmax_random_ties` returns ``labels``: ``1/|ties|`` when the
    label is among the maximisers, else 0."""
    ties = scores == scores.amax(-1, keepdim=True)
    hit = ties.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return hit.to(scores.dtype) / ties.sum(-1).to(scores.dtype)
