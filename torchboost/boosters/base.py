"""What every streaming booster shares: the round. Everything else a booster does lives in a
base class of its own, with a name that says what it holds: :mod:`.prediction` (``predict``,
scores, the learners' forward and the input rules), :mod:`.diagnostics` (edges, compute units,
the stall hint), :mod:`.state` (configuration, ``load_state_dict``, extra state) and
:mod:`.data_parallel` (replicas), :mod:`.records` (``y^0`` and the round's book-keeping); the
round's transaction is :mod:`.transaction`.

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

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.boosters.bounds import PredictionBounds
from torchboost.boosters.data_parallel import DataParallel
from torchboost.boosters.default_lr import with_default_lr
from torchboost.boosters.diagnostics import BoosterDiagnostics
from torchboost.boosters.guards import check_round
from torchboost.boosters.prediction import Prediction
from torchboost.boosters.records import ROUND_COUNTERS, RoundRecords
from torchboost.boosters.scaling import Standardizer
from torchboost.boosters.stall import DEFAULT_WINDOW, StallMonitor
from torchboost.boosters.state import BoosterState
from torchboost.boosters.threading import ThreadChoice
from torchboost.boosters.transaction import RoundTransaction
from torchboost.deferred_checks import DeferredChecks, deferring
from torchboost.distributed import Synchronizer
from torchboost.export import export_booster
from torchboost.learners import LearnerSource, WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory
from torchboost.losses import Loss, get_loss
from torchboost.params import flag, positive_float, positive_int
from torchboost.scalars import scalar
from torchboost.threads import check_threads

__all__ = ["Y0", "Booster", "Round"]

#: Initial prediction ``y^0``: a number, a tensor of shape ``(m,)``, or ``"mean"`` for the best
#: constant given the running mean of the labels seen so far (e.g. the label mean for squared loss,
#: the log-odds of the positive rate for logistic loss).
Y0 = float | Tensor | str

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
        sums: what the round's book-keeping adds up (:meth:`_round_sums`) and the stall
            monitor's (:meth:`~torchboost.boosters.stall.StallMonitor.batch_sums`), where the
            round computed them (``compile=True``'s, :mod:`.compiled_round`); ``None``: the
            book-keeping computes them.
    """

    outputs: Tensor
    h: Tensor
    partials: Tensor
    prediction: Tensor
    targets: Tensor
    weights: Tensor | None = None
    first: int = 0
    index: int | None = None
    sums: tuple[list[Tensor], list[Tensor] | None] | None = None


