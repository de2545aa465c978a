"""The comparison driver's streaming methods with one round per Lightning step and in groups.

``run_comparison`` trains GB in a plain loop and the streaming methods through Lightning, whose
own cost per step weighs on small rounds. This runs the driver's streaming methods on a data
set twice per repeat, alternating ``rounds_per_step=1`` and ``rounds_per_step=k``
(:class:`~torchboost.data.BatchGroups`), one torch thread, and reports each method's training
seconds (the driver's ``wall_seconds``: evaluations excluded), seconds per pass, passes and
final test MSE. The groups move the evaluation points and pass ends to group ends, so the
stopping rule may stop after another number of passes: compare seconds per pass.

    python benchmarks/rounds_per_step.py                       # bundled ABALONE, k = 8
    python benchmarks/rounds_per_step.py --rounds 16 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import warnings

import torch

from torchboost.harness.configs import ExperimentConfig
from torchboost.harness.driver import run_comparison

METHODS = ["base", "wide", "SGB"]


def measure(rounds: int, repeats: int, dataset: str = "abalone") -> dict:
    """Per method and setting: median training seconds over ``repeats``, passes and final
    MSE (those of the last repeat; every repeat trains the same models)."""
    torch.set_num_threads(1)
    seconds: dict[int, dict[str, list[float]]] = {k: {m: [] for m in METHODS}
                                                 for k in (1, rounds)}
    last: dict[int, dict] = {}
    for _ in range(repeats):
        for k in (1, rounds):
            config = ExperimentConfig.for_dataset(dataset, methods=METHODS, rounds_per_step=k)
            with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                last[k] = run_comparison(config, out, progress=False)["methods"]
            for method in METHODS:
                seconds[k][method].append(last[k][method]["wall_seconds"])
    return {"data": dataset, "rounds": rounds, "repeats": repeats, "methods": {
        method: {f"k={k}": {"seconds": statistics.median(seconds[k][method]),
                            "seconds_per_pass": statistics.median(seconds[k][method])
                            / last[k][method]["passes"],
                            "passes": last[k][method]["passes"],
                            "stop_reason": last[k][method]["stop_reason"],
                            "final_mse": last[k][method]["final"]["mse"]}
                 for k in (1, rounds)}
        for method in METHODS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--rounds", type=int, default=8, help="rounds per step of the grouped runs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dataset", default="abalone")
    args = parser.parse_args()
    print(json.dumps(measure(args.rounds, args.repeats, args.dataset), indent=2))


if __name__ == "__main__":
    main()
