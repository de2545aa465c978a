"""Stagewise GB's frozen learners, evaluated as one stacked call.

In stage ``i`` of :class:`~torchboost.StagewiseGB` (Friedman 2001; the baseline of Hu et al. 2017,
Sec. 6.2) every batch is passed through the frozen learners ``1..i−1`` to recompute
``y^{i−1} = y0 − η Σ_{j<i} h_j(x)``: a stream cannot be revisited, so their predictions are never
cached, and an example costs ``i − 1`` prediction units for them. The learners live in a
``mode="loop"`` :class:`~torchboost.learners.WeakLearners` because a stage steps only its own
learner's optimizer; run one by one, the frozen ones cost ``i − 1`` module calls per batch.

:class:`FrozenPrefix` computes the same ``i − 1`` predictions in one call of a
:class:`~torchboost.learners.StackedEngine` (one GEMM or convolution per layer for plain
``nn.Sequential`` networks,
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

from operator import attrgetter, getitem
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.learners import OptimizerSpec, StackedEngine, WeakLearners
from torchboost.learners.stacked import stacking_problem

__all__ = ["FrozenPrefix"]

#: The stacked copy is never stepped; its optimizer is the cheapest elementwise one.
_NO_STEP = OptimizerSpec(torch.optim.SGD)

_training = attrgetter("training")


class _Refillable(StackedEngine):
    """A :class:`StackedEngine` whose first ``k`` rows are refilled from live tensors and
    evaluated (never stepped, never saved: only :class:`FrozenPrefix` holds it)."""

    def __init__(self, modules: list[nn.Module], optimizer: OptimizerSpec) -> None:
        super().__init__(modules, optimizer)
        #: per ``k``, the first ``k`` rows of every stacked parameter, as :meth:`_stacked` gives
        #: them (views; dropped when the stacked tensors are replaced, by :meth:`_apply`)
        self._rows: dict[int, dict[str, Tensor]] = {}

    def _apply(self, *args: Any, **kwargs: Any) -> _Refillable:
        self._rows = {}
        return super()._apply(*args, **kwargs)

    def rows(self, k: int) -> dict[str, Tensor]:
        """The first ``k`` rows of every stacked parameter, by name (in :attr:`_param_names`
        order)."""
        rows = self._rows.get(k)
        if rows is None:
            rows = self._rows[k] = self._stacked(k)[0]
        return rows

    def refill(self, k: int, sources: list[list[Tensor]]) -> None:
        """Copy ``sources[p][j]`` (learner ``j``'s parameter ``p``) into row ``j``."""
        with torch.no_grad():
            for rows, tensors in zip(self.rows(k).values(), sources, strict=True):
                torch.stack(tensors, out=rows)

    def holds(self, sources: list[list[Tensor]]) -> bool:
        """Whether the stacked tensors have the device and dtype of ``sources``."""
        return all(rows.device == tensors[0].device and rows.dtype == tensors[0].dtype
                   for rows, tensors in zip(self.rows(len(self)).values(), sources, strict=True))

    def forward_rows(self, x: Tensor, k: int) -> Tensor:
        """:meth:`forward` of the first ``k`` learners (the engine has no buffers), without
        rebuilding the rows' views."""
        return self._run(self.rows(k), {}, x, True)


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
        #: per stacked parameter (:attr:`_Refillable._param_names` order), each stacked
        #: learner's owning module's ``_parameters`` dict and the name in it
        self._slots: list[tuple[list[dict[str, Tensor]], list[str]]] = []
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
        sources = [list(map(getitem, dicts[:k], attrs[:k])) for dicts, attrs in self._slots]
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
            out = engine.forward_rows(x, k)
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
        self._engine, self._slots, self._submodules = None, [], []
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
        for name in self._engine._param_names:
            owner, _, attr = name.rpartition(".")
            self._slots.append(([module.get_submodule(owner)._parameters for module in modules],
                                [attr] * k))
        self._submodules = [sub for module in modules for sub in module.modules()]

    def _mode(self, k: int) -> bool | None:
        """The training mode shared by every submodule of learners ``0..k−1`` (``None``: mixed)."""
        per_learner = len(self._submodules) // len(self._engine)  # type: ignore[arg-type]
        modes = set(map(_training, self._submodules[:k * per_learner]))
        return modes.pop() if len(modes) == 1 else None
