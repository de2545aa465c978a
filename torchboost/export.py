"""What a trained booster predicts, as a plain ``nn.Module`` to deploy: :func:`export_booster`
(also ``booster.export()``).

The module computes exactly :meth:`Booster.predict <torchboost.boosters.base.Booster.predict>`
of the first ``n_learners`` learners, with everything that depends on training folded into
buffers: the standardiser's feature and label statistics, the initial prediction ``y^0``, and
the steps of the combination ``y^0 + Σ_{i<k} w_i h_i`` (SGB's ``−η`` or learned ``−η_i``,
stagewise GB's, the single learner's 1). No input checks, guards, optimizer or data-dependent
branch remain, so ``torch.export.export`` (with a dynamic batch dimension),
``torch.compile(fullgraph=True)`` and ``torch.onnx.export`` go through, and an exported program
or ONNX file loads without torchboost. Stacked learners stay one batched computation (the direct
path of plain ``nn.Sequential`` MLPs and convolutional networks, else ``vmap`` of the
learner); chained learners
(:mod:`~torchboost.learners.chained`) run one after another, each given the previous one's
features; learners run in ``eval()`` mode, as in ``predict``.

Boosters whose prediction is not such a combination — OGB and ResidualSGB (a projection after
every learner), ConvexHullOGB, the multiclass boosters (votes through cost matrices) — raise a
``ValueError`` saying so.

``output``: ``"scores"`` (``predict``), ``"proba"`` (classifiers: the softmax of the scores, or
for one logistic score the probabilities of classes 0 and 1) or ``"label"`` (``predict_label``).

Examples:
    >>> import torch
    >>> from torchboost import SGB, TwoLayerNet
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> booster = SGB(lambda: TwoLayerNet(4, 8), n_learners=3)
    >>> x, y = torch.randn(64, 4), torch.randn(64)
    >>> _ = booster.learn(x, y)
    >>> module = booster.export()
    >>> torch.allclose(module(x), booster.predict(x), atol=1e-6)
    True
    >>> program = torch.export.export(module, (x,),
    ...     dynamic_shapes=({0: torch.export.Dim("batch")},))
    >>> torch.allclose(program.module()(x[:5]), booster.predict(x[:5]), atol=1e-6)
    True
"""

from __future__ import annotations

import copy
import math
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from torchboost.learners.stacked import StackedEngine
from torchboost.learners.stacked_sequential import sequential_plan, stacked_sequential
from torchboost.params import integer

__all__ = ["BoosterInference", "export_booster"]

Output = Literal["scores", "proba", "label"]


def _own_copy(tensor: Tensor) -> Tensor:
    """A detached contiguous copy: ``torch.export.save`` calls a non-contiguous weight (the
    stacked parameters are laid out learner-second) incomplete and warns "No complete tensor
    found in the group!"."""
    return tensor.detach().clone(memory_format=torch.contiguous_format)


class _StackedLearners(nn.Module):
    """The first ``k`` stacked learners of a :class:`StackedEngine`, frozen copies: ``(k, B, m)``
    in one batched computation."""

    def __init__(self, engine: StackedEngine, k: int) -> None:
        super().__init__()
        params, buffers = engine._stacked(k)
        device = next(iter(params.values())).device
        # the engine's template lives on the meta device: its own tensors are never read
        self.template = copy.deepcopy(engine._template[0]).to_empty(device=device).eval()
        self.template.requires_grad_(False)
        self.param_names, self.buffer_names = list(params), list(buffers)
        for i, tensor in enumerate(params.values()):
            self.register_buffer(f"param_{i}", _own_copy(tensor))
        for i, tensor in enumerate(buffers.values()):
            self.register_buffer(f"buffer_{i}", _own_copy(tensor))
        # the direct GEMM path over this module's own copy of the layers (Dropout included), so
        # that its mode is this module's, never the booster's
        self.plan = sequential_plan(self.template) if engine._plan is not None else None

    def forward(self, x: Tensor) -> Tensor:
        params = {n: getattr(self, f"param_{i}") for i, n in enumerate(self.param_names)}
        if self.plan is not None:
            return stacked_sequential(self.plan, params, x)
        buffers = {n: getattr(self, f"buffer_{i}") for i, n in enumerate(self.buffer_names)}

        def one(p: dict[str, Tensor], b: dict[str, Tensor], x_: Tensor) -> Tensor:
            return functional_call(self.template, (p, b), (x_,))

        return vmap(one, in_dims=(0, 0, None))(params, buffers, x)


