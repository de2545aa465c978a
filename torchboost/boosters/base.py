"""What every streaming booster shares: input checks, the learn/predict cycle, diagnostics and
compute accounting.

A booster owns N weak learners (:class:`~torchboost.learners.WeakLearners`) and a loss. One
:meth:`Booster.learn` call is one round of online boosting on a mini-batch:

1. every learner predicts ``h_i(x)`` (one stacked forward, autograd on for the learners only);
2. the booster combines the *detached* predictions into partial sums ``y^0..y^N``
   (:meth:`Booster.partial_sums`) and its prediction (:meth:`Booster.combine`) — no graph ever
   links one learner to another;
3. after the labels are revealed each learner gets its own detached target or linear loss, and
   optionally per-output weights (:meth:`Booster.learner_objective`; the gradient of its loss,
   :meth:`Booster.learner_loss_grad` times the weights, is closed-form), and all learners take
   one optimizer step;
4. algorithm state (σ for OGB, running y0) is updated (:meth:`Booster.after_step`).

The prediction returned by :meth:`Booster.learn` is the one made *before* the update, so summing
its loss over a stream is progressive validation. Compute is counted in the SGB paper's units
(Hu et al. 2017, Sec. 6.2): one weak-learner prediction of one example = 1 unit, one update = 2.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.boosters.default_lr import with_default_lr
from torchboost.boosters.guards import check_round
from torchboost.boosters.scaling import Standardizer
from torchboost.boosters.stall import DEFAULT_WINDOW, StallMonitor
from torchboost.boosters.transaction import RoundTransaction
from torchboost.distributed import Synchronizer
from torchboost.export import export_booster
from torchboost.inputs import check_features
from torchboost.learners import LearnerSource, Prodigy, WeakLearners
from torchboost.learners.averaging import is_schedule_free
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory, describe_schedulers
from torchboost.losses import Loss, get_loss
from torchboost.params import flag, integer, positive_float, positive_int
from torchboost.protocol import counters, load_counters

__all__ = ["Y0", "Booster", "Round"]

#: Initial prediction ``y^0``: a number, a tensor of shape ``(m,)``, or ``"mean"`` for the best
#: constant given the running mean of the labels seen so far (e.g. the label mean for squared loss,
#: the log-odds of the positive rate for logistic loss).
Y0 = float | Tensor | str

PREDICT_UNITS = 1
UPDATE_UNITS = 2


@dataclass
class Round:
    """What :meth:`Booster.plan_round` hands to the shared round.

    Attributes:
        outputs: the trained learners' outputs with autograd, ``(k, B, m)``.
        h: their detached copy.
        partials: the partial sums ``y^first..y^(first+k)``, ``(k + 1, B, m)``.
        prediction: the booster's scores before the update, ``(B, m)``.
        targets, weights: each trained learner's target ``(k, B, m)`` and loss weights.
        first: index of the first trained learner (a stage of stagewise boosting).
        index: the one learner whose optimizer steps (``None``: all of them).
    """

    outputs: Tensor
    h: Tensor
    partials: Tensor
    prediction: Tensor
    targets: Tensor
    weights: Tensor | None = None
    first: int = 0
    index: int | None = None


class Booster(nn.Module, ABC):
    """Base class of the streaming boosters (see the module docstring for the cycle).

    Args:
        learners: a factory ``lambda: nn.Module`` plus ``n_learners``, a list of modules, or a
            ready :class:`WeakLearners`.
        loss: a :class:`~torchboost.losses.Loss` or its name.
        n_learners: number of learners to build from a factory.
        n_outputs: outputs of the problem (classes for ``"softmax"``); learners must return
            ``(B, m)`` with ``m = loss.output_dim(n_outputs)``.
        y0: the initial prediction ``y^0`` (see :data:`Y0`).
        optimizer, optimizer_kwargs, mode, compile, lr_fan_in, lr_output_scale: passed to
            :class:`WeakLearners` for a factory/list. The default optimizer is schedule-free
            AdamW (:mod:`~torchboost.learners.averaging`: rounds learn at its learning point,
            every prediction uses its averaged weights); without ``optimizer_kwargs={"lr": ...}``
            the learners follow the default rate rule of
            :mod:`~torchboost.boosters.default_lr`, the same for every booster.
        lr_scheduler: a factory ``optimizer -> LRScheduler`` (any ``torch.optim.lr_scheduler``
            class, or :func:`~torchboost.cosine_schedule` / :func:`~torchboost.decay_schedule`),
            one scheduler per optimizer of the learners, stepped once per successful round
            (:mod:`torchboost.learners.schedules`); its state is in ``state_dict``.
        standardize: scale-free training (default on): features, and regression labels, are
            standardised on the fly by running statistics (:mod:`~torchboost.boosters.scaling`)
            and predictions come back in the user's units. ``standardize=False`` trains on the
            data as given.
    """

    def __init__(
        self,
        learners: LearnerSource | WeakLearners,
        loss: str | Loss = "squared",
        *,
        n_learners: int | None = None,
        n_outputs: int = 1,
        y0: Y0 = 0.0,
        optimizer: type[torch.optim.Optimizer] = DEFAULT_OPTIMIZER,
        optimizer_kwargs: dict[str, Any] | None = None,
        mode: str = "auto",
        stall_window: int | None = DEFAULT_WINDOW,
        compile: bool = False,
        lr_fan_in: float | None = None,
        lr_scheduler: LRSchedulerFactory | None = None,
        lr_output_scale: float = 1.0,
        standardize: bool = True,
    ) -> None:
        super().__init__()
        if n_learners is not None:
            n_learners = positive_int("n_learners", n_learners)
        if stall_window is not None:
            stall_window = positive_int("stall_window", stall_window)
        lr_output_scale = positive_float("lr_output_scale", lr_output_scale)
        self.loss = get_loss(loss)
        self.out_dim = self.loss.output_dim(positive_int("n_outputs", n_outputs))
        if isinstance(learners, WeakLearners):
            if n_learners is not None and n_learners != len(learners):
                raise ValueError(f"n_learners={n_learners} but the container has {len(learners)}")
            if lr_scheduler is not None:
                raise ValueError("these WeakLearners are built already: pass lr_scheduler to "
                                 "WeakLearners(...) instead of the booster")
            self.learners = learners
        else:
            rule = with_default_lr({"optimizer": optimizer, "optimizer_kwargs": optimizer_kwargs}
                                   | ({} if lr_fan_in is None else {"lr_fan_in": lr_fan_in}))
            self.learners = WeakLearners(learners, n_learners, optimizer, rule["optimizer_kwargs"],
                                         mode, compile, rule.get("lr_fan_in"), lr_scheduler,
                                         lr_output_scale)
        n = len(self.learners)
        self.y0_mode = _check_y0(y0, self.out_dim)
        fixed_y0 = torch.zeros(self.out_dim) if isinstance(y0, str) else torch.as_tensor(
            y0, dtype=torch.get_default_dtype()).expand(self.out_dim).clone()
        self.register_buffer("y0_fixed", fixed_y0)
        self.register_buffer("label_statistic_sum", torch.zeros(self.out_dim, dtype=torch.float64))
        self.register_buffer("residual_sq_sum", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("target_sq_sum", torch.zeros(n, dtype=torch.float64))
        #: training compute so far, in weak-learner predictions (update = 2), exact integer
        self.compute_units = 0
        #: examples and rounds (``learn`` calls) seen so far
        self.samples_seen = 0
        self.rounds = 0
        self.input_shape: tuple[int, ...] | None = None
        #: the last round's sums behind :attr:`last_diagnostics` (divided only when read)
        self._round_fit: tuple[Tensor, Tensor, int] | None = None
        #: the replicas' synchronizer when training data-parallel (:meth:`distribute`)
        self.sync: Synchronizer | None = None
        #: running standardisation of features and regression targets (:mod:`.scaling`);
        #: ``None`` (``standardize=False``): the user's units
        self.standardize = flag("standardize", standardize)
        self.standardizer: Standardizer | None = (
            Standardizer(targets=not self.loss.is_classifier) if self.standardize else None)
        #: examples in the current round's (global) batch
        self._round_size = 0
        #: every round is all or nothing (:mod:`torchboost.boosters.transaction`)
        self._transaction = RoundTransaction()
        #: warns once when the booster is not learning (:mod:`torchboost.boosters.stall`); for
        #: boosters that predict their last partial sum, with ``stall_window`` examples a window
        self.stall = (StallMonitor(self.loss, n, self.out_dim, stall_window,
                                   metric=self.stall_metric)
                      if stall_window is not None and self.monitors_stall else None)

    #: what the stall monitor judges: the loss of the partial sums, or (``"error"``) the error
    #: rate of votes (the multiclass boosters)
    stall_metric = "loss"
    #: whether data-parallel replicas stay in step (:meth:`distribute`): not when the round
    #: updates state from the local shard alone (StagewiseGB, the multiclass boosters)
    supports_distributed = True
    #: the encoded labels of the last :meth:`learn`, for :meth:`round_scores`
    _round_labels: Tensor | None = None

    #: the fewest learners anytime prediction takes (0: the initial prediction ``y^0`` alone)
    fewest_prediction_learners = 0

    #: whether the stall monitor applies: the prediction is the last of the partial sums
    #: ``y^0..y^N`` a round computes for all learners (not for ResidualSGB's average, nor for
    #: StagewiseGB's one stage at a time)
    monitors_stall = True

    @property
    def n_learners(self) -> int:
        return len(self.learners)

    @property
    def prediction_learners(self) -> int:
        """How many learners :meth:`predict` uses by default (all of them)."""
        return self.n_learners

    def combination_weights(self, n_learners: int) -> Tensor | None:
        """``w (k,)`` when :meth:`predict`'s scores of the first ``k`` learners are
        ``y^0 + Σ_{i<k} w_i h_i`` (what :meth:`export` folds in); ``None`` (default) when they
        are not, and the booster cannot be exported."""
        return None

    def export(self, n_learners: int | None = None, output: str = "scores") -> nn.Module:
        """:meth:`predict` as a plain ``nn.Module`` to deploy (:func:`torchboost.export.
        export_booster`): no checks or guards, ready for ``torch.export``, ``torch.compile`` and
        ONNX."""
        return export_booster(self, n_learners, output)

    # --- the algorithm-specific pieces -------------------------------------------------------
    @abstractmethod
    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Partial sums ``y^0..y^k``, ``(k+1, B, m)``, from detached predictions ``h (k, B, m)``."""

    def combine(self, partials: Tensor) -> Tensor:
        """The booster's prediction from its partial sums (default: the last one, ``y^k``)."""
        return partials[-1]

    @abstractmethod
    def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
        """Each learner's regression target ``(N, B, m)`` after the labels ``z`` are revealed."""

    def learner_objective(self, h: Tensor, partials: Tensor,
                          z: Tensor) -> tuple[Tensor, Tensor | None]:
        """Each learner's target ``(N, B, m)`` and per-output weights of its loss (``None``:
        unweighted). Default: :meth:`learner_targets`, unweighted; second-order boosting
        (:class:`~torchboost.SGB` with ``targets="newton"``) weights by the loss's Hessian."""
        return self.learner_targets(h, partials, z), None

    def learner_loss_grad(self, h: Tensor, targets: Tensor) -> Tensor:
        """Gradient, with respect to the learners' outputs ``h (N, B, m)``, of the sum of the
        learners' own training losses. Default: the squared error to the target,
        ``mean_b ‖target_i − h_i(x_b)‖²`` (SGB Alg. 1 line 12), whose gradient is
        ``2 (h_i − target_i) / B``."""
        return (h - targets) * (2.0 / h.shape[1])

    def after_step(self, h: Tensor, partials: Tensor, z: Tensor) -> None:
        """Update algorithm state once the learners have stepped (default: nothing). Averages
        over the batch go through :meth:`batch_mean`, so that data-parallel replicas agree."""

    def batch_mean(self, values: Tensor) -> Tensor:
        """Mean of ``values (..., B)`` over the round's batch; when distributed, over the global
        batch (the shard sums are all-reduced), the same on every rank."""
        if self.sync is None:
            return values.mean(-1)
        total = values.sum(-1)
        self.sync.sum_([total])
        return total / self._round_size

    def distribute(self, sync: Synchronizer | None) -> None:
        """Train as one of ``sync.world_size`` data-parallel replicas, each :meth:`learn` call
        getting this rank's shard of a global batch (see :mod:`torchboost.distributed`);
        ``None`` goes back to training alone. Every replica must start from the same state.

        Raises ``ValueError`` for a booster whose round updates state from the local shard alone
        (:class:`~torchboost.StagewiseGB`, the multiclass boosters) and for learners
        with BatchNorm running statistics (updated from each rank's shard alone).
        """
        if sync is not None:
            if not self.supports_distributed:
                raise ValueError(f"{type(self).__name__} runs its own round (its per-round state "
                                 "is not synchronised across processes); data-parallel training "
                                 "needs a booster whose class sets supports_distributed = True "
                                 "(SGB and its variants, OGB, ConvexHullOGB, ResidualSGB and "
                                 "SingleLearner among the library's)")
            if any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats
                   for m in self.learners.modules()):
                raise ValueError("weak learners with BatchNorm running statistics would update "
                                 "them from each rank's shard alone; use "
                                 "track_running_stats=False to train data-parallel")
            reasons = {reason for m in self.learners.modules()
                       if (reason := getattr(m, "loop_only_reason", None))}
            if reasons:
                raise ValueError("weak learners that keep their own per-round state cannot be "
                                 "synchronised across processes: " + "; ".join(sorted(reasons)))
        self.sync = sync

    # --- public API ---------------------------------------------------------------------------
    def learn(self, x: Tensor, y: Tensor) -> Tensor:
        """One streaming round on the mini-batch ``(x, y)``; returns the prediction made before
        the update, ``(B, m)``. Bad input raises ``ValueError`` and leaves the state unchanged;
        a round that produces NaN or inf raises :class:`~torchboost.boosters.guards.DivergenceError`
        naming the learner (see :mod:`torchboost.boosters.guards`). Autograd is switched on for
        the learners inside, so ``learn`` also works under ``torch.no_grad()``."""
        _check_grad_mode()
        with torch.enable_grad():
            return self._learn(x, y)

    def _learn(self, x: Tensor, y: Tensor) -> Tensor:
        """The one round every booster runs: checks, :meth:`plan_round`, the numerical guards,
        the learners' step (all of them, or one stage's), :meth:`after_step` and the
        book-keeping, inside a :class:`~torchboost.boosters.transaction.RoundTransaction`:
        whatever raises leaves the booster as it was."""
        x, z = self._checked_round_input(x, y)
        self._run_learners(self.learners.probe, x)  # mode="auto" settles before the round
        labels = z  # in the user's units, for :meth:`round_scores`
        with self._transaction(self) as round_:
            if self.standardizer is not None:  # scale-free units (:mod:`.scaling`)
                x, z, to_user_units = self.standardizer.learn(x, z, self.sync)
                round_.on_commit(self.standardizer.commit)
            # the learners this round trains run at their learning point (schedule-free:
            # :mod:`~torchboost.learners.averaging`), every other forward at the averaged weights
            with self.learners.learning_point(self.stepping_learner()):
                plan = self.plan_round(x, z)
                check_round(plan.h, plan.partials, plan.targets, self.sync, first=plan.first)
                output_grad = self.learner_loss_grad(plan.h, plan.targets)
                if plan.weights is not None:  # a per-output weighted loss: output by output
                    output_grad = output_grad * plan.weights
                if self.sync is not None:  # the shard's share B_r / B of the global-batch mean
                    output_grad = output_grad * (x.shape[0] / self._round_size)
                round_.step(self.learners, plan.outputs, output_grad, plan.index, self.sync)
            self.after_step(plan.h, plan.partials, z)
            self.learners.step_schedules(plan.index)
            if self.stall is not None:  # a warning made an error (-W error) rolls back too
                with self.stall.all_or_nothing():
                    symptoms = self.stall.update(plan.partials, z, self.sync,
                                                 self._round_size, self.learners.parameters)
                    if symptoms:  # the hint reads the steps: only for a warning
                        self.stall.warn(symptoms, self._stall_hint())
        self._record_round(x, plan.h, plan.targets, z, first=plan.first, weights=plan.weights)
        self._set_plain(_round_labels=labels)
        return plan.prediction if self.standardizer is None else to_user_units(plan.prediction)

    def stepping_learner(self) -> int | None:
        """The one learner the next round steps (its :class:`Round`'s ``index``), or ``None``
        (default) for all of them: those run at their learning point during the round."""
        return None

    def _stall_hint(self) -> str:
        """The settings a stall warning suggests changing: the learning rate here; boosters
        with steps add theirs."""
        optimizers = self.learners.optimizers
        group = optimizers[0].param_groups[0]
        if isinstance(optimizers[0], Prodigy):  # its lr multiplies an estimate d per learner
            low, high = (float(v) for v in torch.cat(
                [opt.estimate().flatten() for opt in optimizers]).aminmax())
            hint = f"now Prodigy's lr={group['lr']:g} × estimates d in [{low:.3g}, {high:.3g}]"
        else:
            hint = (f"now lr={optimizers[0].defaults['lr']:g}" if "lr" in group
                    else "now the optimizer's default")
            if is_schedule_free(optimizers[0]):  # no schedule to blame: only the rate
                hint = (f"now schedule-free lr={optimizers[0].defaults['lr']:g}, warm-up "
                        f"{group.get('warmup_steps', 0)} rounds, no schedule needed")
        if self.standardizer is None:
            hint += ("; the booster trains on your units (standardize=False): features or "
                     "labels far from unit scale stall it, and standardize=True fixes that")
        return hint

    def plan_round(self, x: Tensor, z: Tensor) -> Round:
        """The algorithm's part of a round on checked features ``x`` and encoded labels ``z``:
        the learners' outputs (with autograd), their detached copy, the partial sums, the
        prediction made before the update and each learner's target (and loss weights).
        Default: every learner, :meth:`partial_sums`, :meth:`combine` and
        :meth:`learner_objective`. State changed here is restored if the round fails."""
        outputs = self._learner_outputs(x)
        h = outputs.detach()
        partials = self.partial_sums(h, self.initial_prediction(x))
        targets, weights = self.learner_objective(h, partials, z)
        return Round(outputs, h, partials, self.combine(partials), targets, weights)

    def _checked_round_input(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Checked features and encoded labels of a round, and its (global) batch size in
        ``_round_size``. Distributed, one all-reduce carries the shard sizes and whether any
        replica's shard failed the checks, so that every replica raises together (a replica
        left alone in the next collective would hang or pair with the wrong round)."""
        try:
            x = self._check_features(x)
            z = self._check_labels(y, x.shape[0])
        except ValueError:
            if self.sync is not None:
                self.sync.sum_([torch.tensor([0, 1], dtype=torch.int64, device=self.sync.device)])
            raise
        if self.sync is None:
            self._set_plain(_round_size=x.shape[0])
            return x, z
        counts = torch.tensor([x.shape[0], 0], dtype=torch.int64, device=self.sync.device)
        self.sync.sum_([counts])
        size, rejected = counts.tolist()
        if rejected:
            raise ValueError(f"{rejected} other replica(s) rejected their shard of this batch "
                             "(see the error on those ranks); the round was skipped everywhere")
        self._round_size = size
        return x, z

    @torch.no_grad()
    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Prediction ``(B, m)`` using the first ``n_learners`` learners (anytime prediction).
        The learners run in ``eval()`` mode (Dropout off, BatchNorm on its running statistics),
        and each gets its previous mode back afterwards."""
        x = self._check_features(x)
        if self.standardizer is not None:
            x = self.standardizer.inputs(x)
        with self.learners.evaluating():
            h = self._learner_outputs(x, n_learners)
        scores = self.prediction_scores(self.partial_sums(h, self.initial_prediction(x)))
        return scores if self.standardizer is None else self.standardizer.outputs(scores)

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
        """Mean loss (and error rate for classifiers) on a held-out batch."""
        return self.score(self.predict(x, n_learners), y)

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

    def initial_prediction(self, x: Tensor) -> Tensor:
        """``y^0`` for a batch, ``(B, m)`` (from buffers and constants: no autograd graph)."""
        if self.y0_mode == "mean" and self.samples_seen > 0:
            mean = self.label_statistic_sum / self.samples_seen
            y0 = self.loss.best_constant(mean.to(x.dtype))
        else:
            y0 = self.y0_fixed.to(x.dtype)
        return y0.expand(x.shape[0], self.out_dim)

    def edges(self) -> Tensor:
        """Running edge estimate per learner, ``γ_i = 1 − Σ‖target − h‖² / Σ‖target‖²`` (both
        sums weighted when the learners' losses are); 0 for a learner that has seen no target
        yet (a later stage of stagewise GB, any learner before the first round): no evidence
        of an edge."""
        seen = self.target_sq_sum > 0
        return torch.where(seen, 1.0 - self.residual_sq_sum / self.target_sq_sum.clamp_min(
            1e-300), torch.zeros_like(self.target_sq_sum))

    @property
    def last_diagnostics(self) -> dict[str, Tensor]:
        """The last round's per-learner ``target_norm`` (mean norm of its target) and
        ``fit_error`` (mean squared error to it, weighted like its loss); empty before the first
        round. Divided when read, not every round."""
        if self._round_fit is None:
            return {}
        norm_sum, residual_sq, batch = self._round_fit
        return {"target_norm": norm_sum / batch, "fit_error": residual_sq / batch}

    def diagnostics(self) -> dict[str, Tensor]:
        """Per-learner diagnostics of the last round plus running edges."""
        return {**self.last_diagnostics, "edge": self.edges().float()}

    @property
    def units_per_example(self) -> int:
        """Compute units one :meth:`learn` costs per example (``3N`` for the streaming boosters)."""
        return self.n_learners * (PREDICT_UNITS + UPDATE_UNITS)

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
        out = self._run_learners(self._forward_learners, x, n_learners)
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

    def _record_round(self, x: Tensor, h: Tensor, targets: Tensor, z: Tensor,
                      first: int = 0, weights: Tensor | None = None) -> None:
        """Book-keeping after a successful round of learners ``first..first+k`` on batch ``x``
        (``weights``: those of the learners' losses, for the edges). When distributed, the batch
        sums are all-reduced (one call) and the counters advance by the global batch, so every
        rank holds the single-process state."""
        batch = x.shape[0] if self.sync is None else self._round_size
        with torch.no_grad():
            target_sq = targets.square()
            residual_sq = (targets - h).square()
            if weights is None:
                target_sq = weighted_target_sq = target_sq.sum(-1)
            else:
                weighted_target_sq = (weights * target_sq).sum(-1)
                target_sq, residual_sq = target_sq.sum(-1), weights * residual_sq
            sums = [residual_sq.sum(-1).sum(-1), weighted_target_sq.sum(-1),
                    target_sq.sqrt().sum(-1)]
            if self.y0_mode == "mean":
                sums.append(self.loss.target_statistic(z, self.out_dim).sum(0))
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
        self._set_plain(_round_fit=(norm_sum, residual_sq, batch),
                        compute_units=self.compute_units + batch * self.units_per_round_example(),
                        samples_seen=self.samples_seen + batch, rounds=self.rounds + 1)
        if self.input_shape is None:
            self.input_shape = tuple(x.shape[1:])

    def _set_plain(self, **values: Any) -> None:
        """Set plain attributes (never a parameter, buffer or submodule name: the round's
        book-keeping) straight in ``__dict__``, as ``nn.Module.__setattr__`` does after looking
        each name up in its parameters, buffers and submodules (about 1 µs a name; several
        names every round)."""
        vars(self).update(values)

    def units_per_round_example(self) -> int:
        """Units the last :meth:`learn` spent per example (overridden by staged training)."""
        return self.units_per_example

    def _check_features(self, x: Tensor) -> Tensor:
        """Checked features, detached (``learn`` never writes into the caller's ``x.grad``) and
        cast to the learners' dtype (the one dtype rule, shared by ``ScreenedStream`` and the
        Lightning module, which both go through here): :func:`torchboost.inputs.check_features`."""
        return check_features(x, self.learners.dtype, self.input_shape, self.y0_fixed.device)

    def _check_labels(self, y: Tensor, batch: int) -> Tensor:
        if torch.is_tensor(y) and y.device.type == "meta":
            raise ValueError("labels are on the meta device (shapes only, no values); pass labels "
                             f"on {self.y0_fixed.device}")
        z = self.loss.encode_target(y, self.out_dim)
        if z.shape[0] != batch:
            raise ValueError(f"{z.shape[0]} labels for {batch} examples")
        return z.to(self.y0_fixed.device)

    # --- state ------------------------------------------------------------------------------------
    #: attributes that configure the algorithm, saved in the state and compared on loading
    #: (extended by the subclasses)
    config_keys: tuple[str, ...] = ("standardize",)

    def config(self) -> dict[str, Any]:
        """The booster's configuration, as saved in its ``state_dict``: class, loss (name and
        parameters), ``y0`` mode, learners (number, mode, optimizer class and defaults) and the
        algorithm's own hyper-parameters (:attr:`config_keys`, e.g. SGB's step, OGB's radius and
        bound). Loading a state saved with a different configuration raises ``ValueError``."""
        spec = self.learners.optimizer_spec
        defaults = self.learners.optimizers[0].defaults
        out: dict[str, Any] = {
            "booster": type(self).__name__,
            "loss": _describe(self.loss),
            "y0": self.y0_mode,
            "n_learners": self.n_learners,
            "outputs": self.out_dim,
            "mode": self.learners.mode,
            "optimizer": f"{spec.cls.__module__}.{spec.cls.__qualname__}",
            "optimizer_defaults": {k: _plain(v) for k, v in defaults.items()
                                   if k not in _RUNTIME_OPTIMIZER_FLAGS},
            "stall_window": None if self.stall is None else self.stall.window,
        }
        if self.learners.lr_scaled:  # absent where it changes nothing (older states have none)
            out["lr_fan_in"] = spec.lr_fan_in
        if spec.output_scale != 1.0:  # only where it changes a rate (linear learners)
            out["lr_output_scale"] = spec.output_scale
        schedule = describe_schedulers(self.learners.schedulers)
        if schedule is not None:  # absent without one (states saved before schedules)
            out["lr_scheduler"] = schedule
        for cls in reversed(type(self).__mro__):
            for key in vars(cls).get("config_keys", ()):
                out[key] = _describe(getattr(self, key))
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> Any:
        """Load a saved state, all or nothing: a state that does not fit — saved by a booster
        configured differently, with learners of another architecture, with keys missing —
        raises a ``ValueError`` and leaves this booster exactly as it was (parameters,
        optimizer and schedule state, buffers, counters, mode)."""
        if assign:
            raise ValueError("load_state_dict(assign=True) would replace the learners' parameter "
                             "tensors while their optimizers keep stepping the old ones (the "
                             "booster would never learn again); load without assign, which "
                             "copies the saved values into the learners' own tensors")
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"load_state_dict takes a booster's state_dict() (a mapping), got "
                             f"a {type(state_dict).__name__}")
        backup = copy.deepcopy(self.state_dict())
        try:
            result = super().load_state_dict(state_dict, strict, assign)
            self._check_statistics()
            return result
        except BaseException as err:
            super().load_state_dict(backup)
            if isinstance(err, TypeError | KeyError | AttributeError):  # a malformed entry
                raise ValueError(f"the state does not fit this booster (nothing was loaded): "
                                 f"an entry is malformed ({type(err).__name__}: {err}); load "
                                 "a state_dict() saved by a booster built like this one"
                                 ) from err
            if isinstance(err, RuntimeError) and "Error(s) in loading state_dict" in str(err):
                why = ("its tensors have other shapes, so its learners have another "
                       "architecture" if "size mismatch" in str(err) else
                       "it has other entries, so it was saved by another kind of booster or "
                       "with other learners")
                raise ValueError(
                    f"the state does not fit this booster (nothing was loaded): {why}; build "
                    f"the booster as it was saved. {err}") from err
            raise

    def _check_statistics(self) -> None:
        """Loaded running statistics must fit the loaded input shape and outputs (they are sized
        by the first batch, so torch's own shape check cannot see a mismatch)."""
        if self.standardizer is None:
            return
        width = self.input_shape[0] if self.input_shape else None
        sizes = [("features", self.standardizer.features, width)]
        if self.standardizer.labels is not None:
            sizes.append(("labels", self.standardizer.labels, self.out_dim))
        for what, moments, size in sizes:
            columns = moments.mean.numel()
            if columns and (columns != size or moments.sq_dev.numel() != columns):
                raise ValueError(
                    f"the state does not fit this booster (nothing was loaded): its {what} "
                    f"statistics have {columns} columns (and {moments.sq_dev.numel()} squared "
                    f"deviations) for {size} {what} columns")

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any,
                              **kwargs: Any) -> None:
        extra = state_dict.get(prefix + "_extra_state")
        saved = extra.get("config") if isinstance(extra, dict) else None
        if isinstance(saved, dict) and "standardize" not in saved:
            # saved before the option existed: trained on the data as given
            saved = {**saved, "standardize": False}
            state_dict[prefix + "_extra_state"] = {**extra, "config": saved}
        if saved is not None:  # states saved before configurations were recorded have none
            self.learners.adopt_mode(saved.get("mode", self.learners.mode))
            window = saved.get("stall_window")
            if window is not None and self.stall is not None:  # a monitoring setting, not the
                self.stall.window = int(window)               # model: resume with the saved one
            mine = self.config()
            differences = [f"{key}: saved {saved.get(key, '(none)')!r}, this booster "
                           f"{mine.get(key, '(none)')!r}"
                           for key in sorted(set(saved) | set(mine), key=str)
                           if saved.get(key) != mine.get(key)]
            if differences:
                raise ValueError("the state was saved by a booster configured differently (nothing "
                                 "was loaded); build the booster with the saved configuration. "
                                 "Differences: " + "; ".join(differences))
        stall = prefix + "stall."
        if self.stall is not None and not any(key.startswith(stall) for key in state_dict):
            # saved before the monitor existed: it starts afresh (its sums are not the model's)
            state_dict.update({stall + key: value
                               for key, value in self.stall.state_dict().items()})
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> dict[str, Any]:
        return {"input_shape": self.input_shape, "config": self.config(), **counters(self)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        shape = state["input_shape"]
        self.input_shape = tuple(shape) if shape is not None else None
        load_counters(self, state)


#: optimizer defaults that choose an implementation, not the arithmetic
_RUNTIME_OPTIMIZER_FLAGS = ("foreach", "fused", "capturable", "differentiable")


def _plain(value: Any) -> Any:
    """A comparable, picklable copy of a hyper-parameter (tensors become numbers or lists)."""
    if torch.is_tensor(value):
        return value.tolist()
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _describe(value: Any) -> Any:
    """A hyper-parameter for :meth:`Booster.config`: plain values as they are, objects (a loss,
    a surrogate, potentials) as their class name and plain attributes."""
    if value is None or isinstance(value, bool | int | float | str | tuple | list):
        return _plain(value)
    if torch.is_tensor(value):
        return _plain(value)
    attributes = {k: _plain(v) for k, v in sorted(vars(value).items())
                  if not k.startswith("_") and k != "training" and (v is None or isinstance(
                      v, bool | int | float | str | tuple))}
    return {"class": type(value).__name__, **attributes}


def _check_grad_mode() -> None:
    if torch.is_inference_mode_enabled():
        raise ValueError("learn() cannot train under torch.inference_mode(); call it outside "
                         "(torch.no_grad() is fine: learn switches autograd on for the learners)")


def _check_y0(y0: Y0, out_dim: int) -> str:
    if isinstance(y0, str):
        if y0 != "mean":
            raise ValueError(f"y0 must be a number, a tensor or 'mean', got {y0!r}")
        return "mean"
    value = torch.as_tensor(y0)
    if value.numel() not in (1, out_dim) or not bool(torch.isfinite(value).all()):
        raise ValueError(f"y0 must be finite with 1 or {out_dim} entries, got {y0!r}")
    return "fixed"
