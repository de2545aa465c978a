"""SGB against stagewise GB and the base learner on one data set, with compute accounting:
the SGB paper's Fig. 2 (test loss vs training compute) and Table 1 (final test losses).

All three methods see the same standardised features (statistics from a warm-up prefix of the
training stream only), the same weak-learner architecture, loss and optimizer settings, and are
evaluated on the held-out set every ``K`` compute units (1 unit = one weak-learner prediction of
one example, an update = 2; Hu et al. 2017, Sec. 6.2).

One driver for all of it, :mod:`torchboost.lightning`: SGB and the base learner stream through a
Lightning ``Trainer`` (:class:`~torchboost.lightning.StreamingBoosterModule` driven by a
:class:`~torchboost.lightning.StreamingCallback`, the ``passes`` passes being one
:class:`~torchboost.data.MultiPassStream` epoch), stagewise GB runs through
:func:`~torchboost.lightning.run_stagewise`.
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

from torchboost.boosters import SGB, Booster, SingleLearner, StagewiseGB
from torchboost.configs import ExperimentConfig, load_dataset
from torchboost.data import Dataset, DataStream, MultiPassStream
from torchboost.lightning.callback import StreamingCallback
from torchboost.lightning.compare import fit_streaming
from torchboost.lightning.stagewise import run_stagewise
from torchboost.plotting import plot_compute_curves, save_figure

__all__ = ["EVAL_GROWTH", "PreparedData", "make_boosters", "prepare_data", "run_comparison"]

#: Besides every ``K`` units, evaluate whenever compute has grown by this factor since the last
#: evaluation, so that the log-log compute plots have early points too.
EVAL_GROWTH = 1.25


@dataclass(frozen=True)
class PreparedData:
    """Standardised training and test tensors of one data set.

    Regression targets are standardised with the training mean and standard deviation
    ``target_std``; losses are reported back in the original units (``loss_scale``: ``σ²`` for
    squared loss, ``σ`` for absolute loss), so that tables compare with the literature.
    """

    dataset: Dataset
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    loss_scale: float = 1.0

    def stream(self, batch_size: int, seed: int) -> DataStream:
        """One pass over the training set in the order given by ``seed``."""
        return DataStream(self.x_train, self.y_train, batch_size=batch_size, seed=seed,
                          standardize=None)


def prepare_data(config: ExperimentConfig, dataset: Dataset | None = None) -> PreparedData:
    """Load (or take) the data set, subsample ``max_train`` rows, standardise the features with
    the statistics of the warm-up prefix of the first training pass."""
    ds = dataset if dataset is not None else load_dataset(config)
    x_train, y_train = ds.x_train, ds.y_train
    if config.max_train is not None and config.max_train < len(x_train):
        keep = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(config.seed))
        x_train, y_train = x_train[keep[:config.max_train]], y_train[keep[:config.max_train]]
    first = DataStream(x_train, y_train, batch_size=config.batch_size, seed=config.seed)
    next(iter(first))  # fits the warm-up statistics (or nothing, for images)
    y_test, loss_scale = ds.y_test, 1.0
    if ds.task == "regression" and config.loss in ("squared", "absolute"):
        mean, std = y_train.mean(), y_train.std().clamp_min(1e-12)
        y_train, y_test = (y_train - mean) / std, (y_test - mean) / std
        loss_scale = float(std) ** (2 if config.loss == "squared" else 1)
    return PreparedData(ds, first.transform(x_train), y_train, first.transform(ds.x_test),
                        y_test, loss_scale)


def make_boosters(config: ExperimentConfig, data: PreparedData) -> dict[str, Booster]:
    """SGB, stagewise GB and the base learner, each with identically initialised learners."""
    factory = config.learner.factory(data.dataset, config.n_outputs)
    common: dict[str, Any] = {"n_outputs": config.n_outputs, "y0": "mean",
                              "optimizer_kwargs": {"lr": config.lr}}
    builders: dict[str, Callable[[], Booster]] = {
        "SGB": lambda: SGB(factory, config.loss, n_learners=config.n_learners, step=config.step,
                           **common),
        "GB": lambda: StagewiseGB(factory, config.loss, n_learners=config.n_learners,
                                  step=config.step, **common),
        "base": lambda: SingleLearner(factory, config.loss, **common),
    }
    boosters = {}
    for name, build in builders.items():
        torch.manual_seed(config.seed)
        boosters[name] = build()
    return boosters


def run_comparison(config: ExperimentConfig, out_dir: str | Path, *, progress: bool = True,
                   dataset: Dataset | None = None) -> dict[str, Any]:
    """Train SGB and the base learner on ``config.passes`` passes of the training stream through
    Lightning (:func:`~torchboost.lightning.compare.fit_streaming`, with Lightning's progress bar
    if ``progress``) and stagewise GB with :func:`~torchboost.lightning.run_stagewise`, all
    evaluated every ``K`` compute units (and geometrically early on); write ``results.json``,
    the compute plot ``compute.png`` and TensorBoard logs under ``out_dir``; return the results.

    TensorBoard: ``tensorboard/<name>`` holds the curves in original target units (tags
    ``{SGB,GB,base}/test_{loss,mse,error}`` against units, ``SGB/anytime_loss``, ``SGB/edge``);
    ``tensorboard/<name>/{SGB,base,GB}`` the Lightning runs' own tags (see
    :class:`~torchboost.lightning.StreamingCallback` and :func:`run_stagewise`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(config, dataset)
    boosters = make_boosters(config, data)
    sgb_units = boosters["SGB"].units_per_example * len(data.x_train) * config.passes
    every = sgb_units / config.eval_points
    logs = {"save_dir": str(out), "name": "tensorboard", "version": config.name,
            "default_hp_metric": False}
    results: dict[str, Any] = {"config": config.to_dict(), "eval_every_units": every}

    squared = boosters["SGB"].loss.name == "squared"
    callbacks = {}
    for name in ("SGB", "base"):
        callbacks[name] = StreamingCallback(data.x_test, data.y_test, every,
                                            eval_growth=EVAL_GROWTH)
        stream = MultiPassStream(lambda p: data.stream(config.batch_size, config.seed + p),
                                 config.passes)
        started = time.perf_counter()
        fit_streaming(boosters[name], stream, callbacks[name], progress=progress,
                      description=f"{config.name}: {name}",
                      logger=TensorBoardLogger(**logs, sub_dir=name))
        results[name] = _summary(callbacks[name].history, time.perf_counter() - started,
                                 data.loss_scale, squared)

    gb_logger = TensorBoardLogger(**logs, sub_dir="GB")
    started = time.perf_counter()
    gb_run = run_stagewise(boosters["GB"], list(data.stream(config.batch_size, config.seed)),
                           data.x_test, data.y_test, eval_every_units=every,
                           eval_growth=EVAL_GROWTH, loggers=gb_logger,
                           max_epochs=config.gb_max_epochs, patience=config.gb_patience,
                           progress=progress)
    gb_logger.finalize("success")
    results["GB"] = {**_summary(gb_run["history"], time.perf_counter() - started,
                                data.loss_scale, squared), "stages": gb_run["stages"]}
    sgb = boosters["SGB"]
    anytime = [callbacks["SGB"].evaluator.scores(sgb, n_learners=0), *callbacks["SGB"].anytime]
    results["SGB"]["anytime"] = [data.loss_scale * scores["loss"] for scores in anytime]
    results["SGB"]["edges"] = sgb.edges().tolist()
    metric = _metric(results)
    results["metric"] = metric
    results["units_to_reach_gb_final"] = _units_to_reach(results["SGB"]["curve"],
                                                         results["GB"]["final"][metric], metric)
    _log_tensorboard(TensorBoardLogger(**logs), results)
    _write_outputs(out, config, results)
    return results


