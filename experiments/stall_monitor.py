"""False alarms and detections of the stall monitor (``BoostingStallWarning``) on the
repository's streams.

    OMP_NUM_THREADS=1 python experiments/stall_monitor.py      # ~1 min on one core

Every stream (training rows capped at ``--max-train``) is streamed for three seeded passes by
**default** boosters, as a new user builds them: ``SGB(TwoLayerNet(d, 10), n_learners=16)``
(MNIST: the configuration's conv learner, N = 8), squared loss or, for classifiers, the loss with
``targets="newton"``, as the README recommends; and ``SingleLearner`` with the same learner.
Those runs are healthy (each ends better than the best constant): any warning is a false alarm.
The **must-warn** runs break SGB on purpose: learners that never move (rate 0), a step ``η``
30 times the default, a learning rate 1e-6.

Each run records the progressive losses of every anytime prediction and of the best constant
over windows of 500 examples (after a 500-example warm-up), and how far the learners' trainable
parameters have moved since the library's warm-up (``learners_still``), so that any rule of the
monitor's form (warm-up, window, tolerance, windows in a row) is judged offline on the same
runs. The
monitor's settings are chosen here: ``--window`` examples per window, ``--tolerance`` (the
relative margin by which a shorter ensemble must beat the full one). Writes
``experiments/results/stall_monitor/results.json``: the windows of every run, and the false
alarms (after one pass and after three) and detections of each candidate rule.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults import load

from torchboost import SGB, ConvNet, SingleLearner, TwoLayerNet
from torchboost.boosters.stall import DEFAULT_WINDOW, STILL_TOLERANCE, StallMonitor

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "stall_monitor"
STREAMS = ("abalone", "adult", "pol", "kin40k", "protein", "keggundirected", "mnist")
FINE = 500  # examples per recorded window
PASSES = 3
#: candidate rules: (window in examples, tolerance of learners_hurt, whether not_beating_constant
#: also needs y^N not to improve on the window before), judged offline; the library's is
#: (2000, 0.5, True), the one before this experiment (5000, 0.01, False)
RULES = [(w, t, p) for w in (2000, 5000) for t in (0.01, 0.1, 0.2, 0.5) for p in (False, True)]
#: the must-warn runs: learners that never move (rate 0), a rate far too small; ``step_huge``
#: multiplies the default step by 30
BREAKAGES: dict[str, dict[str, Any]] = {"frozen": {"optimizer_kwargs": {"lr": 0.0}},
                                        "lr_tiny": {"optimizer_kwargs": {"lr": 1e-6}},
                                        "step_huge": {}}


def _short(value: float) -> float:
    """Six significant digits (the windows' losses, for a compact JSON)."""
    return float(f"{value:.6g}")


class _Recorder(StallMonitor):
    """A monitor of 500-example windows that keeps every window's mean losses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.windows: list[dict[str, Any]] = []
        self.seen_at_pass: list[int] = []
        self.theta0: torch.Tensor | None = None  # the learners at the library's warm-up's end

    def update(self, partials, z, sync=None, batch=None, parameters=None):  # type: ignore[override]
        out = super().update(partials, z, sync, batch)
        if self.theta0 is None and self.seen >= DEFAULT_WINDOW and parameters is not None:
            self.theta0 = self._flat(parameters)
        if self.in_window == 0 and self.last_window and (
                not self.windows or self.windows[-1]["seen"] != self.seen):
            movement = (None if self.theta0 is None else _short(
                float((self._flat(parameters) - self.theta0).norm())
                / max(float(self.theta0.norm()), 1e-12)))
            self.windows.append({"seen": self.seen,
                                 "anytime": [_short(v) for v in
                                             self.last_window["anytime"].tolist()],
                                 "constant": _short(float(self.last_window["constant"])),
                                 "movement": movement})
        return out


def build(kind: str, name: str, d: int, loss: str, outputs: int, breakage: str | None) -> Any:
    """A default booster (module docstring), broken as ``breakage`` says, with a recorder of
    500-example windows in place of its stall monitor."""
    factory, n = partial(TwoLayerNet, d, 10, outputs), 16
    if name == "mnist":
        factory, n = partial(ConvNet, 1, 28, outputs, channels=5), 8
    options: dict[str, Any] = {"loss": loss, "n_outputs": outputs}
    if kind == "single":
        booster = SingleLearner(factory, **options)
    else:
        if loss != "squared":
            options["targets"] = "newton"
        if breakage in BREAKAGES:
            options.update(BREAKAGES[breakage])
        booster = SGB(factory, n_learners=n, **options)
        if breakage == "step_huge":
            booster.step *= 30
    booster.stall = _Recorder(booster.loss, booster.n_learners, booster.out_dim, window=FINE)
    return booster


def run(name: str, kind: str, seed: int, breakage: str | None, max_train: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    ds, loss, _, _ = load(name, max_train)
    outputs = 10 if loss == "softmax" else 1
    torch.manual_seed(seed)
    booster = build(kind, name, ds.x_train[0].numel(), loss, outputs, breakage)
    gen = torch.Generator().manual_seed(1 + 1000 * seed)
    passes = []
    start = time.perf_counter()
    for _ in range(PASSES):
        for rows in torch.randperm(len(ds.y_train), generator=gen).split(32):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        passes.append(booster.samples_seen)
    score = booster.evaluate(ds.x_test, ds.y_test)
    return {"stream": name, "kind": kind, "seed": seed, "breakage": breakage,
            "pass_ends": passes, "windows": booster.stall.windows, "test": score,
            "seconds": time.perf_counter() - start}


def fires(record: dict[str, Any], window: int, tolerance: float, progress: bool,
          until: int) -> str | None:
    """The first symptom the rule (``window`` examples, ``tolerance``, two windows in a row,
    after a warm-up of one window; with ``progress``, not_beating_constant only when ``y^N``'s
    loss over the constant's did not fall since the window before: the library's rule,
    :class:`~torchboost.boosters.stall.StallMonitor`) confirms before ``until`` examples;
    ``None``: silent."""
    k = window // FINE
    fine = [w for w in record["windows"] if w["seen"] <= until]
    groups = [fine[i:i + k] for i in range(k - 1, len(fine) - k + 1, k)]  # skip the warm-up
    last: tuple[bool, bool, float, bool] = (False, False, float("inf"), False)
    moved = False
    for group in groups:
        if len(group) < k:
            break
        anytime = torch.tensor([w["anytime"] for w in group]).mean(0)
        constant = sum(w["constant"] for w in group) / k
        final = float(anytime[-1])
        ratio = final / constant
        movement = group[-1].get("movement")  # since the warm-up (absent in older records)
        moved = moved or movement is None or movement >= STILL_TOLERANCE
        now = (final >= constant, float(anytime[:-1].min()) < (1 - tolerance) * final, ratio,
               not moved)
        if now[0] and last[0] and not (progress and ratio < last[2]):
            return "not_beating_constant"
        if now[1] and last[1]:
            return "learners_hurt"
        if now[3] and last[3]:
            return "learners_still"
        last = now
    return None


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """False alarms (healthy runs that warn, after one pass and after three) and detections
    (broken runs that warn) of every rule in :data:`RULES`."""
    summary = []
    for window, tolerance, progress in RULES:
        row: dict[str, Any] = {"window": window, "tolerance": tolerance, "progress": progress}
        healthy = [r for r in records if r["breakage"] is None]
        for label, end in (("one_pass", 0), ("three_passes", -1)):
            alarms = [r for r in healthy
                      if fires(r, window, tolerance, progress, r["pass_ends"][end])]
            row[f"false_alarms_{label}"] = f"{len(alarms)}/{len(healthy)}"
            row[f"false_alarm_runs_{label}"] = [f"{r['stream']}:{r['kind']}:{r['seed']}"
                                                for r in alarms]
        broken = [r for r in records if r["breakage"] is not None]
        row["detected"] = {f"{r['stream']}:{r['breakage']}": fires(
            r, window, tolerance, progress, r["pass_ends"][-1]) for r in broken}
        summary.append(row)
        print(json.dumps({k: v for k, v in row.items() if "runs_one" not in k}))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--streams", nargs="*", default=list(STREAMS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-train", type=int, default=15000)
    parser.add_argument("--summarize", action="store_true",
                        help="judge the rules again on the runs saved in results.json")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        records = json.loads((OUT / "results.json").read_text())["runs"]
        for record in records:
            for window in record["windows"]:
                window["anytime"] = [_short(v) for v in window["anytime"]]
                window["constant"] = _short(window["constant"])
        (OUT / "results.json").write_text(json.dumps({"rules": summarize(records),
                                                      "runs": records}))
        return
    records = []
    for name in args.streams:
        jobs = [(k, s, None) for k in ("sgb", "single") for s in range(args.seeds)]
        if name in ("abalone", "kin40k", "adult"):
            jobs += [("sgb", 0, b) for b in ("frozen", "step_huge", "lr_tiny")]
        for kind, seed, breakage in jobs:
            record = run(name, kind, seed, breakage, args.max_train)
            records.append(record)
            print(name, kind, seed, breakage, record["test"], f"{record['seconds']:.0f}s",
                  flush=True)
    summary = summarize(records)
    (OUT / "results.json").write_text(json.dumps({"rules": summary, "runs": records}))


if __name__ == "__main__":
    main()
