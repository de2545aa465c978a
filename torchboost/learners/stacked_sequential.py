"""A faster stacked evaluation for plain ``nn.Sequential`` multi-layer perceptrons.

``vmap`` turns a first ``nn.Linear`` on a shared input into N small batched matmuls. When every
learner is a plain ``nn.Sequential`` of ``Flatten``, ``Linear`` and elementwise layers, the same
computation is written directly: the first layer of all N learners is ONE ``(B, d) × (d, N·h)``
GEMM (the input is shared), later layers are one ``baddbmm`` each. The result is identical to
``vmap(functional_call(...))`` up to floating-point rounding (tested), and elementwise layers such
as ``Dropout`` act on the stacked ``(N, B, h)`` tensor, so each learner draws its own mask.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["ELEMENTWISE_LAYERS", "SequentialPlan", "hidden_major", "hidden_major_prefix",
           "is_plain_flatten", "sequential_plan"]

#: layers that act on each entry (or draw a mask per entry): they keep a stacked layout
ELEMENTWISE_LAYERS = (nn.Identity, nn.Sigmoid, nn.Tanh, nn.ReLU, nn.LeakyReLU, nn.GELU, nn.ELU,
                      nn.SiLU, nn.Softplus, nn.Dropout)

SequentialPlan = list[tuple[str, nn.Module]]


def _layers(module: nn.Module, prefix: str) -> SequentialPlan | None:
    if isinstance(module, nn.Sequential) and type(module).forward is nn.Sequential.forward:
        plan: SequentialPlan = []
        for name, child in module.named_children():
            sub = _layers(child, f"{prefix}{name}.")
            if sub is None:
                return None
            plan.extend(sub)
        return plan
    if type(module) is nn.Linear or is_plain_flatten(module) or isinstance(module,
                                                                          ELEMENTWISE_LAYERS):
        return [(prefix, module)]
    return None


def is_plain_flatten(module: nn.Module) -> bool:
    """Whether ``module`` is ``nn.Flatten()`` of every dimension after the batch's."""
    return isinstance(module, nn.Flatten) and (module.start_dim, module.end_dim) == (1, -1)


def sequential_plan(template: nn.Module) -> SequentialPlan | None:
    """The layer list of ``template`` if the fast path applies to it, else ``None``.

    It applies to (nested) plain ``nn.Sequential`` modules made of ``Flatten()``, ``nn.Linear``
    and elementwise activations/Dropout, where nothing but ``Flatten`` precedes the first
    ``Linear`` (so that every random layer acts per learner).
    """
    plan = _layers(template, "")
    if plan is None:
        return None
    for _, layer in plan:
        if isinstance(layer, nn.Linear):
            return plan
        if not isinstance(layer, nn.Flatten):
            return None
    return None


def hidden_major_prefix(plan: SequentialPlan) -> str | None:
    """The prefix of the first ``Linear`` when its stacked parameters should be stored
    *hidden-major* (:func:`hidden_major`): when the next ``Linear``, after elementwise layers
    only, has one output. Its stacked evaluation is then an elementwise product and a reduction
    over the middle dimension of ``(B, h, k)``, which vectorise over the learners, instead of k
    one-column matrix products."""
    linears = [(i, prefix) for i, (prefix, layer) in enumerate(plan)
               if isinstance(layer, nn.Linear)]
    if len(linears) < 2:
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


def stacked_sequential(plan: SequentialPlan, params: dict[str, Tensor], x: Tensor) -> Tensor:
    """Evaluate k stacked learners (``params`` are ``(k, ...)`` slices) on the shared ``x``.

    Up to the first ``Linear`` the activations are shared, ``(B, ...)``. That layer is one
    ``addmm`` whose output stays *wide*, ``(B, k·h)``, so the following elementwise layers run on
    one contiguous tensor exactly as in a single wide network. Its columns are learner-major
    (``i·h + j``), or hidden-major (``j·k + i``) when its weight is stored so
    (:func:`hidden_major`). The next ``Linear`` switches to the stacked layout ``(k, B, h)`` and
    a ``baddbmm``; with one output on hidden-major columns it is a product and a sum instead.
    """
    h, width = x, 0  # width > 0: wide layout (B, k*width); -1: stacked layout (k, B, h)
    k = next(iter(params.values())).shape[0]
    by_hidden = False  # the wide columns are hidden-major
    for prefix, layer in plan:
        if isinstance(layer, nn.Flatten):
            h = h.flatten(1)
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
            transposed = weight.transpose(1, 2)
            h = torch.baddbmm(bias.unsqueeze(1), h, transposed) if bias is not None else h.bmm(
                transposed)
            width = -1
        else:
            h = layer(h)
    if width <= 0:
        return h
    if by_hidden:
        return h.view(h.shape[0], width, k).permute(2, 0, 1)
    return h.view(h.shape[0], k, width).transpose(0, 1)
