"""Two questions a sceptic asks of chained learners (issue "Boosting that beats the network it
replaces"), one pass at the default rate:

1. **Is it the chain or the parameters?** A chained ``TwoLayerNet(d, h)`` has ``h²`` more
   parameters than a plain one (``carry_in``). Plain SGB whose learners have as many parameters
   (the hidden width whose parameter count is the closest) answers it.
2. **Does GrowNet's corrective step pay?** GrowNet (Badirli et al. 2020, Sec. 3.2) follows every
   new learner with a *corrective step*: all learners so far take a joint step on the
   ensemble's own loss ``ℓ(y^N)``. In a stream the analogue is: every ``k`` rounds, after the
   boosting step, one more step of every learner with the output gradient
   ``∂ℓ(y^N)/∂h_i = −η ∇ℓ(y^N)`` (closed form: no graph across learners; the carries stay
   detached), costing ``N`` predictions and ``N`` updates of every example (``3N`` units).
   It joins the library only if it pays.

3. **Why does the wide network win classification?** (the issue's prototype: one pass over
   multiclass streams with ``TwoLayerNet`` learners and softmax Newton targets, the wide
   network ahead by 1-6 points.) ``--classification`` runs the comparison driver on MNIST with
   16 ``TwoLayerNet(784, 10, 10)`` learners — plain and chained, each with gradient targets
   (SGB), Newton targets (SGB_newton) and Newton targets with learned steps (SGB_learned) —
   against one such learner trained directly and the wide and the deep network with each
   ensemble's parameters, one pass and 3
   passes, each method's rate chosen on validation (schedule-free grid 3e-2 / 1e-1 / 3e-1,
   extended at an edge), 2 seeds; writes ``results/chained_probes/mnist_mlp/``.

Every variant of 1 and 2 runs one pass over the same standardised 7,200 training rows as
``experiments/sgb_vs_gb.py`` (Newton targets on classification), at the default rate, from
``--seeds`` seeds; the final test metric (MSE, the error rate for Adult), mean ± sd, and the
compute units are printed and written to ``experiments/results/chained_probes/results.json``
(and ``results.md``: the table, each cell with the parameters of one learner).

    OMP_NUM_THREADS=1 python experiments/chained_probes.py                   # ~10 minutes
    OMP_NUM_THREADS=1 python experiments/chained_probes.py --classification  # ~30 minutes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from torchboost import SGB
from torchboost.boosters.gradient_boosting import paper_step
from torchboost.data.folder import add_data_dir_option, dataset_path
from torchboost.harness import DATASETS, ExperimentConfig, LearnerConfig
from torchboost.harness.driver import prepare_data, run_comparison
from torchboost.learners.chained import chainable
from torchboost.lightning.module import quiet_streaming_notices
from torchboost.losses import get_loss

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "chained_probes"


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


def run(name: str, chained: bool, every: int | None, seed: int, matched: bool = False,
        **overrides: Any) -> dict[str, float]:
    """One pass of one variant; ``matched``: plain learners with a chained one's parameters;
    ``overrides``: of the data set's configuration (its learner, ``n_learners``)."""
    spec = DATASETS[name]
    path = None if spec.bundled else str(dataset_path(name))  # ABALONE is bundled
    config = ExperimentConfig.for_dataset(name, path, max_train=8000, **overrides)
    data = prepare_data(config)
    m = config.n_outputs
    learner = config.learner
    if matched:  # the width whose parameter count is the closest to a chained learner's
        chained_count = _count(chainable(learner.factory(data.dataset, m)()))
        learner = min((dataclasses.replace(learner, hidden=h)
                       for h in range(learner.hidden, 4 * learner.hidden + 1)),
                      key=lambda c: abs(_count(c.factory(data.dataset, m)()) - chained_count))
    factory = learner.factory(data.dataset, m)
    options: dict[str, Any] = {"n_learners": config.n_learners, "n_outputs": m, "y0": "mean",
                               "standardize": False, "chained": chained,
                               "stall_window": None}
    if config.loss in ("softmax", "logistic"):
        options["targets"] = "newton"
    # the variants' own step (SGB_newton's ½) at every N, as in the driver's comparison
    options["step"] = paper_step(get_loss(config.loss), options.get("targets", "gradient"))
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
    return {"metric": metric, "units": booster.compute_units,
            "params": _count(booster.learners.learner(0)), "hidden": learner.hidden}


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def classification(seeds: int) -> str:
    """Question 3 (module docstring): the driver's comparison on MNIST with MLP learners, plain
    and chained, then two probes at the default rate (a corrective step every round; the same
    parameters in fewer, larger learners); returns the tables (final test error, mean ± sd)
    and writes them to ``OUT / "mnist_mlp" / "table.md"``, every comparison's
    ``results.json`` beside them (a rerun reuses those that exist)."""
    out = OUT / "mnist_mlp"
    lines = ["| regime | learners | base learner | wide net | deep net | SGB | SGB_newton | "
             "SGB_learned | best SGB (validation) |", "|---|---|---|---|---|---|---|---|---|"]

    def comparison(regime: str, passes: int, kind: str, methods: list[str]) -> dict[str, Any]:
        config = ExperimentConfig.for_dataset(
            "mnist", str(dataset_path("mnist")), max_train=8000, max_passes=passes,
            one_pass=regime == "one_pass", fixed_budget=True, optimizer="schedule_free",
            schedule="constant", lr_grid=[3e-2, 1e-1, 3e-1], lr_fan_in=64.0,
            grid_extensions=2, seeds=seeds, eval_points=4, n_learners=16,
            learner=LearnerConfig("two_layer", 10, "sigmoid", kind == "chained"),
            methods=methods)
        done = out / f"{regime}-{kind}" / "results.json"  # a rerun keeps finished runs
        return (json.loads(done.read_text()) if done.exists() else
                run_comparison(config, done.parent, progress=False))

    for regime, passes in (("one_pass", 1), ("budget", 3)):
        # the base learner does not chain: one run per regime, beside both ensembles
        base = comparison(regime, passes, "base", ["base"])["methods"]["base"]
        for kind in ("plain", "chained"):
            results = comparison(regime, passes, kind,
                                 ["wide", "deep", "SGB", "SGB_newton", "SGB_learned"])
            methods = {**results["methods"], "base": base}
            cells = [f"{methods[m]['mean']:.4f} ± {methods[m]['std']:.4f}"
                     for m in ("base", "wide", "deep", "SGB", "SGB_newton", "SGB_learned")]
            label = "1 pass" if passes == 1 else f"{passes} passes"
            lines.append(f"| {label} | {kind} | " + " | ".join(cells)
                         + f" | {results['best_SGB']} |")
            print(lines[-1], flush=True)
    # the ensemble of N TwoLayerNets is a wide network trained greedily: does a joint step on
    # the ensemble's loss every round (the corrective step) close the gap? (default rate)
    lines += ["", "One pass at the default rate, Newton targets (SGB_newton), "
              f"{seeds} seeds: without and with a corrective step every round", "",
              "| learners | no corrective step | corrective step every round |", "|---|---|---|"]
    mlp = {"learner": LearnerConfig("two_layer", 10, "sigmoid"), "n_learners": 16}
    for chained in (False, True):
        cells = []
        for every in (None, 1):
            values = [run("mnist", chained, every, seed, **mlp)["metric"]
                      for seed in range(seeds)]
            cells.append(f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}")
        lines.append(f"| {'chained' if chained else 'plain'} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    # the same parameters in fewer, larger learners: is it the learners' size?
    lines += ["", "One pass at the default rate, SGB_newton, the same parameters in fewer, "
              f"larger learners, {seeds} seeds", "", "| learners | test error |", "|---|---|"]
    for n, hidden in ((16, 10), (4, 40), (1, 160)):
        values = [run("mnist", False, None, seed, n_learners=n,
                      learner=LearnerConfig("two_layer", hidden, "sigmoid"))["metric"]
                  for seed in range(seeds)]
        lines.append(f"| {n} × TwoLayerNet(784, {hidden}, 10) | {statistics.mean(values):.4f} "
                     f"± {statistics.stdev(values):.4f} |")
        print(lines[-1], flush=True)
    table = "\n".join(lines) + "\n"
    (out / "table.md").write_text(table)
    return table


def markdown(results: dict[str, dict[str, Any]]) -> str:
    """One row per stream, one column per variant: mean ± sd (the learners' parameters)."""
    labels = list(next(iter(results.values())))
    lines = ["| data | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for name, row in results.items():
        cells = [f"{row[k]['mean']:.4g} ± {row[k]['std']:.2g} ({row[k]['params_per_learner']})"
                 for k in labels]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--datasets", nargs="+",
                        default=["abalone", "adult", "keggundirected", "kin40k", "pol",
                                 "protein"])
    parser.add_argument("--every", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--classification", action="store_true",
                        help="question 3 only: MNIST with MLP learners (module docstring)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.classification:
        logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
        quiet_streaming_notices()
        print(classification(min(args.seeds, 2)))
        return
    variants = [("SGB", False, None, False), ("SGB, chained's parameters", False, None, True),
                ("chained", True, None, False),
                *[(f"chained + corrective every {k}", True, k, False) for k in args.every]]
    results: dict[str, dict[str, Any]] = {}
    for name in args.datasets:
        results[name] = {}
        for label, chained, every, matched in variants:
            runs = [run(name, chained, every, seed, matched) for seed in range(args.seeds)]
            values = [r["metric"] for r in runs]
            results[name][label] = {"mean": statistics.mean(values),
                                    "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                                    "seeds": values, "units": runs[0]["units"],
                                    "params_per_learner": runs[0]["params"],
                                    "hidden": runs[0]["hidden"]}
            print(f"{name:15s} {label:28s} {results[name][label]['mean']:.5g} ± "
                  f"{results[name][label]['std']:.2g}  units {runs[0]['units']:,}  "
                  f"params/learner {runs[0]['params']}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.md").write_text(markdown(results))
    (OUT / "results.json").write_text(json.dumps(
        {"regime": "one pass, default rate (schedule-free, 1e-1 × 64 / fan-in), 7,200 rows",
         "seeds": args.seeds, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