def _summary(history: list[dict[str, Any]], seconds: float, loss_scale: float,
             squared: bool) -> dict[str, Any]:
    """A method's results: its evaluation points (of :class:`StreamingCallback` or
    :func:`run_stagewise`) in original target units — ``loss`` times ``loss_scale``, ``mse`` =
    2 × loss for squared loss (the paper's "square error"), ``error`` for classifiers — the
    last of them, and the wall time."""
    curve = []
    for entry in history:
        point = {"units": float(entry["units"]), "samples": float(entry["samples"]),
                 "loss": loss_scale * entry["test_loss"]}
        if entry["test_error"] is not None:
            point["error"] = entry["test_error"]
        if squared:
            point["mse"] = 2.0 * point["loss"]
        curve.append(point)
    return {"curve": curve, "final": curve[-1], "wall_seconds": seconds}


def _units_to_reach(curve: list[dict[str, float]], target: float, metric: str) -> float | None:
    """First compute budget at which a curve's ``metric`` is at or below ``target``."""
    return next((p["units"] for p in curve if p[metric] <= target), None)


def _metric(results: dict[str, Any]) -> str:
    """What Table 1 reports: error rate for classifiers, MSE for squared loss, else the loss."""
    final = results["SGB"]["final"]
    return next(key for key in ("error", "mse", "loss") if key in final)


def _log_tensorboard(logger: Any, results: dict[str, Any]) -> None:
    writer = logger.experiment
    for name in ("SGB", "GB", "base"):
        for point in results[name]["curve"]:
            for key in ("loss", "mse", "error"):
                if key in point:
                    writer.add_scalar(f"{name}/test_{key}", point[key], int(point["units"]))
    for k, loss in enumerate(results["SGB"]["anytime"]):
        writer.add_scalar("SGB/anytime_loss", loss, k)
    for i, edge in enumerate(results["SGB"]["edges"]):
        writer.add_scalar("SGB/edge", edge, i + 1)
    writer.flush()


def _write_outputs(out: Path, config: ExperimentConfig, results: dict[str, Any]) -> None:
    metric = _metric(results)
    curves = {name: [(p["units"], p[metric]) for p in results[name]["curve"]]
              for name in ("SGB", "GB", "base")}
    gb_curve = results["GB"]["curve"]
    markers = {"GB: next learner": [
        next(((p["units"], p[metric]) for p in gb_curve if p["units"] >= stage["compute_units"]),
             (gb_curve[-1]["units"], gb_curve[-1][metric]))
        for stage in results["GB"]["stages"]]}
    label = {"error": "test error rate", "mse": "test MSE"}.get(metric, f"test {config.loss} loss")
    fig = plot_compute_curves(curves, title=f"{config.name}: {label} vs compute",
                              ylabel=label, markers=markers)
    results["figure"] = str(save_figure(fig, out / "compute.png"))
    (out / "results.json").write_text(json.dumps(results, indent=2))
