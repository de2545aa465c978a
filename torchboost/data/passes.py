"""Several passes over a training set as one resumable stream.

Small data sets give a streaming booster too few examples in one pass; streaming the training
set ``P`` times in fresh random orders (an i.i.d.-style resampling) gives it ``P`` times as many.
:class:`MultiPassStream` chains ``P`` :class:`~torchboost.data.DataStream` passes into one
iterable with one length and one checkpointable position, so a Lightning fit sees the whole
multi-pass stream as its single epoch and resumes mid-way exactly.

Examples:
    >>> import torch
    >>> x, y = torch.arange(10.0).reshape(5, 2), torch.arange(5.0)
    >>> stream = MultiPassStream(
    ...     lambda p: DataStream(x, y, batch_size=2, seed=p, standardize=None), passes=3)
    >>> len(stream), [len(yb) for _, yb in stream]
    (9, [2, 2, 1, 2, 2, 1, 2, 2, 1])
    >>> stream.batches_consumed, stream.state_dict()["pass"]
    (9, 2)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from torch import Tensor

from torchboost.data.stream import DataStream
from torchboost.params import positive_int

__all__ = ["MultiPassStream"]


class MultiPassStream:
    """``passes`` consecutive :class:`DataStream` passes, pass ``p`` being ``make_pass(p)``.

    Typically ``make_pass = lambda p: DataStream(x, y, batch_size=b, seed=seed + p, ...)``: every
    pass visits each row once, each in its own seeded order. All passes are built on
    construction. Since each ``DataStream`` fits its own standardisation, build the passes
    with ``standardize=None`` on features standardised beforehand (or accept per-pass
    statistics).

    ``len`` is the total number of batches. Iteration continues from the current position and
    an exhausted stream yields nothing until :meth:`reset`. :meth:`state_dict` is the pass index
    and that pass's own state, so Lightning checkpoints the position (see
    :class:`~torchboost.lightning.StreamingBoosterModule`) and a resumed fit continues with
    exactly the batches of an uninterrupted one.
    """

    def __init__(self, make_pass: Callable[[int], DataStream], passes: int) -> None:
        passes = positive_int("passes", passes)
        if not callable(make_pass):
            raise ValueError(f"make_pass must be a function pass -> DataStream, got "
                             f"{type(make_pass).__name__}")
        self._streams = [make_pass(p) for p in range(passes)]
        for p, stream in enumerate(self._streams):
            if not isinstance(stream, DataStream):
                raise ValueError(f"make_pass({p}) returned a {type(stream).__name__}, not a "
                                 "DataStream: each pass is one DataStream (e.g. lambda p: "
                                 "DataStream(x, y, seed=seed + p))")
        self._pass = 0

    @property
    def passes(self) -> int:
        """Number of passes."""
        return len(self._streams)

    def __len__(self) -> int:
        """Batches in all passes together (independent of how many were consumed)."""
        return sum(len(stream) for stream in self._streams)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        while self._pass < self.passes:
            yield from self._streams[self._pass]
            if self._pass == self.passes - 1:
                return  # stay on the last pass: its state says "exhausted"
            self._pass += 1

    @property
    def batches_consumed(self) -> int:
        """Batches handed out so far over all passes."""
        done = sum(len(stream) for stream in self._streams[:self._pass])
        return done + self._streams[self._pass].batches_consumed

    def shard(self, rank: int, world_size: int) -> None:
        """Split every global batch of every pass across ``world_size`` data-parallel processes
        (:meth:`DataStream.shard`); length and state stay global."""
        previous = [(stream.rank, stream.world_size) for stream in self._streams]
        try:
            for stream in self._streams:
                stream.shard(rank, world_size)
        except ValueError:  # a pass too small to split: leave every pass as it was
            for stream, (old_rank, old_world) in zip(self._streams, previous, strict=True):
                stream.shard(old_rank, old_world)
            raise

    def reset(self) -> None:
        """Rewind every pass, back to the first batch of pass 0."""
        for stream in self._streams:
            stream.reset()
        self._pass = 0

    def state_dict(self) -> dict[str, Any]:
        """The current pass index and that pass's :meth:`DataStream.state_dict`."""
        return {"passes": self.passes, "pass": self._pass,
                "stream": self._streams[self._pass].state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where the stream that produced ``state`` stood.

        Raises ``ValueError`` if it had a different number of passes or its current pass a
        different configuration (see :meth:`DataStream.load_state_dict`).
        """
        if int(state["passes"]) != self.passes:
            raise ValueError(f"stream state has {state['passes']} passes, this stream "
                             f"{self.passes}")
        index = int(state["pass"])
        for stream in self._streams[index + 1:]:
            stream.reset()
        self._streams[index].load_state_dict(state["stream"])
        self._pass = index

    def __repr__(self) -> str:
        return (f"MultiPassStream(passes={self.passes}, pass={self._pass}, "
                f"batches={self.batches_consumed}/{len(self)})")
