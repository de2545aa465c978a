"""Wall time of stagewise GB alone on a regression CSV with the comparison driver's settings.

The number issue 13 asks about (GB on keggundirected, before and after the stacked frozen
learners): ``run_comparison`` with ``methods=["GB"]``, one torch thread, a fixed
``gb_max_epochs``. Run it against another version of the package to compare, e.g.

    python benchmarks/gb_wall.py                                   # this checkout
    git worktree add /tmp/old 8d2448e && PYTHONPATH=/tmp/old python benchmarks/gb_wall.py
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

import torchboost
from torchboost.harness.configs import ExperimentConfig
from torchboost.harness.driver import run_comparison

KEGG = "../shared/data/regression/keggundirected.csv.gz"


def measure(path: str, name: str, epochs: int, batch_size: int = 64) -> dict:
    """GB's training seconds, units, passes and final test MSE (the driver's own figures)."""
    torch.set_num_threads(1)
    config = ExperimentConfig.for_dataset("csv", path, name=name, batch_size=batch_size,
                                          methods=["GB"], gb_max_epochs=epochs)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        gb = run_comparison(config, out, progress=False)["methods"]["GB"]
        elapsed = time.perf_counter() - start
    return {"package": torchboost.__file__, "data": name,
            "gb_max_epochs": epochs, "wall_seconds": gb["wall_seconds"],
            "process_seconds": elapsed, "units": gb["units"], "passes": gb["passes"],
            "final_mse": gb["final"]["mse"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--path", default=KEGG)
    parser.add_argument("--name", default="keggundirected")
    parser.add_argument("--epochs", type=int, default=20, help="gb_max_epochs")
    args = parser.parse_args()
    print(json.dumps(measure(args.path, args.name, args.epochs), indent=2))


if __name__ == "__main__":
    main()
