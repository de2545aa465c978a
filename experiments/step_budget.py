"""Many learners at once: SGB's default step η against a cap on the total step N·η.

    OMP_NUM_THREADS=1 python experiments/step_budget.py            # ~15 min on 2 cores
    python experiments/step_budget.py --streams abalone --n 8 64 --seeds 2
    python experiments/step_budget.py --caps 6 --n 16 32 64 128     # one rule more, merged
    python experiments/step_budget.py --replot                      # tables and figure again

The default rule (rate, warm-up, β: :mod:`~torchboost.boosters.default_lr`) was chosen with
N = 8 learners (``experiments/horizon_free.py``). In a streaming round all N learners move at
once, each towards a residual that the learners before it are still reducing, so the
prediction ``y0 − η Σ h_i`` moves up to N·η times as far as one learner's output does. This
measures, for N = 8 to 128 learners, SGB's step ``η`` as the paper sets it (``1/(4β)`` for
gradient targets, Hu et al. 2017 Thm. 5.1 with edge γ = 1; ½ for Newton targets) against the
same step capped so that N·η is at most 4, 6, 8 or 16: ``η = min(paper, cap / N)``; the
library's default is the cap of :data:`~torchboost.boosters.gradient_boosting.STEP_BUDGET`.

Protocol as ``horizon_free.py`` (the same loader, rows, test rows, seeds and orders): every
repository stream but MNIST (its conv learners at N = 128 take hours on 2 cores), the stream's
learner, the default rule for rates, standardisation on, batch 32, 10 passes in a seeded order,
the test metric (MSE, adult's error rate) after 1, 3 and 10 passes, ``--seeds`` seeds. Every
run passes its ``step`` explicitly. Writes ``experiments/results/step_budget/results.json``
(every run), ``summary.json`` (per stream, N and pass count: each rule's mean and standard
deviation over seeds and its ratio to the best rule of the cell; per rule: the worst and the
geometric mean of those ratios), ``table.md`` and ``step_budget.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults import load
from horizon_free import PASSES, add_run_arguments, read_values, run_jobs, stream_passes

from torchboost import SGB
from torchboost.boosters.gradient_boosting import STEP_BUDGET, paper_step
from torchboost.harness.plotting import save_figure
from torchboost.losses import get_loss

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "step_budget"

STREAMS = ("abalone", "adult", "pol", "kin40k", "protein", "keggundirected")
NS = (8, 16, 32, 64, 128)
#: ``None``: the paper's η; a number c: η = min(paper's, c / N)
CAPS: tuple[float | None, ...] = (None, 4.0, 6.0, 8.0, 16.0)
BATCH = 32


def rule_name(cap: float | None) -> str:
    return "paper" if cap is None else f"cap{cap:g}"


def step_for(loss: str, n: int, cap: float | None) -> float:
    """The step of rule ``cap`` for ``n`` learners on ``loss`` (Newton targets for any loss
    but squared, as :func:`run` trains)."""
    paper = paper_step(get_loss(loss), "gradient" if loss == "squared" else "newton")
    return paper if cap is None else min(paper, cap / n)


def run(stream: str, n: int, step: float, seed: int, max_train: int) -> dict[str, Any]:
    """One SGB with ``n`` learners and step ``step``; the test metric after each pass."""
    torch.set_num_threads(1)
    ds, loss, learner, _ = load(stream, max_train)
    torch.manual_seed(seed)
    booster = SGB(learner.factory(ds, 1), loss, n_learners=n, step=step, stall_window=None,
                  targets="newton" if loss != "squared" else "gradient")
    return {"stream": stream, "loss": loss, "n": n, "step": step, "seed": seed,
            **stream_passes(booster, ds, max(PASSES), list(PASSES), BATCH, seed)}


def _job(args: tuple[str, int, float, int, int]) -> dict[str, Any]:
    return run(*args)


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stream, N and pass count: every rule's mean, standard deviation and ratio to the
    cell's best rule; per rule the worst and geometric mean ratio over cells."""
    losses = {r["stream"]: r["loss"] for r in results}
    cells: dict[str, Any] = {}
    for stream in sorted(losses):
        for n in sorted({r["n"] for r in results if r["stream"] == stream}):
            for p in PASSES:
                stats = {}
                for cap in CAPS:
                    step = step_for(losses[stream], n, cap)
                    values = [r[f"pass{p}"] for r in results if r["stream"] == stream
                              and r["n"] == n and math.isclose(r["step"], step)]
                    if values:
                        stats[rule_name(cap)] = {
                            "step": step, "mean": statistics.fmean(values),
                            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                            "seeds": len(values)}
                best = min(s["mean"] for s in stats.values())
                for s in stats.values():
                    s["ratio_to_best"] = s["mean"] / best
                cells[f"{stream}/{n}/{p}"] = stats
    rules = [rule_name(c) for c in CAPS]
    ratios = {rule: [c[rule]["ratio_to_best"] for c in cells.values() if rule in c]
              for rule in rules}
    return {"cells": cells,
            "worst_ratio_to_best": {r: max(v) for r, v in ratios.items() if v},
            "geometric_mean_ratio_to_best": {r: math.exp(statistics.fmean(map(math.log, v)))
                                             for r, v in ratios.items() if v}}


