"""A round's book-keeping: ``y^0`` from the running label statistic, the buffers' sums behind
the edges and diagnostics, and the counters a round advances (:class:`RoundRecords`, a base
class of :class:`~torchboost.boosters.base.Booster`)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from torchboost.without_grad import without_grad

__all__ = ["ROUND_COUNTERS", "RoundRecords"]

#: the plain attributes a round sets (:meth:`RoundRecords._record_round`'s counters, the labels)
ROUND_COUNTERS = ("_round_fit", "compute_units", "samples_seen", "rounds", "input_shape",
                   "_round_labels")


class RoundRecords:
    """``y^0`` and the book-keeping of every round (mixed into
    :class:`~torchboost.boosters.base.Booster`, which registers the buffers and counters read
    here: ``label_statistic_sum``, ``residual_sq_sum``, ``target_sq_sum``, ``samples_seen``,
    ``rounds``, ``compute_units``, ``input_shape``)."""

    def initial_prediction(self, x: Tensor) -> Tensor:
        """``y^0`` for a batch, ``(B, m)`` (from buffers and constants: no autograd graph)."""
        if self.y0_mode == "mean" and self.samples_seen > 0:
            mean = self.label_statistic_sum / self.samples_seen
            y0 = self.loss.best_constant(mean.to(x.dtype))
        else:
            y0 = self.y0_fixed.to(x.dtype)
        return y0.expand(x.shape[0], self.out_dim)

    def _round_sums(self, h: Tensor, targets: Tensor, z: Tensor,
                    weights: Tensor | None = None) -> list[Tensor]:
        """What a round on learners' outputs ``h`` with ``targets`` (and their loss
        ``weights``) and encoded labels ``z`` adds up for :meth:`_record_round`: every
        learner's squared residual and (weighted) squared target summed over the batch, the
        sum of the targets' norms and, with ``y0="mean"``, of the label statistic."""
        with without_grad():
            residual = targets - h
            target_sq, residual_sq = targets * targets, residual * residual
            if weights is None:
                target_sq = weighted_target_sq = target_sq.sum(-1)
            else:
                weighted_target_sq = (weights * target_sq).sum(-1)
                target_sq, residual_sq = target_sq.sum(-1), weights * residual_sq
            sums = [residual_sq.sum(-1).sum(-1), weighted_target_sq.sum(-1),
                    target_sq.sqrt().sum(-1)]
            if self.y0_mode == "mean":
                sums.append(self.loss.target_statistic(z, self.out_dim).sum(0))
        return sums

    def _record_round(self, x: Tensor, h: Tensor, targets: Tensor, z: Tensor,
                      first: int = 0, weights: Tensor | None = None,
                      sums: list[Tensor] | None = None) -> dict[str, Any]:
        """Book-keeping after a successful round of learners ``first..first+k`` on batch ``x``
        (``weights``: those of the learners' losses, for the edges): the buffers' sums
        (:meth:`_round_sums`, or ``sums`` where the round computed them), and the round's
        counters and fit returned, for the round to set last (plain attributes, which its
        transaction does not restore). When distributed, the batch sums are all-reduced (one
        call) and the counters advance by the global batch, so every rank holds the
        single-process state."""
        batch = x.shape[0] if self.sync is None else self._round_size
        if sums is None:
            sums = self._round_sums(h, targets, z, weights)
        with without_grad():
            if self.sync is not None:
                self.sync.sum_(sums)
            residual_sq, target_sq_sum, norm_sum = sums[:3]
            # add_, not +=: no nn.Module attribute (or slice) assignment after the in-place add
            if h.shape[0] == self.n_learners:  # every learner: no slices
                self.residual_sq_sum.add_(residual_sq)
                self.target_sq_sum.add_(target_sq_sum)
            else:
                span = slice(first, first + h.shape[0])
                self.residual_sq_sum[span].add_(residual_sq)
                self.target_sq_sum[span].add_(target_sq_sum)
            if self.y0_mode == "mean":
                self.label_statistic_sum.add_(sums[3])
        return {"_round_fit": (norm_sum, residual_sq, batch),
                "compute_units": self.compute_units + batch * self.units_per_round_example(),
                "samples_seen": self.samples_seen + batch, "rounds": self.rounds + 1,
                "input_shape": tuple(x.shape[1:]) if self.input_shape is None
                else self.input_shape}

    def _set_plain(self, **values: Any) -> None:
        """Set plain attributes (never a parameter, buffer or submodule name: the round's
        book-keeping) straight in ``__dict__``, as ``nn.Module.__setattr__`` does after looking
        each name up in its parameters, buffers and submodules (about 1 µs a name; several
        names every round)."""
        vars(self).update(values)
