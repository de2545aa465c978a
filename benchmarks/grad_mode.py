"""What a gradient-free block costs: ``torch.no_grad()`` against the library's
:class:`~torchboost.without_grad.without_grad`, and how many a default round enters.

Each form switches gradients off around an empty body, as a ``with`` block and as a decorated
call, in alternating windows; then the blocks of a steady-state default round
(``round_cost.py``'s small shape) are counted by their entries into ``without_grad``.

    OMP_NUM_THREADS=1 python benchmarks/grad_mode.py            # ~20 s
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import round_cost
import torch
from common import interleaved, run_timing, two_forms_row

from torchboost import without_grad as module
from torchboost.without_grad import without_grad

#: how many empty blocks one timed call enters (a call of a few hundred ns is below the clock's
#: grain otherwise)
BLOCKS = 100


def _blocks(context: Callable[[], Any]) -> Callable[[], None]:
    def step() -> None:
        for _ in range(BLOCKS):
            with context():
                pass

    return step


def _calls(decorator: Callable[[], Any]) -> Callable[[], None]:
    @decorator()
    def body() -> None:
        pass

    def step() -> None:
        for _ in range(BLOCKS):
            body()

    return step


def blocks_per_round(rounds: int = 20) -> float:
    """The gradient-free blocks (``with without_grad()`` and decorated calls) a steady-state
    default round of the small shape enters, counted over ``rounds`` rounds."""
    step = round_cost.shape("small", 8, "cpu")[0]
    entries = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal entries
        code = frame.f_code
        if event == "call" and code.co_filename == module.__file__ and code.co_name in (
                "__enter__", "call"):
            entries += 1

    sys.setprofile(profile)
    try:
        for _ in range(rounds):
            step()
    finally:
        sys.setprofile(None)
    return entries / rounds


def measure(device: str, min_seconds: float, repeats: int) -> list[dict]:
    rows = []
    for form, make in (("block", _blocks), ("decorated call", _calls)):
        times = interleaved({"no_grad": make(torch.no_grad), "without_grad": make(without_grad)},
                            device, min_seconds, repeats)
        rows.append(two_forms_row({"form": form},
                                  {name: t / BLOCKS for name, t in times.items()},
                                  f"{form:15s} (per block)"))
    blocks = blocks_per_round()
    print(f"gradient-free blocks in a default small round: {blocks:g}")
    rows.append({"form": "blocks per default round (small shape)", "blocks": blocks})
    return rows


if __name__ == "__main__":
    run_timing(__doc__, __file__, 2.0, measure)
