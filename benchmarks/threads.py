"""How many intra-op threads a CPU round should use (issue "The house, second pass").

Small learners are many small operations: torch's thread pool can spend more on waking its
threads than it saves. This times default SGB rounds (schedule-free learners, stacked) at one
thread and at torch's default (one per core) for learners from the papers' two-layer nets to
wide ones and the MNIST conv learner, in alternating windows, and reports each shape's work per
round (batch × parameters of all learners, the proxy :data:`torchboost._adapters.AUTO_THREADS_WORK`
thresholds) and ``default / one thread`` (above 1: one thread is faster).

    python benchmarks/threads.py --out benchmarks/threads.json    # ~1 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import torch

from torchboost import SGB, ConvNet, TwoLayerNet

#: (name, learner factory, input shape, learners, batch)
SHAPES = [
    ("two-layer d=10 h=1 N=16 b=32 (ABALONE)", lambda: TwoLayerNet(10, 1), (10,), 16, 32),
    ("two-layer d=27 h=10 N=16 b=64 (keggundirected)", lambda: TwoLayerNet(27, 10), (27,), 16,
     64),
    ("two-layer d=384 h=10 N=16 b=64 (SLICE)", lambda: TwoLayerNet(384, 10), (384,), 16, 64),
    ("two-layer d=384 h=32 N=16 b=128", lambda: TwoLayerNet(384, 32), (384,), 16, 128),
    ("two-layer d=384 h=64 N=16 b=128", lambda: TwoLayerNet(384, 64), (384,), 16, 128),
    ("two-layer d=384 h=64 N=16 b=256", lambda: TwoLayerNet(384, 64), (384,), 16, 256),
    ("two-layer d=384 h=256 N=16 b=512", lambda: TwoLayerNet(384, 256), (384,), 16, 512),
    ("conv N=8 b=64 (MNIST)", lambda: ConvNet(), (1, 28, 28), 8, 64),
]


def _round(factory, shape, n: int, batch: int):
    torch.manual_seed(0)
    booster = SGB(factory, n_learners=n, n_outputs=10 if shape == (1, 28, 28) else 1,
                  loss="softmax" if shape == (1, 28, 28) else "squared",
                  n_threads=None)  # the thread count timed here, not the booster's choice
    x = torch.randn(batch, *shape)
    y = torch.randint(0, 10, (batch,)) if shape == (1, 28, 28) else torch.randn(batch)
    work = batch * sum(p.numel() for p in booster.learners.parameters())
    return (lambda: booster.learn(x, y)), work


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--seconds", type=float, default=0.6, help="per shape, thread count "
                                                                   "and window")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # random targets: the stall monitor's warnings are noise
    cores = torch.get_num_threads()
    rows = []
    for name, factory, shape, n, batch in SHAPES:
        step, work = _round(factory, shape, n, batch)
        times: dict[int, list[float]] = {1: [], cores: []}
        for _ in range(args.repeats):
            for count in times:
                torch.set_num_threads(count)
                step()
                calls, started = 0, time.perf_counter()
                while time.perf_counter() - started < args.seconds:
                    step()
                    calls += 1
                times[count].append((time.perf_counter() - started) / calls)
        median = {c: sorted(t)[len(t) // 2] for c, t in times.items()}
        rows.append({"shape": name, "work": work, "ms_one_thread": 1e3 * median[1],
                     "ms_default": 1e3 * median[cores],
                     "default_over_one": median[cores] / median[1]})
        print(f"{name:<50} work {work:>12,}  1 thread {1e3 * median[1]:7.2f} ms  "
              f"{cores} threads {1e3 * median[cores]:7.2f} ms  "
              f"ratio {median[cores] / median[1]:.2f}", flush=True)
    torch.set_num_threads(cores)
    if args.out:
        args.out.write_text(json.dumps({
            "machine": platform.processor() or platform.machine(), "cores": cores,
            "load": os.getloadavg(), "torch": torch.__version__, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
