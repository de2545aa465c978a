"""Stacked execution path: N homogeneous modules as one vmapped computation.

The N modules' parameters are stacked along a new leading dimension
(:func:`torch.func.stack_module_state`) and evaluated with one
``vmap(functional_call(template, ...))``. A summed loss gives each learner's gradient in one
backward, and one multi-tensor optimizer step over the stacked tensors updates every learner.
For an elementwise optimizer (Adam, SGD, ...; see :data:`ELEMENTWISE_OPTIMIZERS`) this is
mathematically the same as N separate optimizers with the same hyper-parameters.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from torchboost.learners.chained import (
    ChainedSequential,
    ChainStep,
    sequential_chain,
    stacked_chain,
)
from torchboost.learners.optimizers import OptimizerSpec
from torchboost.learners.stacked_sequential import (
    hidden_major,
    hidden_major_prefix,
    sequential_plan,
    stacked_sequential,
)

__all__ = ["StackedEngine", "stacking_problem"]


def _signature(module: nn.Module) -> tuple:
    params = tuple((n, tuple(p.shape), p.dtype, p.requires_grad)
                   for n, p in module.named_parameters())
    buffers = tuple((n, tuple(b.shape), b.dtype) for n, b in module.named_buffers())
    return type(module), repr(module), params, buffers


def stacking_problem(modules: Sequence[nn.Module], optimizer: OptimizerSpec) -> str | None:
    """Why ``modules`` cannot run stacked (``None`` when they can)."""
    if not optimizer.stacks:
        return (f"{optimizer.cls.__name__} is neither an elementwise optimizer nor one that keeps "
                "its sums per stacked learner, so one instance over stacked learners would "
                "couple them")
    first = _signature(modules[0])
    for i, module in enumerate(modules[1:], start=1):
        if _signature(module) != first:
            return (f"learner {i} differs in architecture (or in which parameters are frozen) "
                    "from learner 0")
    for name, sub in modules[0].named_modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm) and sub.track_running_stats:
            return (f"BatchNorm '{name}' tracks running statistics, which vmap cannot update in "
                    "place; use mode='loop' or track_running_stats=False")
        # A module that cannot run under vmap says why in ``loop_only_reason`` (StumpRegressor).
        if getattr(sub, "loop_only_reason", None):
            return f"'{name or type(sub).__name__}': {sub.loop_only_reason}"
    if not any(True for _ in modules[0].parameters()):
        return "the learners have no parameters"
    tied = _tied_parameters(modules[0])
    if tied:
        return (f"parameters {' = '.join(tied)} are one tensor (tied weights), which stacked "
                "copies would untie")
    return None


def _tied_parameters(module: nn.Module) -> list[str]:
    """Names of the first tensor registered under several names in ``module`` (``[]``: none)."""
    names: dict[int, list[str]] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
    return next((group for group in names.values() if len(group) > 1), [])


class _TemplateGuard:
    """Around every call through a :class:`StackedEngine`'s template: if it raises, the
    template's own tensors go back (:meth:`StackedEngine._reset_template`). ``functional_call``
    swaps a learner's tensors (under ``vmap``, batched ones) into the template and back, and an
    interrupt during the swap back left them there, after which ``deepcopy``, ``pickle``,
    ``export`` and ``learner(i)`` failed for good (about 1 interrupt in 200). (A class, not a
    generator: entered once per forward.)"""

    __slots__ = ("engine",)

    def __init__(self, engine: StackedEngine) -> None:
        self.engine = engine

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        if kind is not None:
            self.engine._reset_template()


def _key(name: str) -> str:
    return name.replace(".", "__")


class StackedEngine(nn.Module):
    """Holds N homogeneous learners as stacked parameters; same interface as ``LoopEngine``."""

    def __init__(self, modules: Sequence[nn.Module], optimizer: OptimizerSpec,
                 chained: bool = False) -> None:
        super().__init__()
        problem = stacking_problem(modules, optimizer)
        if problem is not None:
            raise ValueError(f"cannot stack these learners: {problem}")
        #: chained learners (:mod:`~torchboost.learners.chained`): :func:`stacked_chain`
        self.chained = chained
        self._n = len(modules)
        params, buffers = stack_module_state(list(modules))
        self._param_names = list(params)
        self._buffer_names = list(buffers)
        # The template carries the architecture only; its tensors live on the meta device and
        # are never used (functional_call substitutes the stacked slices). It is kept out of the
        # module tree so it appears in neither state_dict nor parameters().
        self._template = [copy.deepcopy(modules[0]).to("meta")]
        #: the template's own (meta) tensors, put back after an interrupted call
        #: (:class:`_TemplateGuard`)
        self._template_tensors = {
            **dict(self._template[0].named_parameters(remove_duplicate=False)),
            **dict(self._template[0].named_buffers(remove_duplicate=False))}
        self._plan = (sequential_plan(self._template[0])
                      if not (self._buffer_names or chained) else None)
        #: chained learners: the stem's direct GEMM plan (:func:`sequential_chain`)
        self._stem_plan = (sequential_plan(self._template[0].stem)
                           if isinstance(self._template[0], ChainedSequential) else None)
        first = hidden_major_prefix(self._plan) if self._plan is not None else None
        layout = {first + "weight", first + "bias"} if first is not None else set()
        # stack_module_state makes every stacked tensor trainable: keep frozen ones frozen
        trainable = {n: p.requires_grad for n, p in modules[0].named_parameters()}
        self.stacked_params = nn.ParameterDict(
            {_key(n): nn.Parameter(hidden_major(params[n].detach()) if n in layout
                                   else params[n].detach().clone(), requires_grad=trainable[n])
             for n in self._param_names}
        )
        for n in self._buffer_names:
            self.register_buffer("buffer__" + _key(n), buffers[n].clone())
        self.optimizers = [optimizer.build(self.stacked_params.values(), multi_tensor=True,
                                          stacked=True)]

    def __len__(self) -> int:
        return self._n

    def train(self, mode: bool = True) -> StackedEngine:
        super().train(mode)
        self._template[0].train(mode)
        return self

    def _call_one(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor) -> Tensor:
        return functional_call(self._template[0], (params, buffers), (x,))

    def _stacked(self, n_learners: int) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """The first ``n_learners`` rows of every stacked tensor; all of them as the tensors
        themselves (a slice's backward would write the gradient into a zero-filled copy)."""
        params = {n: self.stacked_params[_key(n)] for n in self._param_names}
        buffers = {n: getattr(self, "buffer__" + _key(n)) for n in self._buffer_names}
        if n_learners != self._n:
            params = {n: t[:n_learners] for n, t in params.items()}
            buffers = {n: t[:n_learners] for n, t in buffers.items()}
        return params, buffers

    def forward(self, x: Tensor, n_learners: int, fast: bool = True) -> Tensor:
        """Outputs of the first ``n_learners`` learners, stacked: ``(n_learners, B, ...)``.

        Plain ``nn.Sequential`` MLPs and convolutional networks take the direct path of
        :mod:`~torchboost.learners.stacked_sequential` unless ``fast=False``; everything else,
        and that path's reference, is ``vmap(functional_call(template, ...))``.
        """
        params, buffers = self._stacked(n_learners)
        with _TemplateGuard(self):
            return self._run(params, buffers, x, fast)

    @property
    def template(self) -> nn.Module:
        """The learners' architecture (its tensors on the meta device, never used)."""
        return self._template[0]

    @property
    def has_buffers(self) -> bool:
        """Whether the learners hold buffers."""
        return bool(self._buffer_names)

    @property
    def direct(self) -> bool:
        """Whether :meth:`forward` takes the direct path
        (:mod:`~torchboost.learners.stacked_sequential`; chained learners: for their stem),
        not ``vmap``."""
        return self._plan is not None or self._stem_plan is not None

    def named_stacked(self) -> dict[str, Tensor]:
        """Every stacked parameter, named as in a learner (``"0.weight"``)."""
        return self._stacked(self._n)[0]

    def functional(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """:meth:`forward` of every learner with ``params`` (:meth:`named_stacked`'s names) in
        place of the stacked parameters: the same computation as a function of them, for
        learners without buffers (``compile=True``'s round differentiates it,
        :mod:`~torchboost.boosters.compiled_round`)."""
        return self._run(params, {}, x, True)

    def _reset_template(self) -> None:
        """Put the template's own tensors back (:class:`_TemplateGuard`)."""
        template = self._template[0]
        for name, tensor in self._template_tensors.items():
            owner, _, attr = name.rpartition(".")
            module = template.get_submodule(owner)
            table = module._parameters if attr in module._parameters else module._buffers
            table[attr] = tensor

    def _run(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor,
             fast: bool) -> Tensor:
        if self.chained:
            if fast and not buffers and isinstance(self._template[0], ChainedSequential):
                return sequential_chain(self._template[0], params, x, self._stem_plan)
            k = next(iter(params.values())).shape[0]
            return stacked_chain(self._step(params, buffers, x),
                                 lambda carries: self._vmap_chained(params, buffers, x, carries), k)
        if self._plan is not None and fast:
            return stacked_sequential(self._plan, params, x)
        batched = vmap(self._call_one, in_dims=(0, 0, None), randomness="different")
        return batched(params, buffers, x)

    def _vmap_chained(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor,
                      carries: Tensor) -> Tensor:
        """Every chained learner at once, learner ``i`` with ``carries[i]``."""
        def one(p: dict[str, Tensor], b: dict[str, Tensor], carry: Tensor) -> Tensor:
            return functional_call(self._template[0], (p, b), (x, carry))[0]

        return vmap(one, in_dims=(0, 0, 0), randomness="different")(params, buffers, carries)

    def _step(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor) -> ChainStep:
        """Chained learner ``i`` alone on ``x`` with a carry: ``(output, features)``."""
        def one(i: int, carry: Tensor | None) -> tuple[Tensor, Tensor]:
            row = {n: t[i] for n, t in params.items()}, {n: t[i] for n, t in buffers.items()}
            with _TemplateGuard(self):
                return functional_call(self._template[0], row, (x, carry))

        return one

    def step(self, x: Tensor) -> ChainStep:
        """Chained learner ``i`` on ``x`` with a carry: ``(output, features)``."""
        return self._step(*self._stacked(self._n), x)

    def forward_one(self, index: int, x: Tensor, carry: Tensor | None = None) -> Tensor:
        """Learner ``index``'s output (chained: given its ``carry``)."""
        params, buffers = self._stacked(self._n)
        with _TemplateGuard(self):
            if self.chained:
                return self._step(params, buffers, x)(index, carry)[0]
            one = ({n: t[index] for n, t in params.items()},
                   {n: t[index] for n, t in buffers.items()})
            return self._call_one(*one, x)

    def zero_grad(self) -> None:
        for param in self.stacked_params.values():
            param.grad = None

    def optimizer_step(self, index: int | None = None) -> None:
        if index is not None:
            raise ValueError("stacked learners share one fused optimizer step; stepping a single "
                             "learner needs mode='loop'")
        self.optimizers[0].step()

    def learner_state(self, index: int) -> dict[str, Tensor]:
        """Learner ``index``'s parameters and buffers, named as in the original module."""
        params, buffers = self._stacked(self._n)
        return {n: t[index].detach() for n, t in (params | buffers).items()}

    def learner(self, index: int) -> nn.Module:
        """A standalone copy of learner ``index`` (not linked to the stacked parameters)."""
        device = next(iter(self.stacked_params.values())).device
        module = copy.deepcopy(self._template[0]).to_empty(device=device)
        module.load_state_dict(self.learner_state(index))
        return module

    @torch.no_grad()
    def set_learner_state(self, index: int, state: dict[str, Tensor]) -> None:
        for n in self._param_names:
            self.stacked_params[_key(n)][index].copy_(state[n])
        for n in self._buffer_names:
            getattr(self, "buffer__" + _key(n))[index].copy_(state[n])

    def optimizer_states(self) -> list[dict]:
        return [self.optimizers[0].state_dict()]

    def load_optimizer_states(self, states: list[dict]) -> None:
        if len(states) != 1:
            raise ValueError(f"stacked learners keep 1 optimizer state, got {len(states)}")
        self.optimizers[0].load_state_dict(states[0])
