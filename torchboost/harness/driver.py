"""The comparison driver: SGB (and its Newton / learned-step variants), OGB and ConvexHullOGB
against stagewise GB, the base learner, a wide and a deep network, with compute accounting —
the SGB paper's Fig. 2 (test metric vs training compute) and Table 1 (final test metrics), with
the baselines a sceptic asks for, each given the same inputs and the same chances.
``experiments/sgb_vs_gb.py``, ``torchboost demo`` and ``torchboost run`` all use
:func:`run_comparison`.

**Data.** ``max_train`` training rows are subsampled (seed ``seed``), ``val_fraction`` of them
split off as a validation set that is never trained on; every choice (stopping, rate, the best
SGB variant) uses it and the test set is only reported. Every method gets the same inputs:
features standardised with the training rows' mean and standard deviation (per feature; per
channel for images), regression targets too (results are reported in the original units), and
the boosters' own standardisation off.

**Methods** (``config.methods``; all built by :func:`build_seeded` from the same seed, the same
learner factory, ``y0="mean"`` and the same optimizer, ``config.optimizer``: Adam or the
library's schedule-free default):

* ``base`` — one weak learner trained on the loss (:class:`~torchboost.SingleLearner`);
* ``wide`` — one module with the ensemble's parameter count
  (:meth:`~torchboost.harness.LearnerConfig.widened`) trained end-to-end; one of its predictions
  costs ``N`` weak-learner predictions (``prediction_units=N``);
* ``deep`` — a residual network of ``deep_depth`` hidden layers with the ensemble's parameter
  count (:meth:`~torchboost.harness.LearnerConfig.deep_factory`), likewise;
* ``GB`` — stagewise GB with gradient targets (the paper's baseline), each stage trained to
  convergence with early stopping on the validation loss (patience ``gb_patience`` epochs, at
  most ``gb_max_epochs``); ``GB_newton`` — with Newton targets, on classification losses (on a
  regression loss they are the gradient targets);
* ``SGB`` — the paper: gradient targets, fixed step; ``SGB_newton`` — ``targets="newton"``;
  ``SGB_learned`` — ``targets="newton", step="learned"`` (only ``step="learned"`` for a loss
  without a Hessian);
* ``OGB``, ``ConvexHullOGB`` — online gradient boosting (Beygelzimer et al. 2015, Alg. 1 and 2)
  with its default objective, steps and bound, told that the labels are standardised where
  they are
  (:mod:`torchboost.harness.methods`); recorded like the SGB variants, never picked as one.

A method that does not apply is skipped with the reason (``skipped``).

**Seeding.** Every booster is built with the torch RNG seeded by its run's seed ``s``; pass (or
GB epoch) ``p`` visits the training rows in the order of seed ``10007·s + p``. The rate is
chosen from seed ``seed``; ``seeds − 1`` further seeds then run at it (:func:`choose_rate`).

**Stopping.** GB runs first. The streaming methods (all but GB) stream passes over the
training rows one after another through Lightning (:func:`~torchboost.harness.fit_streaming`,
a :class:`~torchboost.harness.ConvergenceCallback` on a :class:`~torchboost.data.MultiPassStream`
of ``max_passes`` passes) and stop by :class:`~torchboost.harness.StoppingRule`: a plateau of
the validation loss (less than ``plateau_tol`` relative improvement over the last quarter of
the units spent, after ``min_passes`` passes), the compute budget (``max_units``, default GB's
total units), or ``max_passes``.

**A fixed budget** (:func:`fixed_budget`: ``schedule="cosine"``, ``fixed_budget`` or
``one_pass``): no plateau or unit stop; the streaming methods run ``max_passes`` passes (one in
the one-pass regime), GB :func:`gb_epochs_for_equal_units` epochs per stage (the fewest whose
total units reach the ensembles'; in the one-pass regime one epoch of its own ``1/N`` chunk of the
pass), each stage keeping its best epoch on the validation split. Under ``"cosine"`` every run
decays its rate to 0 by its end (each GB stage under its own cosine).

**Rates** (``config.lr_grid``, ``grid_extensions``): every method runs once per rate, the grid
extended beyond an edge while the chosen rate lies there, and reports the run with the lowest
final validation loss (``lr``, ``val_loss``) and every candidate's (``lr_candidates``): the
rate is chosen on validation data, the reported metric is the final test metric of that run
(and its mean over the seeds).

**Compute** (Hu et al. 2017, Sec. 6.2): 1 unit = one weak-learner prediction of one example, an
update = 2. Streaming boosters and the wide and deep nets spend ``3N`` units per example, the
base learner 3, GB's stage ``i`` spends ``i + 3``. Every method is evaluated on the test set
every ``K`` units (and geometrically early on); wall seconds are training time, evaluations
excluded.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.loggers import TensorBoardLogger
from torch import Tensor

from torchboost.boosters import Booster, StagewiseGB
from torchboost.data import BatchGroups, Dataset, DataStream, MultiPassStream
from torchboost.harness.compare import build_seeded, fit_streaming
from torchboost.harness.configs import ExperimentConfig, load_dataset
from torchboost.harness.methods import METHODS, MethodInputs, streaming_variants
from torchboost.harness.plotting import plot_compute_curves, save_figure
from torchboost.harness.stagewise import run_stagewise
from torchboost.harness.stopping import ConvergenceCallback, StoppingRule
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory, cosine_schedule
from torchboost.lightning.cuda_check import plain_cuda_check
from torchboost.lightning.scalars import tag
from torchboost.losses import get_loss

__all__ = ["EVAL_GROWTH", "OPTIMIZER_CLASSES", "PreparedData", "choose_rate", "fixed_budget",
           "make_boosters", "method_builders", "prepare_data", "run_comparison",
           "streaming_passes", "table_row"]

#: Besides every ``K`` units, evaluate whenever compute has grown by this factor since the last
#: evaluation, so that the log-scale plots have early points too.
EVAL_GROWTH = 1.25

#: The optimizer class of each :data:`~torchboost.harness.configs.OPTIMIZERS` name.
OPTIMIZER_CLASSES: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam, "schedule_free": DEFAULT_OPTIMIZER}

#: Metric keys of a curve point, in the order of preference for the tables.
_METRIC_KEYS = ("error", "mse", "loss")


@dataclass(frozen=True)
class PreparedData:
    """Standardised training, validation and test tensors of one data set.

    Regression targets under squared or absolute loss are standardised with the training mean
    and standard deviation (``labels_standardized``); losses are reported back in the original
    units (``loss_scale``: ``σ²`` for squared loss, ``σ`` for absolute loss), so that tables
    compare with the literature.
    """

    dataset: Dataset
    x_train: Tensor
    y_train: Tensor
    x_val: Tensor
    y_val: Tensor
    x_test: Tensor
    y_test: Tensor
    loss_scale: float = 1.0
    labels_standardized: bool = False

    def stream(self, batch_size: int, seed: int) -> DataStream:
        """One pass over the training rows in the order given by ``seed``."""
        return DataStream(self.x_train, self.y_train, batch_size=batch_size, seed=seed,
                          standardize=None)


def prepare_data(config: ExperimentConfig, dataset: Dataset | None = None) -> PreparedData:
    """Load (or take) the data set; subsample ``max_train`` training rows and split off
    ``val_fraction`` of them for validation (one permutation of seed ``seed``); standardise the
    inputs of every method alike with the mean and standard deviation of the training rows (per
    feature for tabular rows, per channel for images) and regression targets with the training
    mean and standard deviation."""
    ds = dataset if dataset is not None else load_dataset(config)
    order = torch.randperm(len(ds.x_train), generator=torch.Generator().manual_seed(config.seed))
    if config.max_train is not None:
        order = order[:config.max_train]
    n_val = max(1, round(config.val_fraction * len(order)))
    if n_val >= len(order):
        raise ValueError(f"{len(order)} training rows leave none after the validation split")
    val, train = order[:n_val], order[n_val:]
    x_train, y_train = ds.x_train[train].float(), ds.y_train[train]
    y_val, y_test = ds.y_train[val], ds.y_test
    # per feature (n, d); per channel (n, C, H, W): statistics over every axis but the channel's
    axes = (0,) if x_train.ndim == 2 else (0, *range(2, x_train.ndim))
    mean = x_train.mean(dim=axes, keepdim=True)
    std = x_train.std(dim=axes, keepdim=True).clamp_min(1e-6)

    def standardized(x: Tensor) -> Tensor:
        return (x.float() - mean) / std

    loss_scale = 1.0
    labels_standardized = ds.task == "regression" and config.loss in ("squared", "absolute")
    if labels_standardized:
        y_mean, y_std = y_train.mean(), y_train.std().clamp_min(1e-12)
        y_train, y_val, y_test = ((y - y_mean) / y_std for y in (y_train, y_val, y_test))
        loss_scale = float(y_std) ** (2 if config.loss == "squared" else 1)
    return PreparedData(ds, standardized(x_train), y_train, standardized(ds.x_train[val]),
                        y_val, standardized(ds.x_test), y_test, loss_scale,
                        labels_standardized)


def method_builders(config: ExperimentConfig, data: PreparedData, lr: float | None = None,
                    schedules: dict[str, LRSchedulerFactory] | None = None,
                    ) -> tuple[dict[str, Callable[[], Booster]], dict[str, str]]:
    """Zero-argument constructors of the configured methods (see the module docstring) at the
    learning rate ``lr`` (default ``config.lr``) and, per method, the learning-rate schedule in
    ``schedules`` (none: a constant rate), and the methods skipped with the reason (Newton
    targets for a loss without a Hessian, a classification twin on a regression loss, a deep
    network for a linear learner, a booster that cannot chain its learners where they chain)."""
    n, m = config.n_learners, config.n_outputs
    # config.optimizer: the SGB paper's Adam or the library's schedule-free default, on data
    # standardised above for every method alike, which the models take as given
    common: dict[str, Any] = {"n_outputs": m, "y0": "mean",
                              "optimizer": OPTIMIZER_CLASSES[config.optimizer],
                              "optimizer_kwargs": {"lr": config.lr if lr is None else lr},
                              "lr_fan_in": config.lr_fan_in, "standardize": False}
    hessian = get_loss(config.loss).has_hessian
    schedules = schedules or {}
    learner = config.learner
    deep = (None if learner.kind == "linear"
            else learner.deep_factory(data.dataset, m, n, config.deep_depth))

    def builder(name: str) -> Callable[[], Booster]:
        inputs = MethodInputs(
            config, learner.factory(data.dataset, m), learner.wide_factory(data.dataset, m, n),
            deep, learner.wide_prediction_units(n), common, schedules.get(name), hessian,
            data.labels_standardized)
        return lambda: METHODS[name].build(inputs)

    skipped = {}
    for name in config.methods:
        if METHODS[name].newton and not hessian:
            skipped[name] = f"{config.loss} loss has no Hessian (no Newton targets)"
        elif METHODS[name].classification and data.dataset.task == "regression":
            skipped[name] = "a regression loss: its Newton targets are its gradient targets"
        elif name == "deep" and deep is None:
            skipped[name] = "a linear learner has no deep counterpart"
        elif learner.chained and not METHODS[name].chains:
            skipped[name] = f"{name} does not chain its learners"
    builders = {m: builder(m) for m in config.methods if m not in skipped}
    return builders, skipped


def streaming_passes(config: ExperimentConfig) -> int:
    """Passes of the streaming methods: 1 in the one-pass regime, else ``max_passes``."""
    return 1 if config.one_pass else config.max_passes


def fixed_budget(config: ExperimentConfig) -> bool:
    """Whether every method runs a stated budget (a cosine schedule, ``fixed_budget`` or the
    one-pass regime) rather than until its validation curve plateaus."""
    return config.schedule == "cosine" or config.fixed_budget or config.one_pass


def gb_epochs_for_equal_units(config: ExperimentConfig) -> int:
    """Epochs per GB stage under a fixed budget (:func:`fixed_budget`): the fewest whose units
    over all stages, ``Σ_i (i + 3)`` per example and epoch, reach the ensembles' ``3N`` per
    example and pass over ``max_passes`` passes (so GB never gets less compute); 1 in the
    one-pass regime, where each stage reads its own chunk of the pass once."""
    if config.one_pass:
        return 1
    n = config.n_learners
    return max(1, math.ceil(config.max_passes * 3 * n / sum(i + 3 for i in range(n))))


def method_schedules(config: ExperimentConfig, batches_per_pass: int,
                     batches_per_stage: int) -> dict[str, LRSchedulerFactory]:
    """Every method's schedule: none for ``schedule="constant"``; for ``"cosine"`` a cosine
    decay over the streaming methods' passes (:func:`streaming_passes`) and over each GB
    stage's :func:`gb_epochs_for_equal_units` epochs of ``batches_per_stage`` batches."""
    if config.schedule == "constant":
        return {}
    streaming = cosine_schedule(streaming_passes(config) * batches_per_pass)
    stagewise = cosine_schedule(gb_epochs_for_equal_units(config) * batches_per_stage)
    return {m: stagewise if spec.kind == "stagewise" else streaming
            for m, spec in METHODS.items()}


