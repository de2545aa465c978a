"""Per-key state created on first use: the lazy node storage behind the chaining trees.

A chaining tree of depth ``D`` over ``[0, 1]^d`` has ``≈ 2^{dD} ≈ T`` nodes (Liautaud et al.,
Sec. 3.2, "Complexity") and LocAdaBoost's core tree holds one tree per node and root value
(Sec. 3.3). Only the nodes some input has reached need state ("nodes in the tree do not need to be
created until at least one input falls into that node"), so the state lives in rows created on
demand: a vectorised open-addressing hash map (linear probing, Fibonacci hashing) sends int64 keys
to row indices, and the rows of named float columns live in one ``(capacity, n_columns)`` tensor
that doubles its capacity when full. Looking up or inserting a whole batch of keys is a handful of
tensor operations, on CPU or CUDA, with no Python loop over keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from torchboost.atomic_load import unfit_state

__all__ = ["LazyTable", "sum_by_key"]

_EMPTY = -1
#: 0x9E3779B97F4A7C15 (2^64 / golden ratio) as a signed int64, for Fibonacci hashing.
_FIBONACCI = -7046029254386353131
_MIN_CAPACITY = 16


def sum_by_key(keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Merge repeated keys: the distinct keys, the sum of ``values`` (``(M,)`` or ``(M, k)``) over
    each key's occurrences, and the index of every occurrence's key."""
    unique, inverse = torch.unique(keys, return_inverse=True)
    sums = values.new_zeros((unique.shape[0], *values.shape[1:]))
    return unique, sums.index_add_(0, inverse, values), inverse


