"""A stream that brings a class or a feature it did not have at first: the river estimators
grow (``torchboost.river``), measured prequentially (predict, then learn; one pass).

    OMP_NUM_THREADS=1 python experiments/stream_growth.py      # ~3 min on one core

* **A third class after 600 examples**: three Gaussian classes (unit variance, centres (0, 3),
  (3, -2), (-3, -2)); the first 600 examples are of the first two, the next 900 of all three,
  balanced. Accuracy on the last 300, and on the new class among them, for ``SGBClassifier()``
  (class-incremental, the default), the same with ``classes=[...]`` listed up front (its
  output for the third class trained from the start), with gradient targets, and with Newton
  targets unclipped (``newton_clip=None``, the default before ``DEFAULT_NEWTON_CLIP``); seeds
  0-5.
* **A feature after 600 examples**: ``y = a + 2 b + 0.1 ε`` with ``a, b, ε ~ N(0, 1)``; ``b`` is
  missing from the first 600 of 1,800 examples. Squared error on the last 600 of
  ``SGBRegressor()`` fed ``b`` when it comes, against the same model never fed it; seeds 0-3.

Writes ``experiments/results/stream_growth/results.json`` and ``stream_growth.png`` (rolling
accuracy and squared error, seed 0, the arrival marked).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from torchboost.river import SGBClassifier, SGBRegressor

OUT = Path(__file__).resolve().parents[1] / "experiments" / "results" / "stream_growth"
CENTRES = {"a": (0.0, 3.0), "b": (3.0, -2.0), "c": (-3.0, -2.0)}
ARRIVAL = 600
CLASSIFIERS = {
    "incremental (default)": {},
    "classes listed up front": {"classes": ["a", "b", "c"]},
    "incremental, gradient targets": {"booster_kwargs": {"targets": "gradient"}},
    "incremental, Newton targets unclipped": {"booster_kwargs": {"newton_clip": None}},
}


def class_stream(seed: int, n: int = 1500) -> list[tuple[dict[str, float], str]]:
    """The first ``ARRIVAL`` examples of classes a and b, the rest of a, b and c."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = rng.choice("ab" if i < ARRIVAL else "abc")
        cx, cy = CENTRES[label]
        rows.append(({"x": cx + rng.gauss(0, 1), "y": cy + rng.gauss(0, 1)}, label))
    return rows


def feature_stream(seed: int, n: int = 1800) -> list[tuple[dict[str, float], float]]:
    """``y = a + 2 b + noise``; ``b`` missing from the first ``ARRIVAL`` examples."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        x = {"a": a, "b": b} if i >= ARRIVAL else {"a": a}
        rows.append((x, a + 2 * b + 0.1 * rng.gauss(0, 1)))
    return rows


def prequential(model, rows, score) -> list[float]:
    """``score(prediction, label)`` of each example, predicted before it is learnt."""
    out = []
    for x, y in rows:
        out.append(score(model.predict_one(x), y))
        model.learn_one(x, y)
    return out


def rolling(values: list[float], width: int = 100) -> list[float]:
    return [sum(values[max(0, i - width + 1):i + 1]) / min(width, i + 1)
            for i in range(len(values))]


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.parse_args()
    torch.set_num_threads(1)
    classes: dict[str, list[dict]] = {name: [] for name in CLASSIFIERS}
    curves: dict[str, list[float]] = {}
    for seed in range(6):
        rows = class_stream(seed)
        last = rows[-300:]
        for name, kwargs in CLASSIFIERS.items():
            hits = prequential(SGBClassifier(seed=seed, n_threads=1, **kwargs), rows,
                               lambda p, y: float(p == y))
            new = [h for h, (_, y) in zip(hits[-300:], last, strict=True) if y == "c"]
            classes[name].append({"seed": seed, "accuracy_last_300": sum(hits[-300:]) / 300,
                                  "new_class_accuracy_last_300": sum(new) / len(new)})
            if seed == 0:
                curves[f"class: {name}"] = rolling(hits)
            print(f"seed {seed} {name:30s} last 300: {sum(hits[-300:]) / 300:.3f} "
                  f"(new class {sum(new) / len(new):.3f})", flush=True)
    features = []
    for seed in range(4):
        rows = feature_stream(seed)
        fed = prequential(SGBRegressor(seed=seed, n_threads=1), rows, lambda p, y: (p - y) ** 2)
        without = prequential(SGBRegressor(seed=seed, n_threads=1),
                              [({"a": x["a"]}, y) for x, y in rows], lambda p, y: (p - y) ** 2)
        fed_last, without_last = sum(fed[-600:]) / 600, sum(without[-600:]) / 600
        features.append({"seed": seed, "mse_last_600_fed": fed_last,
                         "mse_last_600_without": without_last, "ratio": fed_last / without_last})
        if seed == 0:
            curves["feature: fed b when it comes"] = rolling(fed)
            curves["feature: never fed b"] = rolling(without)
        print(f"seed {seed} feature: last 600 MSE {fed_last:.3f} fed, {without_last:.3f} "
              f"without (ratio {fed_last / without_last:.3f})", flush=True)
    summary = {name: sum(r["accuracy_last_300"] for r in runs) / len(runs)
               for name, runs in classes.items()}
    summary["feature ratio (mean)"] = sum(r["ratio"] for r in features) / len(features)
    print(summary)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(
        {"classes": classes, "features": features, "summary": summary, "curves": curves},
        indent=1) + "\n")
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, curve in curves.items():
        axis = left if name.startswith("class") else right
        axis.plot(curve, label=name.split(": ")[1], linewidth=1.5)
    for axis in (left, right):
        axis.axvline(ARRIVAL, color="grey", linestyle="--", linewidth=1)
        axis.set_xlabel("examples seen")
        axis.legend(fontsize=8)
    left.set_ylabel("prequential accuracy (rolling 100)")
    left.set_title("a third class arrives at 600 (seed 0)")
    right.set_ylabel("prequential squared error (rolling 100)")
    right.set_yscale("log")
    right.set_title("a feature arrives at 600 (seed 0)")
    figure.tight_layout()
    figure.savefig(OUT / "stream_growth.png", dpi=120)


if __name__ == "__main__":
    main()
