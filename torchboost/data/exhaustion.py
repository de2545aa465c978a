"""One warning for every stream: a loop that starts on a stream whose pass is over.

A stream (:class:`~torchboost.data.DataStream`, :class:`~torchboost.data.LoaderStream`) is one
pass that can be resumed: iterating it again continues where it stopped, so a finished pass
yields nothing until ``reset()``. A second ``for`` loop over it would train on nothing,
silently; :func:`warn_if_exhausted` says so instead.
"""

from __future__ import annotations

import warnings

__all__ = ["ExhaustedStreamWarning", "warn_if_exhausted"]


class ExhaustedStreamWarning(UserWarning):
    """A stream whose pass is over was iterated again: it yields no batch until ``reset()``."""


def warn_if_exhausted(stream: object, pass_ended: bool) -> None:
    """Warn when a loop starts on ``stream`` after an earlier loop on it ran its pass to the end
    (``pass_ended``; ``reset()`` and ``load_state_dict`` clear it, and a stream built or resumed
    at the end of its pass does not warn): it would train on nothing, silently."""
    if pass_ended:
        warnings.warn(f"this {type(stream).__name__}'s pass is over: it yields no batch until "
                      f"reset(). A stream is one pass; for several, call reset() between them "
                      f"or wrap it in torchboost.data.MultiPassStream", ExhaustedStreamWarning,
                      stacklevel=3)
