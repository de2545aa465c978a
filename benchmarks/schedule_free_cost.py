"""What a default round costs against an Adam round (issue "Streams have no end").

The default learners use schedule-free AdamW (:mod:`torchboost.learners.averaging`): every round
switches the trained learners to their learning point and back (two in-place ``lerp`` passes
over their parameters) and the step is schedule-free's. This times SGB rounds with the default
optimizer and rule against the same booster with ``optimizer=torch.optim.Adam`` (Adam's own
rule), in alternating windows, for small and SLICE-shaped learners, stacked and loop, and the
switch alone (:func:`~torchboost.learners.averaging.learning_point` entered and left, no
step). The target is ``default / adam <= 1.15``.

    OMP_NUM_THREADS=1 python benchmarks/schedule_free_cost.py            # ~1 min
    python benchmarks/schedule_free_cost.py --device cuda --out schedule_free_cost.json
"""

from __future__ import annotations

import torch
from common import BATCH, HIDDEN, IN_FEATURES, interleaved, run_timing

from torchboost import SGB, TwoLayerNet

#: (name, input width, hidden units, learners, batch, mode)
SHAPES = [
    ("small N=8 stacked", 8, 10, 8, 32, "stacked"),
    ("small N=8 loop", 8, 10, 8, 32, "loop"),
    ("SLICE N=64 stacked", IN_FEATURES, HIDDEN, 64, BATCH, "stacked"),
    ("SLICE N=16 loop", IN_FEATURES, HIDDEN, 16, BATCH, "loop"),
]


def _booster(width: int, hidden: int, n: int, mode: str, device: str,
             adam: bool) -> SGB:
    torch.manual_seed(0)
    options = {"optimizer": torch.optim.Adam} if adam else {}
    return SGB(lambda: TwoLayerNet(width, hidden, 1, "leaky_relu"), n_learners=n, mode=mode,
               stall_window=None, **options).to(device)


def measure(device: str, min_seconds: float, repeats: int) -> list[dict]:
    rows = []
    for name, width, hidden, n, batch, mode in SHAPES:
        x = torch.randn(batch, width, device=device)
        y = torch.randn(batch, device=device)
        default = _booster(width, hidden, n, mode, device, adam=False)
        adam = _booster(width, hidden, n, mode, device, adam=True)
        for booster in (default, adam):  # past the first round's lazy state
            for _ in range(3):
                booster.learn(x, y)

        def switch(booster: SGB = default) -> None:
            with booster.learners.learning_point():
                pass

        times = interleaved({"default": lambda b=default, x=x, y=y: b.learn(x, y),
                             "adam": lambda b=adam, x=x, y=y: b.learn(x, y), "switch": switch},
                            device, min_seconds, repeats)
        rows.append({"shape": name, "default_us": times["default"] * 1e6,
                     "adam_us": times["adam"] * 1e6, "switch_us": times["switch"] * 1e6,
                     "default_over_adam": times["default"] / times["adam"]})
        print(f"{name:22s} default {rows[-1]['default_us']:8.0f} us  adam "
              f"{rows[-1]['adam_us']:8.0f} us  ratio {rows[-1]['default_over_adam']:.3f}  "
              f"switch {rows[-1]['switch_us']:6.1f} us")
    return rows


if __name__ == "__main__":
    run_timing(__doc__, __file__, 4.0, measure, target="default_over_adam <= 1.15")