def make_boosters(config: ExperimentConfig, data: PreparedData) -> dict[str, Booster]:
    """The configured methods' boosters, each built with the torch RNG seeded by ``seed``."""
    builders, _ = method_builders(config, data)
    return {name: build_seeded(build, config.seed) for name, build in builders.items()}


def parameter_count(booster: Booster) -> int:
    """Trainable parameters of all of a booster's learners."""
    return sum(p.numel() for p in booster.learners.parameters())


@plain_cuda_check()
def run_comparison(config: ExperimentConfig, out_dir: str | Path, *, progress: bool = True,
                   dataset: Dataset | None = None) -> dict[str, Any]:
    """Run every configured method (module docstring), evaluated on the test set every ``K``
    compute units; write ``results.json``, ``compute.png`` (test metric vs units), ``wall.png``
    (vs training seconds) and TensorBoard logs under ``out_dir``; return the results.

    ``K`` is ``max_units`` (else GB's most units, else the most units of the streaming
    methods' passes) over ``eval_points``. TensorBoard: one run per method and rate,
    ``tensorboard/<name>/<method>/lr=<rate>``, in the tag scheme of
    :mod:`torchboost.lightning.scalars`, so methods overlay on one chart per tag; regression
    runs add ``test/mse`` in the original target units.

    Returns ``{"config", "metric", "budget_units", "eval_every_units", "methods": {name: {...}},
    "skipped", "best_SGB", "units_SGB_to_GB_final", "at_equal_units", "at_equal_wall",
    "figure", "wall_figure"}``; each method has its chosen run's test ``curve`` (points with
    ``units``, ``seconds``, ``samples``, ``loss`` and ``mse`` / ``error`` where they apply,
    ``val``), its ``final`` point, ``units``, ``wall_seconds`` (training), ``elapsed_seconds``
    (with evaluations), ``passes``, ``stop_reason``, ``params``, the chosen ``lr`` and its
    ``val_loss``, every rate tried (``lr_candidates``, ``lr_grid``, ``lr_at_edge``), and over
    the seeds: ``seed_metrics`` (the final test metric of each), ``seed_val_losses``, ``mean``,
    ``std`` (sample standard deviation; 0 for one seed) and ``val_loss_mean``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(config, dataset)
    builders, skipped = method_builders(config, data)
    if not builders:
        raise ValueError(f"no method of {config.methods} applies here: "
                         + "; ".join(f"{m}: {why}" for m, why in skipped.items()))
    n = len(data.x_train)
    n_learners = config.n_learners
    fixed = fixed_budget(config)
    gb_epochs = gb_epochs_for_equal_units(config) if fixed else config.gb_max_epochs
    if config.max_units is not None:
        scale = float(config.max_units)
    elif "GB" in builders and not config.one_pass:
        scale = n * gb_epochs * sum(i + 3 for i in range(n_learners))
    else:
        scale = n * streaming_passes(config) * 3 * n_learners
    every = scale / config.eval_points
    logs = {"save_dir": str(out), "name": "tensorboard", "version": config.name,
            "default_hp_metric": False}
    run = _MethodRun(config, data, every, gb_epochs, logs, progress)
    schedules = method_schedules(config, run.batches_per_pass, run.batches_per_stage)
    methods: dict[str, dict[str, Any]] = {}
    stagewise = [m for m in builders if METHODS[m].kind == "stagewise"]
    for name in [*stagewise, *[m for m in builders if m not in stagewise]]:
        def attempt(lr: float, seed: int, name: str = name) -> dict[str, Any]:
            build = method_builders(config, data, lr, schedules)[0][name]
            booster = build_seeded(build, seed)
            summary = run(name, booster, lr, seed)
            summary["lr"] = lr
            summary["val_loss"] = float(  # not evaluate(): no held-out stall judgement mid-run
                booster.score(booster.predict(data.x_val), data.y_val)["loss"])
            return summary

        methods[name] = choose_rate(attempt, config)
        if name == "GB" and run.budget is None and not fixed:
            run.budget = methods["GB"]["units"]
    budget = run.budget if not fixed else None

    ordered = {m: methods[m] for m in config.methods if m in methods}
    metric = next(key for key in _METRIC_KEYS if key in next(iter(ordered.values()))["final"])
    results: dict[str, Any] = {"config": config.to_dict(), "metric": metric,
                               "budget_units": budget, "eval_every_units": every,
                               "gb_epochs_per_stage": gb_epochs, "train_rows": n,
                               "val_rows": len(data.x_val), "methods": ordered,
                               "skipped": skipped}
    results.update(_comparisons(ordered, metric))
    _log_tensorboard(logs, results)
    _write_outputs(out, config, results)
    return results


def choose_rate(attempt: Callable[[float, int], dict[str, Any]],
                config: ExperimentConfig) -> dict[str, Any]:
    """One method's chosen run: ``attempt(lr, seed)`` at every rate of ``lr_grid`` (or
    ``lr``) from seed ``seed``, extended beyond an edge while the lowest final validation loss
    lies there (at most ``grid_extensions`` rates per edge, by the grid's own ratio), then at
    the chosen rate from ``seeds − 1`` further seeds; see :func:`run_comparison`'s fields."""
    grid = sorted(config.lr_grid) if config.lr_grid else [config.lr]
    ratio = grid[1] / grid[0] if len(grid) > 1 else 10 ** 0.5
    tried = {lr: attempt(lr, config.seed) for lr in grid}
    extended = {"low": 0, "high": 0}
    while True:
        best = min(tried, key=lambda lr: tried[lr]["val_loss"])
        rates = sorted(tried)
        edge = "low" if best == rates[0] else "high" if best == rates[-1] else None
        if len(rates) == 1 or edge is None or extended[edge] >= config.grid_extensions:
            break
        extended[edge] += 1
        lr = best / ratio if edge == "low" else best * ratio
        tried[lr] = attempt(lr, config.seed)
    chosen = tried[best]
    metric_key = next(key for key in _METRIC_KEYS if key in chosen["final"])
    runs = [chosen, *(attempt(best, config.seed + k) for k in range(1, config.seeds))]
    metrics = torch.tensor([r["final"][metric_key] for r in runs], dtype=torch.float64)
    at_edge = len(rates) > 1 and edge is not None
    return {**chosen, "lr": best, "lr_grid": rates, "lr_at_edge": at_edge,
            "lr_candidates": [{"lr": lr, "val_loss": t["val_loss"],
                               "test": t["final"][metric_key], "passes": t["passes"]}
                              for lr, t in sorted(tried.items())],
            "seed_metrics": metrics.tolist(),
            "seed_val_losses": [r["val_loss"] for r in runs],
            "mean": float(metrics.mean()),
            "std": float(metrics.std()) if len(runs) > 1 else 0.0,
            "val_loss_mean": sum(r["val_loss"] for r in runs) / len(runs)}


class _MethodRun:
    """Trains one method's booster as the module docstring says and returns its summary (see
    :func:`run_comparison`): GB stage by stage (``gb_epochs`` epochs at most per stage; under a
    cosine schedule all of them; in the one-pass regime one epoch of its own chunk of the pass),
    every other method through Lightning over seeded passes until the stopping rule (under a
    cosine schedule or in the one-pass regime: all its passes). Pass ``p`` of seed ``s`` visits
    the training rows in the order of seed ``10007·s + p``."""

    def __init__(self, config: ExperimentConfig, data: PreparedData, every: float,
                 gb_epochs: int, logs: dict[str, Any], progress: bool) -> None:
        self.config, self.data, self.every, self.gb_epochs = config, data, every, gb_epochs
        self.logs, self.progress = logs, progress
        self.squared = get_loss(config.loss).name == "squared"
        self.batches_per_pass = len(self.pass_stream(config.seed, 0))
        self.batches_per_stage = (len(self.chunk_stream(config.seed, 0)) if config.one_pass
                                  else self.batches_per_pass)
        #: the streaming methods' unit budget (``max_units``, else GB's units once it ran)
        self.budget = config.max_units

    def pass_stream(self, seed: int, p: int) -> DataStream:
        return self.data.stream(self.config.batch_size, 10007 * seed + p)

    def chunk_stream(self, seed: int, stage: int) -> DataStream:
        """Stage ``stage``'s chunk of the one pass of seed ``seed``: its share of the rows in
        the pass's order."""
        data, n = self.data, self.config.n_learners
        order = torch.randperm(len(data.x_train),
                               generator=torch.Generator().manual_seed(10007 * seed))
        rows = order[stage * len(order) // n:(stage + 1) * len(order) // n]
        return DataStream(data.x_train[rows], data.y_train[rows],
                          batch_size=self.config.batch_size, seed=10007 * seed + stage,
                          standardize=None)

    def __call__(self, name: str, booster: Booster, lr: float, seed: int) -> dict[str, Any]:
        run_name = f"{name}/lr={lr:g}" + (f"/seed={seed}" if seed != self.config.seed else "")
        if METHODS[name].kind == "stagewise":
            return {**self.stagewise(booster, run_name, seed), "run": run_name}
        return {**self.streaming(name, booster, run_name, seed), "run": run_name}

    def stagewise(self, gb: StagewiseGB, run_name: str, seed: int) -> dict[str, Any]:
        config, data = self.config, self.data
        epochs = iter(range(1 << 30))
        source = self.chunk_stream if config.one_pass else self.pass_stream
        logger = _logger(self.logs, run_name)
        started = time.perf_counter()
        fixed = fixed_budget(config)
        patience = self.gb_epochs if fixed else config.gb_patience
        run = run_stagewise(gb, lambda: source(seed, next(epochs)), data.x_test, data.y_test,
                            eval_every_units=self.every, eval_growth=EVAL_GROWTH, loggers=logger,
                            max_epochs=self.gb_epochs, patience=patience,
                            progress=self.progress, validation=(data.x_val, data.y_val),
                            val_metric="loss")
        logger.finalize("success")
        epochs_run = sum(stage["epochs"] for stage in run["stages"])
        return {**_summary(run["history"], time.perf_counter() - started, data, self.squared),
                "passes": 1 if config.one_pass else epochs_run, "params": parameter_count(gb),
                "stop_reason": "epochs" if fixed else "converged", "stages": run["stages"]}

    def streaming(self, name: str, booster: Booster, run_name: str, seed: int) -> dict[str, Any]:
        config, data = self.config, self.data
        passes = streaming_passes(config)
        if fixed_budget(config):
            rule = StoppingRule(config.plateau_tol, passes, passes, None)
        else:
            rule = StoppingRule(config.plateau_tol, min(config.min_passes, passes), passes,
                                self.budget)
        # the validation loss is smoother than the error rate on a small split
        callback = ConvergenceCallback(data.x_test, data.y_test, self.every, val_x=data.x_val,
                                       val_y=data.y_val, rule=rule,
                                       pass_batches=self.batches_per_pass, val_metric="loss",
                                       eval_growth=EVAL_GROWTH)
        started = time.perf_counter()
        stream: MultiPassStream | BatchGroups = MultiPassStream(
            lambda p: self.pass_stream(seed, p), passes)
        if config.rounds_per_step > 1:
            stream = BatchGroups(stream, config.rounds_per_step)
        fit_streaming(booster, stream, callback, progress=self.progress,
                      description=f"{config.name}: {run_name}",
                      logger=_logger(self.logs, run_name))
        out = {**_summary(callback.history, time.perf_counter() - started, data, self.squared),
               "passes": round(booster.samples_seen / len(data.x_train), 4),
               "stop_reason": callback.stop_reason, "params": parameter_count(booster)}
        if METHODS[name].kind in ("streaming", "online"):
            anytime = [callback.evaluator.scores(booster, n_learners=0), *callback.anytime]
            out["anytime"] = [data.loss_scale * s["loss"] for s in anytime]
            out["edges"] = booster.edges().tolist()
            if getattr(booster, "step_rule", None) is not None:
                out["steps"] = booster.step_rule.steps().tolist()
        return out


def _logger(logs: dict[str, Any], method: str) -> TensorBoardLogger:
    """A method's TensorBoard logger with its event writer already open, so that opening it is
    not counted as training time."""
    logger = TensorBoardLogger(**logs, sub_dir=method)
    _ = logger.experiment
    return logger


def _summary(history: list[dict[str, Any]], elapsed: float, data: PreparedData,
             squared: bool) -> dict[str, Any]:
    """A method's results from its evaluation points (of a :class:`ConvergenceCallback` or
    :func:`run_stagewise`), in original target units — ``loss`` times ``loss_scale``, ``mse`` =
    2 × loss for squared loss (the paper's "square error"), ``error`` for classifiers."""
    curve = []
    for entry in history:
        point = {"units": float(entry["units"]), "seconds": float(entry["seconds"]),
                 "samples": float(entry["samples"]), "loss": data.loss_scale * entry["test_loss"]}
        if entry["test_error"] is not None:
            point["error"] = entry["test_error"]
        if squared:
            point["mse"] = 2.0 * point["loss"]
        if entry.get("val") is not None:
            point["val"] = entry["val"]
        curve.append(point)
    final = curve[-1]
    return {"curve": curve, "final": final, "units": final["units"],
            "wall_seconds": final["seconds"], "elapsed_seconds": elapsed}


def _value_at(curve: list[dict[str, float]], axis: str, limit: float, metric: str) -> float:
    """``metric`` at the last evaluation point with ``axis`` (units or seconds) ≤ ``limit``."""
    eligible = [p for p in curve if p[axis] <= limit]
    return (eligible[-1] if eligible else curve[0])[metric]


def _comparisons(methods: dict[str, dict[str, Any]], metric: str) -> dict[str, Any]:
    """The best SGB variant (the lowest validation loss, mean over seeds), the first units at
    which its chosen run reaches GB's final metric, and every
    method's metric at the smallest final units and the smallest training time of all
    (``at_equal_units``, ``at_equal_wall``) and at the best SGB variant's final units and
    training time (``at_SGB_units``, ``at_SGB_wall``: a method that stopped earlier counts with
    its final, converged, metric)."""
    variants = [m for m in streaming_variants() if m in methods]
    best = min(variants, key=lambda m: methods[m]["val_loss_mean"]) if variants else None
    reach = None
    if best is not None and "GB" in methods:
        target = methods["GB"]["final"][metric]
        reach = next((p["units"] for p in methods[best]["curve"] if p[metric] <= target), None)
    out: dict[str, Any] = {"best_SGB": best, "units_SGB_to_GB_final": reach}
    for key, axis, field in (("equal_units", "units", "units"),
                             ("equal_wall", "seconds", "wall_seconds"),
                             ("SGB_units", "units", "units"), ("SGB_wall", "seconds",
                                                                "wall_seconds")):
        if key.startswith("SGB") and best is None:
            continue
        limit = (methods[best][field] if key.startswith("SGB")
                 else min(m[field] for m in methods.values()))
        out[f"at_{key}"] = {"limit": limit, **{name: _value_at(m["curve"], axis, limit, metric)
                                               for name, m in methods.items()}}
    return out


def table_row(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """One row of the comparison table: ``data``, ``metric``, for every method ``m`` (``None``
    where not run) its final test metric ``m`` (mean over seeds), ``std_m``, ``seeds_m`` (each
    seed's), ``units_m``, ``wall_s_m``, ``passes_m``, ``stop_m``, ``params_m``, ``lr_m`` (the
    rate chosen on the validation split), ``lr_grid_m`` (the rates tried), ``lr_at_edge_m``,
    ``optimizer_m`` and ``schedule_m``; ``best_SGB`` (on validation), ``best_SGB_by``,
    ``units_SGB_to_GB_final`` and the winners ``winner_final`` (the lowest mean), and
    ``winner_at_SGB_units`` and ``winner_at_SGB_wall`` (the best method at the best SGB
    variant's units and training time, see :func:`_comparisons`)."""
    metric, methods = results["metric"], results["methods"]
    config = results["config"]
    comparisons = _comparisons(methods, metric)
    row: dict[str, Any] = {"data": name,
                           "metric": {"error": "error rate", "mse": "MSE"}.get(metric, "loss"),
                           "standardized": True, "best_SGB_by": "validation"}
    row.update({m: methods[m]["mean"] if m in methods else None for m in METHODS})
    for prefix, key in (("std", "std"), ("seeds", "seed_metrics"), ("units", "units"),
                        ("wall_s", "wall_seconds"), ("passes", "passes"),
                        ("stop", "stop_reason"), ("params", "params"), ("lr", "lr"),
                        ("lr_grid", "lr_grid"), ("lr_at_edge", "lr_at_edge")):
        row.update({f"{prefix}_{m}": methods[m][key] if m in methods else None for m in METHODS})
    row.update({f"optimizer_{m}": config["optimizer"] if m in methods else None
                for m in METHODS})
    row.update({f"schedule_{m}": config["schedule"] if m in methods else None for m in METHODS})
    row["best_SGB"] = comparisons["best_SGB"]
    row["units_SGB_to_GB_final"] = comparisons["units_SGB_to_GB_final"]
    row["winner_final"] = min(methods, key=lambda m: methods[m]["mean"])
    for key in ("at_SGB_units", "at_SGB_wall"):
        if key in comparisons:
            scores = {m: v for m, v in comparisons[key].items() if m != "limit"}
            row[f"winner_{key}"] = min(scores, key=scores.__getitem__)
    return row


def _log_tensorboard(logs: dict[str, Any], results: dict[str, Any]) -> None:
    """Each method's test curve in the original target units, into the method's own run, in the
    tag scheme of :mod:`torchboost.lightning.scalars`: ``test/mse`` for squared loss (the
    Lightning runs' ``test/loss`` is half the MSE of standardised targets); classifiers' error
    rates are already there as ``test/error``."""
    for method in results["methods"].values():
        if not any("mse" in point for point in method["curve"]):
            continue
        writer = _logger(logs, method["run"]).experiment
        for point in method["curve"]:
            writer.add_scalar(tag("test", "mse"), point["mse"], int(point["units"]))
        writer.flush()


def _write_outputs(out: Path, config: ExperimentConfig, results: dict[str, Any]) -> None:
    metric, methods = results["metric"], results["methods"]
    label = {"error": "test error rate", "mse": "test MSE"}.get(metric, f"test {config.loss} loss")
    markers = {}
    if "GB" in methods:
        gb_curve = methods["GB"]["curve"]
        markers["GB: next learner"] = [
            next(((p["units"], p[metric]) for p in gb_curve
                  if p["units"] >= stage["compute_units"]),
                 (gb_curve[-1]["units"], gb_curve[-1][metric]))
            for stage in methods["GB"]["stages"]]
    curves = {name: [(p["units"], p[metric]) for p in m["curve"]] for name, m in methods.items()}
    fig = plot_compute_curves(curves, title=f"{config.name}: {label} vs compute", ylabel=label,
                              markers=markers)
    results["figure"] = str(save_figure(fig, out / "compute.png"))
    walls = {name: [(p["seconds"], p[metric]) for p in m["curve"]] for name, m in methods.items()}
    fig = plot_compute_curves(walls, title=f"{config.name}: {label} vs training time",
                              ylabel=label, xlabel="training wall time (s, evaluations excluded)")
    results["wall_figure"] = str(save_figure(fig, out / "wall.png"))
    (out / "results.json").write_text(json.dumps(results, indent=2))
