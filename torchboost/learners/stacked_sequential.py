"""A faster stacked evaluation for plain ``nn.Sequential`` multi-layer perceptrons and
convolutional networks.

``vmap`` turns a first ``nn.Linear`` on a shared input into N small batched matmuls. When every
learner is a plain ``nn.Sequential`` of ``Flatten``, ``Linear``, convolutions and elementwise
layers, the same computation is written directly: the first layer of all N learners is ONE
``(B, d) × (d, N·h)`` GEMM, or ONE convolution with N times the output channels (the input is
shared), a convolution after it one grouped convolution (``groups=N``), later ``Linear`` layers
one batched product each (:func:`stacked_linear`). The result is identical to
``vmap(functional_call(...))`` up to floating-point rounding (tested), and elementwise layers
such as ``Dropout`` act on the stacked tensor, so each learner draws its own mask.

For the paper's MNIST learner (:class:`~torchboost.learners.modules.ConvNet`) this writes
what ``vmap`` does less well: the bias in the convolution (``vmap`` adds it afterwards, on a
permuted layout) and the activations in one contiguous ``(B, N·C, H, W)`` tensor
(``benchmarks/round_cost.py``'s ``mnist`` shape).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional

from torchboost.learners.one_channel_conv import one_channel_conv2d, one_channel_geometry

__all__ = ["CONVOLUTIONS", "ELEMENTWISE_LAYERS", "SequentialPlan", "hidden_major",
           "hidden_major_prefix", "is_plain_flatten", "sequential_plan", "stacked_linear",
           "stacked_sequential"]

#: layers that act on each entry (or draw a mask per entry): they keep a stacked layout
ELEMENTWISE_LAYERS = (nn.Identity, nn.Sigmoid, nn.Tanh, nn.ReLU, nn.LeakyReLU, nn.GELU, nn.ELU,
                      nn.SiLU, nn.Softplus, nn.Dropout)

SequentialPlan = list[tuple[str, nn.Module]]

#: the convolutions the direct path evaluates, and their functional form
CONVOLUTIONS = {nn.Conv1d: functional.conv1d, nn.Conv2d: functional.conv2d,
                nn.Conv3d: functional.conv3d}


def _is_plain_convolution(module: nn.Module) -> bool:
    """A convolution of every input channel (``groups=1``) padded with zeros."""
    return (type(module) in CONVOLUTIONS and module.groups == 1
            and module.padding_mode == "zeros")


def _layers(module: nn.Module, prefix: str) -> SequentialPlan | None:
    if isinstance(module, nn.Sequential) and type(module).forward is nn.Sequential.forward:
        plan: SequentialPlan = []
        for name, child in module.named_children():
            sub = _layers(child, f"{prefix}{name}.")
            if sub is None:
                return None
            plan.extend(sub)
        return plan
    if (type(module) is nn.Linear or _is_plain_convolution(module) or is_plain_flatten(module)
            or isinstance(module, ELEMENTWISE_LAYERS)):
        return [(prefix, module)]
    return None


def is_plain_flatten(module: nn.Module) -> bool:
    """Whether ``module`` is ``nn.Flatten()`` of every dimension after the batch's."""
    return isinstance(module, nn.Flatten) and (module.start_dim, module.end_dim) == (1, -1)


def sequential_plan(template: nn.Module) -> SequentialPlan | None:
    """The layer list of ``template`` if the fast path applies to it, else ``None``.

    It applies to (nested) plain ``nn.Sequential`` modules made of ``Flatten()``, ``nn.Linear``,
    convolutions (``groups=1``, zero padding) and elementwise activations/Dropout, where nothing
    but ``Flatten`` precedes the first ``Linear`` or convolution (so that every random layer acts
    per learner), convolutions come before every ``Linear`` and every ``Flatten`` (their input
    is ``(B, C, ...)``), and a ``Flatten`` comes between the last convolution and a ``Linear``.
    """
    plan = _layers(template, "")
    if plan is None:
        return None
    weighted = False  # a Linear or convolution seen
    flat: bool | None = None  # the features are 1-D (after a Flatten or Linear); None: the input
    for _, layer in plan:
        if isinstance(layer, nn.Flatten):
            flat = True
        elif isinstance(layer, nn.Linear):
            if flat is False:  # on a convolution's unflattened output
                return None
            weighted, flat = True, True
        elif type(layer) in CONVOLUTIONS:
            if flat:  # after a Flatten (a leading one too) or a Linear
                return None
            weighted, flat = True, False
        elif not weighted:
            return None
    return plan if weighted else None


