"""Newton against gradient targets at the library's defaults on MNIST: what the default for
classification losses changed (``SGB(..., loss="softmax")`` fits Newton targets unless told).

    OMP_NUM_THREADS=1 python experiments/classification_targets.py      # ~3 min on one core

All of MNIST (the data folder, ``--data-dir``), one seeded pass, batch 64, seed 0, nothing set
but the targets: ``SGB(ConvNet(), n_learners=8, loss="softmax", n_outputs=10)`` (Newton, the
default now) and with ``targets="gradient"`` (the paper's Alg. 1, the default before), and the
base learner alone, ``SingleLearner(ConvNet(), "softmax", n_outputs=10)``, at its defaults.
Final test error after the pass. Not a tuned comparison (no rate chosen on validation): the
README's table (``experiments/sgb_vs_gb.py``) is that. Writes
``experiments/results/classification_targets/results.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from torchboost import SGB, ConvNet, SingleLearner
from torchboost.data import load_mnist
from torchboost.data.folder import add_data_dir_option

OUT = Path(__file__).resolve().parents[1] / "experiments" / "results" / "classification_targets"
MODELS = {
    "SGB, Newton targets (default)": lambda: SGB(ConvNet, n_learners=8, loss="softmax",
                                                 n_outputs=10),
    "SGB, gradient targets": lambda: SGB(ConvNet, n_learners=8, loss="softmax", n_outputs=10,
                                         targets="gradient"),
    "base learner alone": lambda: SingleLearner(ConvNet, "softmax", n_outputs=10),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.parse_args()
    torch.set_num_threads(1)
    ds = load_mnist()
    results = {}
    for name, make in MODELS.items():
        torch.manual_seed(0)
        booster = make()
        order = torch.randperm(len(ds.y_train), generator=torch.Generator().manual_seed(0))
        for rows in order.split(64):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        results[name] = booster.evaluate(ds.x_test, ds.y_test)["error"]
        print(f"{name:32s} test error {100 * results[name]:.2f} %", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
