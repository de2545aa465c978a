"""A boosting round presented to Lightning as one optimizer step."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

__all__ = ["BoostingRound"]


class BoostingRound(torch.optim.Optimizer):
    """The optimizer :class:`~torchboost.lightning.StreamingBoosterModule` hands to Lightning.

    Lightning measures training progress in optimizer steps: ``trainer.global_step``,
    ``Trainer(max_steps=...)``, ``ModelCheckpoint(every_n_train_steps=...)`` and step-based
    validation all count calls of ``LightningOptimizer.step``. A booster, however, steps its own
    per-learner optimizers inside :meth:`~torchboost.boosters.base.Booster.learn` (one step of
    every learner per mini-batch: a *round*). With no optimizer at all Lightning would warn that
    the fit "will run with no optimizer" and ``global_step`` would stay at 0, so ``max_steps`` and
    step-based checkpointing would never fire.

    This proxy closes the gap: :meth:`step` runs its ``closure`` — the round, ``booster.learn(x,
    y)``, or the rounds of a :class:`~torchboost.data.BatchGroup` — and returns the closure's
    result, so one round (or one group of rounds) is one Lightning step. It never reads or
    changes a parameter and keeps no state; it holds the booster's parameters only because
    ``torch.optim.Optimizer`` rejects an empty parameter list. The learners' real optimizer
    state lives in the booster's ``state_dict``.

    Unlike a real optimizer's, its ``step`` is not wrapped by ``torch.optim``'s profiling
    wrapper (a ``record_function`` range and the global step hooks, a few percent of a small
    round): it changes no parameter, and the learners' own optimizers inside the round keep
    theirs.

    Examples:
        >>> from torch import nn
        >>> round_ = BoostingRound(nn.Linear(2, 1).parameters())
        >>> round_.step(lambda: "the round's result")
        "the round's result"
    """

    def __init__(self, params: Iterable[nn.Parameter] | Iterable[dict[str, Any]]) -> None:
        super().__init__(params, {})

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Run the round ``closure`` and return what it returns."""
        if closure is None:
            raise ValueError("BoostingRound.step needs the round as its closure")
        return closure()

    # torch.optim.Optimizer.__init__ wraps ``type(self).step`` unless it is marked as wrapped.
    step.hooked = True  # type: ignore[attr-defined]
