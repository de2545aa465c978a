"""Default SGB with Newton targets over the SGB paper's conv learner on all of MNIST, under a
cosine decay over 10 passes: the test error after every pass.

    OMP_NUM_THREADS=1 python experiments/mnist_cosine.py                # ~3 min on one core

Everything at the library's defaults (N = 8 learners ``ConvNet(channels=5, sigmoid)``, Adam at
the default rule with its fan-in scaling, ``standardize`` on, η = ½), batch 64, plus
``lr_scheduler=cosine_schedule(10 passes)``. Writes
``experiments/results/mnist_cosine/results.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from torchboost import SGB, ConvNet, cosine_schedule
from torchboost.data import load_mnist

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "mnist_cosine"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ds = load_mnist(ROOT.parent / "shared" / "data" / "mnist")
    torch.manual_seed(0)
    rounds = args.passes * math.ceil(len(ds.y_train) / 64)
    booster = SGB(lambda: ConvNet(1, 28, 10, channels=5, activation="sigmoid"), "softmax",
                  n_outputs=10, n_learners=8, targets="newton",
                  lr_scheduler=cosine_schedule(rounds))
    order = torch.Generator().manual_seed(1)
    errors = []
    start = time.perf_counter()
    for p in range(args.passes):
        for rows in torch.randperm(len(ds.y_train), generator=order).split(64):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        errors.append(booster.evaluate(ds.x_test, ds.y_test)["error"])
        print(f"pass {p + 1}: test error {errors[-1]:.4f}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(
        {"args": vars(args), "test_error": errors,
         "seconds": time.perf_counter() - start}, indent=1))


if __name__ == "__main__":
    main()
