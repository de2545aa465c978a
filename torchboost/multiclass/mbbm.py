"""OnlineMBBM, the optimal online multiclass boost-by-majority (Jung, Goetz & Tewari 2017,
Alg. 1, Sec. 3).

Learner ``i`` is told how costly each label would be through the potentials of the multiclass
0-1 loss: with ``m = N − i`` learners after it and ``s = s_t^{i−1}`` the unweighted vote of the
learners before it, row ``r`` of its raw cost matrix (4) is ``φ_m^r(s + e_l)`` and the
normalised matrix (5) is ``D[r, l] = (φ_m^r(s + e_l) − φ_m^r(s + e_r)) / w_r``. Once ``y_t`` is
known, learner ``i`` is trained with importance weight ``w^i(t)/w^{i*}`` (Alg. 1 line 11–12),
``w^i(t) = Σ_l (φ_m^y(s + e_l) − φ_m^y(s + e_y))``. The booster predicts the plain majority
``argmax_l s_t^N(l)`` (line 9). Theorem 2 / Corollary 3: under the weak learning condition with
edge ``γ`` the mistake rate tends to ``φ_N^r(0) ≤ (k − 1) e^{−γ²N/2}`` (Lemma 9).

The normaliser ``w^{i*}`` must bound ``w^i(t)``; Lemma 10's bound has an unknown constant, the
trivial one is ``k`` (used in the paper) and, since the ``l = y`` term is 0, ``k − 1`` is valid
too (the default here, digest §5 item 8).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from torchboost.boosters.state import adopt_unrecorded
from torchboost.learners import LearnerSource, WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory
from torchboost.multiclass.base import MulticlassBooster
from torchboost.multiclass.cost_matrices import mbbm_cost_matrix
from torchboost.multiclass.potentials import (
    MAX_EXACT_VOTES,
    ExactPotentials,
    MonteCarloPotentials,
    Potentials,
)
from torchboost.multiclass.voting import argmax_random_ties
from torchboost.multiclass.weak_classifiers import PredictionRule, TrainingRule

__all__ = ["OnlineMBBM"]


class OnlineMBBM(MulticlassBooster):
    """OnlineMBBM (Alg. 1) with neural weak learners.

    Args:
        learners, n_classes, n_learners: see :class:`~torchboost.multiclass.MulticlassBooster`.
        gamma: the edge ``γ`` assumed by the potentials (the paper tries .3, .1, .05, .01, .001).
        potentials: ``"exact"`` (:class:`~torchboost.multiclass.ExactPotentials`, eq. (16)),
            ``"monte_carlo"`` (:class:`~torchboost.multiclass.MonteCarloPotentials` with
            ``mc_samples`` draws per state seeded by ``mc_seed``, as in the paper's experiments)
            or a ready :class:`~torchboost.multiclass.Potentials`, whose own ``γ`` is then used.
            Potentials are configuration, not state: a checkpoint is loaded into a booster
            built with the same arguments.
        weight_bound: ``w^{i*}``, the same for every learner (default ``k − 1``).
        prediction, training, optimizer, optimizer_kwargs: see the base class.
        mode, seed, lr_fan_in, lr_scheduler: see the base class.

    OnlineMBBM keeps no state besides the learners, so the examples of a batch never wait for
    each other: everything but the learners' step is exactly per example.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> _ = torch.manual_seed(0)
        >>> booster = OnlineMBBM(lambda: nn.Linear(4, 3), n_classes=3, gamma=0.1, n_learners=5)
        >>> x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        >>> booster.learn(x, y).shape, booster.predict_label(x).dtype  # scores; labels
        (torch.Size([8, 3]), torch.int64)
        >>> weights = booster.diagnostics()["weight"]  # mean w^i(t)/w^{i*} per learner
        >>> weights.shape, bool(((0 <= weights) & (weights <= 1)).all())
        (torch.Size([5]), True)
    """

    config_keys = ("gamma", "weight_bound", "potentials_setting")

    def __init__(
        self,
        learners: LearnerSource | WeakLearners,
        n_classes: int,
        gamma: float = 0.1,
        *,
        n_learners: int | None = None,
        potentials: Literal["exact", "monte_carlo"] | Potentials = "exact",
        mc_samples: int = 1000,
        mc_seed: int = 0,
        weight_bound: float | None = None,
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
                         training=training, state_updates="batch", optimizer=optimizer,
                         optimizer_kwargs=optimizer_kwargs, mode=mode, seed=seed,
                         lr_fan_in=lr_fan_in, lr_scheduler=lr_scheduler,
                         standardize=standardize, n_threads=n_threads)
        if isinstance(potentials, Potentials):
            if potentials.n_classes != n_classes:
                raise ValueError(f"the potentials are for {potentials.n_classes} classes, the "
                                 f"booster for {n_classes}")
            self.potentials = potentials
        elif potentials == "exact":
            if self.n_learners > MAX_EXACT_VOTES:
                raise ValueError(f"exact potentials support at most {MAX_EXACT_VOTES} learners; "
                                 "use potentials='monte_carlo'")
            self.potentials = ExactPotentials(n_classes, gamma)
        elif potentials == "monte_carlo":
            self.potentials = MonteCarloPotentials(n_classes, gamma, mc_samples, mc_seed)
        else:
            raise ValueError(f"potentials must be 'exact', 'monte_carlo' or a Potentials, got "
                             f"{potentials!r}")
        self.gamma = self.potentials.gamma
        self.weight_bound = float(n_classes - 1 if weight_bound is None else weight_bound)
        if not self.weight_bound > 0:
            raise ValueError(f"weight_bound must be > 0, got {weight_bound}")

    @property
    def potentials_setting(self) -> str:
        """The potentials as the configuration records them (class, ``γ``, and Monte Carlo's
        draws and seed): a state saved with other potentials is refused on load."""
        return repr(self.potentials)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any,
                              **kwargs: Any) -> None:
        adopt_unrecorded(state_dict, prefix, "potentials_setting", self.potentials_setting)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def vote_weights(self, n_learners: int) -> Tensor:
        """OnlineMBBM's votes are unweighted (``α ≡ 1``)."""
        return torch.ones(n_learners)

    def decide(self, partials: Tensor, generator: torch.Generator) -> Tensor:
        """Plain majority ``argmax_l s^N(l)`` (Alg. 1 line 9), ties at random."""
        return argmax_random_ties(partials[-1], generator)

    def cost_matrices(self, before: Tensor, first: int) -> Tensor:
        """Normalised matrices (5), ``D^i[r, l]`` for learners ``i = first+1..first+n``."""
        n, batch, k = before.shape
        remaining = self.n_learners - first - 1 - np.arange(n)
        counts = _counts(before)
        queries = np.broadcast_to(counts[:, :, None, :], (n, batch, k, k)).reshape(-1, k)
        rows = np.broadcast_to(np.arange(k), (n, batch, k)).reshape(-1)
        raw = self.potentials.shifted(np.repeat(remaining, batch * k), queries, rows)
        raw = torch.from_numpy(raw.reshape(n, batch, k, k)).to(before.device)
        return mbbm_cost_matrix(raw)[0].to(before.dtype)

    def importance_weights(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """``w^i(t) / w^{i*}`` (Alg. 1 lines 11–12) from the votes before each learner."""
        n, batch = h.shape[:2]
        remaining = np.repeat(self.n_learners - 1 - np.arange(n), batch)
        labels = np.tile(z.cpu().numpy(), n)
        weights = self.potentials.weight(remaining, _counts(partials[:-1]).reshape(-1, h.shape[2]),
                                         labels)
        weights = torch.from_numpy(weights.reshape(n, batch) / self.weight_bound)
        return weights.to(device=h.device, dtype=h.dtype)


def _counts(votes: Tensor) -> np.ndarray:
    """Integer vote counts ``(..., k)`` on the CPU."""
    return votes.detach().round().to(torch.int64).cpu().numpy()