def markdown(summary: dict[str, Any]) -> str:
    """The docs' tables: each rule's worst and geometric-mean ratio to the best rule, and
    every cell's means with the rule's ratio to the best."""
    rules = list(summary["worst_ratio_to_best"])
    lines = ["| step rule | geometric mean / best rule | worst cell |", "|---|---:|---:|"]
    for rule in sorted(rules, key=lambda r: summary["worst_ratio_to_best"][r]):
        lines.append(f"| `{rule}` | {summary['geometric_mean_ratio_to_best'][rule]:.3f} | "
                     f"{summary['worst_ratio_to_best'][rule]:.3f} |")
    lines += ["", "| stream | N | passes | " + " | ".join(f"`{r}`" for r in rules) + " |",
              "|---|---:|---:|" + "---:|" * len(rules)]
    for key, stats in summary["cells"].items():
        stream, n, p = key.split("/")
        row = []
        for rule in rules:
            s = stats[rule]
            text = f"{s['mean']:.4g} ({s['ratio_to_best']:.2f})"
            row.append(f"**{text}**" if s["ratio_to_best"] == 1 else text)
        lines.append(f"| {stream} | {n} | {p} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    cells = summary["cells"]
    streams = sorted({key.split("/")[0] for key in cells})
    fig, axes = plt.subplots(len(PASSES), len(streams), figsize=(3.2 * len(streams), 8),
                             sharex=True, squeeze=False, layout="constrained")
    for row, p in enumerate(PASSES):
        for col, stream in enumerate(streams):
            ax = axes[row, col]
            ns = sorted({int(k.split("/")[1]) for k in cells if k.startswith(stream + "/")})
            for i, rule in enumerate(summary["worst_ratio_to_best"]):
                label = f"{rule} (the default)" if rule == rule_name(STEP_BUDGET) else rule
                means = [cells[f"{stream}/{n}/{p}"][rule]["mean"] for n in ns]
                stds = [cells[f"{stream}/{n}/{p}"][rule]["std"] for n in ns]
                ax.errorbar([n * (1 + 0.04 * i) for n in ns], means, yerr=stds, marker="o",
                            ms=4, capsize=2, color=f"C{i}", label=label,
                            lw=2.5 if rule == rule_name(STEP_BUDGET) else 1.2)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            if row == 0:
                ax.set_title(stream)
            if row == len(PASSES) - 1:
                ax.set_xlabel("learners N")
            if col == 0:
                ax.set_ylabel(f"test metric after {p} pass{'es' if p > 1 else ''}")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center",
               ncol=len(summary["worst_ratio_to_best"]),
               title="step η: the paper's, or min(paper's, cap / N); mean ± std over seeds")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_run_arguments(parser, STREAMS, seeds=4, out=OUT)
    parser.add_argument("--n", type=int, nargs="+", default=list(NS))
    parser.add_argument("--caps", type=float, nargs="+", default=None,
                        help="run only these caps (default: every rule of CAPS)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.replot:
        losses = {stream: load(stream, 1)[1] for stream in args.streams}
        jobs = sorted({(stream, n, step_for(losses[stream], n, cap), seed, args.max_train)
                       for stream in args.streams for n in args.n
                       for cap in (CAPS if args.caps is None else args.caps)
                       for seed in range(args.first_seed, args.first_seed + args.seeds)},
                      key=lambda job: -job[1])  # the many-learner runs first
        run_jobs(_job, jobs, args.workers, args.out / "results.json", KEY,
                 lambda row: f"{row['stream']} N={row['n']} η={row['step']:g} "
                             f"seed {row['seed']}: " + read_values(row))
    summary = summarize(json.loads((args.out / "results.json").read_text()))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    (args.out / "table.md").write_text(markdown(summary))
    plot(summary, args.out / "step_budget.png")
    for rule, worst in sorted(summary["worst_ratio_to_best"].items(), key=lambda kv: kv[1]):
        print(f"{rule:6s} worst / best rule {worst:.3f}, geometric mean "
              f"{summary['geometric_mean_ratio_to_best'][rule]:.3f}")


#: what identifies a run in ``results.json`` (a rerun replaces it)
KEY = ("stream", "n", "step", "seed")


if __name__ == "__main__":
    main()
