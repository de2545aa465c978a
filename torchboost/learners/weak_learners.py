"""The container of N weak learners, each an ``nn.Module`` with its own optimizer state."""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from itertools import repeat
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torch.nn.parameter import is_lazy

from torchboost.distributed import Synchronizer
from torchboost.learners.averaging import is_schedule_free, learning_point, window_average
from torchboost.learners.chained import chain, chainable
from torchboost.learners.loop import LoopEngine
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER, OptimizerSpec, output_layer_size
from torchboost.learners.schedules import LRSchedulerFactory, build_schedulers
from torchboost.learners.stacked import StackedEngine, stacking_problem
from torchboost.learners.stacking_probe import StackingProbe, check_output, check_rows
from torchboost.params import flag, positive_int

__all__ = ["LearnerSource", "WeakLearners"]

Mode = Literal["auto", "stacked", "loop"]
LearnerSource = Callable[[], nn.Module] | Sequence[nn.Module]


class WeakLearners(StackingProbe, nn.Module):
    """N weak learners ``h_1..h_N``, each trained by its own optimizer (schedule-free AdamW by
    default: at rest the parameters hold its averaged weights, :meth:`learning_point` switches
    them to where it learns; :mod:`~torchboost.learners.averaging`).

    Args:
        learners: a factory ``lambda: nn.Module`` (called ``n_learners`` times, in order, so the
            global RNG seed fixes every initialisation) or a sequence of modules.
        n_learners: how many learners to build from a factory (must match a sequence's length).
        optimizer: any ``torch.optim.Optimizer`` class; ``optimizer_kwargs`` are passed to it.
        mode: ``"stacked"`` runs homogeneous learners as one vmapped computation with one
            multi-tensor optimizer step; ``"loop"`` runs them one by one (any modules, BatchNorm
            included); ``"auto"`` stacks when it can.
        lr_fan_in: scale the learning rate of weights with a wider fan-in by
            ``lr_fan_in / fan_in`` (see :class:`~torchboost.learners.optimizers.OptimizerSpec`;
            ``None``, the default: one rate for every parameter).
        compile: run the stacked learners' schedule-free step and its guards through
            ``torch.compile`` (:mod:`~torchboost.boosters.stacked_step`); a booster's round
            compiles whole where it can, forward and backward included
            (:mod:`~torchboost.boosters.compiled_round`: multi-layer perceptrons; convolutions
            were no faster compiled whole). Stacked mode only; off by default: compiling
            takes seconds, paid back after a few thousand rounds
            (``docs/results/throughput.md``). Results equal eager ones up to rounding.
        lr_scheduler: a factory ``optimizer -> LRScheduler`` (any ``torch.optim.lr_scheduler``
            class; :mod:`~torchboost.learners.schedules`), called for every optimizer; each
            scheduler steps right after its optimizer's step has succeeded
            (:meth:`step_schedules`), once per round. ``None`` (default): constant rates.
        lr_output_scale: multiplies the rate of learners whose only layer with parameters is
            their output layer (linear learners; :class:`OptimizerSpec`'s ``output_scale``).
            Default 1.
        chained: chain the learners, a streaming GrowNet (:mod:`~torchboost.learners.chained`):
            learner ``i`` also gets learner ``i − 1``'s features, detached. Plain
            ``nn.Sequential`` learners are wrapped in
            :class:`~torchboost.learners.chained.ChainedSequential`; other modules must follow
            the chained-learner protocol. Default ``False``.
        averaging_window: bound the schedule-free learners' weight average to about their last
            ``averaging_window`` steps (:func:`~torchboost.learners.averaging.window_average`),
            for a stream that changes; default ``None``: the uniform average of every step.

    Calling the container returns every learner's output on the same input, ``(N, B, m)``; the
    booster builds each learner's loss and calls :meth:`step`. Optimizer state is part of
    ``state_dict()`` (as extra state), as are the schedulers' states, and follows
    ``.to(device)``.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> learners = WeakLearners(lambda: nn.Linear(3, 1), n_learners=4)
        >>> learners.mode, tuple(learners(torch.randn(5, 3)).shape)
        ('stacked', (4, 5, 1))
    """

    #: the schedule-free average's horizon (containers pickled before it existed: none)
    averaging_window: int | None = None
    #: ``compile=True`` (learners pickled before it have no such attribute)
    compiled = False

    def __init__(
        self,
        learners: LearnerSource,
        n_learners: int | None = None,
        optimizer: type[torch.optim.Optimizer] = DEFAULT_OPTIMIZER,
        optimizer_kwargs: dict[str, Any] | None = None,
        mode: Mode = "auto",
        compile: bool = False,
        lr_fan_in: float | None = None,
        lr_scheduler: LRSchedulerFactory | None = None,
        lr_output_scale: float = 1.0,
        chained: bool = False,
        averaging_window: int | None = None,
    ) -> None:
        super().__init__()
        modules = _build_modules(learners, n_learners)
        if flag("chained", chained):
            modules = [chainable(module) for module in modules]
        #: whether learner ``i`` gets learner ``i − 1``'s features (:mod:`.chained`)
        self.chained = chained
        names = [name for name, _ in modules[0].named_parameters()]
        if not (names and output_layer_size(names) == len(names)):
            lr_output_scale = 1.0  # not a linear learner: its output layer is not all of it
        spec = OptimizerSpec(optimizer, dict(optimizer_kwargs or {}), lr_fan_in,
                             float(lr_output_scale))
        if mode not in ("auto", "stacked", "loop"):
            raise ValueError(f"mode must be 'auto', 'stacked' or 'loop', got {mode!r}")
        #: whether the stacked step runs through ``torch.compile`` (``compile=True``)
        self.compiled = flag("compile", compile)
        if compile and mode == "loop":
            raise ValueError("compile=True compiles the stacked computation; mode='loop' runs "
                             "the learners' own modules as they are (compile those yourself)")
        #: ``mode="auto"`` chose stacking: the first forward probes it (:meth:`_probe`)
        self._probe_pending = False
        if mode == "auto":
            mode = "stacked" if stacking_problem(modules, spec) is None else "loop"
            self._probe_pending = mode == "stacked"
        self.mode: str = mode
        self.optimizer_spec = spec
        self.engine: StackedEngine | LoopEngine = (
            StackedEngine(modules, spec, chained) if mode == "stacked"
            else LoopEngine(modules, spec, chained)
        )
        if averaging_window is not None:
            averaging_window = positive_int("averaging_window", averaging_window)
            if not is_schedule_free(self.engine.optimizers[0]):
                raise ValueError(f"averaging_window bounds the weight average of schedule-free "
                                 f"learners; {optimizer.__name__} keeps none (leave "
                                 "averaging_window out, or use the default optimizer)")
        #: the schedule-free average's horizon in steps (:func:`~.averaging.window_average`;
        #: ``None``: the uniform average over every step)
        self.averaging_window = averaging_window
        #: the ``lr_scheduler`` factory, and one scheduler per optimizer built from it
        self.lr_scheduler = lr_scheduler
        self._build_schedulers()

    def __len__(self) -> int:
        return len(self.engine)

    @property
    def n_learners(self) -> int:
        return len(self.engine)

    def forward(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        """Outputs of the first ``n_learners`` (default all) learners on ``x``: ``(k, B, m)``.

        Learners that return ``(B,)`` are read as one output. Autograd follows the caller's grad
        mode, so :meth:`step` can back-propagate a loss built from this output.
        """
        k = self.n_learners if n_learners is None else n_learners
        if not 1 <= k <= self.n_learners:
            raise ValueError(f"n_learners must be in [1, {self.n_learners}], got {k}")
        self.probe(x)
        return _stacked_outputs(self.engine(x, k), x.shape[0])

    def forward_one(self, index: int, x: Tensor, carry: Tensor | None = None) -> Tensor:
        """Output of learner ``index`` alone, ``(B, m)``. Chained learners: given ``carry``
        (:meth:`chain_prefix`'s), or with the carry of the chain of learners before it."""
        if self.chained and carry is None and index > 0:
            carry = self.chain_prefix(x, index)[1]
        out = self.engine.forward_one(index, x, carry)
        check_output(out, index, x.shape[0])
        return out.unsqueeze(-1) if out.ndim == 1 else out

    @torch.no_grad()
    def chain_prefix(self, x: Tensor, k: int) -> tuple[Tensor, Tensor | None]:
        """Chained learners ``0..k−1`` (``k >= 1``) without autograd: their outputs
        ``(k, B, m)`` and the carry learner ``k`` gets."""
        outputs, carries = chain(self.engine.step(x), k)
        return _stacked_outputs(outputs, x.shape[0]), carries[-1]

    @property
    def dtype(self) -> torch.dtype:
        """The learners' floating dtype (that of their first floating parameter or buffer, in
        the order of ``parameters()`` then ``buffers()``; the default dtype when they have
        none): features are cast to it. Read every round, so found by a walk that stops at the
        first one (``parameters()`` sets up a generator per module first)."""
        for members in ("_parameters", "_buffers"):
            stack: list[nn.Module | None] = [self]
            while stack:
                module = stack.pop()
                if module is None:
                    continue
                for tensor in getattr(module, members).values():
                    if tensor is not None and tensor.is_floating_point():
                        return tensor.dtype
                stack += reversed(module._modules.values())
        return torch.get_default_dtype()

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """Every learner in ``eval()`` mode inside the block (Dropout off, BatchNorm on its
        running statistics), each module's previous mode restored on exit, as
        ``model.eval()`` ... ``model.train(was_training)`` in plain PyTorch."""
        modules = list(self.modules())
        template = getattr(self.engine, "_template", None)
        if template is not None:
            modules += list(template[0].modules())
        modes = [m.training for m in modules]
        engine = self.engine
        try:  # eval() inside: an interrupt during it still restores every module's mode
            self.eval()
            yield
        finally:  # every flag at once, in C (``nn.Module`` keeps it in ``__dict__``): Python
            # checks for a Ctrl-C between its own instructions only, so an interrupt lands
            # before or after, never between two modules (tests/test_interrupt_campaign.py)
            deque(map(dict.__setitem__, map(vars, modules), repeat("training"), modes), maxlen=0)
            if self.engine is not engine:  # the auto-mode probe rebuilt the learners as a loop
                self.train(modes[0])

    def stepped_optimizers(self, index: int | None = None) -> list[torch.optim.Optimizer]:
        """The optimizers a step of every learner (``index=None``) or of learner ``index``
        alone steps: in stacked mode the one optimizer, in loop mode that learner's."""
        optimizers = self.engine.optimizers
        return optimizers if index is None or len(optimizers) == 1 else [optimizers[index]]

    def learning_point(self, index: int | None = None) -> AbstractContextManager[None]:
        """Inside the block, the schedule-free learners (all of them, or learner ``index``'s
        optimizer alone) hold their learning point; they hold their averaged weights again
        after a normal exit (:func:`~torchboost.learners.averaging.learning_point`)."""
        return learning_point(self.stepped_optimizers(index))

    def step(self, loss: Tensor, index: int | None = None) -> None:
        """Back-propagate ``loss`` (a scalar summing the learners' own losses) and step the
        optimizers: every learner's, or only learner ``index``'s (``mode='loop'`` only)."""
        self._check_learning_point(index)
        self._zero_grad(index)
        loss.backward()
        self._optimizer_step(index)

    def step_outputs(self, outputs: Tensor, output_grad: Tensor, index: int | None = None,
                     sync: Synchronizer | None = None,
                     optimizer_step: Callable[[], None] | None = None) -> None:
        """Like :meth:`step` for a loss whose gradient with respect to ``outputs`` (the tensor
        returned by :meth:`forward`) is known in closed form: back-propagates ``output_grad``.
        With ``sync``, the parameter gradients are summed over the data-parallel replicas (one
        coalesced all-reduce) before the optimizers step. ``optimizer_step``: a call taking
        the optimizers' step instead (the compiled step of ``compile=True``,
        :mod:`~torchboost.boosters.stacked_step`)."""
        self._check_learning_point(index)
        self._zero_grad(index)
        outputs.backward(output_grad)
        if sync is not None:
            sync.sum_([p.grad for p in self.parameters() if p.grad is not None])
        self._optimizer_step(index, optimizer_step)

    def _optimizer_step(self, index: int | None,
                        optimizer_step: Callable[[], None] | None = None) -> None:
        if optimizer_step is None:
            self.engine.optimizer_step(index)
        else:
            optimizer_step()
        if self.averaging_window is not None:
            window_average(self.stepped_optimizers(index), self.averaging_window)

    def step_schedules(self, index: int | None = None,
                       restore: Callable[[], None] | None = None) -> None:
        """Step the learning-rate schedulers once: every optimizer's, or only learner
        ``index``'s (a stage of stagewise boosting: each learner's schedule runs during its own
        stage). Boosters call this last in a round, having registered :meth:`schedules_restorer`
        with the round's transaction (and passing it as ``restore``: the schedulers are copied
        once); if a scheduler raises (``OneCycleLR`` past its ``total_steps``, a user's
        ``LambdaLR``), every scheduler is put back as it was."""
        restore = self.schedules_restorer(index) if restore is None else restore
        try:
            for scheduler in self._chosen_schedulers(index):
                scheduler.step()
        except BaseException:  # a schedule shorter than the stream, a user's lambda: as it was
            restore()
            raise

    def schedules_restorer(self, index: int | None = None) -> Callable[[], None]:
        """The action putting the schedulers :meth:`step_schedules` steps back as they are now
        (for a round's transaction to run if the round fails after they stepped)."""
        return partial(_restore_attributes, _scheduler_attributes(self._chosen_schedulers(index)))

    def _chosen_schedulers(self, index: int | None) -> list[Any]:
        if not self.schedulers:
            return []
        return self.schedulers if index is None else [self.schedulers[index]]

    def _check_learning_point(self, index: int | None) -> None:
        """A schedule-free optimizer steps only from its learning point (its train mode)."""
        for opt in self.stepped_optimizers(index):
            if is_schedule_free(opt) and not opt.param_groups[0]["train_mode"]:
                raise ValueError("the learners' schedule-free optimizers hold their averaged "
                                 "weights (what predictions use): run the learners' forward "
                                 "and step inside `with learners.learning_point(): ...` "
                                 "(a booster's learn() does this itself)")

    def _zero_grad(self, index: int | None) -> None:
        """Clear the gradients before a step: every learner's, or in ``mode='loop'`` only those
        of the parameters of learner ``index``'s optimizer (the others are not stepped, and
        walking every learner's modules costs O(N) per round)."""
        if index is None or self.mode != "loop":
            self.engine.zero_grad()
            return
        for group in self.engine.optimizers[index].param_groups:
            for param in group["params"]:
                param.grad = None

    def learner(self, index: int) -> nn.Module:
        """Learner ``index`` as an ``nn.Module`` (a copy in stacked mode)."""
        return self.engine.learner(index)

    def learner_state(self, index: int) -> dict[str, Tensor]:
        """Learner ``index``'s parameters and buffers under its own module's names."""
        return self.engine.learner_state(index)

    @property
    def lr_scaled(self) -> bool:
        """Whether :attr:`OptimizerSpec.lr_fan_in` (or the output layers' scale) gave some
        weight another learning rate: read from the optimizer as built, before any schedule
        moved (or, like ``OneCycleLR``, replaced) its rates."""
        return self._lr_scaled

    def _build_schedulers(self) -> None:
        """The schedulers of the engine's optimizers, after noting whether the optimizers were
        built with scaled rates (:attr:`lr_scaled`)."""
        optimizer = self.engine.optimizers[0]
        groups = optimizer.param_groups
        self._lr_scaled = len(groups) > 1 or groups[0].get("lr") != optimizer.defaults.get("lr")
        self.schedulers = build_schedulers(self.lr_scheduler, self.engine.optimizers)

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizer instances (one per learner in loop mode, one fused in stacked mode)."""
        return self.engine.optimizers

    def adopt_betas(self, betas: tuple[float, float]) -> None:
        """Every optimizer's ``betas`` (its defaults, its parameter groups and the spec that
        builds optimizers) set to ``betas``: a state saved under other betas resumes with them
        (:meth:`~torchboost.boosters.state.BoosterState.load_state_dict`)."""
        self.optimizer_spec = dataclasses.replace(
            self.optimizer_spec, kwargs={**self.optimizer_spec.kwargs, "betas": betas})
        for optimizer in self.optimizers:
            optimizer.defaults["betas"] = betas
            for group in optimizer.param_groups:
                group["betas"] = betas

    # --- optimizer state travels with the module ---------------------------------------------
    def get_extra_state(self) -> dict[str, Any]:
        state = {"mode": self.mode, "optimizers": self.engine.optimizer_states()}
        if self.schedulers:  # absent without a schedule (as in states saved before schedules)
            state["schedulers"] = [s.state_dict() for s in self.schedulers]
        return state

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.adopt_mode(state["mode"])
        if state["mode"] != self.mode:
            raise ValueError(f"checkpoint was saved in {state['mode']!r} mode, this container "
                             f"runs in {self.mode!r} mode")
        # Optimizer.load_state_dict keeps the given tensors: copy them, so that loading a live
        # state_dict never shares Adam moments between two containers.
        schedulers = state.get("schedulers", [])
        if len(schedulers) != len(self.schedulers):
            raise ValueError(f"the state holds {len(schedulers)} learning-rate scheduler states, "
                             f"these learners have {len(self.schedulers)} schedulers (build "
                             "them with the lr_scheduler the state was saved with)")
        self.engine.load_optimizer_states(copy.deepcopy(state["optimizers"]))
        for scheduler, saved in zip(self.schedulers, schedulers, strict=True):
            scheduler.load_state_dict(copy.deepcopy(saved))

    def _apply(self, fn, recurse: bool = True):  # type: ignore[no-untyped-def]
        super()._apply(fn, recurse)
        # Re-loading an optimizer's own state casts it to its parameters' device and dtype.
        for opt in self.engine.optimizers:
            opt.load_state_dict(opt.state_dict())
        return self


def _scheduler_attributes(schedulers: Sequence[Any]) -> list[tuple[Any, dict[str, Any], list]]:
    """A shallow copy of each scheduler's attributes, and of those of the schedulers it chains
    (``SequentialLR``, ``ChainedScheduler``): a step rebinds its counters and rate lists rather
    than changing them in place, so this is what it changes, for a few microseconds (a deep
    copy of ``state_dict()`` cost 2 % of a 64-learner loop round)."""
    return [(s, dict(vars(s)), _scheduler_attributes(getattr(s, "_schedulers", [])))
            for s in schedulers]


def _restore_attributes(saved: list[tuple[Any, dict[str, Any], list]]) -> None:
    for scheduler, attributes, chained in saved:
        vars(scheduler).clear()
        vars(scheduler).update(attributes)
        _restore_attributes(chained)


def _stacked_outputs(out: Tensor | list[Tensor], rows: int) -> Tensor:
    """Learners' outputs for a batch of ``rows`` examples, checked, as ``(k, B, m)``: the
    stacked engine's ``(k, B, ...)`` or the loop's list of ``(B, ...)`` (one output per learner
    read from ``(B,)``)."""
    if isinstance(out, list):
        for i, one in enumerate(out):
            check_output(one, i, rows)
        out = torch.stack(out)
    else:
        check_output(out, None)
        check_rows(out.shape[1] if out.ndim > 1 else 0, rows, "weak learners return")
    if out.ndim == 2:
        out = out.unsqueeze(-1)
    if out.ndim != 3:
        raise ValueError(f"weak learners must return (B, m) or (B,) outputs, got "
                         f"{tuple(out.shape[1:])} per learner")
    return out


def _build_modules(learners: LearnerSource, n_learners: int | None) -> list[nn.Module]:
    if isinstance(learners, nn.Module):
        raise ValueError("pass a factory (lambda: nn.Module) or a list of modules, not one module")
    if callable(learners):
        if n_learners is None or n_learners < 1:
            raise ValueError(f"a learner factory needs n_learners >= 1, the number of learners "
                             f"to build from it (e.g. n_learners=8), got {n_learners}")
        modules = [learners() for _ in range(n_learners)]
    else:
        modules = list(learners)
        if not modules:
            raise ValueError("the list of weak learners is empty")
        if n_learners is not None and n_learners != len(modules):
            raise ValueError(f"n_learners={n_learners} but {len(modules)} modules were given")
    for i, module in enumerate(modules):
        if not isinstance(module, nn.Module):
            raise ValueError(f"learner {i} is a {type(module).__name__}, not an nn.Module")
        lazy = [name for name, p in module.named_parameters() if is_lazy(p)]
        if lazy:
            raise ValueError(f"learner {i} has parameters of a lazy module, not yet "
                             f"initialised ({', '.join(lazy)}; nn.LazyLinear, nn.LazyConv2d, "
                             "...): each learner's optimizer is built with the booster, so give "
                             "their sizes (e.g. nn.Linear(720, 10) for nn.LazyLinear(10)) or run "
                             "each module once on a sample batch before passing it")
        if not any(p.requires_grad for p in module.parameters()):
            what = "all its parameters are frozen" if any(True for _ in module.parameters()) \
                else "it has no parameters"
            raise ValueError(f"learner {i} cannot learn: {what}; a weak learner needs at least "
                             "one trainable parameter (e.g. unfreeze its output layer with "
                             ".requires_grad_(True))")
    if len({id(p) for m in modules for p in m.parameters()}) != sum(
        1 for m in modules for _ in m.parameters()
    ):
        raise ValueError("weak learners share parameters; each learner needs its own module")
    return modules
