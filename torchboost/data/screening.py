"""Screening a stream of mini-batches for bad rows before a booster learns from them.

A streaming booster sees every example once (Hu et al. 2017, Sec. 6), so one malformed row from a
CSV or log source — a NaN, a short line, a label outside the classes — either stops the pass or,
worse, poisons the learners. :meth:`Booster.learn <torchboost.boosters.Booster.learn>` already
refuses a bad batch as a whole; :class:`ScreenedStream` checks each batch *before* it is learned
and either raises :class:`BadInputError` naming the batch and row (``policy="raise"``, the
default) or drops the bad rows, counts them by reason and hands on the clean rows in order
(``policy="skip"``). A booster trained through a skipping stream therefore ends exactly where one
trained on the clean rows alone ends.

Examples:
    >>> import torch
    >>> batches = [(torch.tensor([[1.0, 2.0], [float("nan"), 0.0]]), torch.tensor([0.5, 1.0])),
    ...            ([[3.0, 4.0], [5.0]], [2.0, 3.0])]          # a ragged row from a text source
    >>> stream = ScreenedStream(batches, loss="squared", policy="skip")
    >>> [(x.tolist(), y.tolist()) for x, y in stream]
    [([[1.0, 2.0]], [0.5]), ([[3.0, 4.0]], [2.0])]
    >>> stream.rows_seen, stream.skipped_rows, stream.skipped["features_not_finite"]
    (4, 2, 1)
    >>> next(iter(ScreenedStream(batches, loss="squared")))
    Traceback (most recent call last):
    ...
    torchboost.data.screening.BadInputError: batch 0, row 1 (stream row 1): features contain NaN \
or inf [features_not_finite]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

from torchboost.data.stream import is_stateful
from torchboost.losses import Loss, get_loss

__all__ = ["REASONS", "BadInputError", "Policy", "ResumableScreenedStream", "ScreenedModel",
           "ScreenedStream"]


class _LearnerDtype(Protocol):
    dtype: torch.dtype


class ScreenedModel(Protocol):
    """What a screened stream reads of the booster it screens for (a
    :class:`~torchboost.boosters.Booster` has it): its loss, outputs, input shape once known
    and the learners' dtype. A protocol, so that the data package does not import the
    boosters'."""

    loss: Loss
    out_dim: int
    input_shape: tuple[int, ...] | None

    @property
    def learners(self) -> _LearnerDtype: ...


Policy = Literal["raise", "skip"]
"""What a :class:`ScreenedStream` does with a bad row: raise :class:`BadInputError`, or skip it."""

REASONS = (
    "features_shape",
    "features_dtype",
    "features_not_finite",
    "label_not_finite",
    "label_invalid",
    "label_count",
)
"""Why a row is bad, in the order they are checked (a row is counted under the first that applies):
its features do not have the expected shape per example (or cannot be read as numbers); the batch's
feature tensor is not floating point; a feature is NaN or ±inf; its label is NaN or ±inf; its label
is invalid for the loss (out of range, not an integer class, wrong shape — see
:meth:`Loss.encode_target <torchboost.losses.Loss.encode_target>`); the batch has a different
number of labels than rows (every row of the batch is then bad)."""


class BadInputError(ValueError):
    """A bad row (or an empty batch) met by a :class:`ScreenedStream` with ``policy="raise"``.

    Attributes:
        batch: index of the batch among those the stream has read (0-based).
        row: index of the first bad row within the batch (``None`` for an empty batch).
        stream_row: that row's position among all rows the stream has read.
        reason: one of :data:`REASONS`, or ``"empty_batch"``.
        detail: what is wrong, in words.
        bad_rows: indices within the batch of every bad row (the first ten are in the message).
    """

    def __init__(self, batch: int, row: int | None, stream_row: int | None, reason: str,
                 detail: str, bad_rows: Sequence[int] = ()) -> None:
        self.batch, self.row, self.stream_row = batch, row, stream_row
        self.reason, self.detail, self.bad_rows = reason, detail, list(bad_rows)
        where = f"batch {batch}" if row is None else (
            f"batch {batch}, row {row} (stream row {stream_row})")
        message = f"{where}: {detail} [{reason}]"
        if len(self.bad_rows) > 1:
            message += f"; {len(self.bad_rows)} bad rows in this batch: {self.bad_rows[:10]}"
        super().__init__(message)

    def __reduce__(self) -> tuple[type[BadInputError], tuple[Any, ...]]:
        return type(self), (self.batch, self.row, self.stream_row, self.reason, self.detail,
                            self.bad_rows)


