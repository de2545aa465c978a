"""Loading a model's state, all or nothing: :class:`AtomicLoad`, a base of every booster
(:class:`~torchboost.boosters.state.BoosterState`) and chaining model.

torch's ``load_state_dict`` copies every entry that fits and raises for the rest at the end, so
a state with an entry missing or of another shape would leave a model half loaded (a chaining
tree's tables swapped in, its row count not). Here a copy of the state taken before the load is
put back if anything raises — the load, a subclass's checks of what it loaded
(:meth:`AtomicLoad._check_loaded`), an interruption — together with whatever settings the load
may adopt (:meth:`AtomicLoad._load_settings`), and torch's errors become a ``ValueError`` that
says nothing was loaded and why. ``assign=True`` is refused: it would put the state's own
tensors in place of the parameters the optimizers step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["AtomicLoad", "unfit_state"]


def unfit_state(owner: str, why: str) -> ValueError:
    """The error for a state that does not fit a ``owner`` (a booster, a table, a model):
    ``why``, with the fix; the load that raises it is undone (:class:`AtomicLoad`)."""
    return ValueError(f"the state does not fit this {owner} (nothing was loaded): {why}")


class AtomicLoad:
    """All-or-nothing ``load_state_dict`` for an ``nn.Module`` (a mixin placed before
    ``nn.Module`` among the bases; module docstring)."""

    #: what the error messages call the model
    state_owner = "model"

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> Any:
        """Load a saved state, all or nothing: a state that does not fit raises a
        ``ValueError`` and leaves the model exactly as it was."""
        owner = self.state_owner
        if assign:
            raise ValueError(f"load_state_dict(assign=True) would replace the {owner}'s "
                             "parameter tensors while their optimizers keep stepping the old "
                             f"ones (the {owner} would never learn again); load without assign, "
                             "which copies the saved values into its own tensors")
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"load_state_dict takes a {owner}'s state_dict() (a mapping), got "
                             f"a {type(state_dict).__name__}")
        backup = copy.deepcopy(self.state_dict())  # type: ignore[attr-defined]
        settings = self._load_settings()
        try:
            result = super().load_state_dict(state_dict, strict, assign)  # type: ignore[misc]
            self._check_loaded()
            return result
        except BaseException as err:
            self._restore_load_settings(settings)
            super().load_state_dict(backup)  # type: ignore[misc]
            if isinstance(err, TypeError | KeyError | AttributeError):  # a malformed entry
                raise unfit_state(owner, f"an entry is malformed ({type(err).__name__}: {err}); "
                                         f"load a state_dict() saved by a {owner} built like "
                                         "this one") from err
            if isinstance(err, RuntimeError) and "Error(s) in loading state_dict" in str(err):
                why = (self._other_shapes_reason() if "size mismatch" in str(err) else
                       f"it has other entries, so it was saved by another kind of {owner} or "
                       "with other learners")
                raise unfit_state(owner, f"{why}; build the {owner} as it was saved. {err}"
                                  ) from err
            raise

    def _other_shapes_reason(self) -> str:
        """Why a state whose tensors have other shapes does not fit (for the message)."""
        return "its tensors have other shapes, so it was built with other sizes"

    def _load_settings(self) -> Any:
        """What the load may change besides the state (restored when it fails; default:
        nothing)."""
        return None

    def _restore_load_settings(self, settings: Any) -> None:
        """Put back what :meth:`_load_settings` returned."""

    def _check_loaded(self) -> None:
        """Raise ``ValueError`` for loaded values the model cannot run with (default: none);
        the load is then undone."""
