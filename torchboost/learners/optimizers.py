"""Which optimizer each weak learner gets, and whether it can be fused across learners."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from torchboost.learners.cocob import COCOBBackprop
from torchboost.learners.prodigy import Prodigy

__all__ = ["ELEMENTWISE_OPTIMIZERS", "FUSED_OPTIMIZERS", "PER_LEARNER_OPTIMIZERS", "OptimizerSpec"]

#: Optimizers whose update of a parameter entry depends only on that entry's own gradient history
#: (plus a shared step count). Running one of them over N stacked learners is therefore exactly N
#: independent copies with the same hyper-parameters.
ELEMENTWISE_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (
    torch.optim.SGD,
    torch.optim.Adam,
    torch.optim.AdamW,
    torch.optim.Adamax,
    torch.optim.NAdam,
    torch.optim.RAdam,
    torch.optim.RMSprop,
    torch.optim.Adagrad,
    COCOBBackprop,
)

#: Optimizers that keep a few sums over a whole learner (Prodigy's learning-rate estimate) and
#: take a ``stacked`` flag: with ``stacked=True`` one instance over parameters stacked along dim 0
#: keeps those sums per learner, so it is again N independent copies.
PER_LEARNER_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (Prodigy,)

#: Optimizers with a fused (single-kernel) implementation on CPU and CUDA.
FUSED_OPTIMIZERS: tuple[type[torch.optim.Optimizer], ...] = (
    torch.optim.Adam,
    torch.optim.AdamW,
    torch.optim.SGD,
    torch.optim.Adagrad,
)


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer class and its keyword arguments (Adam with torch's defaults by default)."""

    cls: type[torch.optim.Optimizer] = torch.optim.Adam
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (inspect.isclass(self.cls) and issubclass(self.cls, torch.optim.Optimizer)):
            raise ValueError(f"optimizer must subclass torch.optim.Optimizer, got {self.cls!r}")
        closure = inspect.signature(self.cls.step).parameters.get("closure")
        if closure is not None and closure.default is inspect.Parameter.empty:
            raise ValueError(f"{self.cls.__name__} needs a closure that re-evaluates the loss at "
                             "every step; a booster steps each learner once per round on a "
                             "closed-form gradient, so use an optimizer whose step() takes no "
                             "closure (Adam, SGD, ...)")
        lr = self.kwargs.get("lr")
        if lr is not None and not (_as_float(lr) >= 0 and math.isfinite(_as_float(lr))):
            raise ValueError(f"learning rate lr must be a finite number >= 0, got {lr!r}")

    @property
    def stacks(self) -> bool:
        """Whether one instance over stacked learners is identical to one instance per learner
        (elementwise optimizers, and the per-learner ones built with ``stacked=True``)."""
        return self.cls in ELEMENTWISE_OPTIMIZERS or self.cls in PER_LEARNER_OPTIMIZERS

    def build(self, params: Iterable[Tensor], multi_tensor: bool = False,
              stacked: bool = False) -> torch.optim.Optimizer:
        """Instantiate over ``params``. ``multi_tensor`` asks for the fused kernel where torch has
        one for this class (Adam, AdamW, SGD, Adagrad) and for the foreach implementation
        otherwise, unless the caller chose ``fused``/``foreach`` in the kwargs. ``stacked``: the
        parameters are N learners stacked along dim 0 (passed on to the per-learner optimizers
        of :data:`PER_LEARNER_OPTIMIZERS`)."""
        kwargs = dict(self.kwargs)
        if stacked and self.cls in PER_LEARNER_OPTIMIZERS:
            kwargs["stacked"] = True
        accepted = inspect.signature(self.cls.__init__).parameters
        if multi_tensor and "fused" not in kwargs and "foreach" not in kwargs:
            if self.cls in FUSED_OPTIMIZERS:
                kwargs["fused"] = True
            elif "foreach" in accepted:
                kwargs["foreach"] = True
        return self.cls(params, **kwargs)


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        return math.nan
