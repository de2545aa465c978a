"""SGB against stagewise GB and the base learner on one data set, with compute accounting:
the SGB paper's Fig. 2 (test loss vs training compute) and Table 1 (final test losses).

All three methods see the same standardised features (statistics from a warm-up prefix of the
training stream only), the same weak-learner architecture, loss and optimizer settings, and are
evaluated on the held-out set every ``K`` compute units (1 unit = one weak-learner prediction of
one example, an update = 2; Hu et al. 2017, Sec. 6.2).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from torchboost.boosters import SGB, Booster, SingleLearner, StagewiseGB
from torchboost.configs import ExperimentConfig, load_dataset
from torchboost.data import Dataset, DataStream
from torchboost.lightning.evaluation import evaluate_held_out
from torchboost.plotting import plot_compute_curves, save_figure

__all__ = ["PreparedData", "make_boosters", "prepare_data", "run_comparison"]


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


class _Evaluator:
    """Evaluates a booster on the test set every ``every`` compute units, and more densely at the
    start (after growing the budget by 25 %) so that log-scale plots have early points too."""

    def __init__(self, data: PreparedData, every: float, batch: int = 4096) -> None:
        self.data, self.every, self.batch = data, every, batch
        self.next_at = 0.0
        self.history: list[dict[str, float]] = []

    def __call__(self, booster: Booster, force: bool = False) -> None:
        if not force and booster.compute_units < self.next_at:
            return
        self.next_at = min(booster.compute_units + self.every, 1.25 * booster.compute_units)
        scores = evaluate_held_out(booster, self.data.x_test, self.data.y_test,
                                   batch_size=self.batch)
        scores["loss"] *= self.data.loss_scale
        if booster.loss.name == "squared":
            scores["mse"] = 2.0 * scores["loss"]  # the paper's "square error"
        self.history.append({"units": float(booster.compute_units),
                             "samples": float(booster.samples_seen), **scores})


def _passes(data: PreparedData, config: ExperimentConfig) -> Iterator[tuple[Tensor, Tensor]]:
    for p in range(config.passes):
        yield from data.stream(config.batch_size, config.seed + p)


def run_comparison(config: ExperimentConfig, out_dir: str | Path, *, progress: bool = True,
                   dataset: Dataset | None = None) -> dict[str, Any]:
    """Train SGB (streaming), stagewise GB and the base learner; write ``results.json``, the
    compute plot ``compute.png`` and TensorBoard logs under ``out_dir``; return the results."""
    from lightning.pytorch.loggers import TensorBoardLogger

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(config, dataset)
    boosters = make_boosters(config, data)
    n_batches = len(data.stream(config.batch_size, config.seed)) * config.passes
    sgb_units = boosters["SGB"].units_per_example * len(data.x_train) * config.passes
    every = sgb_units / config.eval_points
    logger = TensorBoardLogger(save_dir=str(out), name="tensorboard", version=config.name)
    results: dict[str, Any] = {"config": config.to_dict(), "eval_every_units": every}

    for name in ("SGB", "base"):
        booster, evaluator = boosters[name], _Evaluator(data, every)
        started = time.perf_counter()
        for x, y in tqdm(_passes(data, config), total=n_batches, disable=not progress,
                         desc=f"{config.name}: {name}", unit="batch"):
            booster.learn(x, y)
            evaluator(booster)
        evaluator(booster, force=True)
        results[name] = _summary(evaluator.history, time.perf_counter() - started)

    gb, evaluator = boosters["GB"], _Evaluator(data, every)
    batches = list(data.stream(config.batch_size, config.seed))
    started = time.perf_counter()
    stages = gb.fit(batches, max_epochs=config.gb_max_epochs, patience=config.gb_patience,
                    progress=progress, on_batch_end=evaluator)
    evaluator(gb, force=True)
    results["GB"] = {**_summary(evaluator.history, time.perf_counter() - started),
                     "stages": stages}
    results["SGB"]["anytime"] = [
        data.loss_scale * evaluate_held_out(boosters["SGB"], data.x_test, data.y_test,
                                            n_learners=k)["loss"]
        for k in range(config.n_learners + 1)]
    results["SGB"]["edges"] = boosters["SGB"].edges().tolist()
    metric = _metric(results)
    results["metric"] = metric
    results["units_to_reach_gb_final"] = _units_to_reach(results["SGB"]["curve"],
                                                         results["GB"]["final"][metric], metric)
    _log_tensorboard(logger, results)
    _write_outputs(out, config, results)
    return results


def _summary(history: list[dict[str, float]], seconds: float) -> dict[str, Any]:
    return {"curve": history, "final": history[-1], "wall_seconds": seconds}


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
