"""Consecutive mini-batches of a stream in groups: several boosting rounds per Lightning step.

One Lightning training step costs about 0.2 ms of Lightning's own loop (its hooks, progress
counters and data fetcher) whatever the step does: on an ABALONE-sized SGB, whose round takes
about 1.1 ms on a CPU, that alone puts ``trainer.fit`` about 20 % behind the plain
``for x, y in stream: booster.learn(x, y)`` loop (``benchmarks/lightning_overhead.py --floor``).
Fitting a :class:`~torchboost.lightning.StreamingBoosterModule` on ``BatchGroups(stream, k)``
instead of ``stream`` makes one Lightning step learn ``k`` rounds, one per batch and in the
stream's order, so that cost is paid once every ``k`` rounds. The booster, its progressive
scores and its compute units are those of the ungrouped fit, bit for bit.

What changes is Lightning's unit of progress: a *step* is a group. ``trainer.global_step``,
``Trainer(max_steps=...)``, ``log_every_n_steps``, ``val_check_interval``,
``ModelCheckpoint(every_n_train_steps=...)`` and every callback's ``on_train_batch_end``
count groups, so a callback that stops on a budget of compute units stops up to ``k - 1``
rounds after it, and checkpoints fall on group ends. A checkpointed fit resumes exactly, as an
ungrouped one does, when the wrapped stream is resumable and the resumed fit groups it the same.

A group reads its batches from the stream one by one as it is iterated — the first when
Lightning fetches the group, each further one when the round before it is done — so the
stream's position is never more than one batch ahead of the booster, as without groups.

Examples:
    >>> import torch
    >>> from torchboost.data import BatchGroups, DataStream
    >>> stream = DataStream(torch.arange(10.0).unsqueeze(1), torch.arange(10.0), batch_size=2,
    ...                     shuffle=False, standardize=None)
    >>> groups = BatchGroups(stream, 3)
    >>> len(groups)
    2
    >>> [[y.tolist() for _, y in group] for group in groups]
    [[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], [[6.0, 7.0], [8.0, 9.0]]]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from torchboost.data.stream import is_stateful

__all__ = ["BatchGroup", "BatchGroups", "ResumableBatchGroups"]


class BatchGroup:
    """Up to ``size`` consecutive batches of a stream, read from it as they are iterated.

    The first batch has been read when the group is made; each further one is read when the
    iteration asks for it, and the group ends early when the stream does. A group can be
    iterated once (it consumes the stream), and to its end before the next group is made.
    """

    __slots__ = ("_first", "_left", "_started", "_stream", "read")

    def __init__(self, first: Any, stream: Iterator[Any], size: int) -> None:
        self._first, self._stream, self._left = first, stream, size - 1
        self._started = False
        #: batches handed on so far by the iteration (the group's rounds, once it is finished)
        self.read = 0

    def __iter__(self) -> Iterator[Any]:
        if self._started:
            raise RuntimeError("a BatchGroup reads its batches from the stream as it is "
                               "iterated, so it can be iterated only once")
        self._started = True
        self.read = 1
        yield self._first
        while self._left:
            try:
                batch = next(self._stream)
            except StopIteration:
                self._left = 0
                return
            self._left -= 1
            self.read += 1
            yield batch

    @property
    def finished(self) -> bool:
        """Whether every batch of the group has been read."""
        return self._started and not self._left

    def __repr__(self) -> str:
        return f"BatchGroup(started={self._started}, unread={self._left})"


class BatchGroups:
    """The batches of ``stream`` handed on in :class:`BatchGroup` s of ``size`` consecutive
    batches (the last one smaller when the stream's length is not a multiple of ``size``).

    ``len`` is ``ceil(len(stream) / size)`` (a ``TypeError`` for a stream without a length).
    :meth:`shard` shards the wrapped stream. Over a stream with ``state_dict`` and
    ``load_state_dict`` the constructor gives a :class:`ResumableBatchGroups`, whose state is the
    stream's, so that Lightning checkpoints and resumes it. See the module docstring for what
    grouping changes in a Lightning fit.

    Args:
        stream: an iterable of ``(x, y)`` mini-batches, e.g. a
            :class:`~torchboost.data.DataStream`.
        size: batches per group (rounds per Lightning step), at least 1.
    """

    def __new__(cls, stream: Iterable[Any] | None = None, *args: Any,
                **kwargs: Any) -> BatchGroups:
        if cls is BatchGroups and is_stateful(stream):
            cls = ResumableBatchGroups
        return super().__new__(cls)

    def __init__(self, stream: Iterable[Any], size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size (batches per group) must be an integer >= 1, got {size!r}")
        self.stream, self.size = stream, size

    def __len__(self) -> int:
        return -(-len(self.stream) // self.size)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[BatchGroup]:
        batches = iter(self.stream)
        group: BatchGroup | None = None
        while True:
            if group is not None and not group.finished:
                raise RuntimeError("each BatchGroup must be iterated to its end before the "
                                   "next one is read: its unread batches belong to it")
            try:
                first = next(batches)
            except StopIteration:
                return
            group = BatchGroup(first, batches, self.size)
            yield group

    def shard(self, rank: int, world_size: int) -> None:
        """Shards the wrapped stream (its ``shard(rank, world_size)``) for data-parallel
        training; the groups stay groups of global batches."""
        shard = getattr(self.stream, "shard", None)
        if not callable(shard):
            raise RuntimeError(f"cannot split a {type(self.stream).__name__} across "
                               f"{world_size} processes batch by batch: it has no "
                               "shard(rank, world_size); group a torchboost.data.DataStream")
        shard(rank, world_size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.stream!r}, size={self.size})"


class ResumableBatchGroups(BatchGroups):
    """:class:`BatchGroups` over a stateful stream: checkpointable, e.g. by Lightning.

    Built by ``BatchGroups(stream, size)`` whenever ``stream`` has ``state_dict`` and
    ``load_state_dict``; only then does the wrapper have them too.
    """

    def state_dict(self) -> dict[str, Any]:
        """The group size and the wrapped stream's state."""
        return {"size": self.size, "stream": self.stream.state_dict()}  # type: ignore[attr-defined]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where the groups that produced ``state`` stood; ``ValueError`` if they had
        another size (Lightning's count of steps done would then not match the stream's
        position)."""
        if int(state["size"]) != self.size:
            raise ValueError(f"the saved stream was read in groups of {state['size']} batches, "
                             f"this one in groups of {self.size}: resume with the same size")
        self.stream.load_state_dict(state["stream"])  # type: ignore[attr-defined]
