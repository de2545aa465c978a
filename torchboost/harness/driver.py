"""The comparison driver: SGB (and its Newton / learned-step variants) against stagewise GB, the
base learner and a wide network, each run to convergence, with compute accounting — the SGB
paper's Fig. 2 (test metric vs training compute) and Table 1 (final test metrics), with honest
baselines. ``experiments/sgb_vs_gb.py``, ``torchboost demo`` and ``torchboost run`` all use
:func:`run_comparison`.

**Data.** ``max_train`` training rows are subsampled (seed ``seed``), ``val_fraction`` of them
split off as a validation set that is never trained on; every stopping decision uses it and the
test set is only reported. Features are standardised with statistics of the warm-up prefix of the
first training pass; regression targets with the training mean and standard deviation (results
are reported in the original units).

**Methods** (``config.methods``; all built by :func:`build_seeded` from the same seed, the same
learner factory, ``y0="mean"`` and the same optimizer learning rate):

* ``base`` — one weak learner trained on the loss (:class:`~torchboost.SingleLearner`);
* ``wide`` — one module with the ensemble's parameter count
  (:meth:`~torchboost.harness.LearnerConfig.widened`) trained on the loss by one Adam; one
  of its predictions costs ``N`` weak-learner predictions (``prediction_units=N``);
* ``GB`` — stagewise GB with gradient targets (the paper's baseline), each stage trained to
  convergence with early stopping on the validation loss (patience ``gb_patience`` epochs, at
  most ``gb_max_epochs``);
* ``SGB`` — the paper: gradient targets, fixed step; ``SGB_newton`` — ``targets="newton"``;
  ``SGB_learned`` — ``targets="newton", step="learned"`` (only ``step="learned"`` for a loss
  without a Hessian). A Newton variant of a loss without a Hessian is skipped (``skipped``).

**Seeding.** Every booster is built with the torch RNG seeded by ``seed``; pass (or GB epoch)
``p`` over the training rows visits them in the order of seed ``seed + p``.

**Stopping.** GB runs first. The streaming methods (all but GB) stream passes over the
training rows one after another through Lightning (:func:`~torchboost.harness.fit_streaming`,
a :class:`~torchboost.harness.ConvergenceCallback` on a :class:`~torchboost.data.MultiPassStream`
of ``max_passes`` passes) and stop by :class:`~torchboost.harness.StoppingRule`: a plateau of
the validation loss (less than ``plateau_tol`` relative improvement over the last quarter of
the units spent, after ``min_passes`` passes), the compute budget (``max_units``, default GB's
total units), or ``max_passes``.

**Schedules and rates** (``config.schedule``, ``config.lr_grid``). With ``"cosine"`` every
method runs a stated budget under a cosine decay of its rate to 0 (no plateau or unit stop): the
streaming methods ``max_passes`` passes, GB :func:`gb_epochs_for_equal_units` epochs per stage
(its total units closest to the ensembles'), each stage under its own cosine and keeping its
best epoch on the validation split. With a grid, every method runs once per rate and reports the
run with the lowest final validation loss (``lr``, ``val_loss``), and every candidate's
(``lr_candidates``): the rate is chosen on validation data, the reported metric is the final
test metric of that run.

**Compute** (Hu et al. 2017, Sec. 6.2): 1 unit = one weak-learner prediction of one example, an
update = 2. Streaming boosters and the wide net spend ``3N`` units per example, the base learner
3, GB's stage ``i`` spends ``i + 3``. Every method is evaluated on the test set every ``K``
units (and geometrically early on); wall seconds are training time, evaluations excluded.
"""

from __future__ import annotations

import json
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
from torchboost.learners.schedules import LRSchedulerFactory, cosine_schedule
from torchboost.lightning.cuda_check import plain_cuda_check
from torchboost.lightning.scalars import tag
from torchboost.losses import get_loss

