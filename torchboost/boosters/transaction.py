"""One round of a booster, all or nothing: :class:`RoundTransaction`.

:meth:`Booster.learn <torchboost.boosters.base.Booster.learn>` runs its round inside ``with
booster._transaction(booster, learners, index) as round_:`` (so does a
:class:`~torchboost.chaining.StepwiseOGB` over a learner container). On entry the transaction
copies every buffer of the booster and its submodules (σ, running sums, the stall monitor's,
BatchNorm statistics, the standardiser's), the state of the booster's random generator
(``booster.generator``, where it has one) and of torch's global ones (CPU, and CUDA once
initialised: a learner's Dropout draws its masks from them; about 1 µs on CPU, and a host-side
copy per CUDA device) and, for the learners the round trains (:meth:`Booster.stepping_learner
<torchboost.boosters.base.Booster.stepping_learner>`), their parameters, optimizer state and
parameter-group settings (:class:`LearnerSnapshot`: one multi-tensor copy into tensors kept from
round to round). Inside, the learners step through :meth:`RoundTransaction.step`, guarded by
:func:`~torchboost.boosters.guards.guard_step` (stacked schedule-free learners: its checks
around their own step, :mod:`~torchboost.boosters.stacked_step`; a non-finite or absurd step
raises :class:`~torchboost.boosters.guards.DivergenceError`), and what may only happen once
the round has succeeded happens last in its body; what a buffer copy cannot undo (the standardiser's
buffers sized by the first batch) registers its undoing with :meth:`RoundTransaction.on_rollback`.
The learning-rate schedules step last in the round (a scheduler that raises puts them all back).
If anything raises — a guard, a learner, a hook, ``KeyboardInterrupt`` — the buffers, the
generators and the learners are restored bitwise (schedule-free learners at their averaged
weights, :mod:`~torchboost.learners.averaging`) and the rollback actions run; otherwise the
round's whole commit already happened inside it.

The learners' copy costs one pass over their parameters and optimizer state per round (Adam:
one more ATen operation than before it, ``benchmarks/round_ops.py``); it replaced the guards'
own copies (a ``torch.cat`` of the parameters and a copy of the optimizer state for every step
that no bound proves safe), so the default schedule-free round cost 1.04× (N = 8) and 1.10×
(N = 64, SLICE shape) an Adam round stacked and 0.90× in loop mode; 0.99×, 1.02× and
0.87-0.92× since the stacked step is the library's (:mod:`.stacked_step`,
``benchmarks/schedule_free_cost.json``).

So a booster's own state must live in buffers (or learner parameters): plain Python attributes
are not restored, and not saved by ``state_dict`` either
(:func:`torchboost.testing.check_state_dict_resumes_exactly` checks every registered booster).

The buffer copy (:class:`RoundSnapshot`): every round copies every buffer into tensors kept
from the round before, in one multi-tensor copy. Finding the buffers means walking the module
tree: with N learners in ``mode="loop"`` that is O(N) modules (84 for stagewise GB's 16
two-layer nets). Walking it every round (and allocating the copies) made a round 12 % slower
for stagewise GB over 16 ``TwoLayerNet(8, 10)`` (541 → 608 µs, one thread) and 6 % for SGB over
16 of them (643 → 685 µs); no slower for 64 learners in the SLICE shape (3.0 ms).
:class:`RoundSnapshot` keeps the list from the last walk and walks again only when the tree may
hold other buffers, which a check reads in C loops (about a third of the walk's time) over live
views of every module's ``_modules`` and ``_buffers`` dicts as the last walk found them: a child
added, removed or replaced (``add_module``, assignment, ``ModuleList.insert``, ``del``) changes
the children, a buffer registered, assigned, set to ``None`` or replaced (``.to()``,
``.double()``, ``load_state_dict(assign=True)``) the buffer entries, and a buffer resized in
place its shape. Values written in place need no walk: the copy reads them. A copied or
unpickled booster walks its own tree.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, ValuesView
from itertools import chain
from operator import attrgetter, is_
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from torchboost.boosters.compiled_round import CompiledRound, Trained
from torchboost.boosters.guards import guard_step
from torchboost.boosters.stacked_step import StackedScheduleFreeStep
from torchboost.distributed import Synchronizer
from torchboost.learners import WeakLearners
from torchboost.without_grad import without_grad

__all__ = ["LearnerSnapshot", "RoundSnapshot", "RoundTransaction", "Snapshot"]

#: the buffers and their copies
Snapshot = tuple[list[Tensor], list[Tensor]]

_shape = attrgetter("shape")


class RoundSnapshot:
    """Copies of the buffers of a module tree, taken by :meth:`take`, put back by
    :meth:`restore` (see the module docstring)."""

    def __init__(self) -> None:
        #: live views of the ``_modules`` and ``_buffers`` dicts of every module of the last walk
        self._module_views: list[ValuesView] = []
        self._buffer_views: list[ValuesView] = []
        #: what they held then: every module's children, every module's buffer entries
        self._children: tuple = ()
        self._entries: tuple = ()
        #: each buffer (``None`` entries left out) and the tensor its copy goes to
        self._buffers: list[Tensor] = []
        self._copies: list[Tensor] = []
        self._shapes: list[torch.Size] = []

    def __getstate__(self) -> dict[str, Any]:
        return {}  # a copy walks its own tree (dict views do not pickle)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def take(self, module: nn.Module) -> Snapshot:
        """Copy every buffer of ``module`` and its submodules; returns the buffers and their
        copies for :meth:`restore` (lists that a later walk replaces, never changes)."""
        if not self._unchanged():
            self._walk(module)
        if self._buffers:
            torch._foreach_copy_(self._copies, self._buffers)
        return self._buffers, self._copies

    @staticmethod
    def restore(snapshot: Snapshot) -> None:
        """Put the copies of :meth:`take` back into their buffers."""
        with without_grad():
            for buffer, copy in zip(*snapshot, strict=True):
                buffer.copy_(copy)

    def _unchanged(self) -> bool:
        """Whether the tree holds the buffers of the last walk, with their shapes."""
        children = tuple(chain.from_iterable(self._module_views))
        entries = tuple(chain.from_iterable(self._buffer_views))
        return (bool(self._module_views)
                and len(children) == len(self._children) and all(map(is_, children,
                                                                     self._children))
                and len(entries) == len(self._entries) and all(map(is_, entries, self._entries))
                and list(map(_shape, self._buffers)) == self._shapes)

    def _walk(self, root: nn.Module) -> None:
        """Find every module (each once) and buffer; allocate the copies."""
        modules: list[nn.Module] = []
        stack, seen = [root], set()
        while stack:
            current = stack.pop()
            if current is None or id(current) in seen:
                continue
            seen.add(id(current))
            modules.append(current)
            stack += current._modules.values()
        self._module_views = [m._modules.values() for m in modules]
        self._buffer_views = [m._buffers.values() for m in modules]
        self._children = tuple(chain.from_iterable(self._module_views))
        self._entries = tuple(chain.from_iterable(self._buffer_views))
        self._buffers = [b for b in self._entries if b is not None]
        self._copies = [torch.empty_like(b) for b in self._buffers]
        self._shapes = list(map(_shape, self._buffers))


class LearnerState(NamedTuple):
    """The saved learners: their stepped optimizers, each one's state entries (shallow) and
    parameter-group settings, and every tensor with its copy (the parameters first)."""

    optimizers: list[torch.optim.Optimizer]
    states: list[dict[Tensor, dict[str, Any]]]
    groups: list[list[dict[str, Any]]]
    tensors: list[Tensor]
    copies: list[Tensor]
    n_params: int

    @property
    def parameters(self) -> list[Tensor]:
        """The copies of the stepped parameters, as they were before the round."""
        return self.copies[:self.n_params]


class LearnerSnapshot:
    """Copies of what a round's step changes in the learners it trains: their parameters, their
    optimizers' state tensors (Adam's moments, schedule-free's ``z``, step counts) and
    parameter-group settings (schedule-free's averaging scalars and train/eval flag), taken by
    :meth:`take` in one multi-tensor copy into tensors kept from round to round, put back by
    :meth:`restore` (module docstring)."""

    def __init__(self) -> None:
        self._copies: list[Tensor] = []
        self._layout: list[tuple[torch.Size, torch.dtype, torch.device]] = []

    def __getstate__(self) -> dict[str, Any]:
        return {}  # a copy allocates its own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def take(self, learners: WeakLearners, index: int | None) -> LearnerState:
        """Copy the state of every optimizer of ``learners`` (or of learner ``index``'s alone)
        and of the parameters it steps."""
        optimizers = learners.stepped_optimizers(index)
        states = [{p: _entry_copy(entry) for p, entry in opt.state.items()}
                  for opt in optimizers]
        groups = [[{k: v for k, v in group.items() if k != "params"}
                   for group in opt.param_groups] for opt in optimizers]
        tensors = [p for opt in optimizers for group in opt.param_groups for p in group["params"]]
        n_params = len(tensors)
        tensors += [v for state in states for entry in state.values() for v in entry.values()
                    if torch.is_tensor(v)]
        layout = [(t.shape, t.dtype, t.device) for t in tensors]
        if layout != self._layout:
            self._copies = [torch.empty_like(t) for t in tensors]
            self._layout = layout
        with without_grad():
            torch._foreach_copy_(self._copies, tensors)
        return LearnerState(optimizers, states, groups, tensors, self._copies, n_params)

    @staticmethod
    def restore(saved: LearnerState) -> None:
        """Put the parameters, optimizer states and group settings of :meth:`take` back."""
        optimizers, states, groups, tensors, copies, _ = saved
        with torch.no_grad():
            torch._foreach_copy_(tensors, copies)
        for opt, state, settings in zip(optimizers, states, groups, strict=True):
            opt.state.clear()
            opt.state.update({p: _entry_copy(entry) for p, entry in state.items()})
            for group, saved_group in zip(opt.param_groups, settings, strict=True):
                group.update(saved_group)


def _entry_copy(entry: dict[str, Any]) -> dict[str, Any]:
    """An optimizer state entry's copy: its tensors as they are (copied into kept tensors
    apart), numbers and strings as they are, anything else (a custom optimizer's list of past
    values, say) deep-copied, so that a failed round's change to it is not kept."""
    return {k: v if torch.is_tensor(v) or isinstance(v, _IMMUTABLE) else copy.deepcopy(v)
            for k, v in entry.items()}


#: values an optimizer step cannot change in place
_IMMUTABLE = (int, float, bool, str, bytes, type(None), tuple)


class RoundTransaction:
    """A booster's rounds, each all or nothing (module docstring). One per booster: it keeps
    the buffer copies (:class:`RoundSnapshot`) from round to round."""

    def __init__(self) -> None:
        self._snapshot = RoundSnapshot()
        self._learners = LearnerSnapshot()
        #: the learners as they were before the current round (:meth:`LearnerSnapshot.take`)
        self._saved = LearnerState([], [], [], [], [], 0)
        self._rollbacks: list[Callable[[], None]] = []
        #: the stacked schedule-free learners' step (:mod:`.stacked_step`)
        self._stacked_step = StackedScheduleFreeStep()
        #: the round's arithmetic with ``compile=True`` (:mod:`.compiled_round`)
        self._compiled_round = CompiledRound()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # a copy keeps its own buffer copies

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def __call__(self, booster: nn.Module, learners: WeakLearners,
                 index: int | None) -> RoundTransaction:
        """The round of ``booster``, which trains its ``learners`` (all, or learner ``index``
        alone), as a ``with`` block: restore the buffers, the learners and the random
        generators (the booster's and torch's global ones) and run the registered rollback
        actions if the body raises. (A class's ``__exit__``, not a generator's: a generator
        left suspended by an interrupt inside ``contextlib``'s exit would be closed later, and
        its restore would then undo a round that had committed.)"""
        self._round = (booster, learners, index)
        return self

    def __enter__(self) -> RoundTransaction:
        booster, learners, index = self._round
        generator = vars(booster).get("generator")  # a plain attribute (no Module lookup miss)
        self._generator = (generator, generator.get_state()) if isinstance(
            generator, torch.Generator) else None
        self._global_rng = torch.get_rng_state()  # Dropout's masks, a learner's own draws
        self._global_cuda_rng = (torch.cuda.get_rng_state_all() if torch.cuda.is_initialized()
                                 else None)
        self._buffers = self._snapshot.take(booster)
        self._saved = self._learners.take(learners, index)
        self._rollbacks = []
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: Any) -> None:
        if kind is None:
            return
        RoundSnapshot.restore(self._buffers)
        LearnerSnapshot.restore(self._saved)
        if self._generator is not None:
            self._generator[0].set_state(self._generator[1])
        torch.set_rng_state(self._global_rng)
        if self._global_cuda_rng is not None:
            torch.cuda.set_rng_state_all(self._global_cuda_rng)
        for action in self._rollbacks:
            action()

    def learners_had_state(self) -> bool:
        """Whether the optimizers this round steps held state before it (had stepped once)."""
        return any(self._saved.states)

    def on_rollback(self, action: Callable[[], None]) -> None:
        """Run ``action`` if the round raises, after the buffers are restored: for a change
        a buffer copy cannot undo (a buffer replaced by one of another size)."""
        self._rollbacks.append(action)

    def compiled_round(self, booster: nn.Module) -> Callable[[Tensor, Tensor],
                                                             Trained | None] | None:
        """``booster``'s round, standardisation to step, as one compiled call where
        ``compile=True`` and it applies (:class:`~.compiled_round.CompiledRound`), else
        ``None``."""
        return self._compiled_round.bound(booster, self._saved.parameters,
                                          self.learners_had_state)

    def step(self, learners: WeakLearners, outputs: Tensor, output_grad: Tensor,
             index: int | None, sync: Synchronizer | None) -> None:
        """The learners' optimizer step (all of them, or learner ``index``) on the gradient of
        their losses with respect to their ``outputs``, guarded (module docstring): a
        non-finite or absurd step raises, and the transaction restores the learners."""
        stacked = self._stacked_step.bound(learners, index, sync, self._saved.parameters)
        if stacked is not None:  # stacked schedule-free learners: the step and checks 2-4
            learners.step_outputs(outputs, output_grad, optimizer_step=stacked)
            return
        with guard_step(learners, index, self._saved.parameters):
            learners.step_outputs(outputs, output_grad, index=index, sync=sync)
