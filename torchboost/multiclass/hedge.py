"""Hedge over the N experts of Adaboost.OLM (Jung, Goetz & Tewari 2017, Alg. 2 lines 10, 15).

Expert ``i`` predicts with the first ``i`` weak learners. Each expert keeps a weight
``v^i``, multiplied by ``exp(−η ℓ^i)`` after every example, with ``η = 1`` and ``ℓ^i`` the
expert's 0-1 loss (in expectation over the random tie-break). Alg. 2 draws the expert used for
the prediction with probability ``∝ v^i``; the deterministic alternative follows the heaviest
expert (ties go to the expert with more learners). Weights are kept as logarithms, so they do not
underflow on long streams.

Examples:
    >>> import torch
    >>> hedge = Hedge(3, randomized=False)
    >>> hedge.update(torch.tensor([1.0, 0.0, 1.0]))
    >>> [round(p, 4) for p in hedge.probabilities().tolist()]  # ∝ (1/e, 1, 1/e)
    [0.2119, 0.5761, 0.2119]
    >>> hedge.choose(2).tolist()
    [1, 1]
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["Hedge"]


class Hedge(nn.Module):
    """Exponential weights over ``n_experts`` experts (state: the log-weights buffer).

    Args:
        n_experts: number of experts ``N``.
        learning_rate: ``η`` of ``v ← v · exp(−η ℓ)`` (Alg. 2 uses 1).
        randomized: draw the expert (Alg. 2 line 10) or take the heaviest one.
    """

    def __init__(self, n_experts: int, learning_rate: float = 1.0, randomized: bool = True,
                 ) -> None:
        super().__init__()
        if n_experts < 1:
            raise ValueError(f"n_experts must be >= 1, got {n_experts}")
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        self.learning_rate = float(learning_rate)
        self.randomized = bool(randomized)
        self.register_buffer("log_weights", torch.zeros(n_experts, dtype=torch.float64))

    def probabilities(self, n_experts: int | None = None) -> Tensor:
        """Normalised weights of the first ``n_experts`` experts (default all)."""
        return torch.softmax(self.log_weights[:n_experts], dim=0)

    def choose(self, batch: int, n_experts: int | None = None,
               generator: torch.Generator | None = None) -> Tensor:
        """Index of the expert followed for each of ``batch`` examples (0-based), among the
        first ``n_experts``."""
        log_weights = self.log_weights[:n_experts]
        if self.randomized:
            probs = torch.softmax(log_weights, dim=0).cpu()
            picks = torch.multinomial(probs, batch, replacement=True, generator=generator)
            return picks.to(log_weights.device)
        last_best = log_weights.numel() - 1 - int(log_weights.flip(0).argmax())
        return torch.full((batch,), last_best, dtype=torch.long, device=log_weights.device)

    def update(self, losses: Tensor) -> None:
        """``log v ← log v − η ℓ`` for the losses ``(N,)`` of one round (or their sum)."""
        self.log_weights -= self.learning_rate * losses.to(self.log_weights)
        self.log_weights -= self.log_weights.max()
