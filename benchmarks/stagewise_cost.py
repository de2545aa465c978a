"""Seconds per batch of stagewise GB in stage ``i``: its frozen learners run one by one (the
loop) or as one stacked call (:class:`~torchboost.boosters.frozen_prefix.FrozenPrefix`).

Stage ``i`` passes every batch through the frozen learners ``0..i−1`` (GB never caches
predictions, Hu et al. 2017, Sec. 6.2), then trains learner ``i``: one :meth:`StagewiseGB.learn`.
The shape is that of ``benchmarks/throughput.py`` (SLICE: 384 inputs, ``TwoLayerNet(384, 10, 1,
activation="leaky_relu")``, batch 256, squared loss). Both variants are timed in alternating
windows (loop, stacked, loop, ...) and the medians reported, so load from other processes hits
both alike; quote the ratios.

    python benchmarks/stagewise_cost.py                      # N = 8, 64, 256 on CPU
    python benchmarks/stagewise_cost.py --n 64 --device cuda --out stagewise.json
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from common import BATCH, HIDDEN, IN_FEATURES, interleaved

from torchboost import StagewiseGB, TwoLayerNet

VARIANTS = ("loop", "stacked")


def stages_of(n: int) -> tuple[int, ...]:
    """The stages timed for ``n`` learners (0-based): the third (two frozen learners, the fewest
    that run stacked), the middle one and the last."""
    return tuple(sorted({min(2, n - 1), n // 2, n - 1}))


def gb_round(n: int, stage: int, variant: str, device: str) -> Callable[[], None]:
    """One ``learn`` of stagewise GB with ``n`` learners in ``stage`` (0-based), its frozen
    learners run by ``variant`` (``"loop"`` or ``"stacked"``)."""
    torch.manual_seed(0)
    gb = StagewiseGB(lambda: TwoLayerNet(IN_FEATURES, HIDDEN, 1, activation="leaky_relu"),
                     "squared", n_learners=n).to(device)
    if variant == "loop":
        gb.frozen_prefix.problem = "timed as the loop"
    for _ in range(stage):
        gb.next_stage()
    x = torch.randn(BATCH, IN_FEATURES, device=device)
    y = torch.randn(BATCH, device=device)
    return lambda: gb.learn(x, y)


def measure(n_learners: Sequence[int] = (8, 64, 256), device: str = "cpu", *,
            window_seconds: float = 0.2, repeats: int = 5,
            threads: int | None = 1) -> dict[str, Any]:
    """Seconds per batch of GB in a few stages (:func:`stages_of`) for each ``n`` in
    ``n_learners``, loop vs stacked frozen learners, medians of ``repeats`` alternating windows
    of ``window_seconds``. ``threads`` fixes ``torch.set_num_threads`` for the measurement
    (restored afterwards; ``None`` leaves it).

    Returns ``{"device", "threads", "shape", "results": [{"n", "stage", "loop_s", "stacked_s",
    "speedup"}, ...]}`` (``stage``: 0-based, also the number of frozen learners run before the
    trained one; ``speedup``: loop over stacked seconds).
    """
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        results = []
        for n in n_learners:
            for stage in stages_of(n):
                steps = {v: gb_round(n, stage, v, device) for v in VARIANTS}
                median = interleaved(steps, device, window_seconds * repeats, repeats)
                results.append({"n": n, "stage": stage, "loop_s": median["loop"],
                                "stacked_s": median["stacked"],
                                "speedup": median["loop"] / median["stacked"]})
    finally:
        torch.set_num_threads(previous)
    return {"device": device if not device.startswith("cuda")
            else torch.cuda.get_device_name(torch.device(device)),
            "threads": torch.get_num_threads() if threads is None else threads,
            "shape": {"in_features": IN_FEATURES, "hidden": HIDDEN, "batch": BATCH},
            "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--window", type=float, default=0.2, help="seconds per timing window")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    report = measure(args.n, args.device, window_seconds=args.window, repeats=args.repeats,
                     threads=args.threads)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