__all__ = ["EVAL_GROWTH", "PreparedData", "make_boosters", "method_builders",
           "prepare_data", "run_comparison", "table_row"]

#: Besides every ``K`` units, evaluate whenever compute has grown by this factor since the last
#: evaluation, so that the log-scale plots have early points too.
EVAL_GROWTH = 1.25

#: Metric keys of a curve point, in the order of preference for the tables.
_METRIC_KEYS = ("error", "mse", "loss")


@dataclass(frozen=True)
class PreparedData:
    """Standardised training, validation and test tensors of one data set.

    Regression targets are standardised with the training mean and standard deviation
    ``target_std``; losses are reported back in the original units (``loss_scale``: ``σ²`` for
    squared loss, ``σ`` for absolute loss), so that tables compare with the literature.
    """

    dataset: Dataset
    x_train: Tensor
    y_train: Tensor
    x_val: Tensor
    y_val: Tensor
    x_test: Tensor
    y_test: Tensor
    loss_scale: float = 1.0

    def stream(self, batch_size: int, seed: int) -> DataStream:
        """One pass over the training rows in the order given by ``seed``."""
        return DataStream(self.x_train, self.y_train, batch_size=batch_size, seed=seed,
                          standardize=None)


def prepare_data(config: ExperimentConfig, dataset: Dataset | None = None) -> PreparedData:
    """Load (or take) the data set; subsample ``max_train`` training rows and split off
    ``val_fraction`` of them for validation (one permutation of seed ``seed``); standardise the
    features with the statistics of the warm-up prefix of the first training pass."""
    ds = dataset if dataset is not None else load_dataset(config)
    order = torch.randperm(len(ds.x_train), generator=torch.Generator().manual_seed(config.seed))
    if config.max_train is not None:
        order = order[:config.max_train]
    n_val = max(1, round(config.val_fraction * len(order)))
    if n_val >= len(order):
        raise ValueError(f"{len(order)} training rows leave none after the validation split")
    val, train = order[:n_val], order[n_val:]
    x_train, y_train = ds.x_train[train], ds.y_train[train]
    y_val, y_test = ds.y_train[val], ds.y_test
    first = DataStream(x_train, y_train, batch_size=config.batch_size, seed=config.seed)
    next(iter(first))  # fits the warm-up statistics (or nothing, for images)
    loss_scale = 1.0
    if ds.task == "regression" and config.loss in ("squared", "absolute"):
        mean, std = y_train.mean(), y_train.std().clamp_min(1e-12)
        y_train, y_val, y_test = (y_train - mean) / std, (y_val - mean) / std, (y_test - mean) / std
        loss_scale = float(std) ** (2 if config.loss == "squared" else 1)
    return PreparedData(ds, first.transform(x_train), y_train, first.transform(ds.x_train[val]),
                        y_val, first.transform(ds.x_test), y_test, loss_scale)


def method_builders(config: ExperimentConfig, data: PreparedData, lr: float | None = None,
                    schedules: dict[str, LRSchedulerFactory] | None = None,
                    ) -> tuple[dict[str, Callable[[], Booster]], dict[str, str]]:
    """Zero-argument constructors of the configured methods (see the module docstring) at the
    learning rate ``lr`` (default ``config.lr``) and, per method, the learning-rate schedule in
    ``schedules`` (none: a constant rate), and the methods skipped with the reason (Newton
    targets for a loss without a Hessian)."""
    n = config.n_learners
    # the SGB paper's setting: Adam (the learners' default is schedule-free, horizon-free
    # learning; experiments/horizon_free.py compares the two), on data standardised above for
    # every method alike, which the models take as given, not through running statistics
    common: dict[str, Any] = {"n_outputs": config.n_outputs, "y0": "mean",
                              "optimizer": torch.optim.Adam,
                              "optimizer_kwargs": {"lr": config.lr if lr is None else lr},
                              "lr_fan_in": config.lr_fan_in, "standardize": False}
    hessian = get_loss(config.loss).has_hessian
    schedules = schedules or {}

    def builder(name: str) -> Callable[[], Booster]:
        inputs = MethodInputs(
            config, config.learner.factory(data.dataset, config.n_outputs),
            config.learner.widened(n).factory(data.dataset, config.n_outputs),
            config.learner.wide_prediction_units(n), common, schedules.get(name), hessian)
        return lambda: METHODS[name].build(inputs)

    skipped = {name: f"{config.loss} loss has no Hessian (no Newton targets)"
               for name in config.methods if METHODS[name].newton and not hessian}
    builders = {m: builder(m) for m in config.methods if m not in skipped}
    return builders, skipped


