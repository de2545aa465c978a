"""GrowNet's corrective step, measured before it joins the library (issue "Boosting that beats
the network it replaces", item 4: "keep it only if it pays").

GrowNet (Badirli et al. 2020, Sec. 3.2) follows every new learner with a *corrective step*: all
learners so far take a joint step on the ensemble's own loss ``ℓ(y^N)``. In a stream the analogue
is: every ``k`` rounds, after the boosting step, one more step of every learner with the output
gradient ``∂ℓ(y^N)/∂h_i = −η ∇ℓ(y^N)`` (closed form: no graph across learners; the carries stay
detached), costing ``N`` predictions and ``N`` updates of every example (``3N`` units).

This runs chained SGB with and without it (``k`` in ``--every``), and plain SGB, for one pass
over the same standardised 7,200 training rows as ``experiments/sgb_vs_gb.py``, at the default
rate, from ``--seeds`` seeds, and reports the final test metric (mean ± sd) and the compute
units (test MSE, the error rate for Adult). Writes
``experiments/results/corrective_step/results.json``.

    OMP_NUM_THREADS=1 python experiments/corrective_step.py          # ~5 minutes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from torchboost import SGB
from torchboost.harness import DATASETS, ExperimentConfig
from torchboost.harness.driver import prepare_data

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "experiments" / "results" / "corrective_step"


class CorrectiveSGB(SGB):
    """SGB whose learners also take, every ``every`` rounds, one joint step on the ensemble's
    loss (module docstring); its compute is counted."""

    def __init__(self, *args: Any, every: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.every = every
        self._x: Tensor | None = None

    def plan_round(self, x: Tensor, z: Tensor):  # type: ignore[no-untyped-def]
        self._x = x
        return super().plan_round(x, z)

    def after_step(self, h: Tensor, partials: Tensor, z: Tensor) -> None:
        super().after_step(h, partials, z)
        if (self.rounds + 1) % self.every or self._x is None:
            return
        x = self._x
        with self.learners.learning_point():
            outputs = self._learner_outputs(x)
            y = self.partial_sums(outputs.detach(), self.initial_prediction(x))[-1]
            weights = self.combination_weights(self.n_learners).to(y)
            grad = weights[:, None, None] * self.loss.gradient(y, z)[None] / x.shape[0]
            self.learners.step_outputs(outputs, grad)
        self.compute_units += 3 * self.n_learners * x.shape[0]


def run(name: str, chained: bool, every: int | None, seed: int) -> dict[str, float]:
    spec = DATASETS[name]
    path = str(SHARED / spec.shared_path) if spec.shared_path else None  # ABALONE is bundled
    config = ExperimentConfig.for_dataset(name, path, max_train=8000)
    data = prepare_data(config)
    m = config.n_outputs
    factory = dataclasses.replace(config.learner).factory(data.dataset, m)
    options: dict[str, Any] = {"n_learners": config.n_learners, "n_outputs": m, "y0": "mean",
                               "standardize": False, "chained": chained,
                               "stall_window": None}
    if config.loss in ("softmax", "logistic"):
        options["targets"] = "newton"
    torch.manual_seed(seed)
    booster = (SGB(factory, config.loss, **options) if every is None
               else CorrectiveSGB(factory, config.loss, every=every, **options))
    order = torch.randperm(len(data.y_train), generator=torch.Generator().manual_seed(seed))
    batch = config.batch_size
    for t in range(0, len(order), batch):
        rows = order[t:t + batch]
        booster.learn(data.x_train[rows], data.y_train[rows])
    scores = booster.evaluate(data.x_test, data.y_test)
    # the comparison's metrics: the error rate, or the MSE (twice the squared loss) in the
    # data's units
    metric = scores.get("error", 2.0 * scores["loss"] * data.loss_scale)
    return {"metric": metric, "units": booster.compute_units}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+",
                        default=["abalone", "keggundirected", "protein", "kin40k", "pol",
                                 "adult"])
    parser.add_argument("--every", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = [("SGB", False, None), ("chained", True, None),
                *[(f"chained + corrective every {k}", True, k) for k in args.every]]
    results: dict[str, dict[str, Any]] = {}
    for name in args.datasets:
        results[name] = {}
        for label, chained, every in variants:
            runs = [run(name, chained, every, seed) for seed in range(args.seeds)]
            values = [r["metric"] for r in runs]
            results[name][label] = {"mean": statistics.mean(values),
                                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                                    "seeds": values, "units": runs[0]["units"]}
            print(f"{name:15s} {label:28s} {results[name][label]['mean']:.5g} ± "
                  f"{results[name][label]['std']:.2g}  units {runs[0]['units']:,}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(
        {"regime": "one pass, default rate (schedule-free, 1e-1 × 64 / fan-in), 8,000 rows",
         "seeds": args.seeds, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
