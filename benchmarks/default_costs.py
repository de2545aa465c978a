"""What each optional default costs a round: the booster of ``round_cost.py`` at the defaults,
with one default switched off at a time and with all of them off, against the same network
(issue "Every cycle goes to learning": "a benchmark that switches a default off says so, beside
the default's figure").

The three defaults a user can switch off (``SGB``'s arguments):

* ``standardize=False``: no running standardisation of features and regression labels
  (:mod:`torchboost.boosters.scaling`);
* ``stall_window=None``: no stall monitor (:mod:`torchboost.boosters.stall`);
* ``bound_predictions=False``: predictions not bounded by the labels seen
  (:mod:`torchboost.boosters.bounds`).

What stays in every variant (the transaction, the guards, the schedule-free learners, the
partial sums and the round's book-keeping) has no switch. For each shape every variant and the
network alternate window by window in one process; per variant the ATen operations and host
syncs of a steady-state round (``round_cost.count``), the median time, the time over the
defaults' and over the network's step, and network / round (for the SLICE shape the goal's
stacked / monolithic). The JSON records the windows' seconds and repeats.

    OMP_NUM_THREADS=1 python benchmarks/default_costs.py              # small and SLICE N = 64
    OMP_NUM_THREADS=1 python benchmarks/default_costs.py --shapes mnist --n 8
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import interleaved, timing_arguments, write_timings
from round_cost import count, shape

#: the variants, by what they switch off
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "standardize=False": {"standardize": False},
    "stall_window=None": {"stall_window": None},
    "bound_predictions=False": {"bound_predictions": False},
    "all three off": {"standardize": False, "stall_window": None, "bound_predictions": False},
}


def measure(names: list[str], n: int, device: str, seconds: float, repeats: int,
            on_row: Callable[[list[dict[str, Any]]], Any] = lambda rows: None
            ) -> list[dict[str, Any]]:
    """One row per shape and variant (``n`` learners; the small shape has 8);
    ``on_row(rows)`` after each shape (the JSON is written as it grows)."""
    rows: list[dict[str, Any]] = []
    for name in names:
        learners = 8 if name == "small" else n
        steps: dict[str, Callable[[], Any]] = {}
        for variant, options in VARIANTS.items():
            steps[variant], network, _ = shape(name, learners, device, **options)
        steps["network"] = network
        counts = {name_: count(step) for name_, step in steps.items()}
        times = interleaved(steps, device, seconds, repeats)
        for variant in VARIANTS:
            ops, syncs = counts[variant]
            row = {"shape": name, "n": learners, "variant": variant, "ops": ops,
                   "syncs": syncs, "network_ops": counts["network"][0],
                   "round_us": times[variant] * 1e6, "network_us": times["network"] * 1e6,
                   "over_defaults": times[variant] / times["defaults"],
                   "round_over_network": times[variant] / times["network"],
                   "network_over_round": times["network"] / times[variant]}
            rows.append(row)
            print(f"{name:6s} N={learners:<3d} {variant:24s} {ops:5d} ops {syncs} syncs "
                  f"{row['round_us']:8.0f} us  x{row['over_defaults']:.2f} of the defaults  "
                  f"{row['round_over_network']:.2f}x the network")
        on_row(rows)
    return rows


def main() -> None:
    warnings.simplefilter("ignore")  # one batch repeated: the stall monitor rightly warns
    args = timing_arguments(__doc__.splitlines()[0], Path(__file__).with_suffix(".json"),
                            seconds=2.0, extra=lambda parser: (
        parser.add_argument("--shapes", nargs="+", default=["small", "slice"],
                            choices=["small", "mnist", "slice"]),
        parser.add_argument("--n", type=int, default=64,
                            help="learners for the mnist and slice shapes (small: 8)")))
    measure(args.shapes, args.n, args.device, args.seconds, args.repeats,
            on_row=lambda rows: write_timings(args.out, args.device, rows,
                                              allocator=args.allocator, seconds=args.seconds,
                                              repeats=args.repeats))


if __name__ == "__main__":
    main()
