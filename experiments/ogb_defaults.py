"""OGB and ConvexHullOGB at their defaults: the paper's linear losses against Sec. 4.1's greedy
fitting, each against Adam's tuned schedules, the base learner, SGB and the best constant.

    OMP_NUM_THREADS=1 python experiments/ogb_defaults.py               # ~17 min on 2 cores
    python experiments/ogb_defaults.py --streams abalone --seeds 2 --workers 1
    python experiments/ogb_defaults.py --n 32 --methods default --out DIR   # defaults, N = 32
    python experiments/ogb_defaults.py --models SingleLearner      # one model's runs, merged
    python experiments/ogb_defaults.py --replot                         # tables and figure again

Beygelzimer et al. (2015) analyse learners shown linear losses (Alg. 1 line 13, Alg. 2 line 11:
``objective="linear"``) and note (Sec. 4.1) that in practice a learner more commonly fits the
loss itself at an offset (``objective="greedy"``: learner ``i`` suffers ``ℓ(y′_i + α_i A_i(x))``;
OGB's offset is ``y^{i−1}`` at ``α = 1``, ConvexHullOGB's its own update, see
:class:`~torchboost.boosters.online_linear.OnlineLinearBooster`). This measures which one learns
on the first try.

Protocol as ``horizon_free.py`` (the same loader, 8,000 training and 2,000 test rows, seeds and
orders): every repository stream but MNIST (conv learners under ten passes of every method take
hours on 2 cores), N = 8 learners of the stream's kind (wrapped in ``D·tanh`` as the boosters
do), standardisation on, batch 32, 10 passes in a seeded order, the test metric (MSE, adult's
error rate) after 1, 3 and 10 passes, ``--seeds`` seeds. For each booster and objective:

* ``default``: nothing set but the objective (the default rule: schedule-free AdamW, no
  horizon);
* ``adam_<lr>``: Adam at horizon_free's three constant rates with the fan-in rule;
* ``adam_cosine``: Adam at 2e-2 with a cosine over exactly 1, 3 or 10 passes.

References, at their defaults: ``SGB`` (N = 8, Newton targets on adult as horizon_free), the base
learner trained alone (``SingleLearner``, also under Adam's tuned baselines, so that its default
is judged as the boosters' are) and the best constant (the training mean, the majority class).
Writes ``experiments/results/ogb_defaults/results.json`` (every run), ``summary.json`` (per
stream and pass count: every method's mean and standard deviation over seeds, each model's and
objective's best tuned Adam and its default's ratio to it), ``table.md`` and
``ogb_defaults.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults import constant_metric, load
from horizon_free import (
    PASSES,
    add_run_arguments,
    booster_options,
    finish_pass_panels,
    guarded,
    methods,
    read_values,
    run_jobs,
    stream_passes,
)

from torchboost import OGB, SGB, ConvexHullOGB, SingleLearner
from torchboost.harness.plotting import save_figure

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "ogb_defaults"

STREAMS = ("abalone", "adult", "pol", "kin40k", "protein", "keggundirected")
BOOSTERS = {"OGB": OGB, "ConvexHullOGB": ConvexHullOGB}
OBJECTIVES = ("linear", "greedy")
N_LEARNERS = 8
BATCH = 32
#: what identifies a run in ``results.json`` (a rerun replaces it)
KEY = ("stream", "n", "model", "objective", "method", "seed", "passes")


def plan() -> list[dict[str, Any]]:
    """Every run's settings but the stream and seed: the boosters' defaults and Adam's tuned
    baselines (horizon_free's, but its open-ended decay) per objective, then the references."""
    every = {"passes": max(PASSES), "read": list(PASSES)}
    adam = [m for m in methods() if m["optimizer"] == "adam" and m.get("schedule") != "decay"]
    default = {"method": "default", "optimizer": "sf", **every}
    out = [{"model": model, "objective": objective, **method}
           for model in BOOSTERS for objective in OBJECTIVES for method in [default, *adam]]
    out += [{"model": "SingleLearner", "objective": None, **method}
            for method in [default, *adam]]
    return [*out, {"model": "SGB", "objective": None, **default}]


def run(stream: str, setting: dict[str, Any], seed: int, max_train: int,
        n_learners: int = N_LEARNERS) -> dict[str, Any]:
    """One model on one stream; the test metric after each pass in ``setting["read"]`` and how
    many warnings the run raised (OGB's labels beyond its radius: the stall monitor is off, as
    in horizon_free)."""
    torch.set_num_threads(1)
    ds, loss, learner, _ = load(stream, max_train)
    torch.manual_seed(seed)
    factory = learner.factory(ds, 1)
    options = {} if setting["method"] == "default" else booster_options(
        setting, setting["passes"] * math.ceil(len(ds.y_train) / BATCH))
    model = setting["model"]
    if model == "SGB":
        booster = SGB(factory, loss, n_learners=n_learners, stall_window=None,
                      targets="newton" if loss != "squared" else "gradient")
    elif model == "SingleLearner":
        booster = SingleLearner(factory, loss, stall_window=None, **options)
    else:
        booster = BOOSTERS[model](factory, loss, n_learners=n_learners, stall_window=None,
                                  objective=setting["objective"], **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row = stream_passes(booster, ds, setting["passes"], setting["read"], BATCH, seed)
    return {"stream": stream, "seed": seed, "n": n_learners, **setting, **row,
            "warnings": len(caught),
            "constant": constant_metric(ds, 1.0)}


def _job(args: tuple[str, dict[str, Any], int, int, int]) -> dict[str, Any]:
    return guarded(run, args)


#: every column, in the order of the tables and the figure
COLUMNS = ("SingleLearner", "SGB",
           *(f"{model}/{objective}" for model in BOOSTERS for objective in OBJECTIVES))


def label(row: dict[str, Any]) -> str:
    """A run's column: ``OGB/greedy``, ``SGB``, ``SingleLearner``."""
    return row["model"] if row["objective"] is None else f"{row['model']}/{row['objective']}"


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stream and pass count: mean and standard deviation over seeds of every method of
    every column; each booster-objective's best tuned Adam (the better of the cosine and the
    best constant rate) and its default's ratio to it, to the constant and to SGB."""
    cells: dict[str, Any] = {}
    for stream in sorted({r["stream"] for r in results}):
        for p in PASSES:
            key = f"pass{p}"
            values: dict[str, dict[str, list[float]]] = {}
            for r in results:
                if r["stream"] == stream and key in r:
                    values.setdefault(label(r), {}).setdefault(r["method"], []).append(r[key])
            stats = {column: {m: {"mean": statistics.fmean(v),
                                  "std": statistics.stdev(v) if len(v) > 1 else 0.0,
                                  "seeds": len(v)} for m, v in sorted(values[column].items())}
                     for column in sorted(values, key=COLUMNS.index)}  # not the runs' order
            constant = next(r["constant"] for r in results
                            if r["stream"] == stream and "constant" in r)  # not a failed run
            cell: dict[str, Any] = {"stats": stats, "constant": constant, "columns": {}}
            for column, by_method in stats.items():
                default = by_method["default"]["mean"]
                entry = {"default": default, "to_constant": default / constant,
                         "to_sgb": default / stats["SGB"]["default"]["mean"]}
                tuned = {m: s["mean"] for m, s in by_method.items() if m != "default"}
                if tuned:
                    best = min(tuned, key=tuned.get)
                    entry.update(best_tuned=best, tuned=tuned[best],
                                 to_tuned=default / tuned[best])
                cell["columns"][column] = entry
            cells[f"{stream}/{p}"] = cell
    judged = sorted({c for cell in cells.values() for c in cell["columns"] if c != "SGB"})
    worst = {c: {ratio: max(cell["columns"][c][ratio] for cell in cells.values())
                 for ratio in ("to_constant", "to_sgb", "to_tuned")
                 if all(ratio in cell["columns"][c] for cell in cells.values())}
             for c in judged}
    return {"cells": cells, "worst": worst}


def markdown(summary: dict[str, Any]) -> str:
    """The docs' tables: every model's default per cell (mean ± std; bold: worse than the best
    constant), then each booster-objective's default over its best tuned Adam."""
    cells = summary["cells"]
    first = next(iter(cells.values()))
    boosted = [c for c in first["columns"] if "/" in c]
    lines = ["| stream | passes | best constant | base learner alone | SGB | "
             + " | ".join(boosted) + " |", "|---|---:|" + "---:|" * (3 + len(boosted))]
    for key, cell in cells.items():
        stream, p = key.split("/")
        stats = cell["stats"]

        def fmt(column: str, cell: dict[str, Any] = cell, stats: dict[str, Any] = stats) -> str:
            s = stats[column]["default"]
            text = f"{s['mean']:.4g} ± {s['std']:.2g}"
            return f"**{text}**" if s["mean"] > cell["constant"] else text

        lines.append(f"| {stream} | {p} | {cell['constant']:.4g} | {fmt('SingleLearner')} | "
                     f"{fmt('SGB')} | " + " | ".join(fmt(c) for c in boosted) + " |")
    tuned = [c for c in ("SingleLearner", *boosted) if "to_tuned" in summary["worst"][c]]
    if tuned:  # Adam's baselines were run
        lines += ["", "| stream | passes | " + " | ".join(
            f"{c} default / its best tuned Adam" for c in tuned) + " |",
            "|---|---:|" + "---:|" * len(tuned)]
        for key, cell in cells.items():
            stream, p = key.split("/")
            lines.append(f"| {stream} | {p} | " + " | ".join(
                f"{cell['columns'][c]['to_tuned']:.2f} (`{cell['columns'][c]['best_tuned']}` "
                f"{cell['columns'][c]['tuned']:.4g})" for c in tuned) + " |")
    lines += ["", "| column | worst default / constant | worst default / SGB | "
              "worst default / its best tuned Adam |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {w['to_constant']:.2f} | {w['to_sgb']:.2f} | "
              f"{w['to_tuned']:.2f} |" if "to_tuned" in w else
              f"| {c} | {w['to_constant']:.2f} | {w['to_sgb']:.2f} | (not run) |"
              for c, w in summary["worst"].items()]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    cells = summary["cells"]
    streams = sorted({key.split("/")[0] for key in cells})
    columns = list(next(iter(cells.values()))["columns"])
    fig, axes = plt.subplots(1, len(PASSES), figsize=(5 * len(PASSES), 5.5), sharey=True,
                             layout="constrained")
    for ax, p in zip(axes, PASSES, strict=True):
        for i, stream in enumerate(streams):
            cell = cells[f"{stream}/{p}"]
            for j, column in enumerate(columns):
                s = cell["stats"][column]["default"]
                ax.errorbar(i + 0.1 * (j - len(columns) / 2), s["mean"] / cell["constant"],
                            yerr=s["std"] / cell["constant"], fmt="os^vDx"[j % 6],
                            color=f"C{j}", label=f"{column}, defaults" if i == 0 else None)
        ax.axhline(1.0, color="k", lw=0.5, ls="--",
                   label="the best constant" if p == PASSES[-1] else None)
    finish_pass_panels(fig, axes, streams,
                       "test metric / the best constant's (mean ± std over seeds)", ncol=4)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_run_arguments(parser, STREAMS, seeds=2, out=OUT)
    parser.add_argument("--n", type=int, default=N_LEARNERS, help="learners per booster")
    parser.add_argument("--methods", nargs="+", default=None,
                        help="only these methods (default, adam_<rate>, adam_cosine)")
    parser.add_argument("--models", nargs="+", default=None,
                        choices=[*BOOSTERS, "SingleLearner", "SGB"], help="only these models")
    args = parser.parse_args()
    if args.n != N_LEARNERS and args.out == OUT:  # one N per results.json: its summary is per N
        parser.error(f"--n {args.n} needs its own --out (N = {N_LEARNERS}'s results are in {OUT})")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.replot:
        jobs = [(stream, setting, seed, args.max_train, args.n)
                for seed in range(args.first_seed, args.first_seed + args.seeds)
                for stream in args.streams for setting in plan()
                if (args.methods is None or setting["method"] in args.methods)
                and (args.models is None or setting["model"] in args.models)]
        jobs.sort(key=lambda job: -job[1]["passes"])
        run_jobs(_job, jobs, args.workers, args.out / "results.json", KEY,
                 lambda row: f"{row['stream']} {label(row)} {row['method']} seed {row['seed']}: "
                             + read_values(row))
    summary = summarize(json.loads((args.out / "results.json").read_text()))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    (args.out / "table.md").write_text(markdown(summary))
    plot(summary, args.out / "ogb_defaults.png")
    for column, worst in summary["worst"].items():
        print(f"{column:22s} worst default / " + ", / ".join(
            f"{ratio.removeprefix('to_')} {value:.2f}" for ratio, value in worst.items()))


if __name__ == "__main__":
    main()
