"""Where ``stacked_linear``'s transposed products pay (``TRANSPOSED_FROM`` in
:mod:`torchboost.learners.stacked_sequential`).

Every learner's ``Linear`` on its own features ``(k, B, F)``, a transposed view of the wide layer
before it (``(B, k·F)``, after a sigmoid, as in a stacked round), forward and backward: as
``baddbmm(bias, features, weightᵀ)`` differentiated by autograd (*plain*) and as
``weight · featuresᵀ`` with its own gradients (*transposed*, ``_StackedLinear``), in
alternating windows. The ``ConvNet`` head is ``k = 8, B = 64, F = 720, O = 10``.

    OMP_NUM_THREADS=1 python benchmarks/stacked_linear.py            # ~1 min
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from common import interleaved, run_timing, two_forms_row

from torchboost.learners.stacked_sequential import _StackedLinear

#: (learners k, batch B, features F, outputs O)
SHAPES = [(8, 32, 10, 2), (8, 64, 32, 10), (8, 64, 128, 10), (8, 64, 256, 10),
          (8, 256, 64, 10), (64, 256, 10, 3), (8, 64, 720, 10), (64, 64, 720, 10)]


def _plain(features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.baddbmm(bias.unsqueeze(1), features, weight.transpose(1, 2))


def _head(k: int, batch: int, features: int, outputs: int, device: str,
          linear: Callable[..., torch.Tensor]) -> Callable[[], None]:
    torch.manual_seed(0)
    wide = torch.randn(batch, k * features, device=device, requires_grad=True)
    weight = torch.randn(k, outputs, features, device=device, requires_grad=True)
    bias = torch.randn(k, outputs, device=device, requires_grad=True)

    def step() -> None:
        h = torch.sigmoid(wide).view(batch, k, features).transpose(0, 1)
        out = linear(h, weight, bias)
        out.backward(torch.ones_like(out))
        wide.grad = weight.grad = bias.grad = None

    return step


def measure(device: str, min_seconds: float, repeats: int) -> list[dict]:
    rows = []
    for k, batch, features, outputs in SHAPES:
        times = interleaved(
            {"plain": _head(k, batch, features, outputs, device, _plain),
             "transposed": _head(k, batch, features, outputs, device, _StackedLinear.apply)},
            device, min_seconds, repeats)
        entries = k * batch * features
        rows.append(two_forms_row(
            {"k": k, "batch": batch, "features": features, "outputs": outputs,
             "entries": entries}, times,
            f"k={k:3d} B={batch:4d} F={features:4d} O={outputs:3d} ({entries:8d} entries)"))
    return rows


if __name__ == "__main__":
    run_timing(__doc__, __file__, 3.0, measure,
               target="transposed_over_plain < 1 from TRANSPOSED_FROM entries on")
