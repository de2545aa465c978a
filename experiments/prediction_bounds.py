"""What bounding a regression booster's predictions by the labels seen does (issue "Nothing left
to break": ``bound_predictions``, on by default).

    OMP_NUM_THREADS=1 python experiments/prediction_bounds.py      # ~5 min on one core

Every stream of the data folder's ``regression/`` (``--data-dir``, ``docs/guide/data.md``:
kin40k, protein, pol, keggundirected; numeric CSVs, target last) and abalone (bundled) is read
**in its file order**, its first 90 % as a one-pass stream (batch 32) and its last 10 % as the
test rows, so that the test rows may lie outside what the stream showed (a temporal split, not a
shuffled one). On each, SGB at the library's defaults, ``SGB(TwoLayerNet(d, 10, activation=a),
n_learners=16)``, with the default sigmoid learners and with ReLU learners, each with the bound
(default) and without (``bound_predictions=False``), same seed. Reported, in units of the test
labels' variance: the prequential MSE over the stream (the predictions ``learn`` returned before
each update) and the test MSE after the pass. Writes
``experiments/results/prediction_bounds/results.json`` and
``docs/figures/prediction_bounds/bounds.png`` (one panel per metric, bars per stream).
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import torch

from torchboost import SGB, TwoLayerNet
from torchboost.data.folder import add_data_dir_option, dataset_path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "prediction_bounds"
FIGURE = ROOT / "docs" / "figures" / "prediction_bounds" / "bounds.png"
STREAMS = ("kin40k", "protein", "pol", "keggundirected", "abalone")
VARIANTS = {"sigmoid": ("sigmoid", True), "sigmoid, unbounded": ("sigmoid", False),
            "relu": ("relu", True), "relu, unbounded": ("relu", False)}


def read(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream's rows in file order: features ``(n, d)`` and targets ``(n,)`` (abalone:
    the copy bundled with the library, ``sex`` one-hot)."""
    if name == "abalone":
        rows = np.genfromtxt(ROOT / "torchboost" / "datasets" / "abalone.csv", delimiter=",",
                             skip_header=1, dtype=None, encoding="utf-8")
        sex = np.array([[row[0] == s for s in "MFI"] for row in rows], dtype=np.float32)
        numbers = np.array([list(row)[1:] for row in rows], dtype=np.float32)
        features = np.concatenate([sex, numbers[:, :-1]], axis=1)
        return torch.from_numpy(features), torch.from_numpy(numbers[:, -1])
    try:
        path = dataset_path(name)
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from None
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return torch.from_numpy(table[:, :-1]), torch.from_numpy(table[:, -1])


def run(name: str, activation: str, bound: bool, seed: int = 0) -> dict[str, float]:
    x, y = read(name)
    cut = int(0.9 * len(y))
    torch.manual_seed(seed)
    booster = SGB(lambda: TwoLayerNet(x.shape[1], 10, activation=activation), n_learners=16,
                  bound_predictions=bound)
    squared, start = 0.0, time.perf_counter()
    for i in range(0, cut, 32):
        xb, yb = x[i:min(i + 32, cut)], y[i:min(i + 32, cut)]
        squared += float((booster.learn(xb, yb)[:, 0] - yb).double().square().sum())
    variance = float(y[cut:].double().var())
    test = float((booster.predict(x[cut:])[:, 0] - y[cut:]).double().square().mean())
    return {"prequential_mse": squared / cut / variance, "test_mse": test / variance,
            "seconds": time.perf_counter() - start,
            "test_rows_outside": int(((y[cut:] < y[:cut].min()) | (y[cut:] > y[:cut].max()))
                                     .sum())}


def plot(results: dict[str, dict[str, dict[str, float]]]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"sigmoid": "#1f77b4", "sigmoid, unbounded": "#aec7e8", "relu": "#d62728",
               "relu, unbounded": "#ff9896"}
    streams = list(results)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric, title in zip(axes, ("prequential_mse", "test_mse"),
                                 ("prequential MSE over the pass", "test MSE after the pass"),
                                 strict=True):
        width = 0.8 / len(VARIANTS)
        for j, variant in enumerate(VARIANTS):
            values = [results[s][variant][metric] for s in streams]
            ax.bar(np.arange(len(streams)) + j * width, values, width, label=variant,
                   color=colours[variant])
        ax.set_xticks(np.arange(len(streams)) + 0.4 - width / 2, streams)
        ax.set_yscale("log")
        ax.set_ylabel("MSE / variance of the test labels")
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.suptitle("SGB at the defaults, one pass in file order: bounded by the labels seen or not")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for name in args.streams:
        results[name] = {}
        for variant, (activation, bound) in VARIANTS.items():
            results[name][variant] = run(name, activation, bound)
            r = results[name][variant]
            print(f"{name:15s} {variant:20s} prequential {r['prequential_mse']:10.4g} test "
                  f"{r['test_mse']:10.4g} ({r['test_rows_outside']} test rows outside the "
                  f"labels seen, {r['seconds']:.0f} s)", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results)
    print(f"wrote {OUT / 'results.json'} and {FIGURE}")


if __name__ == "__main__":
    main()
