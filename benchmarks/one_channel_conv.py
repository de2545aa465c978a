"""Where the stacked learners' first convolution pays as products of patches
(:mod:`torchboost.learners.one_channel_conv`).

A convolution of one-channel images (all learners' output channels at once, as the stacked
learners' first layer computes it), forward and backward to its weight and bias, as torch's
``functional.conv2d`` under autograd (*torch*) and as :func:`one_channel_conv2d` (*patches*),
in alternating windows. ``ConvNet`` stacked 8 and 64 times is ``O = 40`` and ``320``
(5 channels each, kernel 5, stride 2, 28×28 images, batch 64), ``O = 5`` one ConvNet. Every
one-channel row is timed as patches, also where the library leaves it to torch (large images
with few channels, :data:`~torchboost.learners.one_channel_conv.PATCHES_UP_TO`); a
three-channel row, also left to torch, with ``functional.unfold``'s patches, for reference.

    OMP_NUM_THREADS=1 python benchmarks/one_channel_conv.py            # ~1 min
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from common import interleaved, run_timing, two_forms_row
from torch.nn import functional

from torchboost.learners.one_channel_conv import Geometry, one_channel_conv2d

#: (batch B, input channels C, image side H, output channels O, kernel, stride, padding)
SHAPES = [(64, 1, 28, 40, 5, 2, 0), (64, 1, 28, 320, 5, 2, 0), (256, 1, 28, 40, 5, 2, 0),
          (64, 1, 28, 40, 3, 1, 1), (64, 1, 28, 5, 5, 2, 0), (16, 1, 8, 4, 3, 1, 0),
          (256, 1, 128, 2, 5, 1, 0), (64, 3, 32, 64, 5, 2, 0)]


def _patches(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int,
             padding: int) -> torch.Tensor:
    side = (x.shape[2] + 2 * padding - weight.shape[2]) // stride + 1
    if x.shape[1] == 1:  # also where one_channel_geometry would leave it to torch
        return one_channel_conv2d(x, weight, bias, Geometry((stride, stride), (padding, padding),
                                                            (1, 1), side, side))
    cols = functional.unfold(x, weight.shape[2:], padding=padding, stride=stride)
    out = torch.baddbmm(bias.view(1, -1, 1), weight.flatten(1).expand(len(x), -1, -1), cols)
    return out.view(len(x), -1, side, side)


def _step(batch: int, channels: int, side: int, outputs: int, kernel: int, stride: int,
          padding: int, device: str, conv: Callable[..., torch.Tensor]) -> Callable[[], None]:
    torch.manual_seed(0)
    x = torch.randn(batch, channels, side, side, device=device)
    weight = torch.randn(outputs, channels, kernel, kernel, device=device, requires_grad=True)
    bias = torch.randn(outputs, device=device, requires_grad=True)

    def step() -> None:
        out = conv(x, weight, bias, stride, padding)
        out.backward(torch.ones_like(out))
        weight.grad = bias.grad = None

    return step


def measure(device: str, min_seconds: float, repeats: int) -> list[dict]:
    rows = []
    for batch, channels, side, outputs, kernel, stride, padding in SHAPES:
        shape = (batch, channels, side, outputs, kernel, stride, padding, device)
        times = interleaved({"torch": _step(*shape, functional.conv2d),
                             "patches": _step(*shape, _patches)}, device, min_seconds, repeats)
        rows.append(two_forms_row(
            {"batch": batch, "channels": channels, "side": side, "outputs": outputs,
             "kernel": kernel, "stride": stride, "padding": padding}, times,
            f"B={batch:4d} C={channels} H={side:3d} O={outputs:4d} k={kernel} s={stride} "
            f"p={padding}"))
    return rows


if __name__ == "__main__":
    run_timing(__doc__, __file__, 2.0, measure,
               target="patches_over_torch < 1 for one input channel")
