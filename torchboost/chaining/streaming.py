"""The booster contract for the chaining family: :class:`ChainingBooster` adapts a
:class:`~torchboost.chaining.ChainingTree`, :class:`~torchboost.chaining.StepwiseOGB` or
:class:`~torchboost.chaining.LocAdaBoost` to the interface of
:class:`~torchboost.boosters.base.Booster` that the Lightning module drives."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from torchboost.atomic_load import AtomicLoad
from torchboost.inputs import check_features
from torchboost.losses import Loss
from torchboost.protocol import counters, load_counters

__all__ = ["ChainingBooster"]


class ChainingBooster(AtomicLoad, nn.Module):
    """A chaining-family model with the booster contract: :meth:`learn` and :meth:`predict`
    return scores ``(B, 1)`` (the prediction made before the update), :meth:`predict_label`
    gives a classifier's labels, :meth:`score` and :meth:`evaluate` the mean loss (and error
    rate), and the counters ``samples_seen``, ``rounds`` and ``compute_units`` advance with every
    round. Features must be a floating ``(B, d)`` tensor; they are cast to float64, the dtype of
    the models' partitions.

    The chaining models keep nodes, not weak learners, so a compute unit here is one example
    learned (``units_per_example = 1``). They are not data-parallel: :meth:`distribute` refuses
    a synchronizer.

    Examples:
        >>> import torch
        >>> from torchboost.chaining import ChainingTree
        >>> booster = ChainingBooster(ChainingTree((0.0, 1.0), depth=4))
        >>> booster.learn(torch.rand(8, 1), torch.rand(8)).shape, booster.samples_seen
        (torch.Size([8, 1]), 8)
    """

    units_per_example = 1
    supports_distributed = False
    #: the labels of the last :meth:`learn`, for :meth:`round_scores`
    _round_labels: Tensor | None = None

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        if not (callable(getattr(model, "learn", None)) and callable(
                getattr(model, "predict", None)) and isinstance(getattr(model, "loss", None),
                                                                  Loss)):
            raise ValueError(f"ChainingBooster adapts a chaining model (ChainingTree, StepwiseOGB, "
                             f"LocAdaBoost), got {type(model).__name__}")
        self.model = model
        self.loss: Loss = model.loss
        self.out_dim = 1
        self.sync = None
        self.compute_units = self.samples_seen = self.rounds = 0
        # torch.optim.Optimizer (Lightning's BoostingRound) needs at least one parameter
        self.anchor = nn.Parameter(torch.zeros(0), requires_grad=False)

    def learn(self, x: Tensor, y: Tensor) -> Tensor:
        """One round on ``(x, y)``; returns the scores ``(B, 1)`` predicted before the update."""
        prediction = self.model.learn(self._features(x), y)
        batch = prediction.shape[0]
        self.samples_seen += batch
        self.compute_units += batch * self.units_per_example
        self.rounds += 1
        self._round_labels = y
        return prediction.float() if prediction.dtype == torch.float64 else prediction

    @torch.no_grad()
    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Scores ``(B, 1)``; ``n_learners`` is not supported (``None`` only)."""
        if n_learners is not None:
            raise ValueError("the chaining models have no anytime prediction (n_learners=None)")
        return self.model.predict(self._features(x)).float()

    def forward(self, x: Tensor) -> Tensor:
        return self.predict(x)

    def predict_label(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        if not self.loss.is_classifier:
            raise ValueError(f"{self.loss.name} loss is a regression loss; use predict()")
        return self.loss.predict_label(self.predict(x, n_learners))

    @torch.no_grad()
    def score(self, prediction: Tensor, y: Tensor) -> dict[str, float]:
        """Mean loss (and error rate for classifiers) of scores ``(B, 1)`` on labels ``y``."""
        return {key: float(value) for key, value in self._scores(prediction, y).items()}

    @torch.no_grad()
    def round_scores(self, prediction: Tensor) -> dict[str, Tensor]:
        """:meth:`score` of ``prediction``, what the last :meth:`learn` returned, on that round's
        labels, as 0-dim tensors (no host sync)."""
        if self._round_labels is None:
            raise RuntimeError("round_scores scores the last learn() round; there was none")
        return self._scores(prediction, self._round_labels)

    def _scores(self, prediction: Tensor, y: Tensor) -> dict[str, Tensor]:
        z = self.loss.encode_target(y, 1).to(prediction.device, prediction.dtype)
        if z.shape[0] != prediction.shape[0]:
            raise ValueError(f"{z.shape[0]} labels for {prediction.shape[0]} examples")
        return self.loss.scores(prediction, z)

    @torch.no_grad()
    def evaluate(self, x: Tensor, y: Tensor, n_learners: int | None = None) -> dict[str, float]:
        return self.score(self.predict(x, n_learners), y)

    def diagnostics(self) -> dict[str, Tensor]:
        return {}

    def distribute(self, sync: Any) -> None:
        if sync is not None:
            raise ValueError("the chaining models are not data-parallel; train them in one "
                             "process")

    @staticmethod
    def _features(x: Tensor) -> Tensor:
        return check_features(x, torch.float64, owner="model")

    def get_extra_state(self) -> dict[str, int]:
        return counters(self)

    def set_extra_state(self, state: dict[str, int]) -> None:
        load_counters(self, state)
