"""Samples/s of one SGB streaming step: stacked vs loop vs a monolithic network, and in the
same run the other costs of issue 13: ``torch.compile`` vs eager, the Lightning path vs the raw
loop, and stagewise GB's seconds per batch by stage — one JSON.

The SLICE shape of the SGB paper: 384 inputs, two-layer learners with 10 hidden units (leaky
ReLU), batch 256. The monolithic reference is one ``384 → 10N → 1`` network (the same parameter
count up to N−1 output biases) trained on squared loss by the learners' default optimizer
(schedule-free AdamW; ``stacked_over_monolithic``) and, in the same run, both sides by Adam
(``stacked_over_monolithic_adam``): what the hardware does with the same work when nothing is
split into learners. ``learners`` is the stacked learners' own step with no booster around it
(:func:`learners_step`): ``learners_over_monolithic`` bounds what stacked/monolithic can reach,
and ``outside_learners`` is the share of a stacked round spent beyond it (checks, guards,
partial sums, book-keeping, the switch to the learning point). The boosters run with
``standardize=False`` like that network, and with one learning rate for every weight like it
(SGB's default rule would give the 384-input layer its own parameter group, i.e. a second
optimizer call); ``standardize_overhead`` is the extra time of SGB's default running
standardisation (:mod:`torchboost.boosters.scaling`) at each N, ``prodigy_overhead`` that of
:class:`~torchboost.learners.Prodigy` (capped, so that the guards' bound applies) instead of
Adam.

    python benchmarks/throughput.py                 # CPU (and CUDA when available)
    python benchmarks/throughput.py --n 8 64 256 --device cuda --out results.json

It also reports the extra cost per round of SGB's second-order options on a 10-class softmax
problem of the same shape (``newton_overhead``: ``targets="newton"``; ``learned_overhead``:
``targets="newton", step="learned"``; both relative to gradient targets with a fixed step),
timed in alternating windows so that load from other processes hits every variant alike.

The other sections come from their own scripts, run here with the same device and threads:
``compile`` (the stacked step with ``compile=True`` over eager, for ``--compile-n``),
``stagewise`` (:mod:`stagewise_cost`: GB's frozen learners as a loop vs one stacked call) and
``lightning`` (:mod:`lightning_overhead`: ``trainer.fit`` vs the plain loop on an ABALONE-sized
SGB, one round per Lightning step and ``--lightning-groups`` rounds per step through
:class:`~torchboost.data.BatchGroups`). On a GPU machine ``--device cuda`` fills every section.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import stagewise_cost
import torch
from common import BATCH, HIDDEN, IN_FEATURES, interleaved
from torch import nn

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.stall import BoostingStallWarning
from torchboost.learners import Prodigy, WeakLearners
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER


def booster_step(n: int, mode: str, device: str, classes: int = 0,
                 **options: object) -> Callable[[], None]:
    """One ``learn`` of SGB: squared loss, or softmax over ``classes`` classes with ``options``."""
    torch.manual_seed(0)
    out = max(classes, 1)
    loss = "softmax" if classes else "squared"
    options = {"standardize": False, "optimizer_kwargs": {"lr": 1e-3},  # like the monolithic
               "n_threads": None, **options}        # network, under the same threads
    booster = SGB(lambda: TwoLayerNet(IN_FEATURES, HIDDEN, out, activation="leaky_relu"), loss,
                  n_learners=n, n_outputs=out, mode=mode, **options).to(device)
    x = torch.randn(BATCH, IN_FEATURES, device=device)
    y = (torch.randint(0, classes, (BATCH,)) if classes else torch.randn(BATCH)).to(device)
    return lambda: booster.learn(x, y)


SECOND_ORDER = {"gradient": {"step": 0.5}, "newton": {"targets": "newton"},
                "learned": {"targets": "newton", "step": "learned"}}


def second_order_overheads(n: int, device: str, min_seconds: float,
                           repeats: int = 5) -> dict[str, float]:
    """Each second-order variant's seconds per round as the relative extra cost over gradient
    targets (medians of alternating windows)."""
    steps = {name: booster_step(n, "stacked", device, 10, **options)
             for name, options in SECOND_ORDER.items()}
    median = interleaved(steps, device, min_seconds, repeats)
    return {f"{name}_overhead": median[name] / median["gradient"] - 1.0
            for name in ("newton", "learned")}


def learners_step(n: int, device: str) -> Callable[[], None]:
    """The stacked learners' own step, with no booster around it: their forward, the gradient
    of their squared losses to fixed targets, backward and the fused Adam step, with the same
    learners and rate as :func:`booster_step`. What is left of a stacked round without its
    checks, guards, partial sums and book-keeping: the ceiling of stacked/monolithic."""
    torch.manual_seed(0)
    learners = WeakLearners(lambda: TwoLayerNet(IN_FEATURES, HIDDEN, activation="leaky_relu"),
                            n, mode="stacked", optimizer_kwargs={"lr": 1e-3}).to(device)
    x = torch.randn(BATCH, IN_FEATURES, device=device)
    targets = torch.randn(n, BATCH, 1, device=device)

    def step() -> None:
        with learners.learning_point():
            outputs = learners(x)
            learners.step_outputs(outputs, (outputs.detach() - targets) * (2.0 / BATCH))

    return step


def monolithic_step(n: int, device: str, adam: bool = False) -> Callable[[], None]:
    """One step of the monolithic network with the learners' default optimizer (schedule-free
    AdamW, in train mode throughout, as a plain training loop would run it) or, with ``adam``,
    torch's fused Adam (the kernel the stacked Adam path uses)."""
    torch.manual_seed(0)
    net = TwoLayerNet(IN_FEATURES, HIDDEN * n, activation="leaky_relu").to(device)
    if adam:
        opt = torch.optim.Adam(net.parameters(), fused=True)
    else:
        opt = DEFAULT_OPTIMIZER(net.parameters(), lr=1e-3)
        opt.train()
    x = torch.randn(BATCH, IN_FEATURES, device=device)
    y = torch.randn(BATCH, 1, device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(net(x), y).backward()
        opt.step()

    return step


def measure(ns: list[int], device: str, min_seconds: float, repeats: int) -> list[dict]:
    rows = []
    for n in ns:
        row: dict = {"device": device, "n_learners": n}
        steps = {"stacked": booster_step(n, "stacked", device),
                 "loop": booster_step(n, "loop", device),
                 "monolithic": monolithic_step(n, device),
                 "stacked_adam": booster_step(n, "stacked", device, optimizer=torch.optim.Adam),
                 "monolithic_adam": monolithic_step(n, device, adam=True),
                 "learners": learners_step(n, device),
                 "standardized": booster_step(n, "stacked", device, standardize=True),
                 "prodigy": booster_step(n, "stacked", device, optimizer=Prodigy,
                                         optimizer_kwargs={"d0": 1e-3, "d_max": 3e-2})}
        seconds = interleaved(steps, device, min_seconds * len(steps), repeats)
        row.update({name: BATCH / seconds[name]
                    for name in ("stacked", "loop", "monolithic", "learners")})
        row["standardize_overhead"] = seconds["standardized"] / seconds["stacked"] - 1.0
        row["prodigy_overhead"] = seconds["prodigy"] / seconds["stacked"] - 1.0
        row["stacked_over_loop"] = row["stacked"] / row["loop"]
        row["stacked_over_monolithic"] = row["stacked"] / row["monolithic"]
        row["stacked_over_monolithic_adam"] = seconds["monolithic_adam"] / seconds["stacked_adam"]
        # the floor as first defined: the default stacked round against the network by Adam
        row["stacked_over_monolithic_fused_adam"] = (seconds["monolithic_adam"]
                                                     / seconds["stacked"])
        row["learners_over_monolithic"] = row["learners"] / row["monolithic"]
        row["outside_learners"] = 1.0 - seconds["learners"] / seconds["stacked"]
        row.update(second_order_overheads(n, device, min_seconds, repeats))
        rows.append(row)
        print(f"{device:5s} N={n:4d}  stacked {row['stacked']:10.0f}/s"
              f"  loop {row['loop']:10.0f}/s  monolithic {row['monolithic']:10.0f}/s"
              f"  stacked/loop {row['stacked_over_loop']:6.2f}"
              f"  stacked/mono {row['stacked_over_monolithic']:5.2f}"
              f" (Adam {row['stacked_over_monolithic_adam']:5.2f},"
              f" default/Adam net {row['stacked_over_monolithic_fused_adam']:5.2f})"
              f"  learners/mono {row['learners_over_monolithic']:5.2f}"
              f"  outside learners {100 * row['outside_learners']:.0f}%"
              f"  standardize +{100 * row['standardize_overhead']:.1f}%"
              f"  prodigy +{100 * row['prodigy_overhead']:.1f}%"
              f"  newton +{100 * row['newton_overhead']:.1f}%"
              f"  newton+learned +{100 * row['learned_overhead']:.1f}%", flush=True)
    return rows


def compile_speedups(ns: list[int], device: str, min_seconds: float,
                     repeats: int) -> list[dict]:
    """The stacked step with ``compile=True`` against eager (compiled before the timing)."""
    rows = []
    for n in ns:
        steps = {"eager": booster_step(n, "stacked", device),
                 "compiled": booster_step(n, "stacked", device, compile=True)}
        start = time.perf_counter()
        steps["compiled"]()
        first_call = time.perf_counter() - start
        seconds = interleaved(steps, device, min_seconds * len(steps), repeats)
        rows.append({"device": device, "n_learners": n,
                     "compiled_over_eager": seconds["eager"] / seconds["compiled"],
                     "first_compiled_call_seconds": first_call})
        print(f"{device:5s} N={n:4d}  compiled/eager speed {rows[-1]['compiled_over_eager']:.2f}"
              f"  (first call {first_call:.0f} s)", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n", type=int, nargs="+", default=[1, 8, 64, 256])
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="timing seconds per cell (split into --repeats windows)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="alternating timing windows per cell; medians are reported")
    parser.add_argument("--compile-n", type=int, nargs="*", default=[64],
                        help="N for the compile-vs-eager section (none: skip it)")
    parser.add_argument("--lightning-groups", type=int, nargs="+", default=[1, 8],
                        help="rounds per Lightning step (BatchGroups) for the Lightning section")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: as is)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/throughput.json"))
    args = parser.parse_args()
    # every step repeats one batch: the stall monitor would rightly call that a stall
    warnings.simplefilter("ignore", BoostingStallWarning)
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    devices = [d for d in devices if d == "cpu" or torch.cuda.is_available()]
    rows = [r for d in devices for r in measure(args.n, d, args.seconds, args.repeats)]
    compiled = [r for d in devices
                for r in compile_speedups(args.compile_n, d, args.seconds, args.repeats)]
    stagewise = [stagewise_cost.measure([n for n in args.n if n > 2], d, threads=None,
                                        repeats=args.repeats) for d in devices]
    # Imported last: importing Lightning switches torch to an NVML-based CUDA check that costs
    # every Adam step on a machine without CUDA (torchboost.lightning.cuda_check)
    import lightning_overhead
    lightning = [lightning_overhead.measure(repeats=args.repeats, device=d, threads=None,
                                            group=group)
                 for d in devices for group in args.lightning_groups]
    for report in lightning:
        print(f"{report['device']:5s} Lightning/raw {report['lightning_over_raw']:.3f}"
              f" (CPU seconds {report['lightning_over_raw_cpu']:.3f}) with "
              f"{report['group']} round(s) per step", flush=True)
    meta = {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "machine": platform.processor() or platform.machine(),
            "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "batch": BATCH, "in_features": IN_FEATURES, "hidden": HIDDEN}
    report = {"meta": meta, "rows": rows, "compile": compiled, "stagewise": stagewise,
              "lightning": lightning}
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
