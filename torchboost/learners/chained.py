"""Chained weak learners: a streaming GrowNet (Badirli et al. 2020, "Gradient Boosting Neural
Networks: GrowNet", Sec. 3).

GrowNet feeds weak learner ``i`` the input together with learner ``i − 1``'s penultimate
features, so that the ensemble grows into a deep network stage by stage while each learner stays
shallow. Here every learner of a booster built with ``chained=True`` gets, besides the batch
``x``, the *carry* ``c_{i−1}``: learner ``i − 1``'s features on the same batch, **detached**, so
no graph links two learners and each learner's gradient is still its own (the boosters'
combination stays autograd-free). The first learner's carry is ``None``, which means zeros.

**The protocol.** A chained learner is an ``nn.Module`` with a class attribute
``takes_carry = True`` whose ``forward(x, carry=None)`` returns ``(output, features)``:
``output`` its scores ``(B, m)`` or ``(B,)``, ``features`` what the next learner receives as its
``carry``; ``carry=None`` must equal a carry of zeros. Write one for any architecture, or let
:func:`chainable` wrap a plain ``nn.Sequential`` (:class:`ChainedSequential`; the ready-made
:class:`~torchboost.TwoLayerNet` and :class:`~torchboost.ConvNet` are such).

**Compute.** A chained learner is still one weak-learner prediction per example (the SGB
paper's unit, Hu et al. 2017, Sec. 6.2): its carry is a by-product of the previous learner's
prediction. Stacked learners (:class:`~torchboost.learners.StackedEngine`) run the chain of
carries without autograd, one learner after another, then evaluate all learners, their input-
side products included, in one batched ``vmap`` with the carries fixed (:func:`stacked_chain`);
the loop (:class:`~torchboost.learners.LoopEngine`) runs each learner once, with autograd.
Stacked, a learner with ``Dropout`` therefore draws one mask for the carry it hands on and
another for its own output in a training round (each a valid draw; the loop draws one).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from torchboost.learners.stacked_sequential import (
    ELEMENTWISE_LAYERS,
    SequentialPlan,
    is_plain_flatten,
    stacked_sequential,
)

__all__ = ["ChainStep", "ChainedSequential", "chain", "chainable", "checked_step",
           "is_chained", "sequential_chain", "stacked_chain"]

#: a learner's step in a chain: ``(index, carry) -> (output, features)``
ChainStep = Callable[[int, Tensor | None], tuple[Tensor, Tensor]]

_STEMS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


def is_chained(module: nn.Module) -> bool:
    """Whether ``module`` follows the chained-learner protocol (module docstring)."""
    return bool(getattr(module, "takes_carry", False))


class ChainedSequential(nn.Module):
    """A plain ``nn.Sequential`` learner made a chained learner (module docstring).

    The sequential is read as ``stem → body → head``: the stem is its first ``Linear`` or
    convolution (after ``Flatten`` layers only), the body the elementwise layers after it, the
    head the rest (``Flatten`` included, up to the last ``Linear``). The features are the body's
    output — the penultimate activations of ``TwoLayerNet``, the hidden map of ``ConvNet`` — and
    the carry enters the stem's output before the body, through a bias-free projection
    ``carry_in`` (``Linear(h, h)`` for a linear stem, a 1×1 convolution for a convolutional one):
    ``features = body(stem(x) + carry_in(carry))``, GrowNet's concatenation of ``[x, carry]`` as
    the first layer's input written as a sum. With ``carry=None`` the learner is the sequential
    itself. The stem, body and head are the sequential's own layers (its parameters, moved into
    this module; ``carry_in`` is new, with PyTorch's default initialisation).

    Examples:
        >>> import torch
        >>> from torchboost import TwoLayerNet
        >>> learner = ChainedSequential(TwoLayerNet(4, 3))
        >>> out, features = learner(torch.zeros(2, 4))
        >>> out.shape, features.shape
        (torch.Size([2, 1]), torch.Size([2, 3]))
    """

    takes_carry = True

    def __init__(self, module: nn.Sequential) -> None:
        super().__init__()
        layers = _plain_layers(module)
        first = next((i for i, layer in enumerate(layers) if isinstance(layer, _STEMS)), None)
        if first is None or not all(is_plain_flatten(layer) for layer in layers[:first]):
            raise ValueError(_not_chainable(module, "it has no Linear or convolution first "
                                            "layer (after Flatten layers only)"))
        end = first + 1
        while end < len(layers) and isinstance(layers[end], ELEMENTWISE_LAYERS):
            end += 1
        if not any(isinstance(layer, nn.Linear) for layer in layers[end:]):
            raise ValueError(_not_chainable(module, "it has no Linear output layer after its "
                                            "first layer, so no penultimate features"))
        stem = layers[first]
        width = stem.out_features if isinstance(stem, nn.Linear) else stem.out_channels
        factory = {"device": stem.weight.device, "dtype": stem.weight.dtype}
        self.stem = nn.Sequential(*layers[:first + 1])
        self.carry_in: nn.Module = (
            nn.Linear(width, width, bias=False, **factory) if isinstance(stem, nn.Linear)
            else type(stem)(width, width, 1, bias=False, **factory))
        self.body = nn.Sequential(*layers[first + 1:end])
        self.head = nn.Sequential(*layers[end:])

    def forward(self, x: Tensor, carry: Tensor | None = None) -> tuple[Tensor, Tensor]:
        pre = self.stem(x)
        if carry is not None:
            pre = pre + self.carry_in(carry)
        features = self.body(pre)
        return self.head(features), features


def _plain_layers(module: nn.Module) -> list[nn.Module]:
    """The layers of a plain ``nn.Sequential``, nested plain sequentials read through (``[]``
    for anything else)."""
    if not (isinstance(module, nn.Sequential) and type(module).forward is nn.Sequential.forward):
        return []
    layers: list[nn.Module] = []
    for child in module.children():
        inner = _plain_layers(child)
        layers += inner if inner or isinstance(child, nn.Sequential) else [child]
    return layers


def chainable(module: nn.Module) -> nn.Module:
    """``module`` as a chained learner: itself when it follows the protocol, else a plain
    ``nn.Sequential`` wrapped in :class:`ChainedSequential`; anything else raises, saying how to
    write one."""
    if is_chained(module):
        try:
            inspect.signature(module.forward).bind(None, None)
        except TypeError:
            raise ValueError(_not_chainable(module, "its forward takes no carry (it says "
                                            "takes_carry = True)")) from None
        return module
    if isinstance(module, nn.Sequential):
        return ChainedSequential(module)
    raise ValueError(_not_chainable(module, "it is neither a plain nn.Sequential nor a module "
                                    "with takes_carry = True"))


def _not_chainable(module: nn.Module, why: str) -> str:
    return (f"chained=True cannot chain a {type(module).__name__}: {why}. A chained learner "
            "has `takes_carry = True` and a forward(x, carry=None) that returns (output, "
            "features), features being what the next learner gets as its carry (None: zeros); "
            "see torchboost.learners.chained")


def chain(step: ChainStep, k: int) -> tuple[list[Tensor], list[Tensor | None]]:
    """Run learners ``0..k−1`` as a chain: learner ``i`` gets ``carries[i]``, learner ``i − 1``'s
    features detached (``None`` for the first). Returns the ``k`` outputs and the ``k + 1``
    carries, the last being what learner ``k`` would get."""
    outputs: list[Tensor] = []
    carries: list[Tensor | None] = [None]
    for i in range(k):
        output, features = checked_step(step(i, carries[-1]), i)
        outputs.append(output)
        carries.append(features.detach())
    return outputs, carries


def stacked_chain(step: ChainStep, batched: Callable[[Tensor], Tensor], k: int) -> Tensor:
    """``(k, B, ...)`` outputs of ``k`` stacked chained learners: the carries by :func:`chain`
    without autograd, then, when autograd is on, every learner at once by ``batched(carries)``
    (``carries`` stacked, the first learner's zeros), so the backward is one batched call."""
    training = torch.is_grad_enabled()
    if training and k == 1:  # no carry to find
        return step(0, None)[0].unsqueeze(0)
    with torch.no_grad():
        outputs, carries = chain(step, k)
    if not training:
        return torch.stack(outputs)
    first = torch.zeros_like(carries[1])
    return batched(torch.stack([first, *carries[1:k]]))


def sequential_chain(template: ChainedSequential, params: dict[str, Tensor], x: Tensor,
                     plan: SequentialPlan | None) -> Tensor:
    """``(k, B, ...)`` outputs of ``k`` stacked :class:`ChainedSequential` learners (``params``
    their stacked parameters, by name), the same as :func:`stacked_chain` of their forward up to
    floating-point rounding, with only the carries' small products in a chain: the stems of all
    learners are one batched call (one GEMM for a linear stem, whose ``plan`` is
    ``sequential_plan(template.stem)``), then, without autograd, ``f_i = body(stem_i(x) +
    carry_in_i(f_{i−1}))`` learner after learner, then (with autograd) every learner's features
    at once from the fixed carries, and every head at once."""
    stem, carry_in, head = (_part(params, name) for name in ("stem.", "carry_in.", "head."))
    pre = (stacked_sequential(plan, stem, x) if plan is not None
           else _vmapped(template.stem, stem, x, None))
    weights, k = carry_in["weight"], pre.shape[0]
    training = torch.is_grad_enabled()
    with torch.no_grad():  # training: the last learner's features are no one's carry
        features = [template.body(pre[0])]
        for i in range(1, k - 1 if training else k):
            features.append(template.body(_with_carry(template, pre[i], weights[i],
                                                      features[-1])))
    if not training:
        stacked = torch.stack(features)
    elif k == 1:  # one learner, no carry
        stacked = template.body(pre)
    else:
        carries = torch.stack([torch.zeros_like(features[0]), *features])
        stacked = template.body(pre + _carry_products(weights, carries))
    return _vmapped(template.head, head, stacked, 0)


def _part(params: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {name[len(prefix):]: t for name, t in params.items() if name.startswith(prefix)}


def _with_carry(template: ChainedSequential, pre: Tensor, weight: Tensor,
                carry: Tensor) -> Tensor:
    """``pre + carry_in(carry)`` with ``carry_in``'s ``weight``: one ``addmm`` for a linear
    ``carry_in``, a product over the channels for a 1×1 convolution (a ``functional_call`` or a
    1×1 convolution per learner costs more than the product itself)."""
    if isinstance(template.carry_in, nn.Linear):
        return torch.addmm(pre, carry, weight.T)
    mixed = torch.matmul(weight.flatten(1), carry.flatten(2))  # (B, o, positions)
    return pre + mixed.view(pre.shape)


def _carry_products(weights: Tensor, carries: Tensor) -> Tensor:
    """Every learner's ``carry_in(carry)`` at once: ``weights (k, o, c[, 1, ...])`` on
    ``carries (k, B, c[, ...])``, one batched product."""
    if weights.ndim == 3:  # linear: (k, o, c)
        return torch.bmm(carries, weights.transpose(1, 2))
    mixed = torch.matmul(weights.flatten(2).unsqueeze(1), carries.flatten(3))
    return mixed.view(*carries.shape[:2], weights.shape[1], *carries.shape[3:])


def _vmapped(module: nn.Module, params: dict[str, Tensor], x: Tensor, x_dim: int | None) -> Tensor:
    """``module`` with each row of the stacked ``params`` on ``x`` (shared, or its rows)."""
    def one(p: dict[str, Tensor], x_: Tensor) -> Tensor:
        return functional_call(module, p, (x_,))

    return vmap(one, in_dims=(0, x_dim), randomness="different")(params, x)


def checked_step(result: object, index: int) -> tuple[Tensor, Tensor]:
    """A chained learner's ``(output, features)``, or a ``ValueError`` naming learner ``index``
    and the protocol it broke."""
    if not (isinstance(result, tuple) and len(result) == 2 and all(map(torch.is_tensor, result))):
        raise ValueError(f"chained weak learner {index} returns a {type(result).__name__}, not "
                         "(output, features): a chained learner's forward(x, carry) returns "
                         "its scores and the features the next learner receives")
    return result  # type: ignore[return-value]
