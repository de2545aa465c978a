"""Boosted linear learners under the default rule against one linear model: how much to slow a
linear learner's rate under Newton targets with schedule-free learners (the power ``p`` of the
rule's division by ``(N·η)^p``, ``torchboost.boosters.default_lr.NEWTON_OUTPUT_POWER``).

    OMP_NUM_THREADS=1 python experiments/newton_output_power.py      # ~4 min on one core

``SGB(linear, "softmax", n_learners=20)`` (Newton targets, η = 0.3 from the step budget,
schedule-free AdamW at the default rule; logistic loss on adult) with p = 1 (the rule measured
under Adam), ½ and 0, against ``SingleLearner(linear, ...)`` at its defaults; batch 32, held-out
accuracy after one and three seeded passes, seeds 0 and 1 (MNIST and adult: one pass, seed 0).
Streams: ``experiments/newton_defaults.py``'s two synthetic ones, Balance and Mushroom (the data
folder, ``--data-dir``), MNIST (60k) and adult. Writes
``experiments/results/newton_output_power/results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

import torchboost.boosters.default_lr as default_lr
from torchboost import SGB, SingleLearner
from torchboost.data import load_adult
from torchboost.data.folder import add_data_dir_option

sys.path.insert(0, str(Path(__file__).resolve().parent))
from newton_defaults import load  # the same streams

OUT = Path(__file__).resolve().parents[1] / "experiments" / "results" / "newton_output_power"
RUNS = [("synthetic_12_5", (1, 3), (0, 1)), ("synthetic_16_3", (1, 3), (0, 1)),
        ("balance", (1, 3), (0, 1)), ("mushroom", (1,), (0, 1)), ("mnist", (1,), (0,)),
        ("adult", (1,), (0,))]
POWERS = (1.0, 0.5, 0.0)


def accuracy(ds, make, seed: int, passes: int) -> float:
    torch.manual_seed(seed)
    booster = make()
    order = torch.Generator().manual_seed(seed)
    for _ in range(passes):
        for rows in torch.randperm(len(ds.y_train), generator=order).split(32):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
    return 1 - booster.evaluate(ds.x_test, ds.y_test)["error"]


def stream_rows(name: str, all_passes: tuple[int, ...], seeds: tuple[int, ...]) -> list[dict]:
    """One stream's rows: every pass count, one linear model and each power."""
    ds = load_adult() if name == "adult" else load(name)
    loss, k = ("logistic", 1) if name == "adult" else ("softmax", ds.n_classes)
    d = ds.x_train[0].numel()

    def linear() -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(d, k))

    def mean(make, passes: int) -> float:
        return sum(accuracy(ds, make, s, passes) for s in seeds) / len(seeds)

    rows = []
    for passes in all_passes:
        row = {"stream": name, "passes": passes, "seeds": list(seeds),
               "one linear model": mean(lambda: SingleLearner(linear, loss, n_outputs=k), passes)}
        for power in POWERS:
            default_lr.NEWTON_OUTPUT_POWER = power
            row[f"p = {power:g}"] = mean(
                lambda: SGB(linear, loss, n_outputs=k, n_learners=20,
                            newton_clip=None), passes)  # measured before the clip
        default_lr.NEWTON_OUTPUT_POWER = 0.5
        rows.append(row)
        print({key: round(v, 4) if isinstance(v, float) else v for key, v in row.items()},
              flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.parse_args()
    torch.set_num_threads(1)
    results = [row for run in RUNS for row in stream_rows(*run)]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
