"""Stepwise online gradient boosting with generic weak learners (Liautaud et al., Alg. 1).

The strong learner is ``f̂_t = Σ_{n=1}^N β_{n,t} h_{n,t}`` and, at every round, **every** weak
learner takes a ``grad-step`` on eq. 3,

    ``(β_n, h_n) ↦ ℓ_t(f̂_{−n,t}(x_t) + β_n h_n(x_t))``, ``f̂_{−n,t} = f̂_t − β_{n,t} h_{n,t}``,

whose gradient with respect to the learner's output is ``ℓ'_t(f̂_t(x_t))``: the gradient at the
**full** prediction. This is the difference with Beygelzimer et al. (2015)'s OGB
(:class:`torchboost.OGB`), where learner ``n`` is trained on the gradient at the partial sum of the
learners before it, and with batch gradient boosting, which adds learners stagewise; here the
learners are readjusted stepwise. The scales ``β_n`` are part of the learners (the chaining trees
of Sec. 3.2 fix ``β_n = 1``).

Weak learners are either

* objects with ``predict(x) -> (B, 1)`` and ``update(x, grad)`` (:class:`OnlineLearner`), e.g.
  :class:`~torchboost.chaining.ChainingTree`; ``grad[i]`` is ``ℓ'(f̂_t(x_i))`` and each learner
  runs its own ``grad-step`` (a chaining tree is itself Alg. 1 over its nodes, eq. 7); or
* a :class:`~torchboost.learners.WeakLearners` container of ``nn.Module`` s, each stepping its own
  optimizer on the batch-mean loss, so the same modules can be boosted by :class:`torchboost.OGB`
  for comparison.

A batch is one round whose loss is the batch mean (:mod:`~torchboost.chaining.rounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from torchboost.atomic_load import AtomicLoad
from torchboost.boosters.guards import check_round
from torchboost.boosters.transaction import RoundTransaction
from torchboost.chaining.rounds import check_gradients, check_labels, scalar_loss
from torchboost.inputs import check_features
from torchboost.learners import WeakLearners
from torchboost.losses import Loss

__all__ = ["OnlineLearner", "StepwiseOGB"]


@runtime_checkable
class OnlineLearner(Protocol):
    """A weak learner for :class:`StepwiseOGB`."""

    def predict(self, x: Tensor) -> Tensor:
        """Prediction ``(B, 1)``; raises ``ValueError`` on bad input without changing state."""
        ...

    def update(self, x: Tensor, grad: Tensor) -> None:
        """One grad-step given ``grad[i] = ∂ℓ_t/∂ŷ`` at ``x_i`` (``(B, 1)``, batch-mean loss)."""
        ...


class StepwiseOGB(AtomicLoad, nn.Module):
    """Alg. 1: ``f̂ = Σ_n h_n``, every learner updated every round on ``ℓ'(f̂_t(x_t))``.

    Args:
        learners: a sequence of :class:`OnlineLearner` (``nn.Module`` s among them are registered
            as submodules) or a :class:`~torchboost.learners.WeakLearners` container.
        loss: a single-output :class:`~torchboost.losses.Loss` or its name.

    Examples:
        >>> import torch
        >>> from torchboost.chaining import ChainingTree
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> coarse = ChainingTree((0.0, 1.0), depth=3, bound=4.0)
        >>> fine = ChainingTree((0.0, 1.0), depth=8, bound=4.0)
        >>> boost = StepwiseOGB([coarse, fine], "squared")
        >>> for _ in range(300):
        ...     x = torch.rand(1, 1)
        ...     _ = boost.learn(x, 3 * x)
        >>> round(float(boost.predict(torch.tensor([[0.5]]))), 1)  # target 1.5
        1.6
    """

    def __init__(self, learners: Sequence[OnlineLearner] | WeakLearners,
                 loss: str | Loss = "squared") -> None:
        super().__init__()
        self.loss = scalar_loss(loss)
        self.container = learners if isinstance(learners, WeakLearners) else None
        #: a container's rounds, each all or nothing
        self._transaction = RoundTransaction()
        if self.container is None:
            self.members = list(learners)
            if not self.members:
                raise ValueError("StepwiseOGB needs at least one weak learner")
            for i, learner in enumerate(self.members):
                if not isinstance(learner, OnlineLearner):
                    raise ValueError(f"learner {i} ({type(learner).__name__}) has no "
                                     "predict(x) / update(x, grad)")
            self.member_modules = nn.ModuleList(m for m in self.members
                                                if isinstance(m, nn.Module))

    @property
    def n_learners(self) -> int:
        return len(self.container) if self.container is not None else len(self.members)

    @torch.no_grad()
    def predict(self, x: Tensor) -> Tensor:
        """``f̂_t(x) = Σ_n h_{n,t}(x)``, ``(B, 1)``."""
        if self.container is not None:
            return _as_column(self.container(_inputs(x)).sum(0), x)
        return torch.stack([_as_column(h.predict(x), x) for h in self.members]).sum(0)

    def forward(self, x: Tensor) -> Tensor:
        return self.predict(x)

    def learn(self, x: Tensor, y: Tensor) -> Tensor:
        """Predict, then update every learner on ``ℓ'(f̂_t(x))`` (Alg. 1); returns the prediction
        made before the update, ``(B, 1)``. Bad input raises ``ValueError`` before any update.

        A container's round is all or nothing, as a booster's
        (:mod:`~torchboost.boosters.transaction`): schedule-free learners learn at their
        learning point and predict with their averaged weights, a non-finite output or step
        raises :class:`~torchboost.DivergenceError` naming the learner, and whatever raises
        leaves the learners, their optimizers and torch's generators as they were. Online
        learners are updated one after another, each all or nothing by itself: one that raises
        leaves those before it updated."""
        if self.container is not None:
            return self._container_round(_inputs(x), lambda prediction: self._gradient(
                prediction, y))
        prediction = self.predict(x)
        self.update(x, self._gradient(prediction, y))
        return prediction

    @torch.no_grad()
    def update(self, x: Tensor, grad: Tensor) -> None:
        """Send the output gradient ``grad`` (``(B, 1)``) to every learner: a boosted ensemble is
        itself an :class:`OnlineLearner` and can be nested."""
        if self.container is not None:
            grad = check_gradients(grad, x.shape[0], x.device)[:, None]
            with torch.enable_grad():
                self._container_round(_inputs(x), lambda prediction: grad)
            return
        for learner in self.members:
            learner.update(x, grad)

    def _container_round(self, x: Tensor, gradient: Callable[[Tensor], Tensor]) -> Tensor:
        """One round of the container, in a round transaction: the learners' outputs at their
        learning point, checked finite; the output gradient ``gradient(prediction)``, ``(B,
        1)``; ∂(batch-mean loss)/∂h_n(x_i) = ℓ'(f̂(x_i)) / B for every learner ``n``, a
        guarded step, then the learners' schedules. Returns the prediction, ``(B, 1)``."""
        assert self.container is not None
        self.container.probe(x)  # mode="auto" settles before the round (as in Booster.learn)
        with (self._transaction(self, self.container, None) as round_,
              self.container.learning_point()):
            outputs = self.container(x)
            check_round(outputs.detach(), outputs.new_zeros(0), outputs.new_zeros(0),
                        trained=round_.learners_had_state)
            prediction = _as_column(outputs.detach().sum(0), x)
            grad = gradient(prediction)
            round_.step(self.container, outputs, grad.expand_as(outputs) / outputs.shape[1],
                        None, None)
            restore = self.container.schedules_restorer()  # last, as in a booster's round
            round_.on_rollback(restore)
            self.container.step_schedules(restore=restore)
        return prediction

    def _gradient(self, prediction: Tensor, y: Tensor) -> Tensor:
        z = check_labels(self.loss, y, prediction.shape[0], prediction.device)
        return self.loss.gradient(prediction, z.to(prediction.dtype))


def _inputs(x: Tensor) -> Tensor:
    return check_features(x, what="inputs", owner="model")


def _as_column(prediction: Tensor, x: Tensor) -> Tensor:
    if prediction.shape != (x.shape[0], 1):
        raise ValueError(f"weak learners must predict (B, 1), got {tuple(prediction.shape)}")
    return prediction
