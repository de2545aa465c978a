"""Which optimizer each weak learner gets, and whether it can be fused across learners."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import schedulefree
import torch
from torch import Tensor

from torchboost.learners.averaging import is_schedule_free
from torchboost.learners.cocob import COCOBBackprop
from torchboost.learners.prodigy import Prodigy

__all__ = ["DEFAULT_OPTIMIZER", "ELEMENTWISE_OPTIMIZERS", "FUSED_OPTIMIZERS",
           "PER_LEARNER_OPTIMIZERS", "OptimizerSpec", "output_layer_size"]

#: The learners' optimizer when none is given: schedule-free AdamW (Defazio et al., "The Road
#: Less Scheduled", NeurIPS 2024), from the ``schedulefree`` package. It keeps Adam's second
#: moment per entry and replaces the learning-rate schedule by an average of the iterates, so it
#: needs no horizon: a stream may stop anywhere (:mod:`~torchboost.learners.averaging` says which
#: weights predict). Its rate rule is :mod:`~torchboost.boosters.default_lr`'s.
DEFAULT_OPTIMIZER: type[torch.optim.Optimizer] = schedulefree.AdamWScheduleFree

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
    # schedule-free: elementwise given the averaging scalars (k, the sum of weights, the largest
    # rate), which are per parameter group and equal for learners that step in lockstep
    schedulefree.AdamWScheduleFree,
    schedulefree.SGDScheduleFree,
    schedulefree.RAdamScheduleFree,
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
    """An optimizer class and its keyword arguments (:data:`DEFAULT_OPTIMIZER` with its own
    defaults by default).

    ``lr_fan_in`` (``None``: off) scales the learning rate of every weight with a fan-in above
    it: a weight of shape ``(out, in, *kernel)`` with ``fan_in = in · prod(kernel)`` gets
    ``lr · min(1, lr_fan_in / fan_in)``; biases and other 1-D parameters keep ``lr``. An
    adaptive optimizer (Adam) moves every entry by about ``lr`` per step, so a unit's
    pre-activation moves by up to ``fan_in · lr``; this is μP's rule for Adam (Yang et al.,
    "Tensor Programs V", 2022, Table 3: a hidden or output weight's rate ∝ 1/fan_in) with the
    rate chosen for a fan-in of ``lr_fan_in``. It applies to the elementwise optimizers that take
    an ``lr`` (a per-learner optimizer's sums, e.g. Prodigy's, span one parameter group), as
    parameter groups with the same order of parameters; when no weight is that wide the
    optimizer is built exactly as without it.

    ``output_scale`` (default 1: off) multiplies every rate on top of that.
    :class:`~torchboost.learners.WeakLearners` sets it only for learners whose only layer with
    parameters is their output layer (:func:`output_layer_size`: linear learners), where N of
    them sum to one linear model moved N·η times as fast as one
    (:mod:`~torchboost.boosters.default_lr`).
    """

    cls: type[torch.optim.Optimizer] = DEFAULT_OPTIMIZER
    kwargs: dict[str, Any] = field(default_factory=dict)
    lr_fan_in: float | None = None
    output_scale: float = 1.0

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
        if "betas" in self.kwargs:  # a pair of decays in [0, 1), as a tuple (compared on loading)
            object.__setattr__(self, "kwargs", {**self.kwargs,
                                                "betas": _betas(self.kwargs["betas"])})
        if self.lr_fan_in is not None and not (math.isfinite(self.lr_fan_in)
                                               and self.lr_fan_in > 0):
            raise ValueError(f"lr_fan_in must be a finite number > 0 or None, got "
                             f"{self.lr_fan_in!r}")
        if not (math.isfinite(self.output_scale) and 0 < self.output_scale <= 1):
            raise ValueError(f"the output layer's rate scale must be in (0, 1], got "
                             f"{self.output_scale!r}")
        _try_step(self.cls, self.kwargs)

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
        params = self._fan_in_groups(list(params), stacked, kwargs)
        accepted = inspect.signature(self.cls.__init__).parameters
        if multi_tensor and "fused" not in kwargs and "foreach" not in kwargs:
            if self.cls in FUSED_OPTIMIZERS:
                kwargs["fused"] = True
            elif "foreach" in accepted:
                kwargs["foreach"] = True
        try:
            return self.cls(params, **kwargs)
        except TypeError as error:  # an option the class does not take, or of the wrong type
            raise ValueError(f"{self.cls.__name__} cannot be built with optimizer_kwargs="
                             f"{self.kwargs!r}: {error}") from error

    def _fan_in_groups(self, params: list[Tensor], stacked: bool,
                       kwargs: dict[str, Any]) -> list[Tensor] | list[dict[str, Any]]:
        """``params`` as they are, or as groups of consecutive parameters sharing a learning
        rate scaled by :attr:`lr_fan_in` (dim 0 of a stacked parameter indexes learners) and
        by :attr:`output_scale`."""
        lr = kwargs.get("lr", inspect.signature(self.cls.__init__).parameters.get("lr"))
        if isinstance(lr, inspect.Parameter):
            lr = lr.default
        if ((self.lr_fan_in is None and self.output_scale == 1.0)
                or self.cls not in ELEMENTWISE_OPTIMIZERS
                or not isinstance(lr, float | int) or isinstance(lr, bool)):
            return params
        lead = 1 if stacked else 0
        fan_in = self.lr_fan_in
        scales = [self.output_scale * (min(1.0, fan_in / math.prod(p.shape[lead + 1:]))
                                       if fan_in is not None and p.dim() - lead >= 2
                                       and p.shape[lead + 1:].numel() > 0 else 1.0)
                  for p in params]
        if all(scale == 1.0 for scale in scales):
            return params
        groups: list[dict[str, Any]] = []
        for param, scale in zip(params, scales, strict=True):
            if groups and groups[-1]["scale"] == scale:
                groups[-1]["params"].append(param)
            else:
                groups.append({"params": [param], "scale": scale})
        return [{"params": g["params"], "lr": lr * g["scale"]} for g in groups]


def _try_step(cls: type[torch.optim.Optimizer], kwargs: dict[str, Any]) -> None:
    """Build ``cls(**kwargs)`` over a throwaway parameter and take one step (switching a
    schedule-free optimizer to its learning point and back, as a round does), so that options
    of the wrong type or value (``warmup_steps='10'``, ``eps=None``, ``fused=True`` with
    ``foreach=True``, ``amsgrad='no'``, an optimizer that takes no dense gradients) are a
    ``ValueError`` naming them here, not an error from every ``learn()``."""
    defaults = inspect.signature(cls.__init__).parameters
    for name, value in kwargs.items():
        default = defaults[name].default if name in defaults else None
        if isinstance(default, bool) and not (isinstance(value, bool) or value in (0, 1)):
            raise ValueError(f"{cls.__name__}'s {name} is a flag: pass True or False, got "
                             f"{value!r}")
    # float64: an extreme but valid setting (Adam at lr=1e38) must reach the round's guards;
    # 2-D: some optimizers take matrices only (Muon)
    param = torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    param.grad = torch.ones(2, 2, dtype=torch.float64)
    try:
        optimizer = cls([param], **kwargs)
        if kwargs.get("capturable"):  # its step needs the learners' device (CUDA): built only
            return
        switch = is_schedule_free(optimizer)
        if switch:
            optimizer.train()  # type: ignore[attr-defined]
        optimizer.step()
        if switch:
            optimizer.eval()  # type: ignore[attr-defined]
    except ZeroDivisionError as error:
        raise ValueError(f"{cls.__name__} cannot take optimizer_kwargs={kwargs!r}: a "
                         "schedule-free optimizer's averaging divides by betas[0] (moving "
                         "between its two points), so betas[0] must be > 0") from error
    except Exception as error:  # any failure of the optimizer's own code
        raise ValueError(f"{cls.__name__} cannot be built or stepped with optimizer_kwargs="
                         f"{kwargs!r}: {type(error).__name__}: {error}") from error


def output_layer_size(names: list[str]) -> int:
    """How many of a module's parameters, named in ``named_parameters()`` order, belong to its
    output layer: the trailing ones of the last module that has parameters (``"2.weight"``,
    ``"2.bias"`` of a ``Sequential`` → 2)."""
    if not names:
        return 0
    owner = names[-1].rpartition(".")[0]
    count = 0
    for name in reversed(names):
        if name.rpartition(".")[0] != owner:
            break
        count += 1
    return count


def _betas(value: Any) -> tuple[float, float]:
    """``betas`` as a tuple of two floats in [0, 1), or a ``ValueError`` saying what is wrong."""
    try:
        pair = tuple(float(b) for b in value)
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2 or not all(0 <= b < 1 for b in pair):
        raise ValueError(f"betas must be two numbers in [0, 1) (the decays of the gradient's "
                         f"first and second moments, e.g. (0.9, 0.999)), got {value!r}")
    return pair  # type: ignore[return-value]


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        return math.nan
