"""A booster grown to more input features or more outputs, keeping what it learnt
(:func:`grown_state`): what the river estimators do when a stream brings a feature or a class it
has not seen (:mod:`torchboost.river`).

The grown booster is a fresh one of the same configuration built with the wider shape; its
state is the old one with every tensor widened to the shape it has in a *template*, the state of
such a booster after one round (a round sizes what is built lazily: the standardiser's
statistics, the optimizers' moments), along the axes whose size changed. The old values keep
their places (an old feature's column, an old output's row moved to its new index); what is
new is zero, with two exceptions below. Zero is what leaves the learnt function as it was and
lets it learn on:

* a new input column of a learner's first layer is zero, so the outputs on every input are as
  before, and its gradient (the input times the layer's back-propagated error) is not zero once
  the feature is;
* a new output row of a learner's last layer is zero, so the new output starts at the
  booster's ``y^0`` and is fitted from the next round; or, for a new class (``initial``), the
  row a fresh learner would have (its initialisation), so that the new class's error reaches
  the hidden layers from the first round (through a zero row it reaches none, and hidden
  features fitted to the old classes must then learn the new one through the last layer
  alone);
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

The counters, the learners' optimizer hyper-parameters and the schedule-free averaging weights
are kept; the configuration and the input shape are the template's. Only the tensors whose
shape changed differ from the old state, and the parts the caller drops (``drop``: the stall
monitor, whose sums are per output: a booster loaded without them starts a fresh one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["grown_state"]

#: the extra-state entries that describe the grown booster, not what it learnt
_TEMPLATE_KEYS = frozenset({"config", "input_shape"})
#: the optimizer states' second moments (Adam, AdamW, schedule-free AdamW, Prodigy), whose new
#: entries start at the mean of the old ones beside them (module docstring)
_SECOND_MOMENTS = frozenset({"exp_avg_sq"})


def grown_state(old: Mapping[str, Any], template: Mapping[str, Any], *,
                features: int | None = None, outputs: Sequence[int] | None = None,
                initial: Mapping[str, torch.Tensor] | None = None,
                initial_at: Sequence[int] = (), drop: Sequence[str] = ()) -> dict[str, Any]:
    """The ``old`` state (``state_dict()``) widened to the shapes of ``template`` (the
    ``state_dict()`` of the same booster built wider, after one round): either ``features``, the
    old input width (its columns come first), or ``outputs``, the new index of each old output.
    The entries at ``initial_at`` along a grown axis of a tensor named in ``initial`` (the
    learners' parameters as a fresh booster initialises them) take their initial values; the
    other new entries are zero (the module docstring). Keys starting with a ``drop`` prefix are
    left out. ``ValueError`` when a tensor changed shape along an axis that is neither (a
    learner whose parameters depend on the input width in another way)."""
    if (features is None) == (outputs is None):
        raise ValueError("grow either the features or the outputs, one at a time")
    if outputs is not None:
        index: list[int] = list(outputs)
        old_size = len(index)
    else:
        assert features is not None
        index, old_size = list(range(features)), features
    state: dict[str, Any] = {}
    for key, value in template.items():
        if any(key.startswith(prefix) for prefix in drop):
            continue
        state[key] = value if key not in old else _widened(old[key], value, index, old_size,
                                                            key)
        if initial is not None and key in initial and initial_at:
            _take_initial(state[key], old[key], initial[key], initial_at)
    return state


def _take_initial(grown: torch.Tensor, old: torch.Tensor, initial: torch.Tensor,
                  at: Sequence[int]) -> None:
    """Copy ``initial``'s entries at ``at`` along every grown axis into ``grown`` (in place)."""
    for axis, (before, after) in enumerate(zip(old.shape, grown.shape, strict=True)):
        if before != after:
            positions = torch.tensor(list(at), device=grown.device)
            grown.index_copy_(axis, positions, initial.to(grown).index_select(axis, positions))


def _widened(old: Any, new: Any, index: list[int], old_size: int, where: str,
             by_mean: bool = False) -> Any:
    """``old`` widened to the shapes in ``new`` (a tensor, or a dict or list of them: the extra
    states and the optimizers' states, recursively)."""
    if torch.is_tensor(new):
        return _widened_tensor(old, new, index, old_size, where, by_mean)
    if isinstance(new, Mapping):
        return {key: (value if key in _TEMPLATE_KEYS or key not in old
                      else _widened(old[key], value, index, old_size, f"{where}.{key}",
                                    key in _SECOND_MOMENTS))
                for key, value in new.items()}
    if isinstance(new, list | tuple) and isinstance(old, list | tuple) and len(old) == len(new):
        return type(new)(_widened(a, b, index, old_size, f"{where}[{i}]")
                         for i, (a, b) in enumerate(zip(old, new, strict=True)))
    return old


def _widened_tensor(old: torch.Tensor, new: torch.Tensor, index: list[int], old_size: int,
                    where: str, by_mean: bool) -> torch.Tensor:
    """``old`` with ``new``'s shape: the old entries at ``index`` along each grown axis, the new
    ones zero (``by_mean``: the mean of the old ones along that axis)."""
    if old.shape == new.shape:
        return old
    if old.dim() != new.dim():
        raise ValueError(f"cannot grow {where}: it has {old.dim()} dimensions, the grown "
                         f"booster's {new.dim()}")
    out = old
    for axis, (before, after) in enumerate(zip(old.shape, new.shape, strict=True)):
        if before == after:
            continue
        if before != old_size:
            raise ValueError(f"cannot grow {where} of shape {tuple(old.shape)} to "
                             f"{tuple(new.shape)}: axis {axis} is {before} long, neither the "
                             f"old width ({old_size}) nor unchanged; its learner's parameters "
                             "depend on the input or output width in another way than a "
                             "layer's rows or columns (list every class up front, or pass "
                             "every feature from the first example)")
        shape = list(out.shape)
        shape[axis] = after
        wider = (out.mean(axis, keepdim=True).expand(shape).clone() if by_mean
                 else out.new_zeros(shape))
        wider.index_copy_(axis, torch.tensor(index, device=out.device), out)
        out = wider
    return out.to(new.dtype)