class Booster(Prediction, PredictionBounds, ThreadChoice, RoundRecords, BoosterDiagnostics,
              BoosterState, DataParallel, nn.Module, ABC):
    """Base class of the streaming boosters (see the module docstring for the cycle).

    Args:
        learners: a factory ``lambda: nn.Module`` plus ``n_learners``, a list of modules, or a
            ready :class:`WeakLearners`.
        loss: a :class:`~torchboost.losses.Loss` or its name.
        n_learners: number of learners to build from a factory.
        n_outputs: outputs of the problem (classes for ``"softmax"``); learners must return
            ``(B, m)`` with ``m = loss.output_dim(n_outputs)``.
        y0: the initial prediction ``y^0`` (see :data:`Y0`).
        optimizer, optimizer_kwargs, mode, lr_fan_in, lr_output_scale: passed to
            :class:`WeakLearners` for a factory/list. The default optimizer is schedule-free
            AdamW (:mod:`~torchboost.learners.averaging`: rounds learn at its learning point,
            every prediction uses its averaged weights); without ``optimizer_kwargs={"lr": ...}``
            the learners follow the default rate rule of
            :mod:`~torchboost.boosters.default_lr`, the same for every booster.
        lr_scheduler: a factory ``optimizer -> LRScheduler`` (any ``torch.optim.lr_scheduler``
            class, or :func:`~torchboost.cosine_schedule` / :func:`~torchboost.decay_schedule`),
            one scheduler per optimizer of the learners, stepped once per successful round
            (:mod:`torchboost.learners.schedules`); its state is in ``state_dict``.
        compile: run a round's arithmetic — standardisation, the learners' forward and
            backward, the targets and the schedule-free step with its guards — through
            ``torch.compile`` as one function (:mod:`~torchboost.boosters.compiled_round`;
            where that does not apply, the standardiser's update and the step apart,
            :mod:`~torchboost.boosters.stacked_step`): the same arithmetic in a few generated
            kernels, compiled at the first rounds (seconds), so worth it for a long stream
            (``docs/results/throughput.md`` measures it). Default ``False``.
        standardize: scale-free training (default on): features, and regression labels, are
            standardised on the fly by running statistics (:mod:`~torchboost.boosters.scaling`)
            and predictions come back in the user's units. ``standardize=False`` trains on the
            data as given.
        chained: chained learners, a streaming GrowNet (:mod:`~torchboost.learners.chained`):
            learner ``i`` also gets learner ``i − 1``'s penultimate features, detached, so the
            ensemble grows deep while every learner stays shallow and the combination stays
            autograd-free. Default ``False``.
        n_threads: torch's intra-op threads while the booster learns, predicts, evaluates or
            exports, restored after (:mod:`torchboost.threads`): ``"auto"`` (default) one
            thread on a CPU where a round's or a prediction's work (rows × parameters) is at
            most :data:`~torchboost.threads.AUTO_THREADS_WORK`, where torch's thread pool
            costs more than it saves (a plain ``for x, y in stream: booster.learn(x, y)`` on
            MNIST took 16× longer under torch's default threads on a busy 2-core machine),
            torch's setting above it and on a GPU; an int; ``None`` leaves torch's setting
            alone. Inside an estimator's or a Lightning fit, their ``n_threads`` applies.
        bound_predictions: a regression booster's predictions (``predict``, anytime, the one
            ``learn`` returns, ``export``) stay within the range of the labels seen so far,
            widened by :data:`~torchboost.boosters.bounds.BOUND_MARGIN` of it on each side,
            output by output (default on; ``False``: as computed). Trees never leave that
            range; a network can, far, on rows unlike any seen. Training is unchanged: the
            learners' targets and partial sums are not clipped (:mod:`.bounds`).
        averaging_window: for a stream that changes: the schedule-free learners' weights average
            over about their last ``averaging_window`` rounds, not every round
            (:func:`~torchboost.learners.averaging.window_average`; on river's
            ``FriedmanDrift``, 30 recovers from an abrupt change as fast as Adam learners). Default
            ``None``: the uniform average of schedule-free AdamW.
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
        chained: bool = False,
        n_threads: int | str | None = "auto",
        bound_predictions: bool = True,
        averaging_window: int | None = None,
    ) -> None:
        super().__init__()
        self.n_threads = check_threads(n_threads)  # :class:`~.threading.ThreadChoice`
        if n_learners is not None:
            n_learners = positive_int("n_learners", n_learners)
        if stall_window is not None:
            stall_window = positive_int("stall_window", stall_window)
        lr_output_scale = positive_float("lr_output_scale", lr_output_scale)
        self.loss = get_loss(loss)
        self.out_dim = self.loss.output_dim(positive_int("n_outputs", n_outputs))
        compile = flag("compile", compile)
        if flag("chained", chained) and not self.chains_learners:
            raise ValueError(f"{type(self).__name__} does not chain its learners: chained=True "
                             "is for SGB and its variants and StagewiseGB")
        if isinstance(learners, WeakLearners):
            if n_learners is not None and n_learners != len(learners):
                raise ValueError(f"n_learners={n_learners} but the container has {len(learners)}")
            if lr_scheduler is not None:
                raise ValueError("these WeakLearners are built already: pass lr_scheduler to "
                                 "WeakLearners(...) instead of the booster")
            if averaging_window is not None:
                raise ValueError("these WeakLearners are built already: pass averaging_window "
                                 "to WeakLearners(...) instead of the booster")
            if chained and not learners.chained:
                raise ValueError("these WeakLearners are built already, unchained: pass "
                                 "chained=True to WeakLearners(...) instead of the booster")
            if compile and not learners.compiled:
                raise ValueError("these WeakLearners are built already, not compiled: pass "
                                 "compile=True to WeakLearners(...) instead of the booster")
            self.learners = learners
        else:
            rule = with_default_lr({"optimizer": optimizer, "optimizer_kwargs": optimizer_kwargs}
                                   | ({} if lr_fan_in is None else {"lr_fan_in": lr_fan_in}))
            self.learners = WeakLearners(learners, n_learners, optimizer, rule["optimizer_kwargs"],
                                         mode, compile, rule.get("lr_fan_in"), lr_scheduler,
                                         lr_output_scale, chained, averaging_window)
        n = len(self.learners)
        self.y0_mode = _check_y0(y0, self.out_dim)
        fixed_y0 = torch.zeros(self.out_dim) if isinstance(y0, str) else torch.as_tensor(
            y0, dtype=torch.get_default_dtype()).expand(self.out_dim).clone()
        self.register_buffer("y0_fixed", fixed_y0)
        self.register_buffer("label_statistic_sum", torch.zeros(self.out_dim, dtype=torch.float64))
        self.register_buffer("residual_sq_sum", torch.zeros(n, dtype=torch.float64))
        self.register_buffer("target_sq_sum", torch.zeros(n, dtype=torch.float64))
        self._init_bounds(self.out_dim, bound_predictions)
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
            Standardizer(targets=not self.loss.is_classifier, compiled=self.learners.compiled)
            if self.standardize else None)
        #: examples in the current round's (global) batch
        self._round_size = 0
        #: every round is all or nothing (:mod:`torchboost.boosters.transaction`)
        self._transaction = RoundTransaction()
        #: warns once when the booster is not learning (:mod:`torchboost.boosters.stall`), judging
        #: its anytime predictions (:meth:`anytime_predictions`), ``stall_window`` examples a window
        self.stall = (StallMonitor(self.loss, n, self.out_dim, stall_window,
                                   metric=self.stall_metric)
                      if stall_window is not None and self.monitors_stall else None)

    #: what the stall monitor judges: the loss of the partial sums, or (``"error"``) the error
    #: rate of votes (the multiclass boosters)
    stall_metric = "loss"
    #: the encoded labels of the last :meth:`learn`, for :meth:`round_scores`
    _round_labels: Tensor | None = None


    #: whether the stall monitor applies: a round computes every anytime prediction
    #: (:meth:`anytime_predictions`) for all learners (not StagewiseGB's one stage at a time)
    monitors_stall = True
    #: whether ``chained=True`` applies (:mod:`~torchboost.learners.chained`): not for one
    #: learner, nor for OGB's learners (wrapped in ``BoundedOutput``)
    chains_learners = True

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
        with self.running():
            return export_booster(self, n_learners, output)

    # --- the algorithm-specific pieces -------------------------------------------------------
    @abstractmethod
    def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
        """Partial sums ``y^0..y^k``, ``(k+1, B, m)``, from detached predictions ``h (k, B, m)``."""

    def combine(self, partials: Tensor) -> Tensor:
        """The booster's prediction from its partial sums (default: the last one, ``y^k``)."""
        return partials[-1]

    def anytime_predictions(self, partials: Tensor) -> Tensor:
        """The prediction of the first ``k`` learners for every ``k``, ``(N + 1, B, m)``: what
        :meth:`combine` makes of ``partials[:k + 1]`` (default: the partial sums themselves);
        the stall monitor judges these."""
        return partials

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
        return (h - targets) * scalar(2.0 / h.shape[1], h)

    def after_step(self, h: Tensor, partials: Tensor, z: Tensor) -> None:
        """Update algorithm state once the learners have stepped (default: nothing). Averages
        over the batch go through :meth:`batch_mean`, so that data-parallel replicas agree."""

    # --- public API ---------------------------------------------------------------------------
    def learn(self, x: Tensor, y: Tensor) -> Tensor:
        """One streaming round on the mini-batch ``(x, y)``; returns the prediction made before
        the update, ``(B, m)``. Bad input raises ``ValueError`` and leaves the state unchanged;
        a round that produces NaN or inf raises :class:`~torchboost.boosters.guards.DivergenceError`
        naming the learner (see :mod:`torchboost.boosters.guards`). Autograd is switched on for
        the learners inside, so ``learn`` also works under ``torch.no_grad()``."""
        _check_grad_mode()
        with self.running(x), torch.enable_grad():
            return self._learn(x, y)

    def _learn(self, x: Tensor, y: Tensor) -> Tensor:
        """The one round every booster runs: checks, :meth:`plan_round`, the numerical guards,
        the learners' step (all of them, or one stage's), :meth:`after_step` and the
        book-keeping, inside a :class:`~torchboost.boosters.transaction.RoundTransaction`:
        whatever raises leaves the booster as it was."""
        # one process, mode settled: the checks' verdicts stay on the device until the round
        # has stepped, then are read in one host sync (:mod:`torchboost.deferred_checks`)
        with deferring(self.sync is None and not self.learners.probe_pending) as checks:
            x, z = self._checked_round_input(x, y)
            return self._round(x, z, checks)

    def _round(self, x: Tensor, z: Tensor, checks: DeferredChecks) -> Tensor:
        """:meth:`_learn`'s round on checked features and encoded labels."""
        self._run_learners(self.learners.probe, x)  # mode="auto" settles before the round
        labels = z  # in the user's units, for :meth:`round_scores`
        with self._transaction(self, self.learners, self.stepping_learner()) as round_:
            # the learners this round trains run at their learning point (schedule-free:
            # :mod:`~torchboost.learners.averaging`), every other forward at the averaged weights
            with self.learners.learning_point(self.stepping_learner()):
                x, z, to_user_units, plan = self._train(x, z, round_)
                checks.settle()  # every check of the round so far, read once
            self.after_step(plan.h, plan.partials, z)
            # the plain state set from here on is put back by the rollback actions (the
            # transaction restores tensors): an interrupt anywhere leaves the round undone
            round_.on_rollback(partial(self._set_plain, **{
                name: vars(self).get(name) for name in ROUND_COUNTERS}))
            if self.stall is not None:
                round_.on_rollback(self.stall.restorer())
                symptoms = self.stall.update(self.anytime_predictions(plan.partials), z,
                                             self.sync, self._round_size,
                                             self.learners.parameters,
                                             None if plan.sums is None else plan.sums[1])
                if symptoms and not self.stall.warned:  # one warning; the hint reads the
                    # steps and the batch, so it is built only for the warning itself
                    self.stall.warn(symptoms, self._stall_hint() + self._scale_hint(x, z),
                                    self._stall_remedy())
            # before the commits: the map reads the label statistics of the earlier batches
            prediction = self.bounded(plan.prediction if to_user_units is None
                                      else to_user_units(plan.prediction))
            counters = self._record_round(x, plan.h, plan.targets, z, first=plan.first,
                                          weights=plan.weights,
                                          sums=None if plan.sums is None else plan.sums[0])
            self._record_label_range(labels)
            if self.standardizer is not None:
                self.standardizer.commit()
            if self.learners.schedulers:  # last but the counters, their state plain Python
                restore = self.learners.schedules_restorer(plan.index)
                round_.on_rollback(restore)
                self.learners.step_schedules(plan.index, restore)
            self._set_plain(**counters, _round_labels=labels)
        return prediction

    def _train(self, x: Tensor, z: Tensor, round_: RoundTransaction
               ) -> tuple[Tensor, Tensor, Callable[[Tensor], Tensor] | None, Round]:
        """The round's learning part, at the learning point: the standardised features and
        labels, the map of predictions to the user's units (``None``: the identity), and the
        plan, its checks stated and the learners stepped. One compiled call with
        ``compile=True`` where it applies (:mod:`.compiled_round`), else step by step."""
        compiled = round_.compiled_round(self)
        trained = compiled(x, z) if compiled is not None else None
        if trained is not None:
            x, z, to_user_units, (h, partials, prediction, targets, weights, sums) = trained
            return x, z, to_user_units, Round(h, h, partials, prediction, targets, weights,
                                              sums=sums)
        to_user_units = None
        if self.standardizer is not None:  # scale-free units (:mod:`.scaling`)
            x, z, to_user_units = self.standardizer.learn(x, z, self.sync)
            if not self.standardizer.started:  # the first batch sizes its buffers
                round_.on_rollback(self.standardizer.forget)
        plan = self.plan_round(x, z)
        check_round(plan.h, plan.partials, plan.targets, self.sync, first=plan.first,
                    trained=round_.learners_had_state)
        output_grad = self.learner_loss_grad(plan.h, plan.targets)
        if plan.weights is not None:  # a per-output weighted loss: output by output
            output_grad = output_grad * plan.weights
        if self.sync is not None:  # the shard's share B_r / B of the global-batch mean
            output_grad = output_grad * (x.shape[0] / self._round_size)
        round_.step(self.learners, plan.outputs, output_grad, plan.index, self.sync)
        return x, z, to_user_units, plan

    def plain_round(self) -> bool:
        """Whether the next round is :meth:`plan_round`'s over every learner, on one process,
        with the container's forward and (standardised) the statistics sized: the round
        ``compile=True`` compiles whole (:mod:`.compiled_round`)."""
        kind = type(self)
        return (kind.plan_round is Booster.plan_round
                and kind._forward_learners is Prediction._forward_learners
                and self.stepping_learner() is None and self.sync is None
                and not self.learners.probe_pending
                and (self.standardizer is None or self.standardizer.started))

    def stepping_learner(self) -> int | None:
        """The one learner the next round steps (its :class:`Round`'s ``index``), or ``None``
        (default) for all of them: those run at their learning point during the round."""
        return None

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
