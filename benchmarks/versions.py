"""One steady-state round of the library at several git commits, timed side by side in one
process: did a change slow a round?

Each commit's ``torchboost/`` is extracted with ``git archive`` into a scratch folder and
imported under its own package name (``tb_<commit>``), so every version runs in the same
process, on the same inputs, in alternating windows (load from other processes hits them
alike). The shapes are ``benchmarks/round_cost.py``'s ``small`` (``SGB(TwoLayerNet(10, 10),
n_learners=8)``, batch 32), ``slice`` (64 learners of ``TwoLayerNet(384, 10)``, batch 256) and
``mnist`` (``SGB(ConvNet(), n_learners=8)``, softmax, Newton targets, batch 64), at the
defaults; ``--compile`` builds them with ``compile=True`` (compiled in the warm-up rounds),
``--chained`` with ``chained=True``.
Reports each version's fastest window and its median ratio to the first commit's, window by
window. The versions take turns at going first (window ``w`` starts with the ``w``-th, in
rotation), so that none is always timed straight after the same other. ``--control`` times the
first commit twice, as two boosters built apart: their ratio is what two builds of the same
code differ by here, and a difference within it is not measured: on this project's shared
2-core machine, one thread, 11 windows of 1 s, from 0.948 to 1.005 (small 1.005, slice 0.966
and 0.994, mnist 0.948 and 0.991, in two runs).

    OMP_NUM_THREADS=1 python benchmarks/versions.py fe9621e HEAD --shapes small slice
    OMP_NUM_THREADS=1 python benchmarks/versions.py 19aa68a HEAD --compile
    OMP_NUM_THREADS=1 python benchmarks/versions.py 4ee088e HEAD --control
"""

from __future__ import annotations

import argparse
import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path

import torch
from common import allocator_option, chosen_allocator, windows

ROOT = Path(__file__).resolve().parents[1]


def extract(commit: str, into: Path) -> str:
    """``torchboost/`` at ``commit`` under ``into`` as package ``tb_<sha>``; its name."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    name = f"tb_{sha}"
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "torchboost"],
                             check=True, capture_output=True).stdout
    folder = into / sha
    folder.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "torchboost").rename(folder / name)
    for path in (folder / name).rglob("*.py"):
        path.write_text(re.sub(r"\btorchboost\b", name, path.read_text()))
    sys.path.insert(0, str(folder))
    return name


def round_of(module, shape: str, compile: bool = False, chained: bool = False):
    """One default round of ``shape`` with ``module``'s SGB, past the monitor's warm-up."""
    torch.manual_seed(0)
    options = {"compile": compile, "chained": chained}
    if shape == "small":
        booster = module.SGB(lambda: module.TwoLayerNet(10, 10), n_learners=8, **options)
        x, y = torch.randn(32, 10), torch.randn(32)
    elif shape == "mnist":
        booster = module.SGB(lambda: module.ConvNet(), n_learners=8, loss="softmax",
                             n_outputs=10, targets="newton", **options)
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    else:
        booster = module.SGB(lambda: module.TwoLayerNet(384, 10, activation="leaky_relu"),
                             n_learners=64, **options)
        x, y = torch.randn(256, 384), torch.randn(256)
    for _ in range(70):
        booster.learn(x, y)
    return lambda: booster.learn(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("commits", nargs="+", help="the first is the reference")
    parser.add_argument("--shapes", nargs="+", default=["small", "slice"],
                        choices=["small", "slice", "mnist"])
    parser.add_argument("--compile", action="store_true", help="boosters with compile=True")
    parser.add_argument("--chained", action="store_true", help="boosters with chained=True")
    parser.add_argument("--control", action="store_true",
                        help="time the first commit twice, built apart: the noise floor")
    parser.add_argument("--windows", type=int, default=21)
    parser.add_argument("--seconds", type=float, default=0.3, help="per window")
    allocator_option(parser)
    args = parser.parse_args()
    chosen_allocator(args)
    warnings.simplefilter("ignore")  # one batch repeated: the stall monitor rightly warns
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        names = [extract(commit, Path(scratch)) for commit in args.commits]
        modules = {name: importlib.import_module(name) for name in names}
        first = names[0]
        for shape in args.shapes:
            steps = {name: round_of(module, shape, args.compile, args.chained)
                     for name, module in modules.items()}
            if args.control:  # the same code, built again
                steps[first + "'"] = round_of(modules[first], shape, args.compile, args.chained)
            times = windows(steps, "cpu", args.seconds, args.windows)
            for name in steps:
                ratios = sorted(a / b for a, b in zip(times[name], times[first], strict=True))
                print(f"{shape:6s} {name:13s} fastest {min(times[name]) * 1e6:8.0f} us   "
                      f"vs {first}: {ratios[len(ratios) // 2]:.3f}")


if __name__ == "__main__":
    main()