@dataclass(frozen=True)
class _Problem:
    reason: str
    detail: str


class ScreenedStream:
    """Wraps any iterable of ``(x, y)`` mini-batches and checks every row before handing it on.

    **Batches.** ``x`` is a tensor ``(B, ...features)`` or a sequence of ``B`` rows (lists of
    numbers or tensors, possibly of different lengths — ragged rows from a CSV or log); ``y`` is
    a tensor or a sequence of ``B`` labels. Rows given as lists are converted to the default
    float dtype (float tensor rows keep theirs), labels given as lists with ``torch.as_tensor``;
    what is handed on is always a pair of tensors.

    **What a valid row is.** Its features have the expected shape per example — ``input_shape``
    if given, else the booster's :attr:`~torchboost.boosters.Booster.input_shape` once it has
    learned, else the shape of the first batch's rows (a first batch whose rows disagree raises
    ``ValueError``: pass ``input_shape``; pass it, or a trained booster, whenever the first batch
    may be malformed) — and are finite; a floating-point tensor batch; and a label that the loss
    accepts, ``loss.encode_target(label, out_dim)`` with the booster's loss and output
    dimension, or ``loss`` and ``n_outputs`` given here. Pass exactly one of ``booster`` and
    ``loss``.

    **Cost.** Each batch is first checked whole — its shape and dtype, the finiteness of the
    features' sum, one ``encode_target`` of all labels — and row by row only when that fails, so
    a clean tensor batch is handed on unchanged (the same tensors) after one vectorised check.

    **Policies.** ``"raise"``: the first bad row raises :class:`BadInputError` naming the batch,
    the row within it, the row's position in the stream and the reason; an empty batch raises
    too. Nothing of that batch reaches the booster, so its state is left as it was. ``"skip"``:
    bad rows are dropped, and batches left without rows (or empty from the start) are not handed
    on at all; the rows that are handed on keep their order. :attr:`skipped` counts skipped rows
    by reason (:data:`REASONS`), :attr:`rows_seen` and :attr:`batches_seen` what was read,
    :attr:`empty_batches` the batches that had no rows, :attr:`dropped_batches` every batch not
    handed on (empty ones included). :class:`~torchboost.lightning.BadInputLogger` logs them.

    **Length and checkpoints.** ``len()`` is the wrapped stream's length (batches read, of which
    some may be dropped); it raises ``TypeError`` for an unsized stream, which Lightning reads as
    "no length". If the wrapped stream is stateful (``state_dict``/``load_state_dict``, like
    :class:`~torchboost.data.DataStream`), the wrapper is too — constructing a
    ``ScreenedStream`` then gives a :class:`ResumableScreenedStream` — and its state is the
    wrapped stream's plus the counters and the feature shape, so a Lightning fit resumed from a
    checkpoint continues exactly (dropped batches are read before the next clean one is handed
    on, so the saved position always follows the batch the booster learned last). A wrapper of
    a stream that cannot be resumed has no ``state_dict``, so Lightning and
    :class:`~torchboost.lightning.StreamingBoosterModule` see that it cannot be resumed.

    **Data-parallel training.** :meth:`shard` makes the wrapper hand on one process's part of
    every screened global batch, so ``ScreenedStream(DataStream(...), booster, policy="skip")``
    trains under ``Trainer(strategy="ddp")`` (see :meth:`shard`).

    Args:
        stream: the iterable of ``(x, y)`` batches (a DataStream, a DataLoader, a generator, a
            list of batches...).
        booster: the booster that will learn from the stream (its loss, ``out_dim`` and learned
            ``input_shape`` define valid rows).
        policy: ``"raise"`` or ``"skip"`` (see :data:`Policy`).
        input_shape: the feature shape per example, e.g. ``(d,)`` or ``(1, 28, 28)``.
        loss, n_outputs: without a booster, the loss (or its name) and the problem's number of
            outputs or classes that labels are checked against.
    """

    def __new__(cls, stream: Iterable[Any] | None = None, *args: Any,
                **kwargs: Any) -> ScreenedStream:
        if cls is ScreenedStream and is_stateful(stream):
            cls = ResumableScreenedStream
        return super().__new__(cls)

    def __init__(
        self,
        stream: Iterable[Any],
        booster: ScreenedModel | None = None,
        *,
        policy: Policy = "raise",
        input_shape: Sequence[int] | None = None,
        loss: str | Loss | None = None,
        n_outputs: int = 1,
    ) -> None:
        if policy not in ("raise", "skip"):
            raise ValueError(f"policy must be 'raise' or 'skip', got {policy!r}")
        if (booster is None) == (loss is None):
            raise ValueError("pass exactly one of booster (its loss defines valid labels) and loss")
        self.stream, self.booster, self.policy = stream, booster, policy
        if booster is not None:
            self.loss, self.out_dim = booster.loss, booster.out_dim
        else:
            self.loss = get_loss(loss)
            self.out_dim = self.loss.output_dim(n_outputs)
        self.input_shape = None if input_shape is None else tuple(int(s) for s in input_shape)
        known = None if booster is None else booster.input_shape
        if self.input_shape is not None and known is not None and self.input_shape != known:
            raise ValueError(f"input_shape={self.input_shape} but the booster was trained on "
                             f"{known}")
        #: batches and rows read from the wrapped stream so far
        self.batches_seen = 0
        self.rows_seen = 0
        #: skipped rows by reason (every reason of :data:`REASONS`, zeros included)
        self.skipped = dict.fromkeys(REASONS, 0)
        #: batches read with no rows, and batches not handed on (empty, all rows bad, or too few
        #: clean rows for every rank of a :meth:`shard`)
        self.empty_batches = 0
        self.dropped_batches = 0
        self.rank, self.world_size = 0, 1

    @property
    def skipped_rows(self) -> int:
        """Rows skipped so far, all reasons together."""
        return sum(self.skipped.values())

    def counts(self) -> dict[str, int]:
        """The bad-input counters: ``skipped_rows``, ``skipped_rows/<reason>``,
        ``empty_batches``, ``dropped_batches``."""
        return {"skipped_rows": self.skipped_rows,
                **{f"skipped_rows/{reason}": n for reason, n in self.skipped.items()},
                "empty_batches": self.empty_batches, "dropped_batches": self.dropped_batches}

    def __len__(self) -> int:
        """The wrapped stream's number of batches (``TypeError`` if it has no length)."""
        return len(self.stream)  # type: ignore[arg-type]

    def shard(self, rank: int, world_size: int) -> None:
        """From now on, hand on only rank ``rank``'s part of every screened global batch, for
        data-parallel training over ``world_size`` processes (``shard(0, 1)`` undoes it);
        :class:`~torchboost.lightning.StreamingBoosterModule` calls it under DDP.

        The wrapped stream is *not* sharded: every rank reads and screens the whole global
        batch, then splits its clean rows into ``world_size`` contiguous parts as by
        ``torch.tensor_split`` and hands on part ``rank``. Screening the shards instead would let
        the ranks disagree — one rank dropping a batch whose part is all bad (or raising under
        ``policy="raise"``) while the others wait for it in a collective — and leave each rank
        with its own counts, of which a checkpoint (written by rank 0) would restore rank 0's on
        every rank. So every rank makes the same decisions, raises the same
        :class:`BadInputError`, and holds the counters and :meth:`state_dict` of the global
        stream; the replicas learn on the clean rows of each global batch, exactly the batches of
        a single-process run through the same screen. Wrap the *global* stream (built from the
        same data and seed on every rank), not one already sharded.

        One difference: a batch left with fewer clean rows than ``world_size`` cannot give every
        rank a row; it is not handed on (counted in :attr:`dropped_batches`, its clean rows in no
        skip reason), where a single process would learn on those rows.
        """
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
        self.rank, self.world_size = rank, world_size

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        for batch in self.stream:
            try:
                x, y = batch
                len(x), len(y)
            except (TypeError, ValueError) as error:
                raise ValueError(f"batch {self.batches_seen} is not an (x, y) pair of row "
                                 f"sequences but a {type(batch).__name__}: the stream must "
                                 "yield (features, labels) pairs") from error
            screened = self._screen(x, y)
            if screened is None:
                continue
            if self.world_size == 1:
                yield screened
            elif screened[0].shape[0] < self.world_size:
                self.dropped_batches += 1  # every rank sees the same count: all drop it
            else:
                x, y = screened
                yield x.tensor_split(self.world_size)[self.rank], y.tensor_split(
                    self.world_size)[self.rank]

    # ----------------------------------------------------------------- checks
    def _screen(self, x: Any, y: Any) -> tuple[Tensor, Tensor] | None:
        """The clean part of one batch (``None`` if nothing is left), after counting it."""
        n = len(x)
        if n == 0:
            if self.policy == "raise":
                raise BadInputError(self.batches_seen, None, None, "empty_batch",
                                    "empty batch: it has no rows")
            self.batches_seen += 1
            self.empty_batches += 1
            self.dropped_batches += 1
            return None
        if torch.is_tensor(x) and x.ndim < 2:  # one row without a batch dimension, say
            detail = (f"features must have shape (rows, ...features), got {tuple(x.shape)}; "
                      "a single row needs x.unsqueeze(0)")
            if self.policy == "raise":
                raise BadInputError(self.batches_seen, None, None, "features_shape", detail)
            self.batches_seen += 1
            self.rows_seen += len(y)
            self.skipped["features_shape"] += len(y)
            self.dropped_batches += 1
            return None
        problems: dict[int, _Problem] = {}
        features: Tensor | None = None
        labels: Tensor | None = None
        shaped: list[int] = []
        if len(y) != n:
            problem = _Problem("label_count", f"{len(y)} labels for {n} rows")
            problems = dict.fromkeys(range(n), problem)
        else:
            features, shaped = self._features(x, problems)
            labels = self._labels(y, problems)
        if problems and self.policy == "raise":
            first = min(problems)
            raise BadInputError(self.batches_seen, first, self.rows_seen + first,
                                problems[first].reason, problems[first].detail, sorted(problems))
        self.batches_seen += 1
        self.rows_seen += n
        for problem in problems.values():
            self.skipped[problem.reason] += 1
        if len(problems) == n:
            self.dropped_batches += 1
            return None
        assert features is not None and labels is not None
        if problems:
            kept = [k for k, i in enumerate(shaped) if i not in problems]
            features = features[torch.tensor(kept, device=features.device)]
        return features, labels

    def _features(self, x: Any, problems: dict[int, _Problem]) -> tuple[Tensor | None, list[int]]:
        """The features of the rows of the right shape, stacked, and those rows' indices; adds
        a problem for every other row and for rows with NaN or inf."""
        n = len(x)
        if torch.is_tensor(x):
            row_shape = tuple(x.shape[1:])
            expected = self._expected_shape({row_shape})
            if row_shape != expected:
                problem = _Problem("features_shape", f"rows have shape {row_shape}, expected "
                                                     f"{expected}")
                problems.update(dict.fromkeys(range(n), problem))
                return None, []
            if not x.is_floating_point():
                problem = _Problem("features_dtype", f"features must be floating point, got "
                                                     f"dtype {x.dtype}")
                problems.update(dict.fromkeys(range(n), problem))
                return None, []
            features, shaped = x, list(range(n))
        else:
            rows = [_row_tensor(row) for row in x]
            expected = self._expected_shape({tuple(r.shape) for r in rows if r is not None})
            shaped = [i for i, r in enumerate(rows) if r is not None and r.shape == expected]
            for i, r in enumerate(rows):
                if r is None:
                    problems[i] = _Problem("features_shape", "the row cannot be read as numbers")
                elif r.shape != expected:
                    detail = f"the row has shape {tuple(r.shape)}, expected {expected}"
                    problems[i] = _Problem("features_shape", detail)
            if not shaped:
                return None, []
            features = torch.stack([rows[i] for i in shaped])  # type: ignore[misc]
        given = features
        if self.booster is not None and features.dtype != self.booster.learners.dtype:
            # the booster's dtype rule (torchboost.inputs.check_features), applied before the
            # finiteness check so that a value overflowing the learners' dtype is a bad row here
            features = features.to(self.booster.learners.dtype)
        if not bool(torch.isfinite(features.sum())):  # NaN/inf, or finite rows summing to inf
            finite = torch.isfinite(features.reshape(features.shape[0], -1)).all(1).tolist()
            for k, (i, ok) in enumerate(zip(shaped, finite, strict=True)):
                if not ok:
                    overflow = given is not features and bool(torch.isfinite(given[k]).all())
                    problems[i] = _Problem("features_not_finite", (
                        f"features overflow the booster's {features.dtype}" if overflow
                        else "features contain NaN or inf"))
        return features, shaped

    def _labels(self, y: Any, problems: dict[int, _Problem]) -> Tensor | None:
        """The labels of the rows without problems, as one tensor the loss accepts (``None`` if
        no row is left); adds a problem for each row whose label the loss refuses. Row by row
        only if the loss refuses the whole batch."""
        whole = _label_tensor(y)
        refused = "the labels cannot form one tensor" if whole is None else self._accepts(whole)
        if refused is not None:
            for i in range(len(y)):
                if i not in problems:
                    self._check_label(y, i, problems)
        kept = [i for i in range(len(y)) if i not in problems]
        if not kept:
            return None
        if refused is None:  # the loss accepts the whole batch, hence any of its rows
            return _take(whole, y, kept)
        # from the rows left (a bad row may have changed the dtype of a list's tensor); labels
        # valid one by one may still be refused together (binary labels mixing the {0, 1} and
        # {-1, +1} encodings): then every row left is bad
        labels = _take(y if torch.is_tensor(y) else None, y, kept)
        refused = "the labels cannot form one tensor" if labels is None else self._accepts(labels)
        if labels is None or refused is not None:
            detail = refused or "the labels cannot form one tensor"
            problems.update(dict.fromkeys(kept, _Problem("label_invalid", detail)))
            return None
        return labels

    def _check_label(self, y: Any, i: int, problems: dict[int, _Problem]) -> None:
        """Adds a problem if the label of row ``i`` alone is refused by the loss."""
        label = y[i : i + 1] if torch.is_tensor(y) else _label_tensor([y[i]])
        if label is None:
            problems[i] = _Problem("label_invalid", f"the label {y[i]!r} cannot be read")
            return
        refused = self._accepts(label)
        if refused is not None:
            not_finite = label.is_floating_point() and not bool(torch.isfinite(label).all())
            problems[i] = _Problem("label_not_finite" if not_finite else "label_invalid",
                                   f"label {label.flatten().tolist()}: {refused}")

    def _accepts(self, labels: Tensor) -> str | None:
        """``None`` if the loss accepts ``labels``, else its reason."""
        try:
            self.loss.encode_target(labels, self.out_dim)
        except ValueError as error:
            return str(error)
        return None

    def _expected_shape(self, shapes: set[tuple[int, ...]]) -> tuple[int, ...]:
        """The feature shape per example (see the class docstring), inferred from the rows'
        ``shapes`` on first use."""
        if self.input_shape is None and self.booster is not None:
            self.input_shape = self.booster.input_shape
        if self.input_shape is None:
            candidates = {shape for shape in shapes if len(shape) >= 1}
            if len(candidates) != 1:
                raise ValueError(
                    f"batch {self.batches_seen}: cannot tell the feature shape per example from "
                    f"rows of shapes {sorted(shapes)}; pass input_shape")
            self.input_shape = candidates.pop()
        return self.input_shape

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.stream!r}, policy={self.policy!r}, "
                f"rows_seen={self.rows_seen}, skipped_rows={self.skipped_rows})")


