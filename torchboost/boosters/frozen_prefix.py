"""Stagewise GB's frozen learners, evaluated as one stacked call.

In stage ``i`` of :class:`~torchboost.StagewiseGB` (Friedman 2001; the baseline of Hu et al. 2017,
Sec. 6.2) every batch is passed through the frozen learners ``1..i−1`` to recompute
``y^{i−1} = y0 − η Σ_{j<i} h_j(x)``: a stream cannot be revisited, so their predictions are never
cached, and an example costs ``i − 1`` prediction units for them. The learners live in a
``mode="loop"`` :class:`~torchboost.learners.WeakLearners` because a stage steps only its own
learner's optimizer; run one by one, the frozen ones cost ``i − 1`` module calls per batch.

:class:`FrozenPrefix` computes the same ``i − 1`` predictions in one call of a
:class:`~torchboost.learners.StackedEngine` (one GEMM per layer for plain MLPs,
:mod:`~torchboost.learners.stacked_sequential`; ``vmap`` otherwise). Only the stacked *layout* is
kept between calls: the stacked tensors are refilled from the learners' current parameters on
every call (one ``torch.stack`` per parameter name), so loading a state, restoring a stage's best
epoch, moving to another device or dtype, or editing a parameter in place all take effect at once,
exactly as in the loop. The learners' modes are followed too (all in ``train()`` or all in
``eval()``; a mixture runs the loop). Learners that cannot run stacked run the loop: those
:func:`~torchboost.learners.stacked.stacking_problem` rejects (different architectures, BatchNorm
with running statistics, ...), learners with buffers (a forward may update a buffer in place,
which a stacked copy would not write back) and learners that fail under ``vmap``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from torchboost.learners import OptimizerSpec, StackedEngine, WeakLearners
from torchboost.learners.stacked import stacking_problem

__all__ = ["FrozenPrefix"]

#: The stacked copy is never stepped; its optimizer is the cheapest elementwise one.
_NO_STEP = OptimizerSpec(torch.optim.SGD)


class _Refillable(StackedEngine):
    """A :class:`StackedEngine` whose first ``k`` rows are refilled from live tensors."""

    @torch.no_grad()
    def refill(self, k: int, sources: dict[str, list[Tensor]]) -> None:
        """Copy ``sources[name][j]`` (learner ``j``'s parameter ``name``) into row ``j``."""
        params, _ = self._stacked(k)
        for name, rows in params.items():
            torch.stack(sources[name], out=rows)

    def holds(self, sources: dict[str, list[Tensor]]) -> bool:
        """Whether the stacked tensors have the device and dtype of ``sources``."""
        return all(stacked.device == sources[name][0].device
                   and stacked.dtype == sources[name][0].dtype
                   for name, stacked in zip(self._param_names, self.stacked_params.values(),
                                            strict=True))


class FrozenPrefix:
    """Outputs of the first ``k`` learners of a loop-mode :class:`WeakLearners`, stacked when
    they can be (see the module docstring), else by its loop: ``prefix(x, k)`` is
    ``learners(x, k)`` up to floating-point rounding.

    Nothing here is a module: it appears in no ``state_dict``, ``parameters()`` or ``.to()``.
    """

    def __init__(self, learners: WeakLearners) -> None:
        self.learners = learners
        #: why the learners run as a loop (``None``: stacked); setting a reason forces the loop
        #: (the reference path of the tests and of ``benchmarks/stagewise_cost.py``)
        self.problem: str | None = None
        self._engine: _Refillable | None = None
        self._engine_mode: bool | None = None
        #: per parameter name, each stacked learner's (owning module, attribute name)
        self._slots: dict[str, list[tuple[nn.Module, str]]] = {}
        #: every submodule of the stacked learners, learner by learner
        self._submodules: list[nn.Module] = []
        self._verified = False

    def __call__(self, x: Tensor, k: int) -> Tensor:
        """``(k, B, m)``: learners ``0..k−1`` on ``x`` (``1 <= k <= N``), in their own modes."""
        if self.problem is None and (self._engine is None or len(self._engine) < k):
            self._build(k)
        mode = self._mode(k) if self.problem is None else None
        if mode is None:
            return self.learners(x, k)
        sources = {name: [module._parameters[attr] for module, attr in slots[:k]]
                   for name, slots in self._slots.items()}
        engine = self._engine
        assert engine is not None
        if not engine.holds(sources):  # the learners were moved: a new layout
            self._build(len(engine))
            return self(x, k)
        if self._engine_mode != mode:
            engine.train(mode)
            self._engine_mode = mode
        try:
            engine.refill(k, sources)
            out = engine(x, k)
            if not (torch.is_tensor(out) and out.ndim in (2, 3)):
                raise ValueError("not one (B, m) or (B,) tensor per learner")
        except Exception as error:
            if self._verified:
                raise
            out = self.learners(x, k)  # raises when the input or the learners are at fault
            self.problem = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            return out
        self._verified = True
        return out.unsqueeze(-1) if out.ndim == 2 else out

    def _build(self, k: int) -> None:
        """The stacked layout of learners ``0..k−1``, or :attr:`problem`."""
        modules = [self.learners.learner(j) for j in range(k)]
        self._engine, self._slots, self._submodules = None, {}, []
        problem = stacking_problem(modules, _NO_STEP)
        if problem is None and any(True for _ in modules[0].buffers()):
            problem = ("the learners have buffers, which a forward may update in place; a "
                       "stacked copy would not write them back")
        if problem is not None:
            self.problem = problem
            return
        try:
            self._engine = _Refillable(modules, _NO_STEP).requires_grad_(False)
        except RuntimeError as error:  # e.g. learners on different devices
            self.problem = f"{type(error).__name__}: {str(error).splitlines()[0]}"
            return
        self._engine_mode, self._verified = None, False
        for name, _ in modules[0].named_parameters():
            owner, _, attr = name.rpartition(".")
            self._slots[name] = [(module.get_submodule(owner), attr) for module in modules]
        self._submodules = [sub for module in modules for sub in module.modules()]

    def _mode(self, k: int) -> bool | None:
        """The training mode shared by every submodule of learners ``0..k−1`` (``None``: mixed)."""
        per_learner = len(self._submodules) // len(self._engine)  # type: ignore[arg-type]
        modes = {sub.training for sub in self._submodules[:k * per_learner]}
        return modes.pop() if len(modes) == 1 else None
