"""A booster grown to more input features or more outputs, keeping what it learnt
(:func:`grow`): what the river estimators do when a stream brings a feature or a class it has
not seen (:mod:`torchboost.river`).

The grown booster is a fresh one of the same configuration built with the wider shape; its
buffers and parameters are the old ones widened to the shapes they have in a *template*, the
state of such a booster after one round (a round sizes what is built lazily: the standardiser's
statistics), along the axes whose size changed; its optimizers' states are the old ones,
parameter by parameter (matched by name: the default rate rule may group a wider layer apart,
past a fan-in of 64), widened the same way. The old values keep their places (an old feature's
column, an old output's row moved to its new index); what is new is zero, with two exceptions
below. Zero is what leaves the learnt function as it was and lets it learn on:

* a new input column of a learner's first layer is zero, so the outputs on every input are as
  before, and its gradient (the input times the layer's back-propagated error) is not zero once
  the feature is;
* a new output row of a learner's last layer is zero, so the new output starts at the
  booster's ``y^0`` and is fitted from the next round; or, for a new class
  (:attr:`Growth.initial_at`), the row a fresh learner would have (its initialisation), so
  that the new class's error reaches the hidden layers from the first round (through a zero
  row it reaches none, and hidden features fitted to the old classes must then learn the new
  one through the last layer alone);
* the optimizers' first moments and schedule-free sequences of the new entries are zero, as for
  a parameter never stepped; their second moments (``exp_avg_sq``) are the mean of the old
  entries they stand beside. Zero there would be Adam's state of an entry never stepped, but
  Adam's bias correction is by the optimizer's step count ``k``, not the entry's: a zero second
  moment meeting its first gradient at step ``k`` gives an update ``sqrt((1 − β2^k) / (1 − β2))``
  times the rate's (4.4 after 19 rounds, 12 after 156, 32 in the long run), a burst that
  unsettles what was learnt;
* the features' running statistics of a new column are those of a column of zeros over the
  examples seen (mean 0, no spread, a 0/1 indicator so far): river reads a missing feature as
  0, so those examples had it at 0.

The counters, the optimizers' step counts and schedule-free averaging weights and the
schedulers' positions are kept; the configuration, the input shape and the rates the rule
gives the wider layers are the template's (a rate that changed scales its group's schedule-free
weights with it). Apart from those rates, only the tensors whose shape changed differ from the
old state, and the parts the caller drops (``drop``: the stall monitor, whose sums are per
output: a booster loaded without them starts a fresh one). Learners that mix their inputs
before a linear layer (a ``LayerNorm`` over the input) change their outputs when a zero column
joins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["Growth", "grow"]

#: the extra-state entries that describe the grown booster, not what it learnt
_TEMPLATE_KEYS = frozenset({"config", "input_shape"})
#: the optimizer states' second moments (Adam, AdamW, schedule-free AdamW, Prodigy), whose new
#: entries start at the mean of the old ones beside them (module docstring)
_SECOND_MOMENTS = frozenset({"exp_avg_sq"})
#: the learners' optimizers and schedulers, moved parameter by parameter (:func:`_grow_optimizers`)
_OPTIMIZERS = "learners._extra_state"


@dataclass(frozen=True)
class Growth:
    """How a booster grows: either ``features``, the old input width (its columns come first),
    or ``outputs``, the new index of each old output; along a grown axis, the entries at
    ``initial_at`` of the learners' parameters take their values in a fresh booster (a new
    class's rows), the other new entries are zero."""

    features: int | None = None
    outputs: Sequence[int] | None = None
    initial_at: Sequence[int] = field(default=())

    def __post_init__(self) -> None:
        if (self.features is None) == (self.outputs is None):
            raise ValueError("grow either the features or the outputs, one at a time")

    @property
    def index(self) -> list[int]:
        """Where each old entry of a grown axis goes."""
        if self.outputs is not None:
            return list(self.outputs)
        assert self.features is not None
        return list(range(self.features))

    def tensor(self, old: Tensor, shape: torch.Size, where: str, by_mean: bool = False,
               initial: Tensor | None = None) -> Tensor:
        """``old`` widened to ``shape``: its entries at :attr:`index` along each grown axis,
        the new ones zero (``by_mean``: the mean of the old ones along the axis; ``initial``:
        its entries at :attr:`initial_at`). ``ValueError`` for an axis that is neither
        unchanged nor the old width (a learner whose parameters depend on the input or output
        width otherwise than a layer's rows or columns)."""
        if old.shape == shape:
            return old
        index = self.index
        if old.dim() != len(shape):
            raise ValueError(f"cannot grow {where}: it has {old.dim()} dimensions, the grown "
                             f"booster's {len(shape)}")
        out = old
        for axis, (before, after) in enumerate(zip(old.shape, shape, strict=True)):
            if before == after:
                continue
            if before != len(index):
                raise ValueError(
                    f"cannot grow {where} of shape {tuple(old.shape)} to {tuple(shape)}: axis "
                    f"{axis} is {before} long, neither the old width ({len(index)}) nor "
                    "unchanged; its learner's parameters depend on the input or output width "
                    "otherwise than a layer's rows or columns (list every class up front, or "
                    "pass every feature from the first example)")
            wide = list(out.shape)
            wide[axis] = after
            wider = (out.mean(axis, keepdim=True).expand(wide).clone() if by_mean
                     else out.new_zeros(wide))
            wider.index_copy_(axis, torch.tensor(index, device=out.device), out)
            if initial is not None and self.initial_at:
                at = torch.tensor(list(self.initial_at), device=out.device)
                wider.index_copy_(axis, at, initial.to(wider).index_select(axis, at))
            out = wider
        return out


