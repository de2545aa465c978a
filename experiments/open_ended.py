"""A learning-rate schedule for a stream of unknown length: what beats the constant rate without
knowing the horizon.

    OMP_NUM_THREADS=1 python experiments/open_ended.py        # ~10 min on one core

SGB (``SGB(learner, n_learners=8, optimizer=torch.optim.Adam)``, the repository's learner per
stream, batch 32, ``standardize`` on, Adam at its rule: the default before schedule-free
learners) streams ``--passes`` seeded passes over each stream (training rows capped at
``--max-train``) under:

* ``constant`` — no schedule (the default);
* ``decay τ`` — :func:`~torchboost.decay_schedule` ``(τ)``: the rate times
  ``(1 + t/τ)^(−½)`` after ``t`` rounds, for τ in :data:`TIMESCALES` (no horizon);
* ``decay τ, power 1`` — ``(1 + t/τ)^(−1)``;
* ``cosine`` — :func:`~torchboost.cosine_schedule` over the run's known number of rounds: the
  reference an open-ended schedule is measured against (it knows where the stream ends).

The held-out metric (MSE, error rate for classifiers) is recorded after every pass; the table
gives each schedule's metric relative to the constant rate's, per stream and pass, and the
geometric mean. Writes ``experiments/results/open_ended/results.json`` and ``open_ended.png``.

Adam was the library's default optimizer when the stored results were run; the script
names it (``optimizer=torch.optim.Adam``), so that a rerun still measures Adam now that the
default is schedule-free. A rerun matches the stored results bit for bit on pol (checked against
the code before schedule-free learners); abalone and adult moved when standardisation stopped
scaling 0/1 columns (commit e960a33).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults import load

from torchboost import SGB, cosine_schedule, decay_schedule
from torchboost.harness.plotting import save_figure

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "open_ended"
STREAMS = ("abalone", "adult", "pol", "kin40k", "protein", "keggundirected", "mnist")
TIMESCALES = (100, 300, 1000, 3000)


def schedules(rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {"constant": None}
    out.update({f"decay {t}": decay_schedule(t) for t in TIMESCALES})
    out.update({f"decay {t}, power 1": decay_schedule(t, power=1.0) for t in (300, 1000)})
    out["cosine (known horizon)"] = cosine_schedule(rounds)
    return out


def run(name: str, label: str, factory: Any, passes: int, max_train: int,
        seed: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    ds, loss, learner, _ = load(name, max_train)
    outputs = 10 if loss == "softmax" else 1
    torch.manual_seed(seed)
    make = learner.factory(ds, outputs)
    options: dict[str, Any] = {"n_outputs": outputs, "stall_window": None,
                               "optimizer": torch.optim.Adam}
    if loss != "squared":
        options["targets"] = "newton"
    booster = SGB(make, loss, n_learners=8, lr_scheduler=factory, **options)
    gen = torch.Generator().manual_seed(1 + 1000 * seed)
    metrics = []
    start = time.perf_counter()
    for _ in range(passes):
        for rows in torch.randperm(len(ds.y_train), generator=gen).split(32):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        prediction = booster.predict(ds.x_test)
        if ds.task == "regression":
            metrics.append(float((prediction.double().flatten() - ds.y_test).square().mean()))
        else:
            metrics.append(booster.score(prediction, ds.y_test)["error"])
    return {"stream": name, "schedule": label, "seed": seed, "metric": metrics,
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--streams", nargs="*", default=list(STREAMS))
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--max-train", type=int, default=8000)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    records = []
    for name in args.streams:
        rows = min(args.max_train, len(load(name, args.max_train)[0].y_train))
        rounds = args.passes * math.ceil(rows / 32)
        for label, factory in schedules(rounds).items():
            for seed in range(args.seeds):
                record = run(name, label, factory, args.passes, args.max_train, seed)
                records.append(record)
                print(name, label, seed, [f"{m:.4g}" for m in record["metric"]], flush=True)
    table: dict[str, dict[str, list[float]]] = {}
    for name in args.streams:
        mean = {label: [sum(r["metric"][p] for r in records
                            if r["stream"] == name and r["schedule"] == label) / args.seeds
                        for p in range(args.passes)]
                for label in schedules(1)}
        table[name] = {label: [m / c for m, c in zip(values, mean["constant"], strict=True)]
                       for label, values in mean.items()}
    geo = {label: [math.exp(sum(math.log(table[n][label][p]) for n in table) / len(table))
                   for p in range(args.passes)] for label in schedules(1)}
    for label, values in geo.items():
        print(f"{label:28s}", " ".join(f"{v:.3f}" for v in values))
    (OUT / "results.json").write_text(json.dumps(
        {"args": vars(args), "relative_to_constant": table, "geometric_mean": geo,
         "runs": records}, indent=1))
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, values in geo.items():
        ax.plot(range(1, args.passes + 1), values, marker="o", label=label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("passes")
    ax.set_ylabel("test metric / constant rate's (geometric mean)")
    ax.set_title("open-ended schedules vs the constant rate")
    ax.legend(fontsize=7)
    save_figure(fig, OUT / "open_ended.png")


if __name__ == "__main__":
    main()
