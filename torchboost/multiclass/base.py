"""What the online multiclass boosters share: the round on a mini-batch, predictions with
random tie-breaks, importance-weighted training of the weak learners, and state.

The protocol is Jung, Goetz & Tewari (2017), Sec. 2: for an example ``x_t`` every weak learner
``i`` gets a cost matrix ``C_t^i`` (built from the votes ``s_t^{i−1}`` of the learners before it)
and returns a label ``l_t^i``; the booster predicts ``ŷ_t``; then ``y_t`` is revealed and every
learner is trained on ``(x_t, y_t)`` with an importance weight. One :meth:`learn` call is:

1. one stacked forward of all learners gives their logits ``(N, B, k)``;
2. :meth:`~MulticlassBooster.partial_sums` builds the learners' labels and the votes
   ``s^0..s^N``: with ``prediction="argmax"`` the labels ignore the cost matrices and the votes
   are one cumulative sum; with ``"cost"`` learner ``i`` takes the cost-sensitive label for
   ``C^i``, so the votes are built learner by learner (each step vectorised over the batch);
3. :meth:`~MulticlassBooster.decide` gives the booster's labels ``ŷ`` (ties at random);
4. the labels are revealed: :meth:`~MulticlassBooster.importance_weights` gives each learner's
   weight, :meth:`~MulticlassBooster.update` the algorithm's own state (OLM's ``α`` and Hedge,
   OzaBoost's error estimates);
5. all learners take one step on their weighted cross-entropy (closed-form gradient).

**Mini-batches.** The paper's algorithms see one example per round; ``B = 1`` reproduces them.
For ``B > 1`` the learners predict every example with their parameters at the start of the batch
and take one step on the batch's weighted losses (the usual mini-batch reading; forward and
backward stay batched). State that changes from one example to the next is updated example by
example, in order, with ``state_updates="sequential"`` (the paper's semantics for that state:
example ``b`` is predicted and weighted with the state left by examples ``< b``), or with the
batch-start state for every example and one update per batch with ``"batch"`` (vectorised over
the batch; the same as ``"sequential"`` when ``B = 1``). OnlineMBBM has no such state.

:meth:`learn` returns, like every booster, the scores ``(B, k)`` of the prediction made *before*
the update; their ``argmax`` is the booster's label (random tie-breaks included), so a stream's
mean of ``learn(x, y).argmax(-1) != y`` is its prequential (progressive-validation) error, and
:meth:`~torchboost.boosters.base.Booster.predict_label` gives held-out labels. Bad input raises
``ValueError`` before any state changes. Compute is counted as for the other boosters: 3 units
per learner and example.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Literal

import torch
from torch import Tensor

from torchboost.atomic_load import unfit_state
from torchboost.boosters.base import Booster, Round
from torchboost.learners import LearnerSource, WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory
from torchboost.multiclass.voting import cumulative_votes
from torchboost.multiclass.weak_classifiers import (
    PredictionRule,
    TrainingRule,
    cross_entropy_gradient,
    importance_targets,
    predict_labels,
)

__all__ = ["MulticlassBooster", "StateUpdates"]

StateUpdates = Literal["sequential", "batch"]


class MulticlassBooster(Booster):
    """Base class of :class:`~torchboost.multiclass.OnlineMBBM`,
    :class:`~torchboost.multiclass.AdaboostOLM` and :class:`~torchboost.multiclass.OzaBoost`
    (see the module docstring for the round).

    Args:
        learners: a factory ``lambda: nn.Module`` returning ``k`` logits, plus ``n_learners``; a
            list of modules; or a ready :class:`~torchboost.learners.WeakLearners`.
        n_classes: number of labels ``k``; labels are integers in ``[0, k)``.
        prediction: how a learner uses its cost matrix, ``"argmax"`` or ``"cost"``
            (:func:`~torchboost.multiclass.weak_classifiers.predict_labels`).
        training: ``"weighted"`` cross-entropy step or the ``"sampling"`` variant
            (:func:`~torchboost.multiclass.weak_classifiers.importance_targets`).
        state_updates: ``"sequential"`` or ``"batch"`` (module docstring, "Mini-batches").
        optimizer, optimizer_kwargs, mode, lr_fan_in, lr_scheduler, standardize, n_threads: as
            for every :class:`~torchboost.boosters.base.Booster` (schedule-free learners at the
            default rule, features standardised on the fly, by default).
        seed: seeds the generator of every random choice (ties, Hedge, sampling, Poisson).
    """

    supports_distributed = False
    #: the stall monitor (:mod:`torchboost.boosters.stall`) judges the error rate of the votes
    #: ``s^0..s^N`` (they are not scores on the loss's scale)
    monitors_stall = True
    stall_metric = "error"
    fewest_prediction_learners = 1
    config_keys = ("n_classes", "prediction", "training_rule", "state_updates")

    def __init__(
        self,
        learners: LearnerSource | WeakLearners,
        n_classes: int,
        *,
        n_learners: int | None = None,
        prediction: PredictionRule = "argmax",
        training: TrainingRule = "weighted",
        state_updates: StateUpdates = "sequential",
        optimizer: type[torch.optim.Optimizer] = DEFAULT_OPTIMIZER,
        optimizer_kwargs: dict[str, Any] | None = None,
        mode: str = "auto",
        seed: int = 0,
        lr_fan_in: float | None = None,
        lr_scheduler: LRSchedulerFactory | None = None,
        standardize: bool = True,
        n_threads: int | str | None = "auto",
    ) -> None:
        if not (isinstance(n_classes, int) and n_classes >= 2):
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        for name, value, allowed in (("prediction", prediction, ("argmax", "cost")),
                                     ("training", training, ("weighted", "sampling")),
                                     ("state_updates", state_updates, ("sequential", "batch"))):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        options = {"optimizer": optimizer, "optimizer_kwargs": optimizer_kwargs, "mode": mode,
                   "lr_scheduler": lr_scheduler, "standardize": standardize,
                   "n_threads": n_threads}
        if lr_fan_in is not None:
            options["lr_fan_in"] = lr_fan_in
        super().__init__(learners, "softmax", n_learners=n_learners, n_outputs=n_classes,
                         y0=0.0, **options)
        self.n_classes = n_classes
        self.prediction: PredictionRule = prediction
        #: the ``training`` rule (not ``self.training``: that is ``nn.Module``'s train/eval flag)
        self.training_rule: TrainingRule = training
        self.state_updates: StateUpdates = state_updates
        self.generator = torch.Generator().manual_seed(seed)
        self.register_buffer("learner_hits", torch.zeros(self.n_learners, dtype=torch.float64))

    # --- the algorithm-specific pieces -------------------------------------------------------
    @abstractmethod
    def vote_weights(self, n_learners: int) -> Tensor:
        """Weights ``α`` of the first ``n_learners`` learners' votes, ``(n,)``."""

    @abstractmethod
    def decide(self, partials: Tensor, generator: torch.Generator) -> Tensor:
        """The booster's labels ``(B,)`` from the votes ``s^0..s^n`` ``(n + 1, B, k)``."""

    @abstractmethod
    def importance_weights(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Each learner's importance weight ``(N, B)`` once the labels ``z`` are revealed."""

    def cost_matrices(self, before: Tensor, first: int) -> Tensor:
        """Cost matrices ``(n, B, k, k)`` of learners ``first..first+n−1`` (0-based) given the
        votes ``before (n, B, k)`` of the learners preceding each."""
        raise NotImplementedError(f"{type(self).__name__} does not build cost matrices")

    def update(self, labels: Tensor, partials: Tensor, z: Tensor) -> None:
        """Update the algorithm's state after a round (here: per-learner hit counts)."""
        self.learner_hits[: labels.shape[0]] += (labels == z).sum(1).to(torch.float64)

    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Votes ``s^0..s^n`` ``(n + 1, B, k)`` of the learners with logits ``h (n, B, k)``."""
        n = h.shape[0]
        alpha = self.vote_weights(n).to(h)  # device too: OnlineMBBM builds its α ≡ 1 on the CPU
        if self.prediction == "argmax":
            return y0 + cumulative_votes(h.argmax(-1), alpha, self.n_classes)
        votes = [y0]
        for i in range(n):
            cost = self.cost_matrices(votes[-1].unsqueeze(0), i)[0]
            label = predict_labels(h[i], cost, "cost")
            votes.append(votes[-1] + alpha[i] * torch.nn.functional.one_hot(
                label, self.n_classes).to(h.dtype))
        return torch.stack(votes)

    def learner_labels(self, h: Tensor, partials: Tensor) -> Tensor:
        """The labels ``(n, B)`` the learners voted for in :meth:`partial_sums`."""
        if self.prediction == "argmax":
            return h.argmax(-1)
        return predict_labels(h, self.cost_matrices(partials[:-1], 0), "cost")

    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Soft targets ``w e_y`` ``(N, B, k)`` of the learners' weighted cross-entropy."""
        return importance_targets(self.importance_weights(h, partials, z), z, self.n_classes,
                                  self.training_rule, self.generator)

    def learner_loss_grad(self, h: Tensor, targets: Tensor) -> Tensor:
        return cross_entropy_gradient(h, targets)

    def decide_scores(self, partials: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """The booster's labels ``(B,)`` and the votes ``(B, k)`` they were decided from
        (default: :meth:`decide` on the final votes ``s^n``)."""
        return self.decide(partials, generator), partials[-1]

    def decision_scores(self, partials: Tensor, generator: torch.Generator) -> Tensor:
        """Scores ``(B, k)`` whose ``argmax`` is the booster's label: the votes it decided from,
        with the decided label raised just above the others where it tied (random tie-break)."""
        labels, votes = self.decide_scores(partials, generator)
        index = labels.unsqueeze(-1)
        chosen = votes.gather(-1, index)
        others = votes.scatter(-1, index, -torch.inf).max(-1, keepdim=True).values
        above = torch.where(chosen > others, chosen, torch.nextafter(others, others + 1))
        return votes.scatter(-1, index, above)

    # --- Booster hooks ----------------------------------------------------------------------------
    def plan_round(self, x: Tensor, z: Tensor) -> Round:
        """The multiclass round (module docstring): votes, decisions, importance weights and the
        algorithm's state updates, example by example or once per batch. The prediction is the
        scores of :meth:`decision_scores` (labels: ``argmax``, or :meth:`predict_label`)."""
        outputs = self._learner_outputs(x)
        h = outputs.detach()
        y0 = self.initial_prediction(x)
        rounds = (range(x.shape[0]) if self.state_updates == "sequential" else [None])
        scores, targets, votes = [], [], []
        for b in rounds:
            rows = slice(None) if b is None else slice(b, b + 1)
            partials = self.partial_sums(h[:, rows], y0[rows])
            scores.append(self.decision_scores(partials, self.generator))
            targets.append(self.learner_targets(h[:, rows], partials, z[rows]))
            self.update(self.learner_labels(h[:, rows], partials), partials, z[rows])
            votes.append(partials)
        return Round(outputs, h, torch.cat(votes, 1), torch.cat(scores), torch.cat(targets, 1))

    def prediction_scores(self, partials: Tensor) -> Tensor:
        """:meth:`decision_scores`, with random choices from a copy of the generator, so that
        predicting changes no state."""
        generator = torch.Generator()
        generator.set_state(self.generator.get_state())
        return self.decision_scores(partials, generator)

    # --- public API ---------------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Scores ``(B, k)`` of the first ``n_learners`` learners (anytime prediction), whose
        ``argmax`` (:meth:`predict_label`) is the booster's label. Random choices use a copy of
        the generator, so predicting changes no state."""
        return super().predict(x, n_learners)

    @torch.no_grad()
    def votes(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """The final vote ``s^n`` ``(B, k)`` of the first ``n_learners`` learners."""
        x = self._check_features(x)
        if self.standardizer is not None:
            x = self.standardizer.inputs(x)
        with self.learners.evaluating():
            h = self._learner_outputs(x, n_learners)
        return self.combine(self.partial_sums(h, self.initial_prediction(x)))

    def edges(self) -> Tensor:
        """Each learner's running edge over random guessing, ``(k·acc − 1)/(k − 1)`` from its
        prequential accuracy: ``γ`` for a learner voting from ``u_γ^y`` (Sec. 2)."""
        if self.samples_seen == 0:  # no evidence of an edge yet
            return torch.zeros_like(self.learner_hits, dtype=torch.float64)
        accuracy = self.learner_hits / self.samples_seen
        return (self.n_classes * accuracy - 1.0) / (self.n_classes - 1.0)

    def diagnostics(self) -> dict[str, Tensor]:
        """Mean importance weight per learner in the last round and running edges."""
        out = {"edge": self.edges().float()}
        if "target_norm" in self.last_diagnostics:
            out["weight"] = self.last_diagnostics["target_norm"]
        return out

    # --- state ------------------------------------------------------------------------------------
    def get_extra_state(self) -> dict[str, Any]:
        return {**super().get_extra_state(), "generator": self.generator.get_state()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        super().set_extra_state(state)
        saved, mine = state["generator"], self.generator.get_state()
        if not (torch.is_tensor(saved) and saved.dtype == mine.dtype
                and saved.shape == mine.shape):
            raise unfit_state("booster", "its generator entry is not the state of a CPU "
                                         "torch.Generator; load a state_dict() saved by a "
                                         "booster built like this one")
        self.generator.set_state(saved)
