"""Boosting with Newton targets at the default learning rate against one learner of the same kind
at the same defaults, on the repository's multiclass streams and two synthetic ones.

    OMP_NUM_THREADS=1 python experiments/newton_defaults.py      # ~25 min on one core

Every run used the defaults of its time, which the script now names (see the last paragraph):
``SingleLearner(learner, "softmax")`` on raw features against ``SGB(learner, "softmax",
n_learners=N, targets="newton")`` (Adam at its rule, Newton step η = ½, ``standardize`` on), batch
32, over ``--passes`` seeded passes, for several seeds (learner initialisation and stream order).
Learners: ``linear`` (``Flatten → Linear(d, k)``, N = 20, the case reported to collapse) on every
stream, ``conv`` (the SGB paper's MNIST learner, N = 8) on a 10k-image MNIST subset. Streams:
Balance Scale (3 classes), Mushroom (2), MNIST (all 60k for linear learners), and two synthetic
streams of Gaussian features with linear class scores plus noise (``d = 12, k = 5, noise 0.5`` and
``d = 16, k = 3, noise 3``).

Variants of the boosted linear learners' rates (the README, "One default rule"): ``every
layer`` — the rule before this experiment, the default rate (with the fan-in rule) for every
layer; ``default`` — today's rule, a linear learner's rate divided by ``N·η`` (N of them sum to
one linear model moved N·η times as fast as one); ``output/√(N·η)`` — a milder division,
rejected. Conv learners keep the default rule's rates (``default``); dividing their output
layer's rate by ``N·η`` was measured with an earlier version of this script (its numbers are in
``results.json``) and rejected.

Writes ``experiments/results/newton_defaults/results.json`` (every run's held-out accuracy after
every pass, and the means over seeds).

Adam was the library's default optimizer when the stored results were run; the script
names it (``optimizer=torch.optim.Adam``), so that a rerun still measures Adam now that the
default is schedule-free. It also names what else has changed since: the boosters' Newton step
η = ½ (N = 20 learners now get the step budget's 6/20) and ``standardize=False`` for the
single learner (``SingleLearner`` standardises by default now). A rerun then matches the code
before schedule-free learners on MNIST and the synthetic streams (checked, one seed, one
pass); Balance's and Mushroom's boosted rows moved when standardisation stopped scaling 0/1
columns (commit e960a33).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchboost import SGB, ConvNet, SingleLearner
from torchboost.data import Dataset, load_balance, load_mnist, load_mushroom
from torchboost.data.folder import add_data_dir_option, dataset_path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "newton_defaults"
RUNS = [("balance", "linear"), ("mushroom", "linear"), ("synthetic_12_5", "linear"),
        ("synthetic_16_3", "linear"), ("mnist", "linear"), ("mnist_10k", "conv")]
VARIANTS = ("single", "every layer", "default", "output/√(N·η)")


def synthetic(d: int, k: int, noise: float, n: int = 20000, seed: int = 0) -> Dataset:
    """Gaussian features of random scales, labels the argmax of noisy linear scores."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d, k, generator=g)
    x = torch.randn(n, d, generator=g) * torch.rand(d, generator=g) * 3
    y = (x @ w + noise * torch.randn(n, k, generator=g)).argmax(1)
    m = int(0.8 * n)
    return Dataset(f"synthetic_{d}_{k}", x[:m], y[:m], x[m:], y[m:], "multiclass", k)


def load(name: str) -> Dataset:
    if name == "balance":
        return load_balance(dataset_path("balance"))
    if name == "mushroom":
        return load_mushroom(dataset_path("mushroom"))
    if name.startswith("mnist"):
        ds = load_mnist()
        if name == "mnist_10k":
            ds = Dataset(name, ds.x_train[:10000], ds.y_train[:10000], ds.x_test[:2000],
                         ds.y_test[:2000], ds.task, ds.n_classes)
        return ds
    if name == "synthetic_12_5":
        return synthetic(12, 5, 0.5)
    return synthetic(16, 3, 3.0)


def build(variant: str, kind: str, d: int, k: int) -> Any:
    def factory() -> nn.Module:
        return ConvNet(1, 28, k, channels=5) if kind == "conv" else nn.Sequential(
            nn.Flatten(), nn.Linear(d, k))

    if variant == "single":
        return SingleLearner(factory, "softmax", n_outputs=k, optimizer=torch.optim.Adam,
                             standardize=False)
    n = 8 if kind == "conv" else 20
    # as stored: Adam at its rule (the default before schedule-free learners), Newton targets'
    # η = ½ (the default before the step budget; N = 20 learners now get 6/20)
    options: dict[str, Any] = {"optimizer": torch.optim.Adam, "step": 0.5}
    if variant == "every layer":
        options["lr_output_scale"] = 1.0
    elif variant == "output/√(N·η)":
        options["lr_output_scale"] = (n * 0.5) ** -0.5
    # newton_clip=None: measured before Newton targets were clipped (DEFAULT_NEWTON_CLIP)
    return SGB(factory, "softmax", n_outputs=k, n_learners=n, targets="newton",
               newton_clip=None, stall_window=None, **options)


def run(name: str, kind: str, variant: str, seed: int, passes: int) -> list[float]:
    ds = load(name)
    k = ds.n_classes or 2
    torch.manual_seed(seed)
    booster = build(variant, kind, ds.x_train[0].numel(), k)
    g = torch.Generator().manual_seed(seed + 1)
    out = []
    for _ in range(passes):
        for rows in torch.randperm(len(ds.y_train), generator=g).split(32):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        out.append(1.0 - booster.evaluate(ds.x_test, ds.y_test)["error"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--mnist-seeds", type=int, default=2)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"args": vars(args), "runs": [], "mean": {}}
    for name, kind in RUNS:
        seeds = args.mnist_seeds if name.startswith("mnist") else args.seeds
        for variant in VARIANTS if kind == "linear" else ("single", "default"):
            start = time.perf_counter()
            accuracies = [run(name, kind, variant, s, args.passes) for s in range(seeds)]
            mean = [sum(a[p] for a in accuracies) / seeds for p in range(args.passes)]
            results["runs"].append({"stream": name, "learner": kind, "variant": variant,
                                    "accuracy": accuracies})
            results["mean"][f"{name}/{kind}/{variant}"] = mean
            print(f"{name:15s} {kind:6s} {variant:15s}", " ".join(f"{m:.4f}" for m in mean),
                  f"{time.perf_counter() - start:.0f}s", flush=True)
            (OUT / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