class _LoopLearners(nn.Module):
    """Frozen copies of the first ``k`` learners (the booster's own keep training), run one by
    one: ``(k, B, m)``."""

    def __init__(self, modules: list[nn.Module]) -> None:
        super().__init__()
        self.learners = nn.ModuleList(m.eval().requires_grad_(False) for m in modules)

    def forward(self, x: Tensor) -> Tensor:
        return torch.stack([learner(x) for learner in self.learners])


class _ChainedLearners(_LoopLearners):
    """Frozen copies of the first ``k`` chained learners (:mod:`~torchboost.learners.chained`),
    each given the previous one's features: ``(k, B, m)``."""

    def forward(self, x: Tensor) -> Tensor:
        outputs, carry = [], None
        for learner in self.learners:
            output, carry = learner(x, carry)
            outputs.append(output)
        return torch.stack(outputs)


class BoosterInference(nn.Module):
    """``predict`` of a trained booster as plain torch (module docstring): standardise, run the
    learners, combine ``y^0 + Σ w_i h_i``, map back to the user's units, clip to the booster's
    prediction bounds (``bound_predictions``; ±inf: none), and optionally turn the scores into
    probabilities or labels."""

    def __init__(self, learners: nn.Module, weights: Tensor, y0: Tensor, in_mean: Tensor,
                 in_scale: Tensor, out_mean: Tensor, out_scale: Tensor,
                 output: Output = "scores", loss: str = "squared",
                 low: Tensor | None = None, high: Tensor | None = None) -> None:
        super().__init__()
        self.learners = learners
        inf = torch.full_like(out_mean, math.inf)
        for name, value in (("weights", weights), ("y0", y0), ("in_mean", in_mean),
                            ("in_scale", in_scale), ("out_mean", out_mean),
                            ("out_scale", out_scale), ("low", -inf if low is None else low),
                            ("high", inf if high is None else high)):
            self.register_buffer(name, _own_copy(value))
        self.output, self.loss = output, loss

    def forward(self, x: Tensor) -> Tensor:
        h = self.learners((x - self.in_mean) / self.in_scale)
        if h.ndim == 2:  # learners that return (B,): one output
            h = h.unsqueeze(-1)
        scores = self.y0 + torch.einsum("k,kbm->bm", self.weights, h)
        scores = (scores * self.out_scale + self.out_mean).clamp(self.low, self.high)
        if self.output == "scores":
            return scores
        if self.output == "label":
            return scores.argmax(-1) if scores.shape[-1] > 1 else (scores[:, 0] > 0).long()
        if scores.shape[-1] > 1:
            return torch.softmax(scores, -1)
        p = torch.sigmoid(scores[:, 0])
        return torch.stack([1.0 - p, p], -1)


