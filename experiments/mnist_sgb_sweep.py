"""SGB on all of MNIST (one pass of conv learners) over a grid of learner counts N, steps η and
Adam learning rates: is the gap to the single learner in ``sgb_vs_gb --full-mnist`` (N = 16,
η = 0.5, lr = 1e-2) a tuning problem?

    python experiments/mnist_sgb_sweep.py      # ~10 s per setting at N = 16 on 2 CPU cores

Writes ``experiments/results/sgb_vs_gb/mnist_full/sweep.json`` (final test loss and error rate
per setting).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import torch

from torchboost import SGB
from torchboost.configs import ExperimentConfig
from torchboost.experiment import prepare_data
from torchboost.lightning import evaluate_held_out

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT.parent / "shared" / "data" / "mnist"
OUT = ROOT / "experiments" / "results" / "sgb_vs_gb" / "mnist_full" / "sweep.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=MNIST, help="folder with the MNIST IDX files")
    parser.add_argument("--n-learners", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--steps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-2, 3e-3])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    config = ExperimentConfig.for_dataset("mnist", str(args.root), batch_size=64)
    data = prepare_data(config)
    factory = config.learner.factory(data.dataset, config.n_outputs)
    results = []
    for n, step, lr in itertools.product(args.n_learners, args.steps, args.lrs):
        torch.manual_seed(config.seed)
        booster = SGB(factory, config.loss, n_learners=n,
                      n_outputs=config.n_outputs, step=step, y0="mean",
                      optimizer_kwargs={"lr": lr})
        started = time.perf_counter()
        for x, y in data.stream(config.batch_size, config.seed):
            booster.learn(x, y)
        scores = evaluate_held_out(booster, data.x_test, data.y_test)
        results.append({"n_learners": n, "step": step, "lr": lr, **scores,
                        "wall_seconds": time.perf_counter() - started})
        print(results[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
