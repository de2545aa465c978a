"""What a booster reports about its learners (:class:`BoosterDiagnostics`, a base of
:class:`~torchboost.boosters.base.Booster`): running edges, the last round's target norms and
fit errors, compute units per example, and the settings a stall warning suggests changing.
Compute is counted in the SGB paper's units (Hu et al. 2017, Sec. 6.2): one weak-learner
prediction of one example = 1 unit, one update = 2."""

from __future__ import annotations

import torch
from torch import Tensor

from torchboost.boosters.scaling import off_unit_scale
from torchboost.learners import Prodigy
from torchboost.learners.averaging import is_schedule_free

__all__ = ["PREDICT_UNITS", "UPDATE_UNITS", "BoosterDiagnostics"]

PREDICT_UNITS = 1
UPDATE_UNITS = 2


class BoosterDiagnostics:
    """Edges, diagnostics, compute units and the stall hint of a booster (module docstring)."""

    def edges(self) -> Tensor:
        """Running edge estimate per learner, ``γ_i = 1 − Σ‖target − h‖² / Σ‖target‖²`` (both
        sums weighted when the learners' losses are); 0 for a learner that has seen no target
        yet (a later stage of stagewise GB, any learner before the first round): no evidence
        of an edge."""
        seen = self.target_sq_sum > 0
        return torch.where(seen, 1.0 - self.residual_sq_sum / self.target_sq_sum.clamp_min(
            1e-300), torch.zeros_like(self.target_sq_sum))

    @property
    def last_diagnostics(self) -> dict[str, Tensor]:
        """The last round's per-learner ``target_norm`` (mean norm of its target) and
        ``fit_error`` (mean squared error to it, weighted like its loss); empty before the first
        round. Divided when read, not every round."""
        if self._round_fit is None:
            return {}
        norm_sum, residual_sq, batch = self._round_fit
        return {"target_norm": norm_sum / batch, "fit_error": residual_sq / batch}

    def diagnostics(self) -> dict[str, Tensor]:
        """Per-learner diagnostics of the last round plus running edges."""
        return {**self.last_diagnostics, "edge": self.edges().float()}

    def _stall_hint(self) -> str:
        """The settings a stall warning suggests changing: the learning rate here; boosters
        with steps add theirs."""
        optimizers = self.learners.optimizers
        group = optimizers[0].param_groups[0]
        if isinstance(optimizers[0], Prodigy):  # its lr multiplies an estimate d per learner
            low, high = (float(v) for v in torch.cat(
                [opt.estimate().flatten() for opt in optimizers]).aminmax())
            hint = f"now Prodigy's lr={group['lr']:g} × estimates d in [{low:.3g}, {high:.3g}]"
        else:
            hint = (f"now lr={optimizers[0].defaults['lr']:g}" if "lr" in group
                    else "now the optimizer's default")
            if is_schedule_free(optimizers[0]):  # no schedule to blame: only the rate
                hint = (f"now schedule-free lr={optimizers[0].defaults['lr']:g}, warm-up "
                        f"{group.get('warmup_steps', 0)} rounds, no schedule needed")
        return hint

    def _scale_hint(self, x: Tensor, labels: Tensor) -> str:
        """A stall hint's word on the inputs' scale: with ``standardize=False``, when the
        round's features or regression labels are far from unit scale
        (:func:`~torchboost.boosters.scaling.off_unit_scale`), that they are the likely cause."""
        if self.standardizer is not None:
            return ""
        off = off_unit_scale(x, None if self.loss.is_classifier else labels)
        return (f"; the booster trains on your units (standardize=False) and this batch has "
                f"{off}: far from unit scale, a likely cause; standardize=True fixes that"
                if off else "")

    def _stall_remedy(self) -> str:
        """What to lower when the later learners make the prediction worse."""
        return "the step η or the learning rate"

    @property
    def units_per_example(self) -> int:
        """Compute units one :meth:`learn` costs per example (``3N`` for the streaming boosters)."""
        return self.n_learners * (PREDICT_UNITS + UPDATE_UNITS)

    def units_per_round_example(self) -> int:
        """Units the last :meth:`learn` spent per example (overridden by staged training)."""
        return self.units_per_example
