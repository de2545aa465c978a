"""A regression booster's predictions near the labels it has seen (:class:`PredictionBounds`, a
base of :class:`~torchboost.boosters.base.Booster`; ``bound_predictions``).

A network can extrapolate far on rows unlike any it trained on: on a held-out regression
stream, ReLU learners at the defaults gave one prediction 110 label standard deviations off
(test MSE 3.6 in label variances against a median squared error of 0.05), where trees and
their ensembles never leave the range of the labels they saw. The booster keeps that range,
output by output and in the user's units (two buffers, updated inside each round's transaction
from its labels, over every replica's shard when distributed), and clips ``predict``, anytime
prediction, what ``learn`` returns (the range of the labels before that round: progressive
validation stays honest) and the export to it, widened by :data:`BOUND_MARGIN` of it on each
side. The learners' targets and partial sums are not clipped: training is unchanged.
``experiments/prediction_bounds.py`` measures it on the repository's streams.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from torchboost.params import flag
from torchboost.without_grad import without_grad

__all__ = ["BOUND_MARGIN", "PredictionBounds"]

#: how far beyond the labels seen (a fraction of their range, on each side) a regression
#: booster's predictions may go (``bound_predictions``)
BOUND_MARGIN = 0.1


class PredictionBounds:
    """The label range and the clip (module docstring); reads the booster's ``loss``,
    ``samples_seen`` and ``sync``."""

    def _init_bounds(self, out_dim: int, bound_predictions: bool) -> None:
        #: the smallest and largest label seen, output by output, in the user's units (read
        #: once a round has seen labels, :meth:`prediction_bounds`)
        self.register_buffer("label_low", torch.zeros(out_dim, dtype=torch.float64))
        self.register_buffer("label_high", torch.zeros(out_dim, dtype=torch.float64))
        self.bound_predictions = flag("bound_predictions", bound_predictions)
        #: whether the label range covers every label seen (a state saved before the range was
        #: kept has none: its predictions stay unbounded)
        self.label_range_kept = True

    def bounded(self, prediction: Tensor) -> Tensor:
        """``prediction (B, m)`` in the user's units, clipped to :meth:`prediction_bounds` (as it
        is where there are none)."""
        if not self.bounds_predictions():
            return prediction
        low, high = self.prediction_bounds()
        return prediction.clamp(low.to(prediction.dtype), high.to(prediction.dtype))

    def bounds_predictions(self) -> bool:
        """Whether predictions are clipped now: ``bound_predictions`` on a regression loss,
        once a round has seen labels (and the range covers all of them)."""
        return (self.bound_predictions and not self.loss.is_classifier
                and self.label_range_kept and self.samples_seen > 0)

    def prediction_bounds(self) -> tuple[Tensor, Tensor]:
        """The range predictions are clipped to, ``(m,)`` each: the labels seen so far widened
        by :data:`BOUND_MARGIN` of their range on each side (±inf where
        :meth:`bounds_predictions` says there are none)."""
        if not self.bounds_predictions():
            inf = torch.full_like(self.label_low, math.inf)
            return -inf, inf
        margin = (self.label_high - self.label_low) * BOUND_MARGIN
        return self.label_low - margin, self.label_high + margin

    def _record_label_range(self, labels: Tensor) -> None:
        """Widen the range of labels seen by a regression round's ``labels (B, m)``, in the
        user's units (over every replica's shard when distributed)."""
        if self.loss.is_classifier:
            return
        with without_grad():
            low, high = torch.aminmax(labels.to(torch.float64), dim=0)
            if self.sync is not None:  # one slot per replica, summed: every rank sees all
                slots = low.new_zeros(self.sync.world_size, 2, low.shape[0])
                slots[self.sync.rank, 0], slots[self.sync.rank, 1] = low, high
                self.sync.sum_([slots])
                low, high = slots[:, 0].amin(0), slots[:, 1].amax(0)
            if self.samples_seen == 0:  # the first labels: the range itself
                self.label_low.copy_(low), self.label_high.copy_(high)
            else:
                torch.minimum(self.label_low, low, out=self.label_low)
                torch.maximum(self.label_high, high, out=self.label_high)
