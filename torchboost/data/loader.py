"""Streams over ``torch.utils.data`` sources: map-style datasets (e.g. torchvision's), iterable
datasets and ``DataLoader``\\ s, for data that need not fit in memory.

:meth:`DataStream.from_dataset <torchboost.data.DataStream.from_dataset>` reads a map-style
dataset into memory once (fast passes, streaming standardisation); :class:`LoaderStream` reads
it batch by batch through a ``DataLoader`` instead (optionally with worker processes), so only
one batch is in memory at a time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, IterableDataset

from torchboost.data.exhaustion import warn_if_exhausted
from torchboost.params import flag, integer, positive_int

__all__ = ["LoaderStream", "is_map_style", "materialize"]


def is_map_style(dataset: Any) -> bool:
    """Whether ``dataset`` is a map-style dataset: sized and indexable, not an iterable one."""
    return (not isinstance(dataset, IterableDataset | DataLoader)
            and callable(getattr(dataset, "__getitem__", None))
            and callable(getattr(dataset, "__len__", None)))


def _pair(batch: Any) -> tuple[Tensor, Tensor]:
    """``(x, y)`` from a collated batch (a pair of tensors, or ints/floats made tensors)."""
    if not isinstance(batch, list | tuple) or len(batch) != 2:
        raise ValueError("a stream's source must yield (features, label) pairs, got a "
                         f"{type(batch).__name__}")
    x, y = batch
    return torch.as_tensor(x), torch.as_tensor(y)


def materialize(dataset: Any, chunk_size: int = 1024) -> tuple[Tensor, Tensor]:
    """Every ``(x, y)`` item of a map-style dataset, in index order, as two stacked tensors
    (the dataset's transforms applied; labels as returned, ints become ``int64``)."""
    if not is_map_style(dataset):
        raise TypeError(f"expected a map-style dataset (with __len__ and __getitem__), got a "
                        f"{type(dataset).__name__}; stream iterable data with LoaderStream")
    if len(dataset) == 0:
        raise ValueError("empty dataset")
    xs, ys = [], []
    for batch in DataLoader(dataset, batch_size=chunk_size, shuffle=False):
        x, y = _pair(batch)
        xs.append(x)
        ys.append(y)
    return torch.cat(xs), torch.cat(ys)


class LoaderStream:
    """One pass of ``(x, y)`` mini-batches read lazily from a ``torch.utils.data`` source.

    * a **map-style dataset** (e.g. ``torchvision.datasets.CIFAR10(root, transform=ToTensor())``):
      the rows are visited in the order ``torch.randperm(n, generator=seed)`` (or index order
      with ``shuffle=False``), ``batch_size`` at a time, read by a ``DataLoader`` with
      ``num_workers`` worker processes. Batch ``k`` is always the same rows, so the stream
      resumes exactly (:meth:`state_dict` / ``start_batch``) — as :class:`DataStream` does;
    * an **iterable dataset** or a ready **DataLoader**: batches come in the source's own order
      (an ``IterableDataset`` is batched by a ``DataLoader`` with ``batch_size``; a
      ``DataLoader`` is used as it is). Resuming skips the batches already consumed, which is
      exact only when the source replays the same sequence on every iteration (a seeded or fixed
      order); ``len()`` is known only when the source's is.

    No standardisation: give the dataset a transform (e.g. ``Normalize``). Batches are moved to
    ``device`` when one is given. :meth:`reset` rewinds for another pass (a map-style source in
    the same order; pass ``seed=`` a new value per pass through a new stream for new orders).
    """

    def __init__(self, source: Dataset | IterableDataset | DataLoader | Iterable[Any],
                 batch_size: int = 32, seed: int = 0, shuffle: bool = True,
                 num_workers: int = 0, start_batch: int = 0, drop_last: bool = False,
                 device: str | torch.device | None = None) -> None:
        batch_size, seed = positive_int("batch_size", batch_size), integer("seed", seed)
        num_workers, start_batch = integer("num_workers", num_workers, 0), integer(
            "start_batch", start_batch, 0)
        shuffle, drop_last = flag("shuffle", shuffle), flag("drop_last", drop_last)
        self.source = source
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.num_workers, self.drop_last = num_workers, drop_last
        self.device = torch.device(device) if device is not None else None
        self.map_style = is_map_style(source)
        self._n_batches: int | None = None
        if self.map_style:
            n = len(source)  # type: ignore[arg-type]
            if n == 0:
                raise ValueError("empty stream: the dataset has no rows")
            self._n_batches = n // batch_size if drop_last else math.ceil(n / batch_size)
            if self._n_batches == 0:
                raise ValueError(f"empty stream: drop_last=True with {n} rows < "
                                 f"batch_size={batch_size}")
        else:
            try:
                self._n_batches = len(self._iterable())  # type: ignore[arg-type]
            except TypeError:
                self._n_batches = None
        if start_batch < 0 or (self._n_batches is not None and start_batch > self._n_batches):
            raise ValueError(f"start_batch must lie in [0, {self._n_batches}], got {start_batch}")
        self._consumed = start_batch
        self._pass_ended = False  # an earlier loop ran this pass to its end

    # ------------------------------------------------------------------ iteration
    def __len__(self) -> int:
        """Batches in a full pass; ``TypeError`` when the source does not know its length."""
        if self._n_batches is None:
            raise TypeError(f"this stream's {type(self.source).__name__} has no length")
        return self._n_batches

    @property
    def batches_consumed(self) -> int:
        """Batches handed out so far in this pass (the index of the next batch)."""
        return self._consumed

    def reset(self) -> None:
        """Rewind to batch 0 for another pass."""
        self._consumed = 0
        self._pass_ended = False

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        warn_if_exhausted(self, self._pass_ended)
        if self.map_style:
            batches = self._map_style_batches()
        else:
            batches = iter(self._iterable())
            for _ in range(self._consumed):  # fast-forward a resumed pass
                next(batches, None)
        for batch in batches:
            if self._n_batches is not None and self._consumed >= self._n_batches:
                break
            x, y = _pair(batch)
            self._consumed += 1
            if self.device is not None:
                x, y = x.to(self.device), y.to(self.device)
            yield x, y
        self._pass_ended = True

    def _order(self) -> Tensor:
        n = len(self.source)  # type: ignore[arg-type]
        if not self.shuffle:
            return torch.arange(n)
        return torch.randperm(n, generator=torch.Generator().manual_seed(self.seed))

    def _map_style_batches(self) -> Iterator[Any]:
        order = self._order().tolist()
        assert self._n_batches is not None
        rows = [order[k * self.batch_size:(k + 1) * self.batch_size]
                for k in range(self._consumed, self._n_batches)]
        if not rows:
            return iter(())
        return iter(DataLoader(self.source, batch_sampler=rows,  # type: ignore[arg-type]
                               num_workers=self.num_workers))

    def _iterable(self) -> Iterable[Any]:
        if isinstance(self.source, IterableDataset):
            return DataLoader(self.source, batch_size=self.batch_size,
                              num_workers=self.num_workers, drop_last=self.drop_last)
        return self.source

    # ------------------------------------------------------------------ checkpointing
    def _config(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "seed": self.seed, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "map_style": self.map_style,
                "n_batches": self._n_batches}

    def state_dict(self) -> dict[str, Any]:
        """The position, for :meth:`load_state_dict` on an identically built stream."""
        return {"config": self._config(), "batches_consumed": self._consumed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where the stream that produced ``state`` stood (``ValueError`` when this one
        was built differently)."""
        config = self._config()
        if state["config"] != config:
            differing = sorted(k for k in config if state["config"].get(k) != config[k])
            raise ValueError(f"stream state does not match this stream: {differing} differ")
        self._consumed = int(state["batches_consumed"])
        self._pass_ended = False

    def __repr__(self) -> str:
        total = "?" if self._n_batches is None else self._n_batches
        return (f"LoaderStream({type(self.source).__name__}, batch_size={self.batch_size}, "
                f"batches={self._consumed}/{total}, seed={self.seed}, shuffle={self.shuffle})")

