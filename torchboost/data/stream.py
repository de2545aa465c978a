"""One deterministic pass of mini-batches over a training set, with streaming standardisation.

Online boosting (Hu et al. 2017, Sec. 6) sees each training example once, in a random order.
:class:`DataStream` fixes that order with a seeded ``torch.Generator`` and standardises features
using only what the stream has shown so far, so held-out data are never used for fitting.

Examples:
    >>> import torch
    >>> x = torch.tensor([[1.0, 0.0], [3.0, 4.0], [1.0, 0.0], [3.0, 4.0], [9.0, 9.0], [9.0, 9.0]])
    >>> stream = DataStream(x, torch.zeros(6), batch_size=4, shuffle=False, warmup=4)
    >>> len(stream), stream.mean.tolist(), stream.std.tolist()  # from the first 4 rows only
    (2, [2.0, 2.0], [1.0, 2.0])
    >>> [xb.tolist() for xb, _ in stream][1]  # the last batch: rows 4 and 5, standardised
    [[7.0, 3.5], [7.0, 3.5]]
    >>> stream.batches_consumed, stream.batches_remaining
    (2, 0)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import Dataset as TorchDataset

from torchboost.data.dataset import Dataset
from torchboost.data.exhaustion import warn_if_exhausted
from torchboost.params import flag, integer, positive_int

__all__ = ["STD_FLOOR", "DataStream", "Standardize", "is_stateful", "make_test_tensors"]

Standardize = Literal["auto", "warmup", "running"] | None
"""Feature standardisation mode of a :class:`DataStream` (see its docstring)."""

STD_FLOOR = 1e-8
"""Standard deviations at or below this are treated as 0: such features are only centred."""


class DataStream:
    """An iterable over one pass of ``(x_batch, y_batch)`` mini-batches in a seeded order.

    Order: with ``shuffle=True`` the rows are permuted once by
    ``torch.randperm(n, generator=torch.Generator().manual_seed(seed))``; batch ``k`` holds rows
    ``order[k * batch_size : (k + 1) * batch_size]``. The same inputs and ``seed`` always give the
    same batches. The last batch may be smaller unless ``drop_last=True``.

    Standardisation (``x`` is returned as ``(x - mean) / std`` per feature; a feature whose
    std is at most :data:`STD_FLOOR` is only centred; statistics are float64, population
    variance, and computed per pixel for images):

    * ``"warmup"``: mean/std of the first ``warmup`` rows of the shuffled stream (all rows if
      fewer), computed once on construction and applied to every batch;
    * ``"running"``: Welford/Chan running mean/variance over the batches handed out so far;
      each batch first updates the statistics, then is normalised with them;
    * ``None``: batches are passed through unchanged;
    * ``"auto"`` (default): ``"warmup"`` for tabular ``x`` of shape ``(n, d)``, ``None`` for
      images (``x.ndim > 2``, e.g. MNIST's ``(n, 1, 28, 28)`` already scaled to ``[0, 1]``).

    :meth:`transform` applies the current statistics to held-out data. Rows holding NaN or inf
    are passed through, never dropped, but left out of the statistics, so one bad row spoils
    only its own batch (which the booster, or a :class:`~torchboost.data.ScreenedStream`,
    refuses); validating inputs is the learner's job.

    Iterating continues from where the stream stands: ``start_batch=k`` (or
    :meth:`load_state_dict`) resumes at batch ``k`` with exactly the batches and statistics an
    uninterrupted pass would give there (running statistics are fast-forwarded over the skipped
    batches). An exhausted stream yields nothing more until :meth:`reset`. A batch counts as
    consumed once it has been yielded. Batches live on ``x``'s device.

    Data-parallel training (:mod:`torchboost.distributed`): :meth:`shard` makes the stream hand
    out only one process's contiguous part of every global batch; everything else — its length,
    position, statistics and :meth:`state_dict` — stays that of the global stream.
    """

    def __init__(
        self,
        x: Tensor,
        y: Tensor,
        batch_size: int = 32,
        seed: int = 0,
        shuffle: bool = True,
        standardize: Standardize = "auto",
        warmup: int = 1024,
        start_batch: int = 0,
        drop_last: bool = False,
    ) -> None:
        x, y = _tensor("x", x), _tensor("y", y)
        for name, values in (("x", x), ("y", y)):
            if values.is_complex() or values.device.type == "meta":
                raise ValueError(f"{name} must hold real numbers on a real device, got "
                                 f"{values.dtype} on {values.device}")
        if not x.is_floating_point():  # integer or bool features: the learners need floats
            x = x.to(torch.get_default_dtype())
        if x.ndim < 2:
            raise ValueError(f"x must have shape (n, d) or (n, ...), got {tuple(x.shape)}")
        n = x.shape[0]
        if n == 0:
            raise ValueError("empty stream: x has no rows")
        if y.shape[0] != n:
            raise ValueError(f"x has {n} rows but y has {y.shape[0]}")
        if x.device != y.device:
            raise ValueError(f"x and y must be on one device, got {x.device} and {y.device}")
        batch_size, warmup = positive_int("batch_size", batch_size), positive_int("warmup", warmup)
        seed, start_batch = integer("seed", seed), integer("start_batch", start_batch, 0)
        if not -(2**63) <= seed < 2**64:  # what torch.Generator.manual_seed takes
            raise ValueError(f"seed must lie in [-2**63, 2**64), got {seed}")
        shuffle, drop_last = flag("shuffle", shuffle), flag("drop_last", drop_last)
        if standardize not in ("auto", "warmup", "running", None):
            raise ValueError(
                f"standardize must be 'auto', 'warmup', 'running' or None, got {standardize!r}"
            )
        if standardize == "auto":
            standardize = "warmup" if x.ndim == 2 else None
        n_batches = n // batch_size if drop_last else math.ceil(n / batch_size)
        if n_batches == 0:
            raise ValueError(
                f"empty stream: drop_last=True with {n} rows < batch_size={batch_size}"
            )
        if not 0 <= start_batch <= n_batches:
            raise ValueError(f"start_batch must lie in [0, {n_batches}], got {start_batch}")

        self.x, self.y = x, y
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.standardize: Literal["warmup", "running"] | None = standardize
        self.warmup, self.drop_last = warmup, drop_last
        self._n_batches = n_batches
        if shuffle:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        else:
            order = torch.arange(n)
        self._order = order.to(x.device)
        self.rank, self.world_size = 0, 1
        self._consumed = 0
        self._pass_ended = False  # an earlier loop ran this pass to its end
        self._reset_statistics()
        self._fast_forward(start_batch)

    @classmethod
    def from_dataset(cls, dataset: Dataset | TorchDataset, **kwargs: Any) -> DataStream:
        """A stream over a :class:`~torchboost.data.Dataset`'s training split, or over every
        ``(x, y)`` item of any map-style ``torch.utils.data.Dataset`` — e.g.
        ``torchvision.datasets.MNIST(root, download=False, transform=ToTensor())`` — read into
        memory once, in index order, with the dataset's transforms applied (labels become a
        tensor: ``int64`` class indices for torchvision's classification sets). ``kwargs``
        (``batch_size``, ``seed``, ``standardize``, …) go to the constructor. For data that do
        not fit in memory, and for iterable datasets, use :class:`~torchboost.data.LoaderStream`.
        """
        if isinstance(dataset, Dataset):
            return cls(dataset.x_train, dataset.y_train, **kwargs)
        from torchboost.data.loader import materialize

        x, y = materialize(dataset)
        return cls(x, y, **kwargs)

    # ----------------------------------------------------------------- iteration
    def __len__(self) -> int:
        """Number of batches in a full pass (independent of how many were consumed)."""
        return self._n_batches

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        warn_if_exhausted(self, self._pass_ended)
        while self._consumed < self._n_batches:
            rows = self._batch_rows(self._consumed)
            if self.standardize == "running":
                self._update(self.x[rows])
            self._consumed += 1
            mine = rows if self.world_size == 1 else rows.tensor_split(self.world_size)[self.rank]
            # index_select: the rows of x[mine] and y[mine] without advanced indexing's set-up
            yield self.transform(self.x.index_select(0, mine)), self.y.index_select(0, mine)
        self._pass_ended = True

    @property
    def n_samples(self) -> int:
        """Number of rows in the stream."""
        return self.x.shape[0]

    @property
    def batches_consumed(self) -> int:
        """Batches handed out so far in this pass (the index of the next batch)."""
        return self._consumed

    @property
    def batches_remaining(self) -> int:
        """Batches left in this pass."""
        return self._n_batches - self._consumed

    def reset(self) -> None:
        """Rewind to batch 0 for another pass in the same order (running statistics restart)."""
        self._consumed = 0
        self._pass_ended = False
        self._reset_statistics()

    def shard(self, rank: int, world_size: int) -> None:
        """From now on, hand out only rank ``rank``'s part of every global batch, for
        data-parallel training over ``world_size`` processes (``shard(0, 1)`` undoes it).

        Global batch ``k`` (the rows an unsharded stream yields) is split into ``world_size``
        contiguous parts as by ``torch.tensor_split`` — the first ``B mod world_size`` ranks get
        one row more — and this stream yields part ``rank``. The length, position, standardisation
        statistics (from the global rows; ``"running"`` ones updated with the whole global batch)
        and :meth:`state_dict` stay those of the global stream, identical on every rank, so a
        checkpoint of a sharded stream resumes an unsharded one and vice versa. Every rank must
        build its stream from the same data and seed.

        Raises ``ValueError`` when a batch has fewer rows than ``world_size`` (some rank would
        get none): use ``drop_last=True`` or another batch size.
        """
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, {world_size}), got {rank}")
        smallest = self.batch_size if self.drop_last else (
            self.n_samples - (self._n_batches - 1) * self.batch_size)
        if smallest < world_size:
            raise ValueError(f"a batch of {smallest} rows cannot be split over {world_size} "
                             "processes (a rank would get an empty batch); use drop_last=True "
                             "or another batch size")
        self.rank, self.world_size = rank, world_size

    def _batch_rows(self, k: int) -> Tensor:
        """Indices of the rows of global batch ``k``."""
        return self._order[k * self.batch_size : (k + 1) * self.batch_size]

    def _fast_forward(self, k: int) -> None:
        """Skip to batch ``k``, folding the skipped batches into running statistics."""
        for skipped in range(self._consumed, k):
            if self.standardize == "running":
                self._update(self.x[self._batch_rows(skipped)])
        self._consumed = k

    # ----------------------------------------------------------------- statistics
    def _reset_statistics(self) -> None:
        shape, device = self.x.shape[1:], self.x.device
        self._count = 0
        self._mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self._m2 = torch.zeros(shape, dtype=torch.float64, device=device)
        if self.standardize == "warmup":
            self._update(self.x[self._order[: self.warmup]])

    def _update(self, x_batch: Tensor) -> None:
        """Merge a batch's finite rows into the running count/mean/M2 (Chan et al.'s parallel
        Welford)."""
        batch = x_batch.to(torch.float64)
        finite = torch.isfinite(batch.reshape(batch.shape[0], -1)).all(1)
        if not bool(finite.all()):
            batch = batch[finite]
        n_batch = batch.shape[0]
        if n_batch == 0:
            return
        batch_mean = batch.mean(dim=0)
        batch_m2 = ((batch - batch_mean) ** 2).sum(dim=0)
        total = self._count + n_batch
        delta = batch_mean - self._mean
        self._mean = self._mean + delta * (n_batch / total)
        self._m2 = self._m2 + batch_m2 + delta**2 * (self._count * n_batch / total)
        self._count = total

    @property
    def mean(self) -> Tensor | None:
        """Current per-feature mean (float64), or ``None`` without standardisation."""
        return None if self.standardize is None else self._mean.clone()

    @property
    def std(self) -> Tensor | None:
        """Current per-feature population std (float64), or ``None`` without standardisation."""
        if self.standardize is None:
            return None
        return (self._m2 / max(self._count, 1)).sqrt()

    @property
    def n_seen(self) -> int:
        """Rows the current statistics were computed from (0 without standardisation)."""
        return self._count

    def transform(self, x: Tensor) -> Tensor:
        """Standardise ``x`` (e.g. the test set) with the stream's CURRENT statistics.

        With ``"running"`` this means the batches consumed so far (identity before the first
        one); call it after the pass for full-training-stream statistics. The result keeps
        ``x``'s dtype (integer features come back in torch's default floating dtype). Without
        standardisation ``x`` is returned unchanged.
        """
        if self.standardize is None:
            return x
        if x.shape[1:] != self.x.shape[1:]:
            raise ValueError(
                f"expected rows of shape {tuple(self.x.shape[1:])}, got {tuple(x.shape[1:])}"
            )
        std = (self._m2 / max(self._count, 1)).sqrt()
        scale = torch.where(std > STD_FLOOR, std, torch.ones_like(std))
        mean, scale = self._mean.to(x.device), scale.to(x.device)
        dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        return ((x.to(torch.float64) - mean) / scale).to(dtype)

    # ----------------------------------------------------------------- checkpointing
    def _config(self) -> dict[str, Any]:
        return {
            "n_samples": self.n_samples,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "standardize": self.standardize,
            "warmup": self.warmup,
            "drop_last": self.drop_last,
        }

    def state_dict(self) -> dict[str, Any]:
        """Position and statistics, for :meth:`load_state_dict` on an identically built stream."""
        return {
            "config": self._config(),
            "batches_consumed": self._consumed,
            "count": self._count,
            "mean": self._mean.cpu().clone(),
            "m2": self._m2.cpu().clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly where the stream that produced ``state`` stood.

        Raises ``ValueError`` if this stream was built with a different size, batch size, seed,
        shuffling, standardisation or warm-up (its batches would not be the same).
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"a stream state is a mapping (from state_dict()), got "
                             f"{type(state).__name__}")
        missing = [k for k in ("config", "batches_consumed", "count", "mean", "m2")
                   if k not in state]
        if missing:
            raise ValueError(f"stream state lacks {missing} (nothing was loaded)")
        config = self._config()
        if not isinstance(state["config"], Mapping) or state["config"] != config:
            saved = state["config"] if isinstance(state["config"], Mapping) else {}
            differing = sorted(k for k in config if saved.get(k) != config[k])
            raise ValueError(f"stream state does not match this stream: {differing} differ")
        # read and check everything first: a state that fails half-way changes nothing
        consumed = _whole("batches_consumed", state["batches_consumed"], 0, self._n_batches)
        count = _whole("count", state["count"], 0, None)
        mean, m2 = (_statistic(name, state[name], self._mean, self.x.device)
                    for name in ("mean", "m2"))
        self._consumed, self._count, self._mean, self._m2 = consumed, count, mean, m2
        self._pass_ended = False

    def __repr__(self) -> str:
        return (
            f"DataStream(n_samples={self.n_samples}, batch_size={self.batch_size}, "
            f"batches={self._consumed}/{self._n_batches}, seed={self.seed}, "
            f"shuffle={self.shuffle}, standardize={self.standardize!r}, "
            f"shard={self.rank}/{self.world_size})"
        )


def make_test_tensors(stream: DataStream, dataset: Dataset) -> tuple[Tensor, Tensor]:
    """``dataset``'s test split with ``stream``'s current standardisation applied to ``x``.

    The statistics come only from ``stream``'s training rows; for ``"running"`` streams call this
    after the pass (or wherever the evaluation happens) to use the statistics seen so far.
    """
    return stream.transform(dataset.x_test), dataset.y_test


def is_stateful(stream: Any) -> bool:
    """Whether ``stream`` can save and restore its position (``state_dict``/``load_state_dict``,
    Lightning's ``_Stateful`` protocol), so that a checkpointed fit resumes it exactly."""
    return callable(getattr(stream, "state_dict", None)) and callable(
        getattr(stream, "load_state_dict", None))


def _tensor(name: str, values: Any) -> Tensor:
    """``values`` as a tensor: tensors as they are, numpy arrays and nested sequences of numbers
    through ``torch.as_tensor``; anything else is a ``ValueError`` naming ``name``."""
    if torch.is_tensor(values):
        return values
    try:
        return torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f"{name} must be a tensor (or a numpy array or a sequence of numbers "
                         f"torch.as_tensor reads), got {type(values).__name__}: {error}") from None


def _whole(name: str, value: Any, low: int, high: int | None) -> int:
    """``value`` as a whole number in ``[low, high]``, or a ``ValueError`` naming it."""
    whole = (isinstance(value, numbers.Integral) and not isinstance(value, bool)) or (
        isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer()
    ) or (torch.is_tensor(value) and value.numel() == 1 and not value.is_floating_point()
          and value.dtype != torch.bool)
    if not whole:
        raise ValueError(f"stream state: {name} must be a whole number, got {value!r} "
                         "(nothing was loaded)")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"stream state: {name}={value} is not in {bound} for this stream "
                         "(nothing was loaded)")
    return value


def _statistic(name: str, value: Any, current: Tensor, device: torch.device) -> Tensor:
    """A saved running statistic as float64 on ``device``, of ``current``'s shape."""
    if not torch.is_tensor(value) or value.shape != current.shape:
        got = tuple(value.shape) if torch.is_tensor(value) else type(value).__name__
        raise ValueError(f"stream state: {name} must be a tensor of shape "
                         f"{tuple(current.shape)} (one entry per feature), got {got} "
                         "(nothing was loaded)")
    return value.to(device=device, dtype=torch.float64)
