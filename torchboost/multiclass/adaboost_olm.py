"""Adaboost.OLM, the adaptive online multiclass booster (Jung, Goetz & Tewari 2017, Alg. 2,
Sec. 4), and its exponential-loss and squared-hinge variants (Appendix D).

Learner ``i`` sees the gradient of a surrogate loss at the weighted vote ``s = s_t^{i−1}`` as
its cost matrix (eq. (9) for the logistic loss (8)); expert ``i`` predicts ``argmax_l s_t^i(l)``
and the booster follows an expert drawn by Hedge (lines 10–11). After ``y_t`` is revealed:

* each vote weight takes a projected OGD step on ``f_t^i(α) = L^{y_t}(s_t^{i−1} + α e_{l_t^i})``
  (line 13): ``α ← Π_F(α − η_t f′(α))`` with ``f′`` from eq. (10), whose printed
  correct-prediction case is a typo; the derivative used is ``C[y, l]`` at ``s + α e_l``
  (for the logistic loss ``−Σ_{j≠y} σ(s(j) − s(y) − α)`` when ``l = y``);
* learner ``i`` is trained with weight ``w^i(t) = −C_t^i(y_t, y_t)/(k − 1)`` (line 14 prints
  ``C_t^i(y_t, l_t^i)``, which is negative when the learner errs; the text's "proportional to
  ``−C(y, y)``" is used, digest §5 item 2); for the logistic loss ``w ∈ (0, 1)``, for the other
  two losses it can exceed 1 (the sampling variant then trains with probability 1);
* Hedge multiplies expert ``i``'s weight by ``exp(−1[ŷ^i ≠ y])`` (line 15), the indicator being
  taken in expectation over the expert's random tie-break.

``η_t`` uses the 1-based index of the example in the stream (the state's ``t``), the same for
every learner except the exponential loss's ``e^{−i}`` factor.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor

from torchboost.atomic_load import unfit_state
from torchboost.learners import LearnerSource, WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory
from torchboost.multiclass.base import MulticlassBooster, StateUpdates
from torchboost.multiclass.cost_matrices import SurrogateCost, get_surrogate
from torchboost.multiclass.hedge import Hedge
from torchboost.multiclass.voting import argmax_random_ties, tie_fraction
from torchboost.multiclass.weak_classifiers import PredictionRule, TrainingRule

__all__ = ["AdaboostOLM"]


class AdaboostOLM(MulticlassBooster):
    """Adaboost.OLM (Alg. 2) with neural weak learners.

    Args:
        learners, n_classes, n_learners: see :class:`~torchboost.multiclass.MulticlassBooster`.
        loss: the surrogate, ``"logistic"`` (Alg. 2), ``"exponential"`` or ``"squared_hinge"``
            (App. D), or a :class:`~torchboost.multiclass.SurrogateCost`.
        hedge: ``"random"`` draws the expert from Hedge's weights (Alg. 2 line 10, seeded);
            ``"top"`` follows the heaviest expert.
        state_updates: ``"sequential"`` (default) or ``"batch"`` for ``α``, Hedge and ``t``.
        prediction, training, optimizer, optimizer_kwargs: see the base class.
        mode, seed, lr_fan_in, lr_scheduler: see the base class.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> _ = torch.manual_seed(0)
        >>> booster = AdaboostOLM(lambda: nn.Linear(4, 3), n_classes=3, n_learners=5)
        >>> x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        >>> booster.learn(x, y).shape  # scores; labels: .argmax(-1) or booster.predict_label(x)
        torch.Size([8, 3])
        >>> int(booster.t), bool(booster.alpha.abs().max() <= 2)
        (8, True)
    """

    config_keys = ("loss_fn", "hedge")

    def __init__(
        self,
        learners: LearnerSource | WeakLearners,
        n_classes: int,
        *,
        n_learners: int | None = None,
        loss: str | SurrogateCost = "logistic",
        hedge: Literal["random", "top"] = "random",
        state_updates: StateUpdates = "sequential",
        prediction: PredictionRule = "argmax",
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
        super().__init__(learners, n_classes, n_learners=n_learners, prediction=prediction,
                         training=training, state_updates=state_updates, optimizer=optimizer,
                         optimizer_kwargs=optimizer_kwargs, mode=mode, seed=seed,
                         lr_fan_in=lr_fan_in, lr_scheduler=lr_scheduler,
                         standardize=standardize, n_threads=n_threads)
        if hedge not in ("random", "top"):
            raise ValueError(f"hedge must be 'random' or 'top', got {hedge!r}")
        self.loss_fn = get_surrogate(loss)
        n = self.n_learners
        self.hedge = Hedge(n, randomized=hedge == "random")
        self.register_buffer("alpha", torch.zeros(n, dtype=torch.float64))
        #: examples seen by the OGD so far (``t − 1`` of the next example)
        self.register_buffer("t", torch.zeros((), dtype=torch.int64))
        self.register_buffer("cost_of_vote", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("cost_of_truth", torch.zeros(n, dtype=torch.float64))

    def _check_loaded(self) -> None:
        """The statistics (:class:`~torchboost.boosters.state.BoosterState`); vote weights,
        Hedge's log weights and the costs must be finite, the counter >= 0."""
        super()._check_loaded()
        for name, value in (("alpha", self.alpha), ("hedge.log_weights", self.hedge.log_weights),
                            ("cost_of_vote", self.cost_of_vote),
                            ("cost_of_truth", self.cost_of_truth)):
            if not bool(torch.isfinite(value).all()):
                raise unfit_state("booster", f"its {name} is not finite")
        if int(self.t) < 0:
            raise unfit_state("booster", f"its example counter t is {int(self.t)}")

    def vote_weights(self, n_learners: int) -> Tensor:
        return self.alpha[:n_learners]

    def cost_matrices(self, before: Tensor, first: int) -> Tensor:
        """``C^i = ∇L^r(s^{i−1})`` for every row ``r`` (eq. (9) / App. D)."""
        return self.loss_fn.cost_matrix(before)

    def decide(self, partials: Tensor, generator: torch.Generator) -> Tensor:
        """Expert ``i_t`` drawn by Hedge (or the heaviest), which predicts
        ``argmax_l s^{i_t}(l)`` (Alg. 2 lines 8–11)."""
        return self.decide_scores(partials, generator)[0]

    def decide_scores(self, partials: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """:meth:`decide`'s labels and the chosen experts' votes ``s^{i_t}``."""
        experts = argmax_random_ties(partials[1:], generator)
        chosen = self.hedge.choose(partials.shape[1], experts.shape[0], generator)
        labels = experts.gather(0, chosen.unsqueeze(0)).squeeze(0)
        votes = partials[1:][chosen, torch.arange(partials.shape[1], device=chosen.device)]
        return labels, votes

    def importance_weights(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """``w^i(t) = −C_t^i(y_t, y_t)/(k − 1)`` (Alg. 2 line 14, digest §5 item 2)."""
        labels = z.expand(h.shape[0], -1)
        right = self.loss_fn.gradient(partials[:-1], labels).gather(-1, labels.unsqueeze(-1))
        return (-right.squeeze(-1) / (self.n_classes - 1)).to(h.dtype)

    def update(self, labels: Tensor, partials: Tensor, z: Tensor) -> None:
        """OGD on every ``α`` (line 13), Hedge (line 15), ``t`` and the empirical edges."""
        super().update(labels, partials, z)
        n, batch = labels.shape
        truth = z.expand(n, -1)
        before = partials[:-1].to(torch.float64)
        alpha = self.alpha[:n].unsqueeze(1).expand(n, batch)
        slope = self.loss_fn.alpha_derivative(before, alpha, labels, truth)
        t = (self.t + torch.arange(1, batch + 1, device=z.device)).to(torch.float64)
        index = torch.arange(1, n + 1, device=z.device, dtype=torch.float64).unsqueeze(1)
        step = self.loss_fn.step_size(t.unsqueeze(0), index, self.n_classes, self.n_learners)
        bound = self.loss_fn.alpha_bound(self.n_learners)
        self.alpha[:n] = (self.alpha[:n] - (step * slope).sum(1)).clamp(-bound, bound)
        self.hedge.update((1.0 - tie_fraction(partials[1:], truth)).sum(1))
        self.t += batch
        cost = self.loss_fn.gradient(before, truth)
        self.cost_of_vote[:n] += cost.gather(-1, labels.unsqueeze(-1)).squeeze(-1).sum(1)
        self.cost_of_truth[:n] += cost.gather(-1, truth.unsqueeze(-1)).squeeze(-1).sum(1)

    def empirical_edges(self) -> Tensor:
        """The paper's edges ``γ_i = Σ_t C_t^i(y_t, l_t^i) / Σ_t C_t^i(y_t, y_t) ∈ [−1, 1]``
        (Sec. 4.1, Theorem 5); 1 for a learner that is always right."""
        return self.cost_of_vote / self.cost_of_truth.clamp(max=-1e-300)

    def diagnostics(self) -> dict[str, Tensor]:
        """Base diagnostics plus ``α``, Hedge's probabilities and the empirical edges."""
        return {**super().diagnostics(), "alpha": self.alpha.float(),
                "hedge": self.hedge.probabilities().float(),
                "empirical_edge": self.empirical_edges().float()}