def hidden_major_prefix(plan: SequentialPlan) -> str | None:
    """The prefix of the first ``Linear`` when its stacked parameters should be stored
    *hidden-major* (:func:`hidden_major`): when the next ``Linear``, after elementwise layers
    only, has one output. Its stacked evaluation is then an elementwise product and a reduction
    over the middle dimension of ``(B, h, k)``, which vectorise over the learners, instead of k
    one-column matrix products."""
    linears = [(i, prefix) for i, (prefix, layer) in enumerate(plan)
               if isinstance(layer, nn.Linear)]
    if len(linears) < 2 or any(type(layer) in CONVOLUTIONS for _, layer in plan):
        return None
    (first, prefix), (second, _) = linears[:2]
    if plan[second][1].out_features != 1 or not all(
            isinstance(layer, ELEMENTWISE_LAYERS) for _, layer in plan[first + 1:second]):
        return None
    return prefix


def hidden_major(stacked: Tensor) -> Tensor:
    """``stacked (k, h, ...)`` with the same values, stored as ``(h, k, ...)`` in memory: the
    first layer's GEMM then writes hidden unit ``j`` of learner ``i`` to column ``j·k + i``."""
    return stacked.transpose(0, 1).contiguous().transpose(0, 1)


#: the features' size (``k·B·F`` entries) from which :func:`stacked_linear` computes
#: ``weight · featuresᵀ`` with its own gradients: below it, the Python of a custom autograd
#: function costs more than the layouts save (``python benchmarks/stacked_linear.py``)
TRANSPOSED_FROM = 2**15


def stacked_linear(features: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """Every learner's ``Linear`` on its own features: ``features (k, B, F)`` (any strides),
    ``weight (k, O, F)``, ``bias (k, O)`` → ``(k, B, O)``.

    Large features (at least :data:`TRANSPOSED_FROM` entries) are computed as
    ``weight · featuresᵀ``, the few outputs ``O`` on the rows, and differentiated likewise
    (:class:`_StackedLinear`): as ``baddbmm(bias, features, weightᵀ)``, ``O`` the columns, the
    products and their autograd took 2.4× as long on a CPU (``ConvNet``'s head: 8 learners,
    720 features, 10 outputs; 1.7× for 64 learners, ``benchmarks/stacked_linear.py``), the
    features' gradient coming back in a layout that needed a copy. Small ones, and every one
    compiled or exported (the compiler lays the products out; and a batch dimension that stays
    dynamic takes no branch on its size), take ``baddbmm(bias, features, weightᵀ)``."""
    if (torch.compiler.is_compiling() or torch.compiler.is_exporting()
            or features.numel() < TRANSPOSED_FROM):  # traced: no guard on the batch size
        transposed = weight.transpose(1, 2)
        return (torch.baddbmm(bias.unsqueeze(1), features, transposed) if bias is not None
                else features.bmm(transposed))
    differentiated = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (features, weight, bias))
    if differentiated:
        return _StackedLinear.apply(features, weight, bias)
    return _transposed_product(features, weight, bias)