class LazyTable(nn.Module):
    """Rows of float state indexed by non-negative int64 keys, created on first insertion.

    Args:
        columns: names of the per-row float columns; ``data[:, j]`` is column ``columns[j]``.
        dtype: dtype of the columns.

    Memory is proportional to the number of rows (hash slots ≤ 16× rows, data ≤ 2× rows),
    whatever the size of the key space. ``state_dict`` round trips, also into a fresh table, and
    ``.to(device)`` moves every buffer.

    Examples:
        >>> import torch
        >>> table = LazyTable(["value"])
        >>> rows = table.insert(torch.tensor([10**12, 7]))
        >>> table.column("value")[rows] = torch.tensor([1.0, 2.0], dtype=torch.float64)
        >>> table.find(torch.tensor([7, 3, 10**12])).tolist()
        [1, -1, 0]
        >>> len(table), table.column("value").tolist()
        (2, [1.0, 2.0])
    """

    def __init__(self, columns: Sequence[str], dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        self.column_names = tuple(columns)
        self.n_rows = 0
        self.register_buffer("hash_keys", torch.full((_MIN_CAPACITY,), _EMPTY))
        self.register_buffer("hash_rows", torch.zeros(_MIN_CAPACITY, dtype=torch.long))
        self.register_buffer("row_keys", torch.zeros(_MIN_CAPACITY, dtype=torch.long))
        self.register_buffer("data", torch.zeros(_MIN_CAPACITY, len(self.column_names),
                                                 dtype=dtype))

    def __len__(self) -> int:
        return self.n_rows

    @property
    def device(self) -> torch.device:
        return self.data.device

    def keys(self) -> Tensor:
        """The keys of the rows, in row order, ``(n_rows,)``."""
        return self.row_keys[: self.n_rows]

    def column(self, name: str) -> Tensor:
        """A view of the live part of column ``name``, ``(n_rows,)``; writes go through."""
        return self.data[: self.n_rows, self.column_names.index(name)]

    def find(self, keys: Tensor) -> Tensor:
        """Row of every key (any shape), ``-1`` where the key has no row."""
        flat = keys.reshape(-1)
        position, found = self._probe(flat)
        rows = torch.where(found, self.hash_rows[position], _EMPTY)
        return rows.reshape(keys.shape)

    def insert(self, keys: Tensor) -> Tensor:
        """Create zero-filled rows for distinct keys that have none; returns their rows.

        Rows are numbered in the order of ``keys``, so the layout is deterministic.
        """
        n_new = keys.numel()
        rows = torch.arange(self.n_rows, self.n_rows + n_new, device=self.device)
        self._reserve(self.n_rows + n_new)
        self.row_keys[rows] = keys
        self.data[rows] = 0.0
        self.n_rows += n_new
        self._hash_insert(keys, rows)
        return rows

    def find_or_insert(self, keys: Tensor) -> tuple[Tensor, Tensor]:
        """Rows of distinct ``keys``, creating the missing ones; also returns the "new" mask."""
        rows = self.find(keys)
        new = rows < 0
        if bool(new.any()):
            rows[new] = self.insert(keys[new])
        return rows, new

    # --- hashing -----------------------------------------------------------------------------
    def _home(self, keys: Tensor) -> Tensor:
        capacity = self.hash_keys.numel()
        bits = capacity.bit_length() - 1
        return ((keys * _FIBONACCI) >> (64 - bits)) & (capacity - 1)

    def _probe(self, keys: Tensor) -> tuple[Tensor, Tensor]:
        """Linear probing: the position holding each key, or the first empty one on its chain.

        All keys read their home slot at once; only the few whose home holds another key (at
        most a quarter of the slots are used) walk on, as a shrinking sub-batch.
        """
        mask = self.hash_keys.numel() - 1
        position = self._home(keys)
        stored = self.hash_keys[position]
        found = stored == keys
        walking = (~found & (stored != _EMPTY)).nonzero()[:, 0]
        while walking.numel():
            step = (position[walking] + 1) & mask
            position[walking] = step
            stored = self.hash_keys[step]
            hit = stored == keys[walking]
            found[walking] = hit
            walking = walking[~hit & (stored != _EMPTY)]
        return position, found

    def _hash_insert(self, keys: Tensor, rows: Tensor) -> None:
        """Place distinct absent keys in the first empty slot of their chains; keys racing for
        the same slot: one wins, the others probe again."""
        while keys.numel():
            position, _ = self._probe(keys)
            self.hash_keys[position] = keys
            placed = self.hash_keys[position] == keys
            self.hash_rows[position[placed]] = rows[placed]
            keys, rows = keys[~placed], rows[~placed]

    def _reserve(self, n_rows: int) -> None:
        """Grow the data to hold ``n_rows`` and keep the hash map at most a quarter full."""
        capacity = self.row_keys.numel()
        if n_rows > capacity:
            capacity = 1 << (n_rows - 1).bit_length()
            for name in ("row_keys", "data"):
                old = getattr(self, name)
                grown = old.new_zeros(capacity, *old.shape[1:])
                grown[: self.n_rows] = old[: self.n_rows]
                setattr(self, name, grown)
        if 4 * n_rows > self.hash_keys.numel():
            self._rehash(1 << (8 * n_rows - 1).bit_length())

    def _rehash(self, capacity: int) -> None:
        self.hash_keys = torch.full((capacity,), _EMPTY, device=self.device)
        self.hash_rows = torch.zeros(capacity, dtype=torch.long, device=self.device)
        self._hash_insert(self.keys(), torch.arange(self.n_rows, device=self.device))

    # --- state ---------------------------------------------------------------------------------
    def get_extra_state(self) -> dict[str, Any]:
        return {"n_rows": self.n_rows}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        n_rows = int(state["n_rows"])
        if not 0 <= n_rows <= self.row_keys.numel():
            raise unfit_state("table", f"it holds {n_rows} rows for a capacity of "
                                       f"{self.row_keys.numel()}; load a state_dict() saved "
                                       "by a model built like this one")
        self.n_rows = n_rows

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              *args: Any, **kwargs: Any) -> None:
        # The buffers' lengths depend on how many rows exist: adopt the checkpoint's lengths
        # first; other trailing sizes (another number of columns) are torch's size mismatch.
        for name, buffer in self._buffers.items():
            saved = state_dict.get(prefix + name)
            if (buffer is not None and saved is not None and saved.shape != buffer.shape
                    and saved.shape[1:] == buffer.shape[1:]):
                self._buffers[name] = buffer.new_empty(saved.shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
