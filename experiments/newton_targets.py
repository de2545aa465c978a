"""Gradient vs Newton targets vs learned steps on all of MNIST, for linear and conv learners,
next to one learner of the same kind trained directly: where the defaults of
``SGB(targets="newton")`` (step η = ½, Hessian floor 0.01) come from.

    python experiments/newton_targets.py                 # ~15 min on 2 CPU cores
    python experiments/newton_targets.py --learners linear --passes 1

For each learner kind (``linear``: ``Flatten → Linear(784, 10)``; ``conv``: the SGB paper's
5×5 stride-2 convolution with 5 channels) it streams ``passes`` seeded passes over the 60k
training images (batch 64, plain Adam 1e-3 for linear and 1e-2 for conv learners, raw pixels:
``standardize=False``, N = 8 learners) and records the test error after every pass of:

* ``single`` — one learner trained directly on cross-entropy (no boosting);
* ``gradient`` — SGB as in the paper (gradient targets, η = ½ = 1/(4β));
* ``newton η=…, floor=…`` — Newton targets over a grid of steps and Hessian floors;
* ``learned`` — Newton targets with learned steps (Adam on log η, two rates ``step_lr``).

A sum of linear learners is a linear model, so with linear learners boosting can at best match
the single linear model: the gap measures how well the targets build confident scores.
Writes ``experiments/results/newton_targets/{results.json,newton_targets.png}``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from torchboost import SGB, ConvNet, SingleLearner
from torchboost.boosters import Booster
from torchboost.data import load_mnist
from torchboost.data.folder import add_data_dir_option
from torchboost.harness.plotting import save_figure
from torchboost.lightning import evaluate_held_out

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "newton_targets"

LEARNERS: dict[str, tuple[Callable[[], nn.Module], float]] = {
    "linear": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), 1e-3),
    "conv": (lambda: ConvNet(1, 28, 10, channels=5), 1e-2),
}
N_LEARNERS, BATCH = 8, 64


def methods(kind: str) -> dict[str, Callable[[], Booster]]:
    """The boosters compared for one learner kind (see the module docstring)."""
    factory, lr = LEARNERS[kind]
    # as the stored results were run: plain Adam at the learner's rate, on raw pixels (the
    # boosters standardise by default since, SingleLearner since issue 30)
    common = {"n_outputs": 10, "optimizer": torch.optim.Adam, "optimizer_kwargs": {"lr": lr},
              "standardize": False}

    def sgb(**options: object) -> Callable[[], Booster]:  # newton_clip=None: measured
        # before Newton targets were clipped (DEFAULT_NEWTON_CLIP)
        return lambda: SGB(factory, "softmax", n_learners=N_LEARNERS, newton_clip=None,
                           **common, **options)

    out: dict[str, Callable[[], Booster]] = {
        "single": lambda: SingleLearner(factory, "softmax", **common),
        "gradient": sgb(targets="gradient"),  # the paper's (the library's default: Newton)
    }
    for step in (0.25, 0.5, 1.0):
        for floor in (1e-3, 1e-2, 5e-2):
            out[f"newton η={step}, floor={floor}"] = sgb(targets="newton", step=step,
                                                        hessian_floor=floor)
    for rate in (1e-2, 1e-3):
        out[f"learned step_lr={rate}"] = sgb(targets="newton", step="learned", step_lr=rate)
    return out


def stream(booster: Booster, x: torch.Tensor, y: torch.Tensor, x_test: torch.Tensor,
           y_test: torch.Tensor, passes: int) -> dict[str, object]:
    errors, started = [], time.perf_counter()
    for p in range(passes):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(p))
        for start in range(0, len(x), BATCH):
            rows = order[start:start + BATCH]
            booster.learn(x[rows], y[rows])
        errors.append(evaluate_held_out(booster, x_test, y_test)["error"])
    return {"errors": errors, "wall_seconds": time.perf_counter() - started}


def plot(results: dict[str, dict[str, dict[str, object]]], out: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, (kind, runs) in zip(axes[0], results.items(), strict=True):
        shown = ["single", "gradient", "newton η=0.5, floor=0.01", "learned step_lr=0.01",
                 "learned step_lr=0.001"]
        for name in shown:
            errors = runs[name]["errors"]
            ax.plot(range(1, len(errors) + 1), [100 * e for e in errors], marker="o", label=name)
        ax.set(title=f"MNIST, {kind} learners (N = {N_LEARNERS})", xlabel="passes",
               ylabel="test error (%)")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper right", framealpha=0.8)
    fig.tight_layout()
    return save_figure(fig, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=list(LEARNERS))
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_mnist()  # the data folder's mnist/
    results: dict[str, dict[str, dict[str, object]]] = {}
    for kind in args.learners:
        results[kind] = {}
        for name, build in methods(kind).items():
            torch.manual_seed(0)
            results[kind][name] = stream(build(), data.x_train, data.y_train, data.x_test,
                                         data.y_test, args.passes)
            print(kind, name, results[kind][name], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(
        {"n_learners": N_LEARNERS, "batch": BATCH, "passes": args.passes, "results": results},
        indent=2))
    print(f"wrote {plot(results, args.out / 'newton_targets.png')}")


if __name__ == "__main__":
    main()
