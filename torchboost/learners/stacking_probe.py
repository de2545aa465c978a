"""Whether learners that look stackable really run stacked:
:class:`~torchboost.learners.WeakLearners`' ``mode="auto"`` probes the stacked path on the first
input and falls back to the loop, once, with a warning naming the reason."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from torchboost.learners.chained import checked_step
from torchboost.learners.loop import LoopEngine

__all__ = ["StackingProbe", "check_output"]


class StackingProbe:
    """The probe and the fall-back of :class:`~torchboost.learners.WeakLearners` (a mixin: it
    reads the container's ``engine``, ``optimizer_spec``, ``mode``, ``chained`` and
    ``_probe_pending``)."""

    @property
    def probe_pending(self) -> bool:
        """Whether ``mode="auto"`` still has to probe the stacked path on an input."""
        return self._probe_pending

    def probe(self, x: Tensor) -> None:
        """Settle ``mode="auto"`` on the first input (:meth:`_probe`); nothing once settled.
        Boosters call it before a round starts, so that a fall-back to the loop never rebuilds
        the optimizers inside a round."""
        if self._probe_pending:
            self._probe(x)

    def _probe(self, x: Tensor) -> None:
        """``mode="auto"`` chose the stacked path from the modules' structure; whether they run
        under ``vmap`` (an ``nn.LSTM`` does not, nor a forward calling ``.item()`` on a
        learner's tensors) shows only on the first input. Run the stacked forward and backward
        once (the random number generators are restored afterwards); if they fail where one
        learner alone succeeds, fall back to the loop with a one-line warning naming the
        reason. If the learner alone fails too, the input is at fault: raise, probe again."""
        devices = [x.device] if x.device.type == "cuda" else []
        buffers = [(b, b.clone()) for b in self.engine.buffers()]  # the probe leaves them as
        try:                                                      # they were (a counter, ...)
            with torch.random.fork_rng(devices=devices), torch.enable_grad():
                out = self.engine(x, self.n_learners)
                if torch.is_tensor(out) and out.requires_grad:
                    out.sum().backward()
        except Exception as error:
            self.engine.zero_grad()
            self._restore(buffers)
            with torch.random.fork_rng(devices=devices), torch.no_grad():
                alone = self.engine.learner(0)(x)  # raises when the input is at fault
            if self.chained:  # a broken protocol is the learner's fault, not vmap's
                alone = checked_step(alone, 0)[0]
            self._restore(buffers)
            check_output(alone, 0)  # so does a learner's own output (integer scores, ...)
            self._fall_back(f"{type(error).__name__}: {str(error).splitlines()[0]}")
        else:
            self.engine.zero_grad()
            self._restore(buffers)
        self._probe_pending = False

    @staticmethod
    def _restore(buffers: list[tuple[Tensor, Tensor]]) -> None:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)

    def _fall_back(self, reason: str | None) -> None:
        """Rebuild the stacked learners as a loop (``reason``: warn with it)."""
        if any(state for opt in self.engine.optimizers for state in opt.state.values()):
            raise ValueError(f"the learners cannot run stacked ({reason}) and their optimizer "
                             "state is not empty; build the booster with mode='loop'")
        if reason is not None:  # first: a warning turned into an error leaves them stacked
            warnings.warn(f"mode='auto' falls back to mode='loop': the learners cannot run "
                          f"stacked under vmap ({reason}); pass mode='loop' to skip this probe",
                          stacklevel=4)
        training = self.training
        modules = [self.engine.learner(i) for i in range(self.n_learners)]
        self.engine = LoopEngine(modules, self.optimizer_spec, self.chained)
        self._build_schedulers()
        self.mode = "loop"
        self._probe_pending = False
        self.train(training)

    def adopt_mode(self, mode: str) -> None:
        """Before loading a state saved in ``mode``: an auto-stacked container not yet probed
        takes the loop form when the saved one had fallen back to it."""
        if self.adoptable_mode(mode) != self.mode:
            self._fall_back(None)

    def adoptable_mode(self, mode: str) -> str:
        """The mode :meth:`adopt_mode` would leave for a state saved in ``mode``."""
        return "loop" if mode == "loop" and self._probe_pending else self.mode

    def mode_settings(self) -> tuple[Any, ...]:
        """What :meth:`adopt_mode` changes (the engine, its schedulers, the mode, the pending
        probe), for :meth:`restore_mode` to put back when a load fails after adopting."""
        return self.engine, self.schedulers, self.mode, self._probe_pending

    def restore_mode(self, settings: tuple[Any, ...]) -> None:
        """Put back what :meth:`mode_settings` returned (nothing to do if the mode was kept)."""
        if settings[0] is not self.engine:
            self.engine, self.schedulers, self.mode, self._probe_pending = settings


def check_output(out: object, index: int | None, rows: int | None = None) -> None:
    """Refuse a learner's output that is not floating-point scores, or (given ``rows``, the
    batch's examples) not one row of them per example, naming the learner and the fix."""
    who = "weak learners return" if index is None else f"weak learner {index} returns"
    if not torch.is_tensor(out):
        raise ValueError(f"{who} a {type(out).__name__}, not a tensor: a learner's forward must "
                         "return its scores as one (B, m) or (B,) tensor (wrap a module with "
                         "tuple or dict outputs in one that picks the scores)")
    if not (out.is_floating_point() or out.is_complex()):
        raise ValueError(f"{who} {out.dtype} scores: a learner's scores must be floating point, "
                         "so that their gradient can train it (drop the rounding or integer "
                         "cast from its forward; the booster's predict_label gives labels)")
    if rows is not None:
        check_rows(out.shape[0] if out.ndim else 0, rows, who)


def check_rows(got: int, rows: int, who: str) -> None:
    """Refuse ``got`` rows of scores for a batch of ``rows`` examples."""
    if got != rows:
        raise ValueError(f"{who} {got} rows of scores for a batch of {rows} examples: a "
                         "learner's forward must return one row per example, (B, m) or (B,) "
                         "(look for a slice, a pooling or a reshape across the batch dimension)")