def gb_epochs_for_equal_units(config: ExperimentConfig) -> int:
    """Epochs per GB stage under ``schedule="cosine"``: GB's units over all stages,
    ``Σ_i (i + 3)`` per example and epoch, closest to the ensembles' ``3N`` per example and
    pass over ``max_passes`` passes (at least 1)."""
    n = config.n_learners
    return max(1, round(config.max_passes * 3 * n / sum(i + 3 for i in range(n))))


def method_schedules(config: ExperimentConfig,
                     batches_per_pass: int) -> dict[str, LRSchedulerFactory]:
    """Every method's schedule: none for ``schedule="constant"``; for ``"cosine"`` a cosine
    decay over the streaming methods' ``max_passes`` passes and over each GB stage's
    :func:`gb_epochs_for_equal_units` epochs."""
    if config.schedule == "constant":
        return {}
    streaming = cosine_schedule(config.max_passes * batches_per_pass)
    stagewise = cosine_schedule(gb_epochs_for_equal_units(config) * batches_per_pass)
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
    """Run every configured method to convergence (module docstring), evaluated on the test set
    every ``K`` compute units; write ``results.json``, ``compute.png`` (test metric vs units),
    ``wall.png`` (vs training seconds) and TensorBoard logs under ``out_dir``; return the results.

    ``K`` is ``max_units`` (else GB's most units, ``gb_max_epochs`` epochs per stage, else the
    most units of ``max_passes`` passes) over ``eval_points``. TensorBoard: one run per method,
    ``tensorboard/<name>/<method>``, in the tag scheme of :mod:`torchboost.lightning.scalars`
    (:class:`~torchboost.lightning.StreamingCallback`, :func:`~torchboost.harness.run_stagewise`),
    so methods overlay on one chart per tag; regression runs add ``test/mse`` in the original
    target units.

    Returns ``{"config", "metric", "budget_units", "eval_every_units", "methods": {name: {...}},
    "skipped", "best_SGB", "units_SGB_to_GB_final", "at_equal_units", "at_equal_wall",
    "figure", "wall_figure"}``; each method has its test ``curve`` (points with ``units``,
    ``seconds``, ``samples``, ``loss`` and ``mse`` / ``error`` where they apply, ``val``), its
    ``final`` point, ``units``, ``wall_seconds`` (training), ``elapsed_seconds`` (with
    evaluations), ``passes``, ``stop_reason`` and ``params``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(config, dataset)
    builders, skipped = method_builders(config, data)
    n = len(data.x_train)
    n_learners = config.n_learners
    cosine = config.schedule == "cosine"
    gb_epochs = gb_epochs_for_equal_units(config) if cosine else config.gb_max_epochs
    if config.max_units is not None:
        scale = float(config.max_units)
    elif "GB" in builders:
        scale = n * gb_epochs * sum(i + 3 for i in range(n_learners))
    else:
        scale = n * config.max_passes * 3 * n_learners
    every = scale / config.eval_points
    grid = list(config.lr_grid) if config.lr_grid else [config.lr]
    logs = {"save_dir": str(out), "name": "tensorboard", "version": config.name,
            "default_hp_metric": False}
    run = _MethodRun(config, data, every, gb_epochs, logs, progress)
    schedules = method_schedules(config, run.batches_per_pass)
    methods: dict[str, dict[str, Any]] = {}
    order = ["GB", *[m for m in builders if m != "GB"]] if "GB" in builders else list(builders)
    for name in order:
        tried = []
        for lr in grid:
            build = method_builders(config, data, lr, schedules)[0][name]
            booster = build_seeded(build, config.seed)
            summary = run(name, booster, lr if len(grid) > 1 else None)
            summary["lr"] = lr
            summary["val_loss"] = float(booster.evaluate(data.x_val, data.y_val)["loss"])
            tried.append(summary)
        best = min(tried, key=lambda t: t["val_loss"])
        metric_key = next(key for key in _METRIC_KEYS if key in best["final"])
        methods[name] = {**best, "lr_candidates": [
            {"lr": t["lr"], "val_loss": t["val_loss"], "test": t["final"][metric_key],
             "passes": t["passes"]} for t in tried]}
        if name == "GB" and run.budget is None and not cosine:
            run.budget = methods["GB"]["units"]
    budget = run.budget if not cosine else None

    ordered = {m: methods[m] for m in config.methods if m in methods}
    metric = next(key for key in _METRIC_KEYS if key in next(iter(ordered.values()))["final"])
    results: dict[str, Any] = {"config": config.to_dict(), "metric": metric,
                               "budget_units": budget, "eval_every_units": every,
                               "gb_epochs_per_stage": gb_epochs,
                               "methods": ordered, "skipped": skipped}
    results.update(_comparisons(ordered, metric))
    _log_tensorboard(logs, results)
    _write_outputs(out, config, results)
    return results


class _MethodRun:
    """Trains one method's booster as the module docstring says and returns its summary (see
    :func:`run_comparison`): GB stage by stage (``gb_epochs`` epochs at most per stage; under a
    cosine schedule all of them), every other method through Lightning over seeded passes until
    the stopping rule (under a cosine schedule: all ``max_passes`` passes)."""

    def __init__(self, config: ExperimentConfig, data: PreparedData, every: float,
                 gb_epochs: int, logs: dict[str, Any], progress: bool) -> None:
        self.config, self.data, self.every, self.gb_epochs = config, data, every, gb_epochs
        self.logs, self.progress = logs, progress
        self.squared = get_loss(config.loss).name == "squared"
        self.batches_per_pass = len(self.pass_stream(0))
        #: the streaming methods' unit budget (``max_units``, else GB's units once it ran)
        self.budget = config.max_units

    def pass_stream(self, p: int) -> DataStream:
        return self.data.stream(self.config.batch_size, self.config.seed + p)

    def __call__(self, name: str, booster: Booster, lr: float | None) -> dict[str, Any]:
        run_name = name if lr is None else f"{name}/lr={lr:g}"
        if METHODS[name].kind == "stagewise":
            return self.stagewise(booster, run_name)
        return self.streaming(name, booster, run_name)

    def stagewise(self, gb: StagewiseGB, run_name: str) -> dict[str, Any]:
        config, data = self.config, self.data
        epochs = iter(range(1 << 30))
        logger = _logger(self.logs, run_name)
        started = time.perf_counter()
        patience = self.gb_epochs if config.schedule == "cosine" else config.gb_patience
        run = run_stagewise(gb, lambda: self.pass_stream(next(epochs)), data.x_test, data.y_test,
                            eval_every_units=self.every, eval_growth=EVAL_GROWTH, loggers=logger,
                            max_epochs=self.gb_epochs, patience=patience,
                            progress=self.progress, validation=(data.x_val, data.y_val),
                            val_metric="loss")
        logger.finalize("success")
        epochs_run = sum(stage["epochs"] for stage in run["stages"])
        return {**_summary(run["history"], time.perf_counter() - started, data, self.squared),
                "passes": epochs_run, "params": parameter_count(gb),
                "stop_reason": "epochs" if config.schedule == "cosine" else "converged",
                "stages": run["stages"]}

    def streaming(self, name: str, booster: Booster, run_name: str) -> dict[str, Any]:
        config, data = self.config, self.data
        if config.schedule == "cosine":
            rule = StoppingRule(config.plateau_tol, config.max_passes, config.max_passes, None)
        else:
            rule = StoppingRule(config.plateau_tol, min(config.min_passes, config.max_passes),
                                config.max_passes, self.budget)
        # the validation loss is smoother than the error rate on a small split
        callback = ConvergenceCallback(data.x_test, data.y_test, self.every, val_x=data.x_val,
                                       val_y=data.y_val, rule=rule,
                                       pass_batches=self.batches_per_pass, val_metric="loss",
                                       eval_growth=EVAL_GROWTH)
        started = time.perf_counter()
        stream: MultiPassStream | BatchGroups = MultiPassStream(self.pass_stream,
                                                                config.max_passes)
        if config.rounds_per_step > 1:
            stream = BatchGroups(stream, config.rounds_per_step)
        fit_streaming(booster, stream, callback, progress=self.progress,
                      description=f"{config.name}: {run_name}",
                      logger=_logger(self.logs, run_name))
        out = {**_summary(callback.history, time.perf_counter() - started, data, self.squared),
               "passes": round(booster.samples_seen / len(data.x_train), 4),
               "stop_reason": callback.stop_reason, "params": parameter_count(booster)}
        if METHODS[name].kind == "streaming":
            anytime = [callback.evaluator.scores(booster, n_learners=0), *callback.anytime]
            out["anytime"] = [data.loss_scale * s["loss"] for s in anytime]
            out["edges"] = booster.edges().tolist()
            if booster.step_rule is not None:
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
    """The best SGB variant, the first units at which it reaches GB's final metric, and every
    method's metric at the smallest final units and the smallest training time of all
    (``at_equal_units``, ``at_equal_wall``) and at the best SGB variant's final units and
    training time (``at_SGB_units``, ``at_SGB_wall``: a method that stopped earlier counts with
    its final, converged, metric)."""
    variants = [m for m in streaming_variants() if m in methods]
    best = min(variants, key=lambda m: methods[m]["final"][metric]) if variants else None
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
    """One row of the comparison table: ``data``, ``metric``, the final test metric of every
    method (``None`` where not run), ``units_<method>``, ``wall_s_<method>``,
    ``passes_<method>``, ``stop_<method>``, ``params_<method>``, ``lr_<method>`` (the rate
    chosen on the validation split), ``best_SGB``,
    ``units_SGB_to_GB_final`` and the winners ``winner_final``, ``winner_at_SGB_units`` and
    ``winner_at_SGB_wall`` (the best method at the best SGB variant's units and training time,
    see :func:`_comparisons`)."""
    metric, methods = results["metric"], results["methods"]
    comparisons = _comparisons(methods, metric)
    row: dict[str, Any] = {"data": name,
                           "metric": {"error": "error rate", "mse": "MSE"}.get(metric, "loss")}
    row.update({m: methods[m]["final"][metric] if m in methods else None for m in METHODS})
    for prefix, key in (("units", "units"), ("wall_s", "wall_seconds"), ("passes", "passes"),
                        ("stop", "stop_reason"), ("params", "params"), ("lr", "lr")):
        row.update({f"{prefix}_{m}": methods[m][key] if m in methods else None for m in METHODS})
    row["best_SGB"] = comparisons["best_SGB"]
    row["units_SGB_to_GB_final"] = comparisons["units_SGB_to_GB_final"]
    row["winner_final"] = min(methods, key=lambda m: methods[m]["final"][metric])
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
    for name, method in results["methods"].items():
        if not any("mse" in point for point in method["curve"]):
            continue
        writer = _logger(logs, name).experiment
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
