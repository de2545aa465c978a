"""OzaBoost: Oza & Russell's online boosting ("Online bagging and boosting", AISTATS 2001,
Fig. 2), the "OLB" baseline of Jung, Goetz & Tewari (2017, Sec. 5).

For each example the weight ``λ`` starts at 1 and passes through the learners in order:
learner ``m`` is trained ``Poisson(λ)`` times on the example, then, if it classifies the
example correctly, ``λ^sc_m += λ`` and ``λ ← λ / (2(1 − ε_m))``, else ``λ^sw_m += λ`` and
``λ ← λ / (2ε_m)``, with ``ε_m = λ^sw_m / (λ^sc_m + λ^sw_m)``. The booster predicts
``argmax_y Σ_{m: h_m(x) = y} log((1 − ε_m)/ε_m)``.

Neural adaptation: "trained ``K ~ Poisson(λ)`` times" becomes one cross-entropy step with
importance weight ``K`` (``"weighted"``) or one unweighted step when ``K ≥ 1`` (``"sampling"``),
and learner ``m``'s correctness is read from the prediction it made before the update (all
learners predict in one stacked forward). A learner with ``ε_m ≥ 1/2``, or none seen yet, gets
vote weight 0, and ``ε_m`` is floored at ``1e−6`` in the vote weight.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchboost.learners import LearnerSource, WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory
from torchboost.multiclass.base import MulticlassBooster, StateUpdates
from torchboost.multiclass.voting import argmax_random_ties
from torchboost.multiclass.weak_classifiers import TrainingRule

__all__ = ["OzaBoost"]

_ERROR_FLOOR = 1e-6


class OzaBoost(MulticlassBooster):
    """Oza-style online boosting with Poisson(λ) example weights.

    Args:
        learners, n_classes, n_learners: see :class:`~torchboost.multiclass.MulticlassBooster`.
        state_updates: ``"sequential"`` (default) or ``"batch"`` for the ``λ^sc``/``λ^sw`` sums.
        training, optimizer, optimizer_kwargs: see the base class.
        mode, seed, lr_fan_in, lr_scheduler: see the base class. The learners
            predict by plain argmax (the algorithm has no cost matrices).

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> _ = torch.manual_seed(0)
        >>> booster = OzaBoost(lambda: nn.Linear(4, 3), n_classes=3, n_learners=5)
        >>> x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        >>> booster.learn(x, y).shape  # scores; labels: .argmax(-1)
        torch.Size([8, 3])
        >>> float(booster.lambda_correct[0] + booster.lambda_wrong[0])  # λ = 1 at learner 1
        8.0
    """

    def __init__(
        self,
        learners: LearnerSource | WeakLearners,
        n_classes: int,
        *,
        n_learners: int | None = None,
        state_updates: StateUpdates = "sequential",
        training: TrainingRule = "weighted",
        optimizer: type[torch.optim.Optimizer] = DEFAULT_OPTIMIZER,
        optimizer_kwargs: dict[str, Any] | None = None,
        mode: str = "auto",
        seed: int = 0,
        lr_fan_in: float | None = None,
        lr_scheduler: LRSchedulerFactory | None = None,
        standardize: bool = True,
        n_threads: int | str | None = "auto",
    ) -> None:
        super().__init__(learners, n_classes, n_learners=n_learners, prediction="argmax",
                         training=training, state_updates=state_updates, optimizer=optimizer,
                         optimizer_kwargs=optimizer_kwargs, mode=mode, seed=seed,
                         lr_fan_in=lr_fan_in, lr_scheduler=lr_scheduler,
                         standardize=standardize, n_threads=n_threads)
        self.register_buffer("lambda_correct", torch.zeros(self.n_learners, dtype=torch.float64))
        self.register_buffer("lambda_wrong", torch.zeros(self.n_learners, dtype=torch.float64))

    def errors(self) -> Tensor:
        """``ε_m = λ^sw_m / (λ^sc_m + λ^sw_m)`` per learner (1/2 before any example)."""
        total = self.lambda_correct + self.lambda_wrong
        return torch.where(total > 0, self.lambda_wrong / total.clamp_min(1e-300), 0.5)

    def vote_weights(self, n_learners: int) -> Tensor:
        """``max(log((1 − ε)/ε), 0)`` with ``ε ≥ 1e−6``."""
        error = self.errors()[:n_learners].clamp_min(_ERROR_FLOOR)
        return torch.log((1.0 - error) / error).clamp_min(0.0)

    def decide(self, partials: Tensor, generator: torch.Generator) -> Tensor:
        return argmax_random_ties(partials[-1], generator)

    def poisson_rates(self, labels: Tensor, z: Tensor) -> Tensor:
        """``λ`` reaching each learner ``(N, B)``, given which learners are right (each example
        sees the current sums plus its own contribution)."""
        right = (labels == z).cpu().numpy()
        correct = self.lambda_correct.cpu().numpy()
        wrong = self.lambda_wrong.cpu().numpy()
        rates = np.empty(right.shape)
        lam = np.ones(right.shape[1])
        for m in range(right.shape[0]):
            rates[m] = lam
            hit = right[m]
            error = (wrong[m] + lam * ~hit) / (correct[m] + wrong[m] + lam)
            lam = lam / (2.0 * np.where(hit, 1.0 - error, error))
        return torch.from_numpy(rates).to(z.device)

    def importance_weights(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Poisson counts ``K ~ Poisson(λ)`` (drawn on the CPU)."""
        rates = self.poisson_rates(h.argmax(-1), z).cpu()
        return torch.poisson(rates, generator=self.generator).to(device=h.device, dtype=h.dtype)

    def update(self, labels: Tensor, partials: Tensor, z: Tensor) -> None:
        """Add each example's ``λ`` to ``λ^sc`` or ``λ^sw`` of every learner."""
        super().update(labels, partials, z)
        rates = self.poisson_rates(labels, z)
        right = labels == z
        self.lambda_correct += (rates * right).sum(1)
        self.lambda_wrong += (rates * ~right).sum(1)

    def diagnostics(self) -> dict[str, Tensor]:
        """Base diagnostics plus each learner's weighted error ``ε``."""
        return {**super().diagnostics(), "error": self.errors().float()}
