"""Classic stagewise (batch) gradient boosting (Friedman 2001) with the same weak learners, the
baseline of the SGB paper's Sec. 6.2."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from torchboost.atomic_load import unfit_state
from torchboost.boosters.base import Round
from torchboost.boosters.frozen_prefix import FrozenPrefix
from torchboost.boosters.gradient_boosting import GradientBoosting
from torchboost.data import ScreenedStream
from torchboost.learners import WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER, FUSED_OPTIMIZERS

__all__ = ["StagewiseGB"]

Batches = Iterable[tuple[Tensor, Tensor]] | Callable[[], Iterable[tuple[Tensor, Tensor]]]


class StagewiseGB(GradientBoosting):
    """Friedman's gradient boosting, one learner at a time, with shrinkage ``η``.

    Stage ``i`` trains learner ``i`` alone (its own Adam) on the pseudo-residual targets
    ``∇ℓ(y^{i−1})`` (or, with ``targets="newton"``, the Hessian-weighted Newton direction there:
    the model and targets of :class:`~torchboost.boosters.gradient_boosting.GradientBoosting`,
    which :class:`~torchboost.SGB` shares, so GB and SGB stay like for like) where
    ``y^{i−1} = y0 − η Σ_{j<i} h_j(x)`` is recomputed for every batch by passing it through
    the frozen learners ``1..i−1``: a stream cannot be revisited, so earlier predictions are
    never cached (Hu et al. 2017, Sec. 6.2 and footnote 5). One example in stage ``i`` therefore
    costs ``(i − 1) + 1 + 2`` units, and GB's total is ``T_B Σ_i i + 2 T_B N``.

    :meth:`learn` trains the current stage on one batch, :meth:`next_stage` freezes it, and
    :meth:`fit` runs every stage to convergence over a re-iterable set of batches. Learners run in
    ``mode="loop"`` because each stage steps only its own learner's optimizer; the frozen
    learners are evaluated as one stacked call when they can be (same predictions up to
    floating-point rounding, same units; see :mod:`~torchboost.boosters.frozen_prefix`), except
    chained learners (``chained=True``: stage ``i`` also sees stage ``i − 1``'s features, GrowNet's
    own scheme, Badirli et al. 2020), which run as their chain. Each
    learner's optimizer runs torch's fused implementation where there is one (Adam, AdamW, SGD,
    Adagrad), as :class:`~torchboost.SGB`'s stacked learners do, unless ``optimizer_kwargs``
    choose ``fused`` or ``foreach`` or the learners come as a ready ``WeakLearners`` (the same
    arithmetic up to rounding; about 10 % of a GB round on keggundirected).
    """

    supports_distributed = False
    #: no stall monitor (:mod:`torchboost.boosters.stall`): a round does not compute every
    #: learner's anytime prediction on the loss's scale
    monitors_stall = False

    def __init__(self, learners: Any, loss: Any = "squared", **kwargs: Any) -> None:
        if kwargs.get("step") == "learned":
            raise ValueError("StagewiseGB takes a fixed step η (the shrinkage of Friedman 2001); "
                             "step='learned' is for the streaming SGB")
        if isinstance(learners, WeakLearners) and learners.mode != "loop":
            raise ValueError("StagewiseGB steps one learner at a time; build its WeakLearners "
                             "with mode='loop'")
        if kwargs.get("compile"):
            raise ValueError("StagewiseGB steps one learner at a time (its learners run as a "
                             "loop): compile=True, which compiles the stacked learners' step, "
                             "does not apply; leave it False")
        kwargs["mode"] = "loop"
        # one learner trains at a time: it moves the prediction by η·h alone, so the default
        # rule's Newton scaling of SGB's linear learners does not apply
        kwargs.setdefault("lr_output_scale", 1.0)
        if not isinstance(learners, WeakLearners):
            kwargs["optimizer_kwargs"] = _fused_by_default(
                kwargs.get("optimizer", DEFAULT_OPTIMIZER), kwargs.get("optimizer_kwargs"))
        super().__init__(learners, loss, **kwargs)
        self.register_buffer("stage", torch.zeros((), dtype=torch.long))
        #: the frozen learners, evaluated stacked when they can be (``frozen_prefix.problem``: why
        #: not)
        self.frozen_prefix = FrozenPrefix(self.learners)

    def plan_round(self, x: Tensor, z: Tensor) -> Round:
        """The current stage's learner alone, after the frozen earlier stages: one optimizer step
        of it on this batch (through the shared round of :meth:`Booster.learn`, guards included);
        the prediction is the one before the step."""
        i = int(self.stage)
        carry = None
        if self.learners.chained and i > 0:  # GrowNet proper: stage i sees stage i−1's features
            frozen, carry = self._run_learners(self.learners.chain_prefix, x, i)
        else:
            with torch.no_grad():
                frozen = self._learner_outputs(x, i)
        output = self._check_width(
            self._run_learners(lambda x_: self.learners.forward_one(i, x_, carry), x))
        h = torch.cat([frozen, output.detach().unsqueeze(0)])
        partials = self.partial_sums(h, self.initial_prediction(x))
        target, weights = self.learner_objective(h[-1:], partials[-2:], z)
        return Round(output.unsqueeze(0), h[-1:], partials[-2:], partials[-1], target, weights,
                     first=i, index=i)

    def _check_loaded(self) -> None:
        """The statistics (:class:`~torchboost.boosters.state.BoosterState`), and a stage that
        is one of the learners."""
        super()._check_loaded()
        if not 0 <= int(self.stage) < self.n_learners:
            raise unfit_state("booster", f"its stage is {int(self.stage)}, not one of this "
                                         f"booster's learners 0..{self.n_learners - 1}")

    def stepping_learner(self) -> int:
        """The current stage's learner."""
        return int(self.stage)

    @property
    def prediction_learners(self) -> int:
        """The learners trained so far (stages ``0..stage``)."""
        return int(self.stage) + 1

    @torch.no_grad()
    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Prediction with the learners trained so far (stages ``0..stage``) by default."""
        return super().predict(x, self.prediction_learners if n_learners is None else n_learners)

    def _forward_learners(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Learners ``0..k−1``: the frozen ones (``0..stage−1``) in one stacked call
        (:class:`~torchboost.boosters.frozen_prefix.FrozenPrefix`) when there are two or more
        (one alone is cheaper as it is), the others one by one."""
        k = self.n_learners if n_learners is None else n_learners
        frozen = min(k, int(self.stage))
        if frozen < 2 or k > self.n_learners or self.learners.chained:
            return super()._forward_learners(x, n_learners)
        prefix = self.frozen_prefix(x, frozen)
        if k == frozen:
            return prefix
        later = [self.learners.forward_one(j, x).unsqueeze(0) for j in range(frozen, k)]
        return torch.cat([prefix, *later])

    def units_per_round_example(self) -> int:
        return int(self.stage) + 3

    def next_stage(self) -> None:
        """Freeze the current learner and start training the next one."""
        if int(self.stage) + 1 >= self.n_learners:
            raise ValueError(f"all {self.n_learners} stages are already trained")
        for param in self.learners.learner(int(self.stage)).parameters():
            param.grad = None  # a frozen learner keeps no gradient (it is never stepped again)
        self.stage += 1

    def fit(self, batches: Batches, *, max_epochs: int = 20, patience: int = 2,
            tol: float = 1e-3, progress: bool = False,
            on_batch_end: Callable[[StagewiseGB], None] | None = None,
            validate: Callable[[StagewiseGB], float] | None = None) -> list[dict[str, float]]:
        """Train the remaining stages, each to convergence: until its score has not improved by a
        relative ``tol`` for ``patience`` epochs in a row (or ``max_epochs``).

        The score is ``validate(self)`` after every epoch if given — a held-out score, lower is
        better, e.g. the loss or error rate on a validation split of the training data (early
        stopping); the stage then keeps the learner of its best epoch (the epochs after it are
        still paid for in compute units). Without ``validate`` it is the epoch-mean fit loss of
        the stage's learner on its training batches, and the last epoch's learner is kept.

        ``batches`` is a re-iterable of ``(x, y)`` (a list, a DataLoader) or a function returning
        a fresh iterable each epoch. ``on_batch_end(self)`` runs after every batch (for
        evaluation every K compute units). Returns one summary dict per trained stage
        (``stage``, ``epochs``, ``fit_loss`` of the last epoch, ``compute_units`` at its end
        and, with ``validate``, ``val_score`` of the kept learner and ``best_epoch``).

        ``fit`` is a sequence of rounds, each all or nothing: if one raises (a bad batch, an
        interruption, a ``validate`` that is not a finite number), the rounds before it stay
        learnt, as hours of stages should, and ``fit`` called again goes on from the current
        stage. An iterator or a one-pass stream (one with ``reset()``: ``DataStream``,
        ``MultiPassStream``, ``LoaderStream``; also inside a ``ScreenedStream``), which the first
        epoch would exhaust, is refused before any round.
        """
        if max_epochs < 1 or patience < 1:
            raise ValueError("max_epochs and patience must be >= 1")
        one_pass = _one_pass(batches)
        if one_pass is not None:
            raise ValueError(f"batches is {one_pass}, which the first epoch would exhaust; pass "
                             "a list, a DataLoader or a function returning a fresh iterable each "
                             "epoch (e.g. one that calls stream.reset() and returns the stream)")
        epochs = batches if callable(batches) else (lambda: batches)
        history = []
        stages = range(int(self.stage), self.n_learners)
        for i in tqdm(stages, desc="stagewise GB", disable=not progress, unit="stage"):
            if i > int(self.stage):
                self.next_stage()
            best, stale, epoch_loss, epochs_run = float("inf"), 0, float("inf"), 0
            best_epoch, best_state = 0, None
            while epochs_run < max_epochs:
                epoch_loss = self._fit_epoch(epochs(), on_batch_end)
                epochs_run += 1
                score = epoch_loss if validate is None else float(validate(self))
                if not math.isfinite(score):
                    what = ("the epoch's fit loss is" if validate is None
                            else "validate returned")
                    raise ValueError(f"{what} {score} after epoch {epochs_run} of stage {i}: "
                                     "a score must be a finite number (lower is better); the "
                                     "rounds so far stay learnt")
                if score < best * (1.0 - tol):
                    best, stale, best_epoch = score, 0, epochs_run
                    if validate is not None:
                        best_state = {k: v.clone() for k, v in
                                      self.learners.learner_state(i).items()}
                else:
                    stale += 1
                    if stale >= patience:
                        break
            summary = {"stage": i, "epochs": epochs_run, "fit_loss": epoch_loss,
                       "compute_units": float(self.compute_units)}
            if validate is not None:
                if best_state is not None and best_epoch != epochs_run:
                    self.learners.engine.set_learner_state(i, best_state)
                summary.update(val_score=best, best_epoch=best_epoch)
            history.append(summary)
        return history

    def _fit_epoch(self, batches: Iterable[tuple[Tensor, Tensor]],
                   on_batch_end: Callable[[StagewiseGB], None] | None) -> float:
        """One epoch of the current stage; its mean fit loss: each batch's ``fit_error`` of
        :attr:`last_diagnostics` (the stage's learner is a round's only one) times the batch
        size, summed in float64 in batch order. The rounds' squared-error sums are kept and
        divided, scaled and read from the device once, at the end: the same elementwise
        arithmetic in three calls instead of three per round, then the same sequential sum."""
        residuals: list[Tensor] = []
        divisors: list[int] = []
        sizes: list[int] = []
        for x, y in batches:
            self.learn(x, y)
            _, residual_sq, batch = self._round_fit  # type: ignore[misc]
            residuals.append(residual_sq)
            divisors.append(batch)
            sizes.append(x.shape[0])
            if on_batch_end is not None:
                on_batch_end(self)
        if not residuals:
            raise ValueError("no batches to fit on (an exhausted iterator? pass a list, a "
                             "DataLoader or a function returning a fresh iterable)")
        errors = torch.cat(residuals)
        errors = (errors / torch.tensor(divisors, device=errors.device)).double() * torch.tensor(
            sizes, dtype=torch.float64, device=errors.device)
        total = 0.0
        for error in errors.tolist():
            total += error
        return total / sum(sizes)


def _fused_by_default(optimizer: type[torch.optim.Optimizer],
                      options: dict[str, Any] | None) -> dict[str, Any]:
    """``options`` with ``fused=True`` for an optimizer torch fuses, unless they choose an
    implementation (``fused`` or ``foreach``) themselves."""
    options = dict(options or {})
    if optimizer in FUSED_OPTIMIZERS and "fused" not in options and "foreach" not in options:
        options["fused"] = True
    return options


def _one_pass(batches: Any) -> str | None:
    """What makes ``batches`` one pass, for the message: an iterator, or a stream that must be
    ``reset()`` before it yields again (looked for inside a ``ScreenedStream`` too); ``None``
    for a re-iterable or a function."""
    if callable(batches):
        return None
    if isinstance(batches, Iterator):
        return "an iterator"
    inner = batches.stream if isinstance(batches, ScreenedStream) else batches
    if callable(getattr(inner, "reset", None)):
        return f"a {type(inner).__name__}"
    return None
