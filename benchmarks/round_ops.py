"""The operations one streaming round dispatches, counted (not timed) and grouped by the
torchboost function they come from: the deterministic measure of a round's fixed cost.

One stacked SGB ``learn`` in the SLICE shape of ``benchmarks/throughput.py`` (384 inputs,
``TwoLayerNet(384, 10, 1, activation="leaky_relu")``, batch 256, squared loss,
``standardize=False`` unless ``--standardize``), after enough rounds that the stall monitor is
past its warm-up. Every ATen operation the round runs (the backward pass's included) is counted
once, under the innermost torchboost or ``torch.optim`` function on the Python stack when it
was dispatched; ``learners`` sums the weak learners' forward, backward and optimizer step, the
rest is the round's fixed cost (input checks, guards, partial sums, book-keeping, stall monitor).
Counts do not depend on the machine's load, unlike the timings of ``throughput.py``.

    python benchmarks/round_ops.py                   # N = 64
    python benchmarks/round_ops.py --n 64 256 --standardize --json ops.json
"""

from __future__ import annotations

import argparse
import json
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from common import BATCH, HIDDEN, IN_FEATURES
from torch.utils._python_dispatch import TorchDispatchMode

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.stall import BoostingStallWarning

#: the functions whose operations are the weak learners' own work (``wrapper``: an optimizer's
#: ``step``; ``foreach_schedule_free_step`` and its ``_add_number``: the stacked schedule-free
#: learners')
LEARNER_FUNCTIONS = ("stacked_sequential", "step_outputs", "_fused_adam", "wrapper",
                     "foreach_schedule_free_step", "_add_number")


class _Counter(TorchDispatchMode):
    """Counts each dispatched ATen operation under the innermost torchboost/optimizer frame."""

    def __init__(self) -> None:
        super().__init__()
        self.by_function: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        where = "other"
        for frame in reversed(traceback.extract_stack()[:-1]):
            if "torchboost" in frame.filename or "torch/optim" in frame.filename:
                where = f"{Path(frame.filename).stem}.{frame.name}"
                break
        self.by_function[where] += 1
        return func(*args, **(kwargs or {}))


def count_ops(step: Callable[[], Any]) -> Counter[str]:
    """ATen operations of one call of ``step``, by ``module.function``."""
    counter = _Counter()
    with counter:
        step()
    return counter.by_function


def sgb_round(n: int, standardize: bool = False, adam: bool = True) -> Callable[[], Any]:
    """One stacked SGB ``learn`` of the SLICE shape, past the stall monitor's warm-up: with
    Adam (one rate, one fused Adam call, as before schedule-free learners) or with the default
    schedule-free learners at one rate."""
    torch.manual_seed(0)
    optimizer = {"optimizer": torch.optim.Adam} if adam else {}
    booster = SGB(lambda: TwoLayerNet(IN_FEATURES, HIDDEN, 1, activation="leaky_relu"),
                  "squared", n_learners=n, mode="stacked", standardize=standardize,
                  optimizer_kwargs={"lr": 1e-3}, **optimizer)
    x, y = torch.randn(BATCH, IN_FEATURES), torch.randn(BATCH)
    with warnings.catch_warnings():  # one batch repeated: the monitor rightly calls it a stall
        warnings.simplefilter("ignore", BoostingStallWarning)
        for _ in range(booster.stall.window // BATCH + 2):
            booster.learn(x, y)

    def step() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BoostingStallWarning)
            booster.learn(x, y)

    return step


def report(n: int, standardize: bool = False, adam: bool = True) -> dict[str, Any]:
    """``{"n", "total", "learners", "fixed", "by_function"}`` for one round."""
    counts = count_ops(sgb_round(n, standardize, adam))
    learners = sum(v for k, v in counts.items() if k.split(".")[-1] in LEARNER_FUNCTIONS)
    total = sum(counts.values())
    return {"n": n, "standardize": standardize, "adam": adam, "total": total, "learners": learners,
            "fixed": total - learners, "by_function": dict(counts.most_common())}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n", type=int, nargs="+", default=[64])
    parser.add_argument("--standardize", action="store_true")
    parser.add_argument("--schedule-free", action="store_true",
                        help="the default schedule-free learners instead of Adam")
    parser.add_argument("--json", type=Path, help="also write the reports here")
    args = parser.parse_args()
    reports = [report(n, args.standardize, not args.schedule_free) for n in args.n]
    for r in reports:
        print(f"N={r['n']}: {r['total']} ATen ops per round, {r['learners']} the learners', "
              f"{r['fixed']} fixed")
        for name, count in r["by_function"].items():
            print(f"  {count:4d}  {name}")
    if args.json is not None:
        args.json.write_text(json.dumps(reports, indent=2))


if __name__ == "__main__":
    main()
