"""The stacked learners' first convolution on a one-channel image (MNIST's), differentiated on a
CPU as one product of the image's patches.

For a convolution with one input channel, torch's CPU kernel (oneDNN) computes the weight's
gradient slowly: for the paper's MNIST learner stacked eight times (``Conv2d(1, 8·5, 5,
stride=2)``, a batch of 64) forward and backward took 4.1 ms, the larger part of a round.
Written as products of the patches — the ``(B, kh·kw, Ho·Wo)`` windows of the image (one
strided copy, no ``unfold``), ``output = weight · patches + bias`` and ``∂weight = Σ_b grad_b ·
patches_bᵀ``, batched matrix products — they took 0.37× that, 0.40-0.55× for 64 learners, a
batch of 256 or a 3×3 kernel, 0.66× for one learner (``python
benchmarks/one_channel_conv.py``). Inputs of several channels are left to torch's kernel,
which is faster there (3 channels: 1.59× slower as patches).

It applies (:func:`one_channel_geometry`) where the weight is differentiated on a CPU, eagerly,
and the images need no gradient: the stacked learners' first layer an ``nn.Conv2d`` of one
input channel, zero padding given as numbers, a geometry torch accepts, and patches that take
little memory (:data:`PATCHES_UP_TO`). Predictions, compiled and exported graphs, ``torch.func``
transforms, other devices and every other case take ``functional.conv2d``; the results are the
same up to rounding (the products sum in another order).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd import forward_ad
from torch.nn import functional

__all__ = ["PATCHES_UP_TO", "Geometry", "one_channel_conv2d", "one_channel_geometry"]


#: the most entries a batch's patches may hold beyond the output's own count (they are kept for
#: the backward): 2²¹, 8 MiB in float32. Large images with few channels at stride 1 (256
#: images of 128 × 128, 2 channels, 5 × 5) would keep 12.5 times the output and run 1.10×
#: torch's time (``benchmarks/one_channel_conv.py``), so torch's kernel takes them.
PATCHES_UP_TO = 2**21


class Geometry(NamedTuple):
    """A convolution's settings, each as two numbers (height, width), and its output's size."""

    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    out_h: int
    out_w: int


def one_channel_geometry(x: Tensor, weight: Tensor, stride: Any, padding: Any,
                         dilation: Any) -> Geometry | None:
    """The geometry of ``functional.conv2d(x, weight, None, stride, padding, dilation)`` where
    :func:`one_channel_conv2d` computes it and pays (module docstring), else ``None``: a
    non-empty batch of one-channel images ``(B, 1, H, W)`` on a CPU that needs no gradient, a
    weight ``(O, 1, kh, kw)`` to differentiate, outside ``torch.func`` transforms and
    forward-mode AD (the function has neither a vmap rule nor a jvp), not traced; strides and
    dilations positive, padding non-negative numbers and a kernel that fits the padded image
    (torch's kernel states every other case in its own words); patches at most as many as the
    output's entries or :data:`PATCHES_UP_TO`."""
    if not (x.device.type == "cpu" and x.ndim == 4 and x.shape[0] > 0 and x.shape[1] == 1
            and weight.ndim == 4 and weight.shape[1] == 1 and not isinstance(padding, str)
            and torch.is_grad_enabled() and weight.requires_grad and not x.requires_grad
            and not torch.compiler.is_compiling() and not torch.compiler.is_exporting()
            and not torch.jit.is_tracing() and _functorch_level() is None
            and forward_ad._current_level < 0):
        return None
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        return None
    span_h = x.shape[2] + 2 * ph - dh * (weight.shape[2] - 1)
    span_w = x.shape[3] + 2 * pw - dw * (weight.shape[3] - 1)
    if span_h < 1 or span_w < 1:
        return None
    out_h, out_w = (span_h - 1) // sh + 1, (span_w - 1) // sw + 1
    positions = out_h * out_w * x.shape[0]
    if positions * weight.shape[2] * weight.shape[3] > max(positions * weight.shape[0],
                                                           PATCHES_UP_TO):
        return None
    return Geometry((sh, sw), (ph, pw), (dh, dw), out_h, out_w)


def _functorch_level() -> Any:
    """The innermost ``torch.func`` transform around the call (``None``: none)."""
    return torch._C._functorch.peek_interpreter_stack()


def _pair(value: int | tuple[int, ...]) -> tuple[int, int]:
    """An ``nn.Conv2d`` setting as two numbers: an int or a one-element tuple for both axes
    (``nn.Conv2d`` keeps a one-element tuple as given, ``functional.conv2d`` expands it;
    ``torch.nn.modules.utils._pair`` would keep it)."""
    if isinstance(value, int):
        return value, value
    return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])


def _patches(x: Tensor, kernel: tuple[int, int], geometry: Geometry) -> Tensor:
    """The windows a convolution of ``kernel`` sees on one-channel images ``x (B, 1, H, W)``,
    zero-padded: ``(B, kh·kw, Ho·Wo)``, contiguous (``functional.unfold``'s layout, copied from
    a strided view of ``x``)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (kernel, geometry.stride, geometry.padding,
                                              geometry.dilation)
    if ph or pw:
        x = functional.pad(x, (pw, pw, ph, ph))
    rows, columns, step = x.stride(0), x.stride(2), x.stride(3)
    windows = x.as_strided((len(x), kh, kw, geometry.out_h, geometry.out_w),
                           (rows, columns * dh, step * dw, columns * sh, step * sw),
                           x.storage_offset())
    return windows.contiguous().view(len(x), kh * kw, geometry.out_h * geometry.out_w)


class _OneChannelConv2d(torch.autograd.Function):
    """``functional.conv2d`` of one-channel images as products of their patches, with the
    weight's gradient ``Σ_b grad_b · patches_bᵀ`` and the bias's ``Σ grad`` (none for the
    images: :func:`one_channel_geometry` asks that they need none)."""

    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor | None,
                geometry: Geometry) -> tuple[Tensor, Tensor]:
        cols = _patches(x, weight.shape[2:], geometry)
        batch, outputs = x.shape[0], weight.shape[0]
        flat = weight.reshape(1, outputs, -1).expand(batch, -1, -1)
        out = (torch.baddbmm(bias.view(1, outputs, 1), flat, cols) if bias is not None
               else torch.bmm(flat, cols))
        return out.view(batch, outputs, geometry.out_h, geometry.out_w), cols

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Tensor, Tensor]) -> None:
        ctx.weight_shape = inputs[1].shape
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _: Tensor | None) -> tuple[Tensor | None, ...]:
        (cols,) = ctx.saved_tensors
        wants = ctx.needs_input_grad
        flat = grad.reshape(grad.shape[0], grad.shape[1], -1)
        return (None, torch.bmm(flat, cols.transpose(1, 2)).sum(0).view(ctx.weight_shape)
                if wants[1] else None, flat.sum((0, 2)) if wants[2] else None, None)


def one_channel_conv2d(x: Tensor, weight: Tensor, bias: Tensor | None,
                       geometry: Geometry) -> Tensor:
    """``functional.conv2d(x, weight, bias, ...)`` of one-channel images as products of their
    patches (module docstring), for the ``geometry`` :func:`one_channel_geometry` found."""
    return _OneChannelConv2d.apply(x, weight, bias, geometry)[0]
