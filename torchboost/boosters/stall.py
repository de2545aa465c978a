"""A warning when a streaming booster is not learning, with the likely fix.

After a warm-up of ``window`` examples (an ensemble of untrained learners starts worse than a
constant), over consecutive windows of ``window`` examples :class:`StallMonitor` sums the
progressive (test-then-train) loss of every anytime prediction ``y^0..y^N`` of the rounds and
the loss of the best constant prediction known before each round (the loss's
:meth:`~torchboost.losses.Loss.best_constant` of the running label statistics: the label mean for
squared loss, the class frequencies for softmax). At the end of each window it checks two symptoms:

* ``not_beating_constant`` — the booster's prediction ``y^N`` did no better over the window than
  the best constant: its learners learn too slowly (learning rate too small) or diverge;
* ``learners_hurt`` — some shorter ensemble ``y^k``, ``k < N``, did better than ``y^N`` by more
  than a relative ``tolerance``: the later learners make the prediction worse (step ``η`` or
  learning rate too large, or too many learners for the data).

A symptom seen in two consecutive windows (one bad window early in training is common and
passes) raises one :class:`BoostingStallWarning` per booster with the numbers and the fix,
and stays flagged in :meth:`StallMonitor.flags` (logged to TensorBoard as ``stall/<symptom>`` by
:class:`~torchboost.lightning.StreamingCallback`). When training data-parallel the sums are
all-reduced, so every replica judges the global batches.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from torchboost.distributed import Synchronizer
from torchboost.losses import Loss

__all__ = ["SYMPTOMS", "BoostingStallWarning", "StallMonitor"]

#: What :class:`StallMonitor` detects.
SYMPTOMS = ("not_beating_constant", "learners_hurt")


class BoostingStallWarning(UserWarning):
    """A booster is not learning (see :mod:`torchboost.boosters.stall`)."""


class StallMonitor(nn.Module):
    """Windowed progressive losses of a booster's anytime predictions and of the best constant.

    Args:
        loss: the booster's loss.
        n_learners: ``N``; rounds pass ``N + 1`` partial sums.
        out_dim: the prediction's dimension ``m``.
        window: examples of the warm-up and of each window (each check uses one whole window).
        tolerance: the relative margin of ``learners_hurt``.

    Example:
        >>> import torch
        >>> from torchboost.losses import get_loss
        >>> monitor = StallMonitor(get_loss("squared"), n_learners=1, out_dim=1, window=2)
        >>> z = torch.tensor([[1.0], [3.0]])
        >>> flat = torch.zeros(2, 2, 1)  # y^0 = y^1 = 0, while the label mean is 2
        >>> monitor.update(flat, z)  # the warm-up: only the label statistics are learnt
        []
        >>> monitor.update(flat, z)  # a first bad window
        []
        >>> monitor.update(flat, z)  # and a second one
        ['not_beating_constant']
    """

    def __init__(self, loss: Loss, n_learners: int, out_dim: int, window: int = 5000,
                 tolerance: float = 0.01) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"the stall window must be >= 1 example, got {window}")
        self.loss, self.window, self.tolerance = loss, int(window), float(tolerance)
        self.register_buffer("statistic_sum", torch.zeros(out_dim, dtype=torch.float64))
        self.register_buffer("partial_loss", torch.zeros(n_learners + 1, dtype=torch.float64))
        self.register_buffer("constant_loss", torch.zeros((), dtype=torch.float64))
        #: examples seen, and in the current window (Python ints: no device sync per round)
        self.seen, self.in_window = 0, 0
        self.register_buffer("flagged", torch.zeros(len(SYMPTOMS), dtype=torch.bool))
        self.register_buffer("last_seen", torch.zeros(len(SYMPTOMS), dtype=torch.bool))
        #: the mean losses of the last complete window: ``y^0..y^N`` and the best constant
        self.last_window: dict[str, Tensor] = {}

    @torch.no_grad()
    def update(self, partials: Tensor, z: Tensor, sync: Synchronizer | None = None,
               batch: int | None = None) -> list[str]:
        """Add a round's partial sums ``(N + 1, B, m)`` before the update and its encoded labels
        (summed over the replicas' shards with ``sync``; ``batch`` is then the global batch
        size); at the end of a window, return the symptoms seen for the first time (else
        ``[]``)."""
        first = self.seen < self.window  # the warm-up: the label statistics only
        sums = [self.loss.target_statistic(z, partials.shape[-1]).sum(0)]
        if not first:
            mean = (self.statistic_sum / self.seen).to(partials.dtype)
            constant = self.loss.best_constant(mean).expand(z.shape[0], -1)
            sums += [self.loss.value(partials, z).sum(-1), self.loss.value(constant, z).sum()]
        if sync is not None:  # summed in float64 (the buffers' dtype, to which they are added)
            sums = [s.double() for s in sums]
            sync.sum_(sums)
        batch = z.shape[0] if batch is None else batch
        self.statistic_sum.add_(sums[0])  # add_, not +=: no buffer re-registration
        self.seen += batch
        if not first:
            self.partial_loss.add_(sums[1])
            self.constant_loss.add_(sums[2])
            self.in_window += batch
        if self.in_window < self.window:
            return []
        partial, constant = self.partial_loss / self.in_window, self.constant_loss / self.in_window
        self.last_window = {"anytime": partial.clone(), "constant": constant.clone()}
        final = float(partial[-1])
        seen = torch.tensor([final >= float(constant),
                             float(partial[:-1].min()) < (1.0 - self.tolerance) * final],
                            device=self.flagged.device)
        confirmed = seen & self.last_seen
        new = [name for i, name in enumerate(SYMPTOMS) if confirmed[i] and not self.flagged[i]]
        self.flagged |= confirmed
        self.last_seen.copy_(seen)
        self.partial_loss.zero_(), self.constant_loss.zero_()
        self.in_window = 0
        return new

    def get_extra_state(self) -> dict[str, int]:
        return {"seen": self.seen, "in_window": self.in_window}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.seen, self.in_window = int(state["seen"]), int(state["in_window"])

    def flags(self) -> dict[str, float]:
        """``{symptom: 1.0 or 0.0}``: whether each symptom has been seen."""
        return {name: float(flag) for name, flag in zip(SYMPTOMS, self.flagged.tolist(),
                                                        strict=True)}

    def message(self, symptom: str, hint: str) -> str:
        """The warning's text for ``symptom`` with the last window's numbers and ``hint`` (the
        booster's current learning rate and step)."""
        anytime, constant = self.last_window["anytime"], float(self.last_window["constant"])
        final = float(anytime[-1])
        if symptom == "not_beating_constant":
            return (f"over the last {self.window} examples the booster's progressive loss "
                    f"{final:.4g} is no better than the best constant prediction's "
                    f"{constant:.4g}: its learners learn too slowly or diverge. Try another "
                    f"learning rate ({hint}; larger if the loss is flat, smaller if it "
                    "oscillates), or targets='newton' for a classification loss")
        best = int(anytime[:-1].argmin())
        return (f"over the last {self.window} examples the first {best} learner(s) alone had "
                f"progressive loss {float(anytime[best]):.4g}, all {len(anytime) - 1} had "
                f"{final:.4g}: the later learners make the prediction worse. Lower the step η "
                f"or the learning rate ({hint}), or use fewer learners")

    def warn(self, symptoms: list[str], hint: str) -> None:
        for symptom in symptoms:
            warnings.warn(self.message(symptom, hint), BoostingStallWarning, stacklevel=4)
