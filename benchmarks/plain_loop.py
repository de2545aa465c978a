"""A user's plain loop, ``for x, y in stream: booster.learn(x, y)``, under torch's default
threads against the same loop at one thread (issue "Every cycle goes to learning").

The MNIST shape of the issue: ``SGB(ConvNet(), n_learners=8, loss="softmax",
targets="newton")`` on batches of 64 random 28×28 images, nothing else set (the booster's
``n_threads="auto"`` at work). Each variant runs in a fresh process, alternating, ``--repeats``
times: ``default`` sets no thread count, ``one`` calls ``torch.set_num_threads(1)`` first.
``--busy`` keeps one core busy with a spinning process meanwhile, as on a shared machine (where
torch's default threads hurt most). Reports each run's milliseconds per round and the median
ratio default / one (target: at most 1.3).

    python benchmarks/plain_loop.py --busy --out benchmarks/plain_loop.json     # ~1 min
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: the loop one process times (argv[1]: "default" or "one")
LOOP = """
import sys, time, warnings, torch
warnings.simplefilter("ignore")
from torchboost import SGB, ConvNet
if sys.argv[1] == "one":
    torch.set_num_threads(1)
torch.manual_seed(0)
booster = SGB(lambda: ConvNet(), n_learners=8, loss="softmax", n_outputs=10, targets="newton")
xs, ys = torch.randn(40, 64, 1, 28, 28), torch.randint(0, 10, (40, 64))
for x, y in zip(xs[:3], ys[:3]):
    booster.learn(x, y)
start = time.perf_counter()
for x, y in zip(xs, ys):
    booster.learn(x, y)
print((time.perf_counter() - start) / len(xs) * 1e3)
"""


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run(variant: str) -> float:
    """Milliseconds per round of one fresh process's plain loop."""
    out = subprocess.run([sys.executable, "-c", LOOP, variant], check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    spinner = None
    if args.busy:
        spinner = multiprocessing.Process(target=_spin, args=(3600.0,), daemon=True)
        spinner.start()
    try:
        runs: dict[str, list[float]] = {"default": [], "one": []}
        for _ in range(args.repeats):
            for variant in runs:
                runs[variant].append(run(variant))
                print(f"{variant:8s} {runs[variant][-1]:7.2f} ms a round", flush=True)
    finally:
        if spinner is not None:
            spinner.terminate()
    ratio = statistics.median(d / o for d, o in zip(runs["default"], runs["one"], strict=True))
    print(f"default threads / one thread, median of {args.repeats}: {ratio:.2f} (target <= 1.3)")
    if args.out is not None:
        args.out.write_text(json.dumps({"busy": args.busy, "ms_per_round": runs,
                                        "default_over_one": ratio}, indent=2) + "\n")


if __name__ == "__main__":
    main()
