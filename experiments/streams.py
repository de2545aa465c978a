"""Prequential comparison on streams as river users know them: river's synthetic drift streams
and the repository's real streams in their natural file order, against river's own models and
a per-batch MLP trained with Adam as deep-river does (``docs/results/streams.md``).

    OMP_NUM_THREADS=1 python experiments/streams.py            # ~30 min on 2 cores
    OMP_NUM_THREADS=1 python experiments/streams.py --quick    # ~2 min: 3,000 examples, seed 0

Every model predicts each example before learning it (river's ``progressive_val_score``
protocol, one pass, batch 32 for the mini-batched ones). Streams:

* ``FriedmanDrift`` (regression, 30,000 examples) with its three drift types: ``gra`` (global,
  abrupt, recurring; at 10k and 20k), ``lea`` (local, expanding, abrupt; 10k, 15k, 20k) and
  ``gsg`` (global, slow gradual; from 10k and 20k over 10k);
* SEA (classification, 20,000; its concept switched at 10k: variant 0 to 2) and Agrawal
  (classification, 20,000; classification function 0 to 4 at 10k): the first 10,000 examples
  of the first concept, then 10,000 of the second (an abrupt change);
* protein, kin40k, pol and keggundirected (regression, the first 20,000 rows in the file's
  order, pol's 15,000; the data folder, ``--data-dir``).

Models: ``SGBRegressor()``/``SGBClassifier()`` at their defaults; the same with
``averaging_window=30`` (the schedule-free average bounded to about its last 30 rounds) and with
``optimizer="adam"``; the base learner trained directly (``booster="single"``: one
``TwoLayerNet(d, 10)``) and a network of the 8 learners' width (``booster="single",
hidden=80``), both at the same defaults, and that network with ``averaging_window=30``; an MLP
of that width (80 ReLU units) trained per batch of 32 with Adam at 1e-2 behind river's
``StandardScaler`` (what a deep-river ``Regressor`` does; deep-river itself pins an older torch
and river); river's ``LinearRegression``/``LogisticRegression``, Hoeffding tree and adaptive
random forest (ARF, 10 trees) at their defaults, each behind ``StandardScaler`` as river's own
examples put them (the trees' leaf models are linear). Regression error is the MSE in units of
the stream's label variance, classification error the error rate; "after" is the mean over the
2,000 examples after each change. Seeds 0 and 1 (the synthetic streams' and the models'); the
real streams have one order, so their two seeds vary only the models. Writes
``experiments/results/streams/results.json`` and ``streams.png``. """

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from river import base, datasets, forest, linear_model, preprocessing, tree

from torchboost.data import dataset_path
from torchboost.data._parse import read_numeric_csv
from torchboost.data.folder import add_data_dir_option
from torchboost.river import SGBClassifier, SGBRegressor

OUT = Path(__file__).resolve().parents[1] / "experiments" / "results" / "streams"
AFTER = 2000
REAL_ROWS = 20000
#: name -> (task, changes, length)
STREAMS: dict[str, tuple[str, tuple[int, ...], int]] = {
    "FriedmanDrift gra": ("regression", (10000, 20000), 30000),
    "FriedmanDrift lea": ("regression", (10000, 15000, 20000), 30000),
    "FriedmanDrift gsg": ("regression", (10000, 20000), 30000),
    "SEA": ("classification", (10000,), 20000),
    "Agrawal": ("classification", (10000,), 20000),
    "protein": ("regression", (), REAL_ROWS),
    "kin40k": ("regression", (), REAL_ROWS),
    "pol": ("regression", (), REAL_ROWS),
    "keggundirected": ("regression", (), REAL_ROWS),
}
#: the top of a regression panel's scale (in label variances): a diverged model leaves it
CEILING = 10.0
MODELS = ("SGB", "SGB, averaging_window=30", "SGB, Adam", "base learner", "wide net",
          "wide net, averaging_window=30", "MLP, Adam per batch", "linear", "Hoeffding tree",
          "ARF")


def stream(name: str, seed: int, length: int) -> list[tuple[dict[str, float], Any]]:
    if name.startswith("FriedmanDrift"):
        kind = name.split()[1]
        changes = STREAMS[name][1]
        data = datasets.synth.FriedmanDrift(drift_type=kind, position=changes, seed=seed)
    elif name in ("SEA", "Agrawal"):  # the first concept, then the second from 10k on
        make = ((lambda v: datasets.synth.SEA(variant=v, seed=seed)) if name == "SEA"
                else (lambda v: datasets.synth.Agrawal(v, seed=seed)))
        first, second = (0, 2) if name == "SEA" else (0, 4)
        half = STREAMS[name][1][0]
        return ([(dict(x), y) for x, y in make(first).take(min(half, length))]
                + [(dict(x), y) for x, y in make(second).take(max(length - half, 0))])
    else:
        table = read_numeric_csv(dataset_path(name))[:length]
        return [({f"x{j}": float(v) for j, v in enumerate(row[:-1])}, float(row[-1]))
                for row in table]
    return [(dict(x), y) for x, y in data.take(length)]