class ResumableScreenedStream(ScreenedStream):
    """A :class:`ScreenedStream` over a stateful stream: checkpointable, e.g. by Lightning.

    Built by ``ScreenedStream(stream, ...)`` whenever ``stream`` has ``state_dict`` and
    ``load_state_dict``; only then does the wrapper have them too.
    """

    _COUNTERS = ("batches_seen", "rows_seen", "empty_batches", "dropped_batches")

    def state_dict(self) -> dict[str, Any]:
        """The wrapped stream's state, the counters and the feature shape per example."""
        return {"stream": self.stream.state_dict(),  # type: ignore[attr-defined]
                "input_shape": self.input_shape, "skipped": dict(self.skipped),
                **{key: getattr(self, key) for key in self._COUNTERS}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where the wrapper that produced ``state`` stood (same stream, same checks);
        ``ValueError`` if ``state`` was screened against another feature shape."""
        shape = None if state["input_shape"] is None else tuple(state["input_shape"])
        if self.input_shape is not None and shape is not None and shape != self.input_shape:
            raise ValueError(f"the saved stream was screened for rows of shape {shape}, this one "
                             f"for {self.input_shape}")
        self.stream.load_state_dict(state["stream"])  # type: ignore[attr-defined]
        self.input_shape = self.input_shape or shape
        self.skipped = {reason: int(state["skipped"][reason]) for reason in REASONS}
        for key in self._COUNTERS:
            setattr(self, key, int(state[key]))


def _row_tensor(row: Any) -> Tensor | None:
    """One feature row as a floating-point tensor, or ``None`` if it is not numbers."""
    if torch.is_tensor(row) and row.is_floating_point():
        return row
    try:
        return torch.as_tensor(row, dtype=torch.get_default_dtype())
    except (TypeError, ValueError, RuntimeError):
        return None


def _label_tensor(y: Any) -> Tensor | None:
    """Labels as a tensor (``torch.as_tensor`` for sequences), or ``None`` if they are not."""
    if torch.is_tensor(y):
        return y
    try:
        return torch.as_tensor(y)
    except (TypeError, ValueError, RuntimeError):
        return None


def _take(whole: Tensor | None, y: Any, kept: list[int]) -> Tensor | None:
    """The labels of rows ``kept``, from the whole batch's tensor if there is one."""
    if whole is None:
        return _label_tensor([y[i] for i in kept])
    if len(kept) == whole.shape[0]:
        return whole
    return whole[torch.tensor(kept, device=whole.device)]