@torch.no_grad()
def export_booster(booster: Any, n_learners: int | None = None, output: Output = "scores",
                   *, inputs: tuple[Tensor, Tensor] | None = None,
                   outputs: tuple[Tensor, Tensor] | None = None) -> BoosterInference:
    """The module that computes ``booster.predict(x, n_learners)`` (or its probabilities or
    labels, ``output``) of a :class:`~torchboost.boosters.base.Booster` as plain torch (typed
    ``Any`` here: this module sits below the boosters, which reach it through
    :meth:`~torchboost.boosters.base.Booster.export`, and reads their public hooks,
    ``combination_weights`` and ``prediction_learners``); see the module docstring.
    ``inputs = (mean, scale)`` standardises the features before the booster sees them,
    ``outputs = (mean, scale)`` maps its scores back (the scikit-learn estimators' own
    scaling), both folded into the module."""
    if output not in ("scores", "proba", "label"):
        raise ValueError(f"output must be 'scores', 'proba' or 'label', got {output!r}")
    if output != "scores" and not booster.loss.is_classifier:
        raise ValueError(f"output={output!r} needs a classification loss; "
                         f"{booster.loss.name} loss predicts real values (output='scores')")
    k = booster.prediction_learners if n_learners is None else integer("n_learners", n_learners)
    if not 1 <= k <= booster.n_learners:
        raise ValueError(f"n_learners must be in [1, {booster.n_learners}], got {n_learners}")
    if output == "proba" and not booster.loss.has_probabilities:
        raise ValueError(f"output='proba' needs a loss whose scores are log-odds; "
                         f"{booster.loss.name} loss gives margins, not probabilities "
                         "(output='scores' or 'label')")
    weights = booster.combination_weights(k)
    if weights is None:
        raise ValueError(f"{type(booster).__name__} cannot be exported: its prediction is not "
                         "y^0 + Σ w_i h_i of its learners' outputs (a booster whose prediction "
                         "is says so in combination_weights(k), as SGB and its variants, "
                         "StagewiseGB and SingleLearner do)")
    dtype = booster.learners.dtype
    engine = booster.learners.engine
    learners: nn.Module
    if isinstance(engine, StackedEngine) and not booster.learners.chained:
        learners = _StackedLearners(engine, k)
    else:
        copies = [copy.deepcopy(booster.learners.learner(i)) for i in range(k)]
        learners = (_ChainedLearners if booster.learners.chained else _LoopLearners)(copies)
    device = booster.y0_fixed.device
    y0 = booster.initial_prediction(torch.zeros(1, 1, dtype=dtype, device=device))[0]
    one, zero = torch.ones((), dtype=dtype, device=device), torch.zeros((), dtype=dtype,
                                                                      device=device)
    in_mean, in_scale, out_mean, out_scale = zero, one, zero, one
    standardizer = booster.standardizer
    if standardizer is not None and standardizer.features.started:
        shape = (1, -1, *([1] * (len(booster.input_shape or (0,)) - 1)))  # per channel
        in_mean, in_scale = (v.to(dtype).view(shape)
                             for v in standardizer.features.shift_and_scale())
    if standardizer is not None and standardizer.labels is not None:
        if standardizer.labels.started:
            out_mean = standardizer.labels.mean.to(dtype)
            out_scale = standardizer.labels.scale().to(dtype)
        else:  # predict gives 0 before any label was seen
            out_scale = zero
    if inputs is not None:  # ((x − m₁)/s₁ − m₂)/s₂ = (x − (m₁ + s₁ m₂)) / (s₁ s₂)
        mean, scale = (torch.as_tensor(t, dtype=dtype, device=device) for t in inputs)
        in_mean, in_scale = mean + scale * in_mean, scale * in_scale
    # the booster's prediction bounds in its user's units (±inf: none)
    low, high = (v.to(dtype) for v in booster.prediction_bounds())
    if outputs is not None:  # (y s_b + m_b) s + m
        mean, scale = (torch.as_tensor(t, dtype=dtype, device=device) for t in outputs)
        out_mean, out_scale = out_mean * scale + mean, out_scale * scale
        low, high = low * scale + mean, high * scale + mean  # increasing: scale > 0
    # in eval mode whatever the booster's mode (Dropout off, BatchNorm on its statistics)
    return BoosterInference(learners, weights.to(dtype), y0.to(dtype), in_mean, in_scale,
                            out_mean, out_scale, output, booster.loss.name, low,
                            high).to(device).eval()