class BatchMLP(base.Regressor, base.Classifier):
    """An MLP trained per batch of 32 with Adam (deep-river's way): 80 ReLU units, lr 1e-2."""

    def __init__(self, classifier: bool, seed: int) -> None:
        self.classifier = classifier
        self.seed = seed
        self.net: torch.nn.Module | None = None
        self.names: list[str] = []
        self.classes: list[Any] = []
        self.rows: list[list[float]] = []
        self.labels: list[Any] = []

    def _vector(self, x: dict) -> list[float]:
        return [float(x.get(name, 0.0)) for name in self.names]

    def _build(self, d: int, m: int) -> None:
        torch.manual_seed(self.seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(d, 80), torch.nn.ReLU(),
                                       torch.nn.Linear(80, m))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)

    def learn_one(self, x: dict, y: Any) -> None:
        if not self.names:
            self.names = sorted(x)
        if self.classifier and y not in self.classes:
            self.classes.append(y)
        self.rows.append(self._vector(x))
        self.labels.append(y)
        if len(self.rows) < 32:
            return
        if self.net is None:
            self._build(len(self.names), 2 if self.classifier else 1)
        xs = torch.tensor(self.rows)
        out = self.net(xs)
        if self.classifier:
            if out.shape[1] < len(self.classes):  # deep-river grows its output layer too
                self._grow(len(self.classes))
                out = self.net(xs)
            target = torch.tensor([self.classes.index(v) for v in self.labels])
            loss = torch.nn.functional.cross_entropy(out, target)
        else:
            loss = torch.nn.functional.mse_loss(out[:, 0], torch.tensor(self.labels))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.rows, self.labels = [], []

    def _grow(self, m: int) -> None:
        last = self.net[2]
        grown = torch.nn.Linear(80, m)
        with torch.no_grad():
            grown.weight[:last.out_features] = last.weight
            grown.bias[:last.out_features] = last.bias
        self.net[2] = grown
        self.opt = torch.optim.Adam(self.net.parameters(), lr=1e-2)

    def predict_one(self, x: dict) -> Any:
        if self.net is None:
            return self.classes[0] if self.classifier and self.classes else 0.0
        with torch.no_grad():
            out = self.net(torch.tensor([self._vector(x)]))[0]
        if self.classifier:
            return self.classes[int(out[:len(self.classes)].argmax())]
        return float(out[0])


def model(name: str, classifier: bool, seed: int) -> Any:
    sgb = SGBClassifier if classifier else SGBRegressor
    if name == "SGB":
        return sgb(seed=seed, n_threads=1)
    if name == "SGB, averaging_window=30":
        return sgb(seed=seed, n_threads=1, averaging_window=30)
    if name == "SGB, Adam":
        return sgb(seed=seed, n_threads=1, optimizer="adam")
    if name == "base learner":  # one of SGB's learners, trained directly
        return sgb(seed=seed, n_threads=1, booster="single")
    if name.startswith("wide net"):  # one network of the 8 learners' width, same defaults
        window = {"averaging_window": 30} if name.endswith("=30") else {}
        return sgb(seed=seed, n_threads=1, booster="single", hidden=80, **window)
    if name == "MLP, Adam per batch":
        return preprocessing.StandardScaler() | BatchMLP(classifier, seed)
    if name == "linear":
        river_model = (linear_model.LogisticRegression() if classifier
                       else linear_model.LinearRegression())
    elif name == "Hoeffding tree":
        river_model = (tree.HoeffdingTreeClassifier() if classifier
                       else tree.HoeffdingTreeRegressor())
    else:
        river_model = (forest.ARFClassifier(seed=seed) if classifier
                       else forest.ARFRegressor(seed=seed))
    return preprocessing.StandardScaler() | river_model  # as river's own examples do