def grow(old: nn.Module, new: nn.Module, sized: nn.Module, growth: Growth,
         drop: Sequence[str] = ()) -> None:
    """Load into ``new`` (a fresh booster, wider than ``old``) what ``old`` learnt, widened as
    ``growth`` says (the module docstring); ``sized`` is a twin of ``new`` after one round (its
    buffers have their sizes). The keys starting with a ``drop`` prefix keep ``new``'s
    values (the stall monitor: a booster loaded without them starts a fresh one).
    ``ValueError`` (``new`` then unusable) where a tensor cannot grow."""
    before, initial = old.state_dict(), dict(new.named_parameters())
    state: dict[str, Any] = {}
    for key, value in sized.state_dict().items():
        if key == _OPTIMIZERS:
            state[key] = new.state_dict()[key]  # fresh optimizers: filled below
        elif not any(key.startswith(prefix) for prefix in drop):
            state[key] = value if key not in before else _widened(
                before[key], value, growth, key, initial.get(key))
    new.load_state_dict(state)
    _grow_optimizers(old, new, growth)


def _widened(old: Any, new: Any, growth: Growth, where: str,
             initial: Tensor | None = None) -> Any:
    """``old`` widened to the shapes in ``new`` (a tensor, or a dict or list holding tensors: the
    extra states, recursively)."""
    if torch.is_tensor(new):
        return growth.tensor(old, new.shape, where, initial=initial).to(new.dtype)
    if isinstance(new, Mapping):
        return {key: (value if key in _TEMPLATE_KEYS or key not in old
                      else _widened(old[key], value, growth, f"{where}.{key}"))
                for key, value in new.items()}
    if isinstance(new, list | tuple) and isinstance(old, list | tuple) and len(old) == len(new):
        return type(new)(_widened(a, b, growth, f"{where}[{i}]")
                         for i, (a, b) in enumerate(zip(old, new, strict=True)))
    return old


def _grow_optimizers(old: nn.Module, new: nn.Module, growth: Growth) -> None:
    """Every parameter's optimizer state from its namesake in ``old``, widened; every parameter
    group's step counts and averaging weights from the old group of its first parameter (scaled
    where the rule's rate changed); the schedulers' positions from the old ones."""
    old_params = dict(old.named_parameters())
    names = {id(p): name for name, p in new.named_parameters()}
    owners = {id(p): (opt, group) for opt in old.learners.optimizers
              for group in opt.param_groups for p in group["params"]}
    for opt in new.learners.optimizers:
        for group in opt.param_groups:
            for param in group["params"]:
                before = old_params[names[id(param)]]
                entry = owners[id(before)][0].state.get(before)
                if entry:
                    opt.state[param] = {
                        key: (growth.tensor(value, param.shape, f"{names[id(param)]}.{key}",
                                            key in _SECOND_MOMENTS).clone()
                              if torch.is_tensor(value) and value.shape == before.shape
                              else value.clone() if torch.is_tensor(value) else value)
                        for key, value in entry.items()}
            _adopt_counters(group, owners[id(old_params[names[id(group["params"][0])]])][1])
    for scheduler, before in zip(new.learners.schedulers, old.learners.schedulers, strict=True):
        scheduler.last_epoch, scheduler._step_count = before.last_epoch, before._step_count
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]


def _adopt_counters(group: dict[str, Any], before: dict[str, Any]) -> None:
    """``before``'s settings and counters into the fresh ``group`` but its parameters and its
    initial rate (the rule's, for the grown layer); the rate, its schedule-free maximum and
    averaging weights scaled by the ratio of the initial rates (1 unless the fan-in changed)."""
    initial = group.get("initial_lr", group["lr"])
    ratio = initial / before.get("initial_lr", before["lr"])
    group.update({key: value for key, value in before.items()
                  if key not in ("params", "initial_lr")})
    group["lr"] = before["lr"] * ratio
    for key in ("lr_max", "scheduled_lr"):
        if key in group:
            group[key] = before[key] * ratio
    if "weight_sum" in group:
        group["weight_sum"] = before["weight_sum"] * ratio ** group["weight_lr_power"]
