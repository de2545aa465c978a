"""Streams have no end: the default (schedule-free) learners against Adam's tuned schedules.

    OMP_NUM_THREADS=1 python experiments/horizon_free.py                 # ~30 min on 2 cores
    python experiments/horizon_free.py --streams abalone pol --seeds 2 --workers 1
    python experiments/horizon_free.py --first-seed 6 --seeds 2      # two more seeds, merged
    python experiments/horizon_free.py --replot                         # figure from the JSON
    python experiments/horizon_free.py --spread 20     # seed spread after one pass, ~4 min
    python experiments/horizon_free.py --spread 40 --streams kin40k --spread-knobs r1  # knobs
    python experiments/horizon_free.py --spread 40 --spread-sources  # initialisation, order

Every stream of the repository (``abalone``, ``adult``, ``pol``, ``kin40k``, ``protein``,
``keggundirected``, ``mnist``; training rows capped at ``--max-train``, test rows at 2,000, as
in ``experiments/defaults.py``) is fed to ``SGB`` with N = 8 learners of the stream's kind
(:data:`~torchboost.harness.DATASETS`), ``standardize`` on, batch 32 (64 for MNIST), for 10
passes in a seeded random order; the held-out metric (test MSE, error rate) is read after
passes 1, 3 and 10. Methods:

* ``sf_<lr>_w<warm-up>``: schedule-free AdamW (the default optimizer) at each rate of
  :data:`SF_RATES` with the fan-in rule, after a linear warm-up of each length in
  :data:`SF_WARMUPS` rounds: no schedule, no horizon, one run read after 1, 3 and 10 passes.
  These chose the default rule's rate and warm-up (:mod:`~torchboost.boosters.default_lr`), at
  the package's ``β₁`` = 0.9; ``sf_1e-01_w0`` is the default (nothing set: the rule, whose
  ``β₁`` = 0.92 was chosen at that rate by the variants below).
* ``adam_<lr>``: Adam at the constant rates of :data:`ADAM_RATES` with the fan-in rule;
  ``adam_2e-02`` is the constant default before schedule-free learners.
* ``adam_decay``: Adam at 2e-2 with the open-ended :func:`~torchboost.decay_schedule` (300).
* ``adam_cosine``: Adam at 2e-2 with a cosine decay over exactly 1, 3 or 10 passes, the
  horizon given by hand (three runs, each read at its end).
* ``sf_1e-01_w0_<variant>``: the default rule changed in one respect (:data:`VARIANTS`): with
  the open-ended ``decay_schedule(300)`` on top, or schedule-free's interpolation β₁ = 0.9 (the
  rule before), 0.93 or 0.95 instead of 0.92 (all horizon-free; see the docs, "Defaults").

Each cell is run for ``--seeds`` seeds (learner initialisation and order) from
``--first-seed``; runs are merged into an existing ``results.json`` (a run of the same stream,
method and seed is replaced), so seeds and methods (``--methods``) can be added later. Writes
``experiments/results/horizon_free/results.json`` (every run), ``summary.json`` (per stream
and pass count: every method's mean and standard deviation over seeds, the best of Adam's
tuned baselines, each schedule-free rate's ratio to it, the checks of the issue),
``table.md`` (the docs' tables, each ratio with its standard error) and ``horizon_free.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults import load

from torchboost import SGB, Booster, cosine_schedule, decay_schedule
from torchboost.boosters.default_lr import (
    DEFAULT_BETAS,
    DEFAULT_LR,
    DEFAULT_LR_FAN_IN,
    DEFAULT_WARMUP,
    RULE_BETAS_BEFORE,
)
from torchboost.harness.plotting import save_figure

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "horizon_free"

STREAMS = ("abalone", "adult", "pol", "kin40k", "protein", "keggundirected", "mnist")
PASSES = (1, 3, 10)
SF_RATES = (1e-2, 2e-2, 5e-2, 1e-1, 2e-1)
SF_WARMUPS = (0, 100)
ADAM_RATES = (6.7e-3, 2e-2, 6e-2)
ADAM_LR = 2e-2
N_LEARNERS = 8

#: One-respect changes of the default rule, measured next to it: an open-ended decay of the
#: rate, and schedule-free's interpolation β₁ (the gradient is taken at ``(1 − β₁) z + β₁ x``;
#: the rule's is :data:`~torchboost.boosters.default_lr.DEFAULT_BETAS`; ``beta90``, the
#: package's own, was the rule before).
VARIANTS: dict[str, dict[str, Any]] = {
    "decay300": {"lr_scheduler": decay_schedule(300)},
    "beta90": {"optimizer_kwargs": {"betas": RULE_BETAS_BEFORE}},
    "beta93": {"optimizer_kwargs": {"betas": (0.93, 0.999)}},
    "beta95": {"optimizer_kwargs": {"betas": (0.95, 0.999)}},
}

#: More one-respect changes of the default rule, measured only for the seed spread after one
#: pass (``--spread-knobs`` takes these and :data:`VARIANTS`): the rate, β₁ and β₂, a warm-up,
#: weight decay, Adam's ε and schedule-free's ``r`` (the average weights iterate ``t`` by
#: ``t^r``: later iterates count more).
SPREAD_KNOBS: dict[str, dict[str, Any]] = {
    **{f"lr{lr:g}": {"optimizer_kwargs": {"lr": lr}} for lr in (0.07, 0.15, 0.2)},
    "beta97": {"optimizer_kwargs": {"betas": (0.97, 0.999)}},
    **{f"beta2_{b2:g}": {"optimizer_kwargs": {"betas": (DEFAULT_BETAS[0], b2)}}
       for b2 in (0.99, 0.9999)},
    **{f"warmup{w}": {"optimizer_kwargs": {"warmup_steps": w}} for w in (10, 50, 250)},
    "wd1e-3": {"optimizer_kwargs": {"weight_decay": 1e-3}},
    "eps1e-4": {"optimizer_kwargs": {"eps": 1e-4}},
    **{f"r{r:g}": {"optimizer_kwargs": {"r": float(r)}} for r in (1, 2)},
}


def methods() -> list[dict[str, Any]]:
    """Every method's settings: a name, the SGB keyword arguments' recipe, the passes it runs
    and the passes it is read at."""
    out: list[dict[str, Any]] = []
    for lr in SF_RATES:
        for warmup in SF_WARMUPS:
            out.append({"method": f"sf_{lr:.0e}_w{warmup}", "optimizer": "sf", "lr": lr,
                        "warmup": warmup, "passes": max(PASSES), "read": list(PASSES)})
    for variant in VARIANTS:
        out.append({"method": f"sf_{DEFAULT_LR:.0e}_w{DEFAULT_WARMUP}_{variant}",
                    "optimizer": "sf", "lr": DEFAULT_LR, "warmup": DEFAULT_WARMUP,
                    "variant": variant, "passes": max(PASSES), "read": list(PASSES)})
    for lr in ADAM_RATES:
        out.append({"method": f"adam_{lr:.0e}", "optimizer": "adam", "lr": lr,
                    "passes": max(PASSES), "read": list(PASSES)})
    out.append({"method": "adam_decay", "optimizer": "adam", "lr": ADAM_LR, "schedule": "decay",
                "passes": max(PASSES), "read": list(PASSES)})
    for p in PASSES:
        out.append({"method": "adam_cosine", "optimizer": "adam", "lr": ADAM_LR,
                    "schedule": "cosine", "passes": p, "read": [p]})
    return out


def booster_options(method: dict[str, Any], rounds: int) -> dict[str, Any]:
    """SGB's optimizer keyword arguments for ``method`` over ``rounds`` rounds: nothing for the
    default (the library's rule), the rule's rate, warm-up and variant made explicit for other
    schedule-free settings, Adam's rate and schedule otherwise."""
    options: dict[str, Any] = {"lr_fan_in": DEFAULT_LR_FAN_IN}
    variant = {**VARIANTS, **SPREAD_KNOBS}.get(method.get("variant", ""), {})
    if (method["optimizer"] == "sf" and not variant
            and (method["lr"], method["warmup"]) == (DEFAULT_LR, DEFAULT_WARMUP)):
        return {}  # the default: no rate, no schedule, nothing set
    if method["optimizer"] == "sf":  # the rate grid at the package's β, a variant at the rule's
        options["optimizer_kwargs"] = {"lr": method["lr"], "warmup_steps": method["warmup"],
                                       **({"betas": DEFAULT_BETAS} if variant else {}),
                                       **variant.get("optimizer_kwargs", {})}
        if "lr_scheduler" in variant:
            options["lr_scheduler"] = variant["lr_scheduler"]
        return options
    options.update(optimizer=torch.optim.Adam, optimizer_kwargs={"lr": method["lr"]})
    if method.get("schedule") == "decay":
        options["lr_scheduler"] = decay_schedule(300)
    elif method.get("schedule") == "cosine":
        options["lr_scheduler"] = cosine_schedule(rounds)
    return options


def run(stream: str, method: dict[str, Any], seed: int, max_train: int,
        order_seed: int | None = None) -> dict[str, Any]:
    """One SGB on one stream, its learners initialised from ``seed`` and the passes' order
    drawn from ``order_seed`` (``seed`` if not given); the held-out metric after each pass in
    ``method["read"]``."""
    order_seed = seed if order_seed is None else order_seed
    torch.set_num_threads(1)
    ds, loss, learner, _ = load(stream, max_train)
    batch = 64 if stream == "mnist" else 32
    outputs = 10 if loss == "softmax" else 1
    torch.manual_seed(seed)
    factory = learner.factory(ds, outputs)
    options = booster_options(method, method["passes"] * math.ceil(len(ds.y_train) / batch))
    booster = SGB(factory, loss, n_learners=N_LEARNERS, n_outputs=outputs, stall_window=None,
                  targets="newton" if loss != "squared" else "gradient", **options)
    return {"stream": stream, "seed": seed, "order_seed": order_seed, **method,
            **stream_passes(booster, ds, method["passes"], method["read"], batch, order_seed)}


def stream_passes(booster: Booster, ds: Any, passes: int, read: list[int], batch: int,
                  seed: int, power: int = 2) -> dict[str, Any]:
    """Train ``booster`` on ``passes`` passes over ``ds``'s training rows in batches, each pass
    in an order drawn from ``seed``; the held-out metric (test MSE, or with ``power=1`` the
    mean absolute error; the error rate for classifiers) after each pass in ``read``
    (``pass<p>``) and the ``seconds`` it all took."""
    order = torch.Generator().manual_seed(1 + 1000 * seed)
    row: dict[str, Any] = {}
    start = time.perf_counter()
    for p in range(1, passes + 1):
        for rows in torch.randperm(len(ds.y_train), generator=order).split(batch):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        if p in read:
            prediction = booster.predict(ds.x_test)
            if ds.task == "regression":
                value = float((prediction.double().flatten() - ds.y_test).abs().pow(power)
                              .mean())
            else:
                value = booster.score(prediction, ds.y_test)["error"]
            row[f"pass{p}"] = value if math.isfinite(value) else float("inf")
    row["seconds"] = time.perf_counter() - start
    return row


def guarded(run_fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> dict[str, Any]:
    """``run_fn(*args)`` for ``args = (stream, setting, seed, ...)``; a run that raises is
    returned as a row with an infinite metric at every pass it reads and the error: a diverged
    configuration is a result, not a crash."""
    try:
        return run_fn(*args)
    except Exception as error:
        return {"stream": args[0], "seed": args[2], **args[1],
                **{f"pass{p}": float("inf") for p in args[1]["read"]},
                "error": f"{type(error).__name__}: {str(error)[:200]}"}


def _job(args: tuple[Any, ...]) -> dict[str, Any]:
    return guarded(run, args)


def run_jobs(job: Callable[[Any], dict[str, Any]], jobs: list[Any], workers: int, path: Path,
             fields: tuple[str, ...], describe: Callable[[dict[str, Any]], str]
             ) -> list[dict[str, Any]]:
    """Run ``jobs`` in ``workers`` processes, printing each row as it comes (``describe``) and
    merging the rows into ``path`` every 20 and at the end (:func:`write_merged` on
    ``fields``), so that an interrupted run keeps what it ran."""
    results: list[dict[str, Any]] = []
    with multiprocessing.Pool(workers) as pool:
        for i, row in enumerate(pool.imap_unordered(job, jobs), 1):
            results.append(row)
            print(f"[{i}/{len(jobs)}] {describe(row)}", flush=True)
            if i % 20 == 0 or i == len(jobs):
                write_merged(path, results, fields)
    return results


def read_values(row: dict[str, Any]) -> str:
    """A run's metrics as ``pass1=… pass3=…`` for progress lines."""
    return " ".join(f"{k}={row[k]:.4g}" for k in row if k.startswith("pass") and k != "passes")


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stream and pass count: mean and std over seeds of every method; the best of the
    tuned Adam baselines (cosine that knows the end, the best constant rate); each
    schedule-free setting's ratio to it and to today's constant default."""
    cells: dict[str, Any] = {}
    for stream in sorted({r["stream"] for r in results}):
        for p in PASSES:
            key = f"pass{p}"
            values: dict[str, list[float]] = {}
            for r in results:
                if r["stream"] == stream and key in r:
                    values.setdefault(r["method"], []).append(r[key])
            stats = {m: {"mean": statistics.fmean(v),
                         "std": statistics.stdev(v) if len(v) > 1 else 0.0,
                         "standard_error": (statistics.stdev(v) / math.sqrt(len(v))
                                            if len(v) > 1 else 0.0),
                         "seeds": len(v)} for m, v in values.items()}
            constants = [m for m in stats if m.startswith("adam_") and m[5].isdigit()]
            best_constant = min(constants, key=lambda m: stats[m]["mean"])
            tuned = min(stats["adam_cosine"]["mean"], stats[best_constant]["mean"])
            cells[f"{stream}/{p}"] = {
                "stats": stats, "best_constant": best_constant, "tuned_best": tuned,
                "ratio_to_tuned": {m: s["mean"] / tuned for m, s in stats.items()
                                   if m.startswith("sf_")},
                "ratio_to_old_default": {m: s["mean"] / stats[f"adam_{ADAM_LR:.0e}"]["mean"]
                                         for m, s in stats.items() if m.startswith("sf_")},
            }
    settings = sorted({m for c in cells.values() for m in c["ratio_to_tuned"]})
    ranking = {m: math.exp(statistics.fmean(math.log(c["ratio_to_tuned"][m])
                                            for c in cells.values()))
               for m in settings}
    worst = {m: max(c["ratio_to_tuned"][m] for c in cells.values()) for m in settings}
    return {"cells": cells, "geometric_mean_ratio_to_tuned": ranking,
            "worst_ratio_to_tuned": worst}


#: ``--spread``: the old default (Adam at 2e-2) against the new one, one pass, many seeds
SPREAD_METHODS = (
    {"method": f"adam_{ADAM_LR:.0e}", "optimizer": "adam", "lr": ADAM_LR, "passes": 1,
     "read": [1]},
    {"method": "default", "optimizer": "sf", "lr": DEFAULT_LR, "warmup": DEFAULT_WARMUP,
     "passes": 1, "read": [1]},
)


def spread_knob(name: str) -> dict[str, Any]:
    """``--spread-knobs``: the default rule changed by ``name`` (of :data:`VARIANTS` or
    :data:`SPREAD_KNOBS`), one pass."""
    return {"method": f"default_{name}", "optimizer": "sf", "lr": DEFAULT_LR,
            "warmup": DEFAULT_WARMUP, "variant": name, "passes": 1, "read": [1]}


def source_jobs(streams: list[str], seeds: int, max_train: int) -> list[tuple[Any, ...]]:
    """``--spread-sources``: the jobs of :data:`SPREAD_METHODS` with one source of randomness
    varied over ``seeds`` and the other held at seed 0: the learners' initialisation
    (``"source": "init"``) or the passes' order (``"order"``)."""
    return [(stream, {**method, "source": source}, seed if source == "init" else 0, max_train,
             seed if source == "order" else 0)
            for seed in range(seeds) for stream in streams for method in SPREAD_METHODS
            for source in ("init", "order")]


def sources(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stream and source of randomness (``--spread-sources``): :func:`spread` of the runs
    that vary it."""
    return {stream: {source: spread([r for r in results
                                     if r["stream"] == stream and r["source"] == source])[stream]
                     for source in ("init", "order")}
            for stream in sorted({r["stream"] for r in results})}


def spread(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per stream: each method's mean and standard deviation over seeds after one pass, and
    the new default's standard deviation over the old one's (``std_ratio``; a knob's in its
    own entry)."""
    old = f"adam_{ADAM_LR:.0e}"
    out: dict[str, Any] = {}
    for stream in sorted({r["stream"] for r in results}):
        cell: dict[str, Any] = {}
        for method in dict.fromkeys(r["method"] for r in results if r["stream"] == stream):
            values = [r["pass1"] for r in results if r["stream"] == stream
                      and r["method"] == method]
            cell[method] = {"mean": statistics.fmean(values), "std": statistics.stdev(values),
                            "seeds": len(values)}
        for method, stats in cell.items():
            if method.startswith("default_"):
                stats["std_ratio"] = stats["std"] / cell[old]["std"]
        cell["std_ratio"] = cell["default"]["std"] / cell[old]["std"]
        out[stream] = cell
    return out


def ratio_error(cell: dict[str, Any], method: str, reference: str) -> float:
    """The standard error of ``mean(method) / mean(reference)`` from the two means' standard
    errors (first order; seeds treated as independent)."""
    a, b = cell["stats"][method], cell["stats"][reference]
    return (a["mean"] / b["mean"]) * math.hypot(a["standard_error"] / a["mean"],
                                                b["standard_error"] / b["mean"])


def markdown(summary: dict[str, Any]) -> str:
    """The docs' tables (``table.md``): the rule's ranking, the default against tuned Adam and
    the old default per cell (ratio ± its standard error), and the rule's variants."""
    cells = summary["cells"]
    default = f"sf_{DEFAULT_LR:.0e}_w{DEFAULT_WARMUP}"
    old = f"adam_{ADAM_LR:.0e}"
    variants = [f"{default}_{v}" for v in VARIANTS]

    def bold(ratio: float) -> str:  # the default better than tuned Adam
        return f"**{ratio:.2f}**" if ratio < 1 else f"{ratio:.2f}"

    def fmt(stats: dict[str, Any]) -> str:
        return f"{stats['mean']:.4g} ± {stats['std']:.2g}"

    def tuned(cell: dict[str, Any]) -> str:
        return min(("adam_cosine", cell["best_constant"]),
                   key=lambda m: cell["stats"][m]["mean"])

    ranking = sorted(summary["geometric_mean_ratio_to_tuned"].items(), key=lambda kv: kv[1])
    lines = ["| schedule-free setting | geometric mean / best tuned Adam | worst cell |",
             "|---|---:|---:|"]
    lines += [f"| `{m}` | {r:.3f} | {summary['worst_ratio_to_tuned'][m]:.3f} |"
              for m, r in ranking]
    lines += ["", "| stream | passes | Adam + cosine that knows the end | Adam, best constant | "
              "Adam 2e-2 (old default) | **default** | default / best tuned | "
              "default / old default |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, cell in cells.items():
        stream, p = key.split("/")
        best, s = cell["best_constant"], cell["stats"]
        rate = next(r for r in ADAM_RATES if f"adam_{r:.0e}" == best)
        lines.append(
            f"| {stream} | {p} | {fmt(s['adam_cosine'])} | {fmt(s[best])} ({rate:.2g}) | "
            f"{fmt(s[old])} | {fmt(s[default])} | {bold(cell['ratio_to_tuned'][default])} "
            f"± {ratio_error(cell, default, tuned(cell)):.2f} | "
            f"{cell['ratio_to_old_default'][default]:.2f} ± "
            f"{ratio_error(cell, default, old):.2f} |")
    present = [v for v in variants if all(v in c["ratio_to_tuned"] for c in cells.values())]
    if present:
        lines += ["", "| stream | passes | default / best tuned | "
                  + " | ".join(f"`{v.removeprefix(default + '_')}` / best tuned"
                               for v in present) + " |",
                  "|---|---:|---:|" + "---:|" * len(present)]
        for key, cell in cells.items():
            stream, p = key.split("/")
            lines.append(f"| {stream} | {p} | {cell['ratio_to_tuned'][default]:.2f} | "
                         + " | ".join(f"{cell['ratio_to_tuned'][v]:.2f}" for v in present)
                         + " |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    cells = summary["cells"]
    streams = sorted({key.split("/")[0] for key in cells})
    fig, axes = plt.subplots(1, len(PASSES), figsize=(5 * len(PASSES), 5.8), sharey=True,
                             layout="constrained")
    for ax, p in zip(axes, PASSES, strict=True):
        for i, stream in enumerate(streams):
            cell = cells[f"{stream}/{p}"]
            tuned = cell["tuned_best"]
            for method, marker, label in (
                    ("adam_cosine", "s", "Adam + cosine that knows the end"),
                    (cell["best_constant"], "^", "Adam, best of 3 constant rates"),
                    (f"adam_{ADAM_LR:.0e}", "v", "Adam 2e-2 (the old default)"),
                    ("adam_decay", "x", "Adam + decay_schedule")):
                if method not in cell["stats"]:  # a run of some methods (--methods)
                    continue
                stats = cell["stats"][method]
                ax.errorbar(i - 0.2, stats["mean"] / tuned, yerr=stats["std"] / tuned,
                            fmt=marker, color="grey", alpha=0.6, label=label if i == 0 else None)
            for j, lr in enumerate(SF_RATES):
                if f"sf_{lr:.0e}_w0" not in cell["stats"]:
                    continue
                stats = cell["stats"][f"sf_{lr:.0e}_w0"]
                default = lr == DEFAULT_LR  # the rule: its β₁, not the package's
                label = (f"default: schedule-free {lr:g}, β₁ = {DEFAULT_BETAS[0]:g}" if default
                         else f"schedule-free {lr:g}, β₁ = {RULE_BETAS_BEFORE[0]:g}")
                ax.errorbar(i + 0.05 * j, stats["mean"] / tuned, yerr=stats["std"] / tuned,
                            fmt="D" if default else "o", markersize=8 if default else 6,
                            color=f"C{j}", label=label if i == 0 else None)
        ax.axhline(1.05, color="k", lw=0.5, ls="--",
                   label="5 % above the best tuned Adam" if p == PASSES[-1] else None)
    finish_pass_panels(fig, axes, streams, "test metric / best tuned Adam (mean ± std over seeds)",
                       ncol=5)
    save_figure(fig, path)


def finish_pass_panels(fig: Any, axes: Any, streams: list[str], ylabel: str, ncol: int) -> None:
    """Label one panel per pass count (``axes`` in the order of :data:`PASSES`) with the
    streams along x and a log y, and put the last panel's legend under the figure."""
    for ax, p in zip(axes, PASSES, strict=True):
        ax.set_xticks(range(len(streams)), streams, rotation=35, ha="right")
        ax.set_title(f"after {p} pass{'es' if p > 1 else ''}")
        ax.set_yscale("log")
    axes[0].set_ylabel(ylabel)
    fig.legend(*axes[-1].get_legend_handles_labels(), loc="outside lower center", ncol=ncol,
               fontsize=8)


def add_run_arguments(parser: argparse.ArgumentParser, streams: tuple[str, ...], seeds: int,
                      out: Path) -> None:
    """The options every stream × seed experiment here shares: which streams and seeds, rows,
    worker processes, ``--replot`` and the output folder."""
    parser.add_argument("--streams", nargs="+", default=list(streams), choices=streams)
    parser.add_argument("--seeds", type=int, default=seeds)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--max-train", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--replot", action="store_true",
                        help="summarise and plot results.json again, without running")
    parser.add_argument("--out", type=Path, default=out)


#: what identifies a run in ``results.json`` (a rerun replaces it)
KEY = ("stream", "method", "seed", "passes")


def write_merged(path: Path, results: list[dict[str, Any]],
                 fields: tuple[str, ...] = KEY) -> None:
    """Write ``results`` into the JSON list at ``path``, replacing earlier runs that agree on
    ``fields`` (by default the same stream, method, seed and horizon; atomically: a crash
    leaves the old file)."""
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[f] for f in fields)

    old = json.loads(path.read_text()) if path.exists() else []
    new = {key(r) for r in results}
    merged = [r for r in old if key(r) not in new] + results
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(merged, indent=1))
    tmp.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_run_arguments(parser, STREAMS, seeds=6, out=OUT)
    parser.add_argument("--methods", nargs="+", default=None,
                        help="only these methods (names as in results.json)")
    parser.add_argument("--spread", type=int, default=0, metavar="SEEDS",
                        help="only the seed spread after one pass: the old default against "
                             "the new, over SEEDS seeds (spread.json)")
    parser.add_argument("--spread-knobs", nargs="+", default=[],
                        choices=sorted(VARIANTS | SPREAD_KNOBS),
                        help="with --spread: the default rule changed by each of these too "
                             "(spread_knobs.json)")
    parser.add_argument("--spread-sources", action="store_true",
                        help="with --spread: vary the learners' initialisation and the order "
                             "one at a time, the other at seed 0 (spread_sources.json)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.spread_sources and (args.spread_knobs or not args.spread):
        parser.error("--spread-sources goes with --spread SEEDS and without --spread-knobs")
    if args.spread:
        if args.spread_sources:
            jobs = source_jobs(args.streams, args.spread, args.max_train)
        else:
            jobs = [(stream, method, seed, args.max_train) for seed in range(args.spread)
                    for stream in args.streams
                    for method in SPREAD_METHODS + tuple(map(spread_knob, args.spread_knobs))]
        with multiprocessing.Pool(args.workers) as pool:
            rows = pool.map(_job, jobs)
        # other streams' runs stay (--streams reruns some); knobs and sources have their files
        path = args.out / ("spread_sources.json" if args.spread_sources else
                           "spread_knobs.json" if args.spread_knobs else "spread.json")
        kept = [r for r in (json.loads(path.read_text())["runs"] if path.exists() else [])
                if r["stream"] not in args.streams]
        rows = kept + rows
        if args.spread_sources:
            table = sources(rows)
            path.write_text(json.dumps({"runs": rows, "sources": table}, indent=1))
            for stream in args.streams:
                print(f"{stream:15s} " + "; ".join(
                    f"{source}: std old {cell[f'adam_{ADAM_LR:.0e}']['std']:.4g} new "
                    f"{cell['default']['std']:.4g} ratio {cell['std_ratio']:.2f}"
                    for source, cell in table[stream].items()))
            return
        table = spread(rows)
        path.write_text(json.dumps({"runs": rows, "spread": table}, indent=1))
        for stream, cell in table.items():
            if stream not in args.streams:
                continue
            print(f"{stream:15s} std old {cell[f'adam_{ADAM_LR:.0e}']['std']:.4g} new "
                  f"{cell['default']['std']:.4g} ratio {cell['std_ratio']:.2f}")
            for knob in args.spread_knobs:
                stats = cell[f"default_{knob}"]
                print(f"{'':15s} {knob}: mean {stats['mean']:.4g} std {stats['std']:.4g} "
                      f"ratio {stats['std_ratio']:.2f}")
        return
    if not args.replot:
        chosen = [m for m in methods() if args.methods is None or m["method"] in args.methods]
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        jobs = [(stream, method, seed, args.max_train) for seed in seeds
                for stream in args.streams for method in chosen]
        jobs.sort(key=lambda job: -job[1]["passes"] * (20 if job[0] == "mnist" else 1))
        run_jobs(_job, jobs, args.workers, args.out / "results.json", KEY,
                 lambda row: f"{row['stream']} {row['method']} seed {row['seed']}: "
                             + read_values(row))
    summary = summarize(json.loads((args.out / "results.json").read_text()))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    (args.out / "table.md").write_text(markdown(summary))
    plot(summary, args.out / "horizon_free.png")
    for method, ratio in sorted(summary["geometric_mean_ratio_to_tuned"].items(),
                                key=lambda kv: kv[1]):
        print(f"{method:14s} geometric mean / tuned {ratio:.3f}, worst "
              f"{summary['worst_ratio_to_tuned'][method]:.3f}")


if __name__ == "__main__":
    main()