def run(job: tuple[str, str, int, int]) -> dict[str, Any]:
    """One model on one stream: its per-example errors' summary and a rolling curve."""
    stream_name, model_name, seed, length = job
    torch.set_num_threads(1)
    task, changes, _ = STREAMS[stream_name]
    rows = stream(stream_name, seed, length)
    classifier = task == "classification"
    learner = model(model_name, classifier, seed)
    start, errors = time.perf_counter(), []
    for x, y in rows:
        prediction = learner.predict_one(x)
        if classifier:
            errors.append(float(prediction != y))
        else:
            p = prediction if prediction is not None and math.isfinite(prediction) else 0.0
            errors.append(min((p - y) ** 2, 1e30))
        learner.learn_one(x, y)
    seconds = time.perf_counter() - start
    scale = 1.0 if classifier else float(np.var([y for _, y in rows]))
    e = np.array(errors) / scale
    after = [float(e[c:c + AFTER].mean()) for c in changes if c < len(e)]
    window = max(len(e) // 60, 1)
    curve = np.convolve(e, np.ones(window) / window, mode="valid")[::window].tolist()
    return {"stream": stream_name, "model": model_name, "seed": seed, "whole": float(e.mean()),
            "after": after, "seconds": seconds, "curve": curve, "curve_step": window}


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: whole-stream error (and after-change error) per stream and model, mean of
    the seeds."""
    lines = ["| stream | " + " | ".join(MODELS) + " |",
             "|---|" + "---|" * len(MODELS)]
    for stream_name in (s for s in STREAMS if any(r["stream"] == s for r in results)):
        cells = []
        for model_name in MODELS:
            runs = [r for r in results if r["stream"] == stream_name and r["model"] == model_name]
            if not runs:
                cells.append("—")
                continue
            whole = np.mean([r["whole"] for r in runs])
            after = [np.mean([r["after"][i] for r in runs]) for i in range(len(runs[0]["after"]))]
            cell = _number(whole)
            if after:
                cell += " (" + " / ".join(_number(a) for a in after) + ")"
            cells.append(cell)
        best = min(range(len(MODELS)), key=lambda i: _value(cells[i]))
        cells[best] = f"**{cells[best]}**"
        lines.append(f"| {stream_name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:.3g}" if value < 1e3 else f"{value:.1e}"


def _value(cell: str) -> float:
    try:
        return float(cell.split(" ")[0])
    except ValueError:
        return math.inf


def figure(results: list[dict[str, Any]], path: Path) -> None:
    names = [s for s in STREAMS if any(r["stream"] == s for r in results)]
    columns = 3
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.2 * rows), squeeze=False)
    for axis, stream_name in zip(axes.flat, names, strict=False):
        task, changes, _ = STREAMS[stream_name]
        for model_name in MODELS:
            runs = [r for r in results if r["stream"] == stream_name
                    and r["model"] == model_name and r["seed"] == 0]
            if runs:
                r = runs[0]
                steps = [(i + 1) * r["curve_step"] for i in range(len(r["curve"]))]
                axis.plot(steps, r["curve"], label=model_name,
                          linewidth=2.0 if model_name.startswith("SGB") else 1.0)
        for change in changes:
            axis.axvline(change, color="grey", linestyle="--", linewidth=1)
        axis.set_title(stream_name)
        axis.set_yscale("log")
        diverged = sorted({r["model"] for r in results if r["stream"] == stream_name
                           and r["seed"] == 0 and r["whole"] > CEILING})
        if diverged:
            axis.set_ylim(top=CEILING)
            axis.set_title(f"{stream_name} ({', '.join(diverged)}: diverged, off the scale)",
                           fontsize=9)
        axis.set_ylabel("error rate" if task == "classification" else "MSE / label variance")
        axis.set_xlabel("examples seen")
    for axis in list(axes.flat)[len(names):]:
        axis.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--quick", action="store_true",
                        help="3,000 examples of each stream, seed 0 (a smoke run)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seeds = (0,) if args.quick else (0, 1)
    jobs = [(s, m, seed, 3000 if args.quick else STREAMS[s][2])
            for s in STREAMS for seed in seeds for m in MODELS]
    results = []
    with ProcessPoolExecutor(args.workers) as pool:
        for result in pool.map(run, jobs):
            results.append(result)
            print(f"{result['stream']:20s} {result['model']:26s} seed {result['seed']}: "
                  f"{result['whole']:.4g} after {[round(a, 4) for a in result['after']]} "
                  f"({result['seconds']:.0f} s)", flush=True)
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    markdown = table(results)
    print(markdown)
    (out / "results.json").write_text(json.dumps({"table": markdown, "runs": results}) + "\n")
    figure(results, out / "streams.png")


if __name__ == "__main__":
    main()
