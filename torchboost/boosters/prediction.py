"""What a booster predicts (:class:`Prediction`, a base of
:class:`~torchboost.boosters.base.Booster`): ``predict`` (anytime, with the first ``k``
learners), labels, held-out scores, and the learners' forward with its errors in our words.
Predictions read the learners as they rest — for the default schedule-free learners, their
averaged weights (:mod:`~torchboost.learners.averaging`) — and change no state."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from torchboost.inputs import check_dense, check_features
from torchboost.params import integer

__all__ = ["Prediction"]


class Prediction:
    """A booster's predictions (module docstring)."""

    #: the fewest learners anytime prediction takes (0: the initial prediction ``y^0`` alone)
    fewest_prediction_learners = 0

    @torch.no_grad()
    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Prediction ``(B, m)`` using the first ``n_learners`` learners (anytime prediction),
        a regression booster's within the labels seen (``bound_predictions``). The learners run
        in ``eval()`` mode (Dropout off, BatchNorm on its running statistics), and each gets its
        previous mode back afterwards."""
        with self.running(x):
            return self._predict(x, n_learners)

    def _predict(self, x: Tensor, n_learners: int | None) -> Tensor:
        return self._scores_of(self._held_out_partials(x, n_learners))

    def _held_out_partials(self, x: Tensor, n_learners: int | None) -> Tensor:
        """The partial sums of checked features ``x``, standardised, the learners in eval mode
        (in standardised label units)."""
        x = self._check_features(x)
        if self.standardizer is not None:
            x = self.standardizer.inputs(x)
        with self.learners.evaluating():
            h = self._learner_outputs(x, n_learners)
        return self.partial_sums(h, self.initial_prediction(x))

    def _scores_of(self, partials: Tensor) -> Tensor:
        """:meth:`predict`'s output from the partial sums: combined, in the user's units and
        within the prediction bounds."""
        scores = self.prediction_scores(partials)
        return self.bounded(scores if self.standardizer is None
                            else self.standardizer.outputs(scores))

    def prediction_scores(self, partials: Tensor) -> Tensor:
        """:meth:`predict`'s scores from the partial sums (default :meth:`combine`); changes no
        state."""
        return self.combine(partials)

    def predict_label(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Predicted labels ``(B,)`` of a classifier: the loss's decision on :meth:`predict`'s
        scores (``argmax`` for softmax, the sign for logistic and hinge losses)."""
        if not self.loss.is_classifier:
            raise ValueError(f"{self.loss.name} loss is a regression loss; use predict()")
        return self.loss.predict_label(self.predict(x, n_learners))

    def forward(self, x: Tensor) -> Tensor:
        return self.predict(x)

    @torch.no_grad()
    def evaluate(self, x: Tensor, y: Tensor, n_learners: int | None = None) -> dict[str, float]:
        """Mean loss (and error rate for classifiers) on a held-out batch; the squared loss is
        ``½ (prediction − y)²``, so its mean is half the MSE. On a stream too short for the
        stall monitor's windows, the monitor judges these rows instead
        (:meth:`~torchboost.boosters.stall.StallMonitor.judge_held_out`) and warns if the
        booster does no better than a constant or its later learners do harm."""
        judging = self.stall is not None and n_learners is None and self.stall.judges_held_out()
        if not judging:
            return self.score(self.predict(x, n_learners), y)
        with self.running(x):  # one forward for both the score and the judgement
            partials = self._held_out_partials(x, None)
            scores = self.score(self._scores_of(partials), y)
            self._judge_held_out(partials, y)
        return scores

    def _judge_held_out(self, partials: Tensor, y: Tensor) -> None:
        """The stall monitor's judgement of held-out rows from their partial sums: the anytime
        predictions against the labels, both in the units a round judges (standardised)."""
        z = self._check_labels(y, partials.shape[1]).to(partials.device)
        if self.standardizer is not None:
            z = self.standardizer.targets(z)
        symptoms = self.stall.judge_held_out(self.anytime_predictions(partials), z,
                                             self.learners.parameters)
        if symptoms:
            self.stall.warn(symptoms, self._stall_hint(), self._stall_remedy(), remember=False)

    @torch.no_grad()
    def score(self, prediction: Tensor, y: Tensor) -> dict[str, float]:
        """Mean loss (and error rate for classifiers) of a prediction ``(B, m)`` on labels ``y``;
        on what :meth:`learn` returns, this is the progressive-validation score of a batch."""
        z = self._check_labels(y, prediction.shape[0]).to(prediction.device)
        return {key: float(value) for key, value in self._scores(prediction, z).items()}

    @torch.no_grad()
    def round_scores(self, prediction: Tensor) -> dict[str, Tensor]:
        """:meth:`score` of ``prediction``, what the last :meth:`learn` returned, on that round's
        labels as ``learn`` encoded them (no second encoding), as 0-dim tensors (no host sync)."""
        if self._round_labels is None:
            raise RuntimeError("round_scores scores the last learn() round; there was none")
        return self._scores(prediction, self._round_labels.to(prediction.device))

    def _scores(self, prediction: Tensor, z: Tensor) -> dict[str, Tensor]:
        return self.loss.scores(prediction, z)

    # --- internals ------------------------------------------------------------------------------
    def _learner_outputs(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        if n_learners is not None:  # anytime prediction: 0 (y^0 alone) to every learner
            low = self.fewest_prediction_learners
            n_learners = integer("n_learners", n_learners, 0 if low == 0 else None)
            if not low <= n_learners <= self.n_learners:
                why = (" (0: the initial prediction alone)" if low == 0 else
                       f" ({type(self).__name__} votes with at least one learner)")
                raise ValueError(f"n_learners must be in [{low}, {self.n_learners}]{why}, got "
                                 f"{n_learners}")
        if n_learners == 0:
            return x.new_zeros(0, x.shape[0], self.out_dim)
        return self._check_width(self._run_learners(self._forward_learners, x, n_learners))

    def _check_width(self, out: Tensor) -> Tensor:
        """``out``, learners' scores ``(..., m)``, if ``m`` is the width the loss needs."""
        if out.shape[-1] != self.out_dim:
            raise ValueError(f"weak learners return {out.shape[-1]} outputs per example but "
                             f"{self.loss.name} loss with this problem needs {self.out_dim}")
        return out

    def _forward_learners(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """The first ``n_learners`` (all: ``None``) learners' outputs, ``(k, B, m)``: the
        container's forward (:class:`~torchboost.StagewiseGB` stacks its frozen learners)."""
        return self.learners(x, n_learners)

    def _run_learners(self, run: Any, x: Tensor, *args: Any) -> Tensor:
        """``run(x, *args)`` (the learners' forward), with torch's error on a fresh booster's
        first batch turned into ours: most likely the features have the wrong width."""
        try:
            return run(x, *args)
        except RuntimeError as err:
            if self.input_shape is None:
                raise ValueError(f"the weak learners failed on features of shape "
                                 f"{tuple(x.shape[1:])} per example (check the input width "
                                 f"they expect): {err}") from err
            raise

    def _check_features(self, x: Tensor) -> Tensor:
        """Checked features, detached (``learn`` never writes into the caller's ``x.grad``) and
        cast to the learners' dtype (the one dtype rule, shared by ``ScreenedStream`` and the
        Lightning module, which both go through here): :func:`torchboost.inputs.check_features`."""
        return check_features(x, self.learners.dtype, self.input_shape, self.y0_fixed.device)

    def _check_labels(self, y: Tensor, batch: int) -> Tensor:
        if torch.is_tensor(y):
            check_dense(y, "labels")
        z = self.loss.encode_target(y, self.out_dim)
        if z.shape[0] != batch:
            raise ValueError(f"{z.shape[0]} labels for {batch} examples")
        return z.to(self.y0_fixed.device)
