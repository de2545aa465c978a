"""The streaming-model protocol: what the Lightning module, the evaluation helpers and the
adapters need of a model, and what every :class:`~torchboost.boosters.base.Booster` and the
chaining family's :class:`~torchboost.chaining.ChainingBooster` provide. A model of your own
that is an ``nn.Module`` with these members trains under
:class:`~torchboost.lightning.StreamingBoosterModule` as they do."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from torch import Tensor

from torchboost.losses import Loss

__all__ = ["COUNTERS", "StreamingModel", "counters", "load_counters", "missing_members"]

#: the round counters every streaming model keeps, saved in its extra state
COUNTERS = ("compute_units", "samples_seen", "rounds")


@runtime_checkable
class StreamingModel(Protocol):
    """A model that learns a stream one mini-batch (round) at a time, test-then-train.

    ``learn(x, y)`` runs one round and returns the scores ``(B, out_dim)`` it predicted before
    the update (bad input: a ``ValueError``, nothing changed); ``predict`` and ``predict_label``
    do not change the model; ``score``/``evaluate`` give the mean loss (and error rate) of
    scores or of a batch, ``round_scores`` that of the last round's scores as 0-dim tensors;
    the counters ``samples_seen``, ``rounds`` and ``compute_units`` advance with every round;
    ``distribute(sync)`` joins data-parallel training where ``supports_distributed`` (and
    sets ``sync``).
    """

    loss: Loss
    out_dim: int
    samples_seen: int
    rounds: int
    compute_units: int
    supports_distributed: bool
    #: the synchronizer :meth:`distribute` joined (``None``: training alone)
    sync: Any

    def learn(self, x: Tensor, y: Tensor) -> Tensor: ...

    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor: ...

    def predict_label(self, x: Tensor, n_learners: int | None = None) -> Tensor: ...

    def score(self, prediction: Tensor, y: Tensor) -> dict[str, float]: ...

    def round_scores(self, prediction: Tensor) -> dict[str, Tensor]: ...

    def evaluate(self, x: Tensor, y: Tensor, n_learners: int | None = None) -> dict[str, float]:
        ...

    def diagnostics(self) -> dict[str, Tensor]: ...

    def distribute(self, sync: Any) -> None: ...


def missing_members(model: object) -> list[str]:
    """The members of :class:`StreamingModel` that ``model`` lacks (``[]``: it has them all)."""
    names = [*StreamingModel.__annotations__,
             *(name for name, value in vars(StreamingModel).items()
               if callable(value) and not name.startswith("_"))]
    return sorted(name for name in names if not hasattr(model, name))


def counters(model: object) -> dict[str, int]:
    """``model``'s :data:`COUNTERS`, for its extra state."""
    return {key: getattr(model, key) for key in COUNTERS}


def load_counters(model: object, state: dict[str, Any]) -> None:
    """Set ``model``'s :data:`COUNTERS` from an extra state written with :func:`counters`."""
    for key in COUNTERS:
        setattr(model, key, int(state[key]))
