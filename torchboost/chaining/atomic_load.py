"""Loading a chaining model's state, all or nothing: :class:`AtomicLoad`.

torch's ``load_state_dict`` copies every entry that fits and raises for the rest at the end, so
a state with an entry missing or of another shape used to leave a :class:`ChainingTree
<torchboost.chaining.ChainingTree>` half loaded (its tables swapped in, its row count not). The
boosters load all or nothing (:mod:`torchboost.boosters.state`); the chaining models do the
same here: a copy of the state before the load is put back if anything raises, and torch's
error becomes a ``ValueError`` that says nothing was loaded.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from torch import nn

__all__ = ["AtomicLoad"]


class AtomicLoad(nn.Module):
    """A mixin for the chaining models' ``load_state_dict``: all or nothing (module
    docstring)."""

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> Any:
        """Load ``state_dict``; if it does not fit, raise ``ValueError`` and leave the model
        exactly as it was."""
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"load_state_dict takes a state_dict() (a mapping), got a "
                             f"{type(state_dict).__name__}")
        backup = copy.deepcopy(self.state_dict())
        try:
            return super().load_state_dict(state_dict, strict, assign)
        except BaseException as err:
            super().load_state_dict(backup)
            if isinstance(err, RuntimeError) and "Error(s) in loading state_dict" in str(err):
                raise ValueError(f"the state does not fit this {type(self).__name__} (nothing "
                                 f"was loaded); load a state_dict() saved by one built like "
                                 f"it. {err}") from err
            raise