def _transposed_product(features: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``(weight · featuresᵀ + bias)ᵀ``, ``(k, B, O)`` and contiguous."""
    transposed = features.transpose(1, 2)
    out = (torch.baddbmm(bias.unsqueeze(2), weight, transposed) if bias is not None
           else torch.bmm(weight, transposed))
    return out.transpose(1, 2).contiguous()


class _StackedLinear(torch.autograd.Function):
    """:func:`stacked_linear` of large features with its gradients ``grad · weight`` (features,
    in their layout), ``gradᵀ · features`` (weight) and ``Σ_B grad`` (bias), each one batched
    product. Written into a transposed layout on a CPU, the first runs learner by learner
    inside torch's kernel (three view operations each, counted by torch.profiler: a ConvNet
    round's 645 operations at N = 8 are 1,149 at N = 64), and still beat the contiguous product
    and autograd's copy to the layer's layout: an MNIST round 1.13× as long with them
    (``benchmarks/versions.py``)."""

    @staticmethod
    def forward(features: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        return _transposed_product(features, weight, bias)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, Tensor, Tensor | None],
                      output: Tensor) -> None:
        features, weight, _ = inputs
        ctx.save_for_backward(features, weight)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        features, weight = ctx.saved_tensors
        wants = ctx.needs_input_grad
        # the features' gradient in their own layout (a transposed view of the wide layer):
        # autograd then hands it to that layer without a copy
        return (torch.bmm(grad, weight, out=torch.empty_like(features)) if wants[0] else None,
                torch.bmm(grad.transpose(1, 2), features) if wants[1] else None,
                grad.sum(1) if wants[2] else None)


def stacked_sequential(plan: SequentialPlan, params: dict[str, Tensor], x: Tensor) -> Tensor:
    """Evaluate k stacked learners (``params`` are ``(k, ...)`` slices) on the shared ``x``.

    Up to the first ``Linear`` or convolution the activations are shared, ``(B, ...)``. That
    layer is one ``addmm`` (one convolution with k times the output channels) whose output stays
    *wide*, ``(B, k·h)`` (``(B, k·C, ...)``), so the following elementwise layers run on one
    contiguous tensor exactly as in a single wide network; a further convolution is one grouped
    convolution on it, a ``Flatten`` keeps it wide, ``(B, k·C·H·W)``, learner by learner. Its
    columns are learner-major (``i·h + j``), or hidden-major (``j·k + i``) when the first
    ``Linear``'s weight is stored so (:func:`hidden_major`). The next ``Linear`` switches to the
    stacked layout ``(k, B, h)`` and :func:`stacked_linear`; with one output on hidden-major
    columns it is a product and a sum instead.
    """
    h, width = x, 0  # width > 0: wide layout (B, k*width, ...); -1: stacked layout (k, B, h)
    k = next(iter(params.values())).shape[0]
    by_hidden = False  # the wide columns are hidden-major
    for prefix, layer in plan:
        if isinstance(layer, nn.Flatten):
            h = h.flatten(2) if width < 0 else h.flatten(1)
            width = h.shape[1] // k if width > 0 else width
        elif type(layer) in CONVOLUTIONS:  # shared input: k·C channels; wide: k groups
            stacked, bias = params[prefix + "weight"], params.get(prefix + "bias")
            weight, bias = stacked.flatten(0, 1), bias.flatten() if bias is not None else None
            geometry = (one_channel_geometry(h, weight, layer.stride, layer.padding,
                                             layer.dilation)
                        if width == 0 and type(layer) is nn.Conv2d else None)
            if geometry is not None:  # its weight's gradient 3x as fast
                h = one_channel_conv2d(h, weight, bias, geometry)
            else:
                h = CONVOLUTIONS[type(layer)](h, weight, bias, layer.stride, layer.padding,
                                              layer.dilation, 1 if width == 0 else k)
            width = stacked.shape[1]
        elif isinstance(layer, nn.Linear):
            weight, bias = params[prefix + "weight"], params.get(prefix + "bias")
            if width == 0:  # shared input: one GEMM for all learners
                by_hidden = weight.transpose(0, 1).is_contiguous()
                if by_hidden:
                    weight = weight.transpose(0, 1)
                    bias = bias.transpose(0, 1) if bias is not None else None
                flat = weight.reshape(-1, weight.shape[-1]).T
                h = torch.addmm(bias.reshape(-1), h, flat) if bias is not None else h @ flat
                width = weight.shape[1] if not by_hidden else weight.shape[0]
                continue
            if width > 0 and by_hidden and weight.shape[1] == 1:  # (B, h, k) · (h, k), sum over h
                h = (h.view(h.shape[0], width, k) * weight.reshape(k, width).T.contiguous()).sum(1)
                h = (h + bias.reshape(1, k) if bias is not None else h).T.unsqueeze(-1)
                width = -1
                continue
            if width > 0:
                h = (h.view(h.shape[0], width, k).permute(2, 0, 1) if by_hidden
                     else h.view(h.shape[0], k, width).transpose(0, 1))
            h = stacked_linear(h, weight, bias)
            width = -1
        else:
            h = layer(h)
    if width <= 0:
        return h
    if by_hidden:
        return h.view(h.shape[0], width, k).permute(2, 0, 1)
    return h.view(h.shape[0], k, width, *h.shape[2:]).transpose(0, 1)
