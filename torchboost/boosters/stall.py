"""A warning when a streaming booster is not learning, with the likely fix.

After a warm-up of ``window`` examples (an ensemble of untrained learners starts worse than a
constant), over consecutive windows of ``window`` examples (default 2000: a stream of 6,000
examples can already be judged) :class:`StallMonitor` sums the
progressive (test-then-train) loss of every anytime prediction ``y^0..y^N`` of the rounds (the
partial sums; ResidualSGB's averages of them: ``Booster.anytime_predictions``) and
the loss of the best constant prediction known before each round (the loss's
:meth:`~torchboost.losses.Loss.best_constant` of the running label statistics: the label mean for
squared loss, the class frequencies for softmax). At the end of each window it checks three
symptoms:

* ``not_beating_constant`` — the booster's prediction ``y^N`` did no better over the window than
  the best constant, and no better than over the window before (a slow start that is getting
  better passes): its learners do not learn (learning rate far too small, frozen learners) or
  diverge;
* ``learners_hurt`` — some shorter ensemble ``y^k``, ``k < N``, had less than half the loss of
  ``y^N`` (``tolerance = 0.5``): the later learners make the prediction much worse (step ``η``
  or learning rate far too large);
* ``learners_still`` — the learners' trainable parameters moved by less than
  :data:`STILL_TOLERANCE` of their norm since the end of the warm-up: they are frozen or their
  learning rate is zero or far too small. Fixed random learners can beat the constant (on
  ABALONE every random net of the size features does, by 8 %), so a monitor of the loss alone
  cannot tell them from learning ones; their parameters can. The check ends (and its copy of the
  parameters is freed) as soon as they have moved.

A symptom seen in two consecutive windows (one bad window early in training is common and
passes) raises one :class:`BoostingStallWarning` per booster, whatever it saw, with the numbers
and the fix; every symptom stays flagged in :meth:`StallMonitor.flags` (logged to TensorBoard
as ``stall/<symptom>`` by :class:`~torchboost.lightning.StreamingCallback`). When training
data-parallel the sums are all-reduced, so every replica judges the global batches.

**Measured** (``experiments/stall_monitor.py``, ``experiments/results/stall_monitor``): with
these settings the default boosters of the README on the repository's seven streams, three
seeds, one pass and three, raise no warning; the broken ones (learners that never move, a
learning rate of 1e-6, a step 30 times the default) warn, once.
Tighter margins (the 1 % of earlier versions, and windows of 5000) warned on most healthy runs:
shorter ensembles often beat ``y^N`` by a few percent on a progressive loss without anything to
fix.

A stream shorter than the warm-up and one window is judged when the booster is evaluated:
:meth:`StallMonitor.judge_held_out` (``Booster.evaluate`` on held-out rows).

Classifiers that vote (the multiclass boosters, ``metric="error"``) are judged on the error rate
of their votes ``s^0..s^N`` against the majority class, since their votes are not scores on the
loss's scale.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.distributed import Synchronizer
from torchboost.losses import Loss
from torchboost.without_grad import without_grad

__all__ = ["DEFAULT_WINDOW", "STILL_TOLERANCE", "SYMPTOMS", "BoostingStallWarning",
           "StallMonitor"]

#: What :class:`StallMonitor` detects.
SYMPTOMS = ("not_beating_constant", "learners_hurt", "learners_still")

#: ``learners_still``: the largest movement ``‖θ − θ₀‖ / ‖θ₀‖`` of the learners' trainable
#: parameters since the end of the warm-up that still counts as not moving. Adam at 1e-6 moves
#: a 10-unit net by about 1e-4 in 4000 examples, at the default rate by more than 0.1.
STILL_TOLERANCE = 1e-3

#: Examples of the warm-up and of each window by default.
DEFAULT_WINDOW = 2000


class BoostingStallWarning(UserWarning):
    """A booster is not learning (see :mod:`torchboost.boosters.stall`)."""


class StallMonitor(nn.Module):
    """Windowed progressive losses of a booster's anytime predictions and of the best constant.

    Args:
        loss: the booster's loss.
        n_learners: ``N``; rounds pass ``N + 1`` partial sums.
        out_dim: the prediction's dimension ``m``.
        window: examples of the warm-up and of each window (each check uses one whole window).
        tolerance: the relative margin of ``learners_hurt``.
        metric: ``"loss"``, or ``"error"`` for the error rate of votes (the multiclass
            boosters).

    Examples:
        >>> import torch
        >>> from torchboost.losses import get_loss
        >>> monitor = StallMonitor(get_loss("squared"), n_learners=1, out_dim=1, window=2)
        >>> z = torch.tensor([[1.0], [3.0]])
        >>> flat = torch.zeros(2, 2, 1)  # y^0 = y^1 = 0, while the label mean is 2
        >>> monitor.update(flat, z)  # the warm-up: only the label statistics are learnt
        []
        >>> monitor.update(flat, z)  # a first bad window
        []
        >>> monitor.update(flat, z)  # and a second one
        ['not_beating_constant']
    """

    def __init__(self, loss: Loss, n_learners: int, out_dim: int, window: int = DEFAULT_WINDOW,
                 tolerance: float = 0.5, metric: str = "loss") -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"the stall window must be >= 1 example, got {window}")
        if metric not in ("loss", "error"):
            raise ValueError(f"metric must be 'loss' or 'error', got {metric!r}")
        self.loss, self.window, self.tolerance = loss, int(window), float(tolerance)
        self.metric = metric
        self.register_buffer("statistic_sum", torch.zeros(out_dim, dtype=torch.float64))
        self.register_buffer("partial_loss", torch.zeros(n_learners + 1, dtype=torch.float64))
        self.register_buffer("constant_loss", torch.zeros((), dtype=torch.float64))
        #: examples seen, and in the current window (Python ints: no device sync per round)
        self.seen, self.in_window = 0, 0
        self.register_buffer("flagged", torch.zeros(len(SYMPTOMS), dtype=torch.bool))
        self.register_buffer("last_seen", torch.zeros(len(SYMPTOMS), dtype=torch.bool))
        #: ``y^N``'s loss over the constant's in the last window (inf before one)
        self.last_ratio = float("inf")
        #: whether the booster has warned (once per booster)
        self.warned = False
        #: the mean losses of the last complete window: ``y^0..y^N`` and the best constant
        self.last_window: dict[str, Any] = {}
        #: the learners' trainable parameters at the end of the warm-up, flattened, until they
        #: have moved (``learners_still``); ``moved``: they have, and the check is over
        self.reference: Tensor | None = None
        self.moved = False
        #: ``‖θ − θ₀‖ / ‖θ₀‖`` at the end of the last window that checked it (``None`` before)
        self.movement: float | None = None
        #: the held-out rows :meth:`judge_held_out` judged (0: the numbers are a window's)
        self.held_out_rows = 0

    @without_grad()
    def batch_sums(self, partials: Tensor, z: Tensor,
                   seen: Tensor | float | None) -> list[Tensor]:
        """What :meth:`update` adds up of a batch: the label statistic's sum and, given the
        examples ``seen`` before it (``None``: in the warm-up, that sum only), every partial
        sum's and the best constant's summed loss."""
        sums = [self.loss.target_statistic(z, partials.shape[-1]).sum(0)]
        if seen is not None:
            mean = (self.statistic_sum / seen).to(partials.dtype)
            constant = self.loss.best_constant(mean).expand(z.shape[0], -1)
            sums += [self._values(partials, z).sum(-1), self._values(constant, z).sum()]
        return sums

    @without_grad()
    def update(self, partials: Tensor, z: Tensor, sync: Synchronizer | None = None,
               batch: int | None = None,
               parameters: Callable[[], Iterable[Tensor]] | None = None,
               sums: list[Tensor] | None = None) -> list[str]:
        """Add a round's partial sums ``(N + 1, B, m)`` before the update and its encoded labels
        (summed over the replicas' shards with ``sync``; ``batch`` is then the global batch
        size); at the end of a window, return the symptoms seen for the first time (else
        ``[]``). ``parameters`` returns the learners' parameters (read at the end of the
        warm-up and of each window, for ``learners_still``; without it that symptom is never
        seen). ``sums``: :meth:`batch_sums` with ``seen`` the examples seen so far, where the
        round computed them (in the warm-up only the first is added)."""
        first = self.seen < self.window  # the warm-up: the label statistics only
        if sums is None:
            sums = self.batch_sums(partials, z, None if first else float(self.seen))
        elif first:
            sums = sums[:1]
        if sync is not None:  # summed in float64 (the buffers' dtype, to which they are added)
            sums = [s.double() for s in sums]
            sync.sum_(sums)
        batch = z.shape[0] if batch is None else batch
        self.statistic_sum.add_(sums[0])  # add_, not +=: no buffer re-registration
        self.seen += batch
        if not first:
            self.partial_loss.add_(sums[1])
            self.constant_loss.add_(sums[2])
            self.in_window += batch
        elif self.seen >= self.window and parameters is not None and not self.moved:
            self.reference = self._flat(parameters)  # the warm-up's end: θ₀
        if self.in_window < self.window:
            return []
        partial, constant = self.partial_loss / self.in_window, self.constant_loss / self.in_window
        self.last_window = {"anytime": partial.clone(), "constant": constant.clone()}
        self.held_out_rows = 0
        final = float(partial[-1])
        ratio = final / max(float(constant), 1e-300)
        seen = torch.tensor([final >= float(constant),
                             float(partial[:-1].min()) < (1.0 - self.tolerance) * final,
                             self._still(parameters)], device=self.flagged.device)
        confirmed = seen & self.last_seen
        if ratio < self.last_ratio:  # behind the constant, but better than before: a slow start
            confirmed[0] = False
        self.last_ratio = ratio
        new = [name for i, name in enumerate(SYMPTOMS) if confirmed[i] and not self.flagged[i]]
        self.flagged |= confirmed
        self.last_seen.copy_(seen)
        self.partial_loss.zero_(), self.constant_loss.zero_()
        self.in_window = 0
        return new

    @staticmethod
    def _flat(parameters: Callable[[], Iterable[Tensor]]) -> Tensor:
        """The trainable ones of ``parameters()``, flattened into one float64 copy."""
        trainable = [p.detach().reshape(-1).double() for p in parameters() if p.requires_grad]
        return torch.cat(trainable) if trainable else torch.zeros(1, dtype=torch.float64)

    def _still(self, parameters: Callable[[], Iterable[Tensor]] | None) -> bool:
        """Whether the learners' trainable parameters moved by less than
        :data:`STILL_TOLERANCE` of their norm since the warm-up; once they have moved, never
        again (and θ₀ is freed)."""
        movement = self._movement(parameters)
        if movement is None:
            return False
        self.movement = movement
        if self.movement >= STILL_TOLERANCE:
            self.moved, self.reference = True, None
        return not self.moved

    def _movement(self, parameters: Callable[[], Iterable[Tensor]] | None) -> float | None:
        """``‖θ − θ₀‖ / ‖θ₀‖`` now (``None`` when not checked: no θ₀, or they have moved)."""
        if parameters is None or self.moved or self.reference is None:
            return None
        now = self._flat(parameters)
        return float((now - self.reference).norm()) / max(float(self.reference.norm()), 1e-12)

    def _values(self, scores: Tensor, z: Tensor) -> Tensor:
        """Per-example loss of ``scores (..., B, m)``, or with ``metric="error"`` whether their
        ``argmax`` misses the label."""
        if self.metric == "loss":
            return self.loss.value(scores, z)
        return (scores.argmax(-1) != z).to(torch.float64)

    def restorer(self) -> Callable[[], None]:
        """The action putting the monitor's plain state back as it is now, for a round's
        transaction to run if the round fails (a stall warning turned into an error; its sums
        are buffers, which the transaction restores itself)."""
        saved, window = self.get_extra_state(), self.last_window
        return lambda: self._restore(saved, window)

    def _restore(self, saved: dict[str, object], window: dict[str, Any]) -> None:
        self.set_extra_state(saved)
        self.last_window = window

    def get_extra_state(self) -> dict[str, object]:
        return {"seen": self.seen, "in_window": self.in_window, "last_ratio": self.last_ratio,
                "warned": self.warned, "moved": self.moved, "reference": self.reference,
                "movement": self.movement}

    def set_extra_state(self, state: dict[str, object]) -> None:
        self.seen, self.in_window = int(state["seen"]), int(state["in_window"])
        self.last_ratio = float(state.get("last_ratio", float("inf")))
        self.warned = bool(state.get("warned", bool(self.flagged.any())))
        # saved before ``learners_still``: the learners count as having moved (no check)
        self.moved = bool(state.get("moved", True))
        reference = state.get("reference")
        self.reference = None if reference is None else torch.as_tensor(reference).clone()
        movement = state.get("movement")
        self.movement = None if movement is None else float(movement)

    def _load_from_state_dict(self, state_dict: dict[str, Tensor], prefix: str,
                              *args: object) -> None:
        for name in ("flagged", "last_seen"):  # saved with fewer symptoms: the new ones unseen
            saved = state_dict.get(prefix + name)
            if saved is not None and saved.numel() < len(SYMPTOMS):
                state_dict[prefix + name] = torch.cat(
                    [saved, saved.new_zeros(len(SYMPTOMS) - saved.numel())])
        super()._load_from_state_dict(state_dict, prefix, *args)

    def flags(self) -> dict[str, float]:
        """``{symptom: 1.0 or 0.0}``: whether each symptom has been seen."""
        return {name: float(flag) for name, flag in zip(SYMPTOMS, self.flagged.tolist(),
                                                        strict=True)}

    def judges_held_out(self) -> bool:
        """Whether :meth:`judge_held_out` would judge: no window was ever judged (the stream so
        far is shorter than the warm-up and one window), something was learnt, no warning yet."""
        return not self.warned and self.seen > 0 and not self.last_window

    @torch.no_grad()
    def judge_held_out(self, partials: Tensor, z: Tensor,
                       parameters: Callable[[], Iterable[Tensor]] | None = None) -> list[str]:
        """The symptoms on held-out rows, for a stream shorter than the monitor's warm-up and
        window (:meth:`judges_held_out`): ``partials (N + 1, B, m)``, the anytime predictions of
        the held-out features, and their encoded labels. ``not_beating_constant`` (a held-out
        loss needs no second window: seen once counts) and, half a window after the warm-up,
        ``learners_still``. Returns them (``[]`` when it does not judge); judges once per
        monitor object and changes no state the ``state_dict`` holds (no flags, not
        :attr:`warned`): evaluating must not change the model, and a later window still warns.

        Measured on the repository's streams (``experiments/stall_short_streams.py``: abalone,
        pol, kin40k, protein, keggundirected, adult; the first 350, 1,000, 2,000 and 3,500
        examples, two seeds, default SGB): it
        warned on the 6 runs that ended worse than the best constant (kin40k up to 2,000
        examples, protein at 350) and on none of the 42 that beat it."""
        if not self.judges_held_out():
            return []
        mean = (self.statistic_sum / float(self.seen)).to(partials.dtype)
        constant = self._values(self.loss.best_constant(mean).expand(z.shape[0], -1), z).mean()
        anytime = self._values(partials, z).mean(-1).double()
        self.last_window = {"anytime": anytime, "constant": constant.double()}
        self.held_out_rows = z.shape[0]
        # learners_hurt is not judged here: on a few hundred examples a shorter ensemble often
        # beats the full one on held-out rows of a healthy run (keggundirected, 350 rows); the
        # learners are judged still only after half a window of training since the warm-up
        movement = self._movement(parameters) if self.in_window >= self.window // 2 else None
        self.last_window["movement"] = movement
        seen = [float(anytime[-1]) >= float(constant), False,
                movement is not None and movement < STILL_TOLERANCE]
        return [name for name, flag in zip(SYMPTOMS, seen, strict=True) if flag]

    def message(self, symptom: str, hint: str, remedy: str) -> str:
        """The warning's text for ``symptom`` with the last window's numbers, ``hint`` (the
        booster's current learning rate and step) and, when later learners do harm, what to
        lower (``remedy``: the booster's ``_stall_remedy()``)."""
        anytime, constant = self.last_window["anytime"], float(self.last_window["constant"])
        final = float(anytime[-1])
        where, kind = f"over the last {self.window} examples", "progressive"
        if self.held_out_rows:
            where = (f"on {self.held_out_rows} held-out rows (the stream, {self.seen} examples, "
                     f"was too short for the monitor's windows of {self.window})")
            kind = "held-out"
        if symptom == "learners_still":
            movement = self.last_window.get("movement", self.movement)
            return (f"since the first {self.window} examples the learners' trainable parameters "
                    f"moved by {movement:.2g} of their norm: they do not learn (frozen "
                    f"parameters, or a zero or far too small learning rate). Unfreeze them "
                    f"(requires_grad=True) or raise the learning rate ({hint})")
        if symptom == "not_beating_constant":
            return (f"{where} the booster's {kind} "
                    f"{self.metric} {final:.4g} is no better than the best constant prediction's "
                    f"{constant:.4g}: its learners learn too slowly or diverge. Try another "
                    f"learning rate or step ({hint}; larger if the loss is flat, smaller if "
                    "it grows)" + (", or targets='newton'"
                                   if self.loss.has_hessian and self.loss.is_classifier else "")
                    + (f"; with {self.seen} examples, fewer learners or several passes "
                       "(torchboost.data.MultiPassStream) may be what it needs"
                       if self.held_out_rows else ""))
        best = int(anytime[:-1].argmin())
        fewer = ("the initial prediction y^0 alone (no learner)" if best == 0
                 else f"the first {best} learner(s) alone")
        return (f"{where} {fewer} had {kind} "
                f"{self.metric} {float(anytime[best]):.4g}, all {len(anytime) - 1} had "
                f"{final:.4g}: the later learners make the prediction much worse. Lower "
                f"{remedy} ({hint})")

    def warn(self, symptoms: list[str], hint: str, remedy: str, remember: bool = True) -> None:
        """One :class:`BoostingStallWarning` per booster: the first time symptoms are
        confirmed, naming all of them (``hint``, ``remedy``: see :meth:`message`); later ones
        are only flagged. ``remember=False`` (a held-out judgement): warn without counting it,
        so that the state is unchanged and a later window still warns."""
        if self.warned or not symptoms:
            return
        text = "; and ".join(self.message(symptom, hint, remedy) for symptom in symptoms)
        warnings.warn(text, BoostingStallWarning, stacklevel=4)
        self.warned = remember  # after: a warning turned into an error rolls the round back
