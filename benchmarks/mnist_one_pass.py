"""One pass over MNIST's 60,000 training images, timed end to end: the booster of the issue
"Every cycle goes to learning" against the network of its size, on one device.

The booster is ``SGB(ConvNet(), n_learners=8, loss="softmax", targets="newton")`` (the
library's defaults otherwise: schedule-free learners, standardisation, stall monitor, guards);
the network a ConvNet with 8× the channels trained by fused Adam on the same batches. Both see
every training image once, in one fixed order (``--seed``), in batches of 64, the images
already on the device. The clock runs from the first batch to the last update (waited for on
CUDA; ``--compile``'s compiling inside it, as a user would wait for it), after one untimed step
of a throwaway ConvNet that pays the process's first-use costs for neither side. Reported for
each: the seconds, the images per second and the test error after the pass (the final figure,
not the best of a curve); the booster's seconds over the network's; and the warnings raised.
The test error only shows that each learned: the network runs at Adam's default rate, not
tuned, so this is no comparison of accuracy (``experiments/sgb_vs_gb.py`` compares at rates
chosen on validation data).

    python benchmarks/mnist_one_pass.py --device cuda --out mnist_one_pass_cuda.json
    OMP_NUM_THREADS=1 python benchmarks/mnist_one_pass.py --device cpu \
        --out benchmarks/mnist_one_pass_cpu.json                      # ~15 s
    python benchmarks/mnist_one_pass.py --limit 100                   # the first 100 batches
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from common import allocator_option, chosen_allocator
from torch import Tensor, nn

from torchboost import SGB, ConvNet
from torchboost.data import load_mnist

#: the issue's batch size and learner count
BATCH, LEARNERS = 64, 8


def timed_pass(learn: Callable[[Tensor, Tensor], Any], batches: list[tuple[Tensor, Tensor]],
               device: torch.device) -> float:
    """Seconds ``learn`` takes over every batch once, its device work waited for."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for x, y in batches:
        learn(x, y)
    sync()
    return time.perf_counter() - start


def test_error(scores: Callable[[Tensor], Tensor], x: Tensor, y: Tensor) -> float:
    """The error rate of the class with the highest score, in chunks of 4,096 images."""
    with torch.no_grad():
        wrong = sum(int((scores(xs).argmax(-1) != ys).sum())
                    for xs, ys in zip(x.split(4096), y.split(4096), strict=True))
    return wrong / len(y)


def measure(root: str | None, device: torch.device, n_learners: int = LEARNERS,
            limit: int | None = None, compile_: bool = False, seed: int = 0) -> dict[str, Any]:
    """Both one-pass runs (module docstring) on the first ``limit`` batches (all: ``None``)."""
    data = load_mnist(root)
    order = torch.randperm(len(data.y_train), generator=torch.Generator().manual_seed(seed))
    x, y = data.x_train[order].to(device), data.y_train[order].to(device)
    batches = list(zip(x.split(BATCH), y.split(BATCH), strict=True))[:limit]
    x_test, y_test = data.x_test.to(device), data.y_test.to(device)

    torch.manual_seed(seed)
    booster = SGB(lambda: ConvNet(), n_learners=n_learners, loss="softmax", n_outputs=10,
                  targets="newton", compile=compile_).to(device)
    torch.manual_seed(seed)
    network = ConvNet(channels=5 * n_learners).to(device)
    optimizer = torch.optim.Adam(network.parameters(), fused=True)

    def network_step(xb: Tensor, yb: Tensor) -> None:
        optimizer.zero_grad()
        nn.functional.cross_entropy(network(xb), yb).backward()
        optimizer.step()

    warm_up(batches[0], device)
    with warnings.catch_warnings(record=True) as caught:  # reported, not shown
        warnings.simplefilter("always")
        seconds = {"booster": timed_pass(booster.learn, batches, device),
                   "network": timed_pass(network_step, batches, device)}
        network.eval()
        errors = {"booster": test_error(booster.predict, x_test, y_test),
                  "network": test_error(network, x_test, y_test)}
    images = sum(len(yb) for _, yb in batches)
    rows = {name: {"seconds": seconds[name], "images_per_s": images / seconds[name],
                   "test_error": errors[name]} for name in seconds}
    return {"device": str(device), "torch": torch.__version__,
            "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else "cpu"),
            "threads": torch.get_num_threads(), "n_learners": n_learners, "batch": BATCH,
            "images": images, "compile": compile_, "seed": seed, **rows,
            "booster_over_network": seconds["booster"] / seconds["network"],
            "warnings": sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})}


def warm_up(batch: tuple[Tensor, Tensor], device: torch.device) -> None:
    """One untimed step of a throwaway ConvNet (convolution, sigmoid, linear layer, cross
    entropy, backward, fused Adam), so that what the first such step of a process pays — on
    CUDA, loading cuDNN and cuBLAS, creating their handles — falls on neither timed side."""
    net = ConvNet().to(device)
    nn.functional.cross_entropy(net(batch[0]), batch[1]).backward()
    torch.optim.Adam(net.parameters(), fused=True).step()
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--root", help="the MNIST files' folder (default: the data folder's "
                                       "mnist/, torchboost.data.folder)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--n", type=int, default=LEARNERS, help="the booster's learners")
    parser.add_argument("--limit", type=int, help="only the first LIMIT batches")
    parser.add_argument("--compile", action="store_true", help="the booster with compile=True")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    allocator_option(parser)
    args = parser.parse_args()
    allocator = chosen_allocator(args)
    result = {**measure(args.root, torch.device(args.device), args.n, args.limit, args.compile,
                        args.seed), "allocator": allocator}
    for name in ("booster", "network"):
        r = result[name]
        print(f"{name:8s} {r['seconds']:8.2f} s  {r['images_per_s']:9.0f} images/s  "
              f"test error {r['test_error']:.4f}")
    print(f"booster / network: {result['booster_over_network']:.2f} "
          f"({result['images']} images, {result['device_name']})")
    for warning in result["warnings"]:
        print(f"warned: {warning}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
