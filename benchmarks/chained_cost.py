"""What a chained round costs (issue "Boosting that beats the network it replaces"): SGB rounds
with chained learners (:mod:`torchboost.learners.chained`), stacked and in the loop, against the
same booster unchained and stacked, in alternating windows, for small, SLICE-shaped and MNIST
conv learners. Stacked chained learners run their stems as one batched call, the carries' small
products as a chain without autograd, then every learner at once: the question is what the
chain costs on top of a stacked round, and what stacking saves against the chained loop.

    OMP_NUM_THREADS=1 python benchmarks/chained_cost.py            # ~2 min
    python benchmarks/chained_cost.py --device cuda --out chained_cost_cuda.json
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from common import BATCH, HIDDEN, IN_FEATURES, interleaved, run_timing
from torch import nn

from torchboost import SGB, ConvNet, TwoLayerNet

#: (name, learner factory, input shape, learners, batch, loss)
SHAPES: list[tuple[str, Callable[[], nn.Module], tuple[int, ...], int, int, str]] = [
    ("small d=8 h=10 N=16", lambda: TwoLayerNet(8, 10), (8,), 16, 32, "squared"),
    ("SLICE N=64", lambda: TwoLayerNet(IN_FEATURES, HIDDEN, 1, "leaky_relu"), (IN_FEATURES,),
     64, BATCH, "squared"),
    ("MNIST conv N=8", ConvNet, (1, 28, 28), 8, 64, "softmax"),
]


def _booster(factory: Callable[[], nn.Module], n: int, loss: str, mode: str, chained: bool,
             device: str) -> SGB:
    torch.manual_seed(0)
    options = {"n_outputs": 10, "targets": "newton"} if loss == "softmax" else {}
    return SGB(factory, loss, n_learners=n, mode=mode, chained=chained, stall_window=None,
               **options).to(device)


def measure(device: str, min_seconds: float, repeats: int,
            shapes: list | None = None) -> list[dict]:
    rows = []
    for name, factory, shape, n, batch, loss in shapes or SHAPES:
        x = torch.randn(batch, *shape, device=device)
        y = (torch.randint(0, 10, (batch,), device=device) if loss == "softmax"
             else torch.randn(batch, device=device))
        boosters = {"stacked": _booster(factory, n, loss, "stacked", False, device),
                    "chained_stacked": _booster(factory, n, loss, "stacked", True, device),
                    "chained_loop": _booster(factory, n, loss, "loop", True, device)}
        for booster in boosters.values():  # past the first round's lazy state
            for _ in range(3):
                booster.learn(x, y)
        times = interleaved({key: lambda b=b, x=x, y=y: b.learn(x, y)
                             for key, b in boosters.items()}, device, min_seconds, repeats)
        row = {"shape": name, **{f"{key}_us": t * 1e6 for key, t in times.items()},
               "chained_over_stacked": times["chained_stacked"] / times["stacked"],
               "loop_over_chained_stacked": times["chained_loop"] / times["chained_stacked"]}
        rows.append(row)
        print(f"{name:22s} " + "  ".join(f"{key} {row[key + '_us']:8.0f} us" for key in times)
              + f"  chained/stacked {row['chained_over_stacked']:.2f}"
              f"  loop/chained {row['loop_over_chained_stacked']:.2f}")
    return rows


if __name__ == "__main__":
    run_timing(__doc__, __file__, 3.0, measure)
