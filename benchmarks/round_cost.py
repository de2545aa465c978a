"""What one steady-state round costs at the defaults, against the same-size network's step
(issue "Every cycle goes to learning").

For each shape, one booster built with the library's defaults (schedule-free learners at the
default rule, standardisation, stall monitor, transaction and guards on: nothing switched off)
and one network of the same size trained end to end by fused Adam on the same batch:

* ``small``: ``SGB(TwoLayerNet(10, 10), n_learners=8)``, batch 32, squared loss, against
  ``Linear(10, 80) → sigmoid → Linear(80, 1)``;
* ``mnist``: ``SGB(ConvNet(), n_learners=8, loss="softmax", targets="newton")``, batch 64,
  against a ConvNet with 8× the channels;
* ``slice``: ``SGB(TwoLayerNet(384, 10, activation="leaky_relu"), n_learners=64)``, batch 256,
  against ``384 → 640 → 1``.

Per round it reports the ATen operations (every ``aten::`` event torch.profiler records, nested
ones included), the host syncs among them (``aten::_local_scalar_dense``: a ``.item()``,
``bool()`` or ``float()`` of a tensor) and the time, median of alternating windows, and the
ratio booster / network; for the SLICE shape also the same booster with its learners in a
loop (``mode="loop"``) and loop / stacked. ``--compiled`` adds the booster built with
``compile=True``, the seconds compiling added to its first rounds and the rounds its saving
takes to repay them.

    OMP_NUM_THREADS=1 python benchmarks/round_cost.py                 # ~1 min
    python benchmarks/round_cost.py --device cuda --n 8 64 256 --out round_cost_cuda.json
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from common import interleaved, timing_arguments, write_timings
from torch import nn
from torch.profiler import ProfilerActivity, profile

from torchboost import SGB, ConvNet, TwoLayerNet

SYNC = "aten::_local_scalar_dense"
#: the issue's goals, written beside the rows
TARGETS = ("small: ops <= 250, syncs <= 1, round_over_network <= 1.5 (eager); mnist N=8: "
           "round_over_network <= 1.3; slice N=64: loop_over_round >= 5, round_over_network "
           "<= 1 / 0.6")


def count(step: Callable[[], Any]) -> tuple[int, int]:
    """ATen operations and host syncs of one call of ``step`` (after two calls to warm up)."""
    step(), step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    names = [event.name for event in prof.events() if event.name.startswith("aten::")]
    return len(names), names.count(SYNC)


def shape(name: str, n: int, device: str, compiled: bool = False, mode: str = "auto",
          **options: Any) -> tuple[Callable[[], Any], Callable[[], Any], float]:
    """One booster round (learners in ``mode``; ``options``: more of the booster's arguments,
    a default switched off) and one network step of the shape ``name`` with ``n`` learners,
    and the seconds its first 80 rounds took (compiling included)."""
    torch.manual_seed(0)
    if name == "mnist":
        booster = SGB(lambda: ConvNet(), n_learners=n, loss="softmax", n_outputs=10,
                      targets="newton", compile=compiled, mode=mode, **options)
        net: nn.Module = ConvNet(channels=5 * n)
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
        loss = nn.functional.cross_entropy
    else:
        width, hidden, batch, act = (10, 10, 32, "sigmoid") if name == "small" else (
            384, 10, 256, "leaky_relu")
        booster = SGB(lambda: TwoLayerNet(width, hidden, activation=act), n_learners=n,
                      compile=compiled, mode=mode, **options)
        net = TwoLayerNet(width, hidden * n, activation=act)
        x, y = torch.randn(batch, width), torch.randn(batch)

        def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return nn.functional.mse_loss(out.squeeze(-1), target)
    booster.to(device), net.to(device)
    x, y = x.to(device), y.to(device)
    optimizer = torch.optim.Adam(net.parameters(), fused=True)

    def network_step() -> None:
        optimizer.zero_grad()
        loss(net(x), y).backward()
        optimizer.step()

    def round_() -> None:
        booster.learn(x, y)

    start = time.perf_counter()
    for _ in range(80):  # past the first rounds' lazy state and the stall monitor's warm-up
        round_()
    return round_, network_step, time.perf_counter() - start


def measure(names: list[str], ns: list[int], device: str, seconds: float, repeats: int,
            compiled: bool, on_row: Callable[[list[dict[str, Any]]], Any] = lambda rows: None
            ) -> list[dict[str, Any]]:
    """The rows of every shape and learner count; ``on_row(rows)`` after each (the JSON is
    written as it grows: a run cut short keeps what it measured)."""
    rows = []
    for name in names:
        for n in ns if name != "small" else [8]:
            variants = {"eager": False, "compiled": True} if compiled else {"eager": False}
            warmup = {}
            for variant, compile_ in variants.items():
                round_, network, warmup[variant] = shape(name, n, device, compile_)
                ops, syncs = count(round_)
                net_ops, net_syncs = count(network)
                steps = {"round": round_, "network": network}
                if name == "slice" and variant == "eager":  # the same booster, one by one
                    steps["loop"] = shape(name, n, device, mode="loop")[0]
                times = interleaved(steps, device, seconds, repeats)
                rows.append({"shape": name, "n": n, "variant": variant, "ops": ops,
                             "syncs": syncs, "network_ops": net_ops, "network_syncs": net_syncs,
                             "round_us": times["round"] * 1e6,
                             "network_us": times["network"] * 1e6,
                             "round_over_network": times["round"] / times["network"]})
                if "loop" in times:
                    rows[-1]["loop_us"] = times["loop"] * 1e6
                    rows[-1]["loop_over_round"] = times["loop"] / times["round"]
                r = rows[-1]
                if variant == "compiled":  # compiling's cost, and the rounds that repay it
                    eager_us = rows[-2]["round_us"]
                    r["compile_s"] = warmup["compiled"] - warmup["eager"]
                    r["pays_after_rounds"] = (r["compile_s"] / ((eager_us - r["round_us"]) * 1e-6)
                                              if eager_us > r["round_us"] else None)
                print(f"{name:6s} N={n:<4d} {variant:8s} {ops:5d} ops {syncs:2d} syncs "
                      f"{r['round_us']:9.0f} us | network {net_ops:4d} ops {net_syncs} syncs "
                      f"{r['network_us']:8.0f} us | ratio {r['round_over_network']:.2f}"
                      + (f" | loop/stacked {r['loop_over_round']:.2f}" if "loop" in times
                         else "")
                      + (f" | compiling {r['compile_s']:.1f} s" if "compile_s" in r else ""))
                on_row(rows)
    return rows


def main() -> None:
    warnings.simplefilter("ignore")  # one batch repeated: the stall monitor rightly warns
    args = timing_arguments(__doc__.splitlines()[0], Path(__file__).with_name(
        "round_cost.json"), seconds=2.0, extra=lambda parser: (
        parser.add_argument("--shapes", nargs="+", default=["small", "mnist", "slice"],
                            choices=["small", "mnist", "slice"]),
        parser.add_argument("--n", type=int, nargs="+", default=[8, 64],
                            help="learners for the mnist and slice shapes (small: 8)"),
        parser.add_argument("--compiled", action="store_true")))
    measure(args.shapes, args.n, args.device, args.seconds, args.repeats, args.compiled,
            on_row=lambda rows: write_timings(args.out, args.device, rows, targets=TARGETS,
                                              allocator=args.allocator))


if __name__ == "__main__":
    main()
