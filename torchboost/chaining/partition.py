"""The regular dyadic partition tree of a box (Liautaud et al., Definition 1).

The root (depth 1, *level* 0 here) is the box ``X``; every node's ``2^d`` children halve each
coordinate of its cell, so ``|X_n| = |X| 2^{-(depth(n) - 1)}`` in sup-norm and the ``2^{d l}`` cells
of level ``l`` partition ``X``. Cells are half-open, ``[a, a + h)`` per coordinate, except that a
point on the upper boundary of ``X`` belongs to the last cell.

Nodes are numbered level by level: level ``l`` starts at ``offset_l = (2^{dl} - 1) / (2^d - 1)``
and cell ``(c_1..c_d)`` of that level (``0 ≤ c_j < 2^l``) is ``offset_l + Σ_j c_j 2^{l(j-1)}``;
for ``d = 1`` this is heap order (children of ``n`` are ``2n + 1, 2n + 2``). Every node id of a
batch's paths comes from integer arithmetic on the rescaled inputs, with no loop over points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["Domain", "DyadicPartition", "default_depth"]

#: A box ``(low, high)``: two numbers (a cube, dimension from ``dim``) or two sequences.
Domain = tuple[float | Sequence[float], float | Sequence[float]]

_MAX_ID_BITS = 62


def default_depth(horizon: int, dim: int) -> int:
    """Theorem 1's depth ``(1/d) log2 T``, rounded up (at least 1 level, the root)."""
    if horizon < 1:
        raise ValueError(f"horizon T must be >= 1, got {horizon}")
    return max(1, math.ceil(math.log2(horizon) / dim))


class DyadicPartition(nn.Module):
    """Levels ``0..depth-1`` of the regular ``2^d``-ary partition tree of a box.

    Args:
        domain: ``(low, high)`` as numbers (with ``dim``) or as two length-``d`` sequences.
        depth: number of levels, the root included (the paper's ``depth(T)``); default
            :func:`default_depth` of ``horizon``.
        horizon: the number of rounds ``T`` (used when ``depth`` is not given).
        dim: dimension when ``domain`` is given by numbers (default 1).

    Examples:
        >>> import torch
        >>> part = DyadicPartition((0.0, 1.0), depth=3)
        >>> part.path(torch.tensor([[0.3], [1.0]])).tolist()  # root, then [0, ½), [¼, ½) ...
        [[0, 1, 4], [0, 2, 6]]
        >>> part.center(torch.tensor([4])).tolist()
        [[0.375]]
    """

    def __init__(self, domain: Domain, depth: int | None = None, *, horizon: int | None = None,
                 dim: int | None = None) -> None:
        super().__init__()
        low, high = _parse_domain(domain, dim)
        self.dim = low.numel()
        if depth is None:
            if horizon is None:
                raise ValueError("give the horizon T (depth (1/d) log2 T) or an explicit depth")
            depth = default_depth(horizon, self.dim)
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
        # the largest node id is below the node count Σ_{l<depth} 2^{dl} < 2^{d(depth−1)+1}
        if self.dim * (depth - 1) > _MAX_ID_BITS:
            raise ValueError(f"d·(depth − 1) = {self.dim * (depth - 1)} > {_MAX_ID_BITS}: node "
                             "ids would overflow int64; use a smaller depth")
        self.depth = depth
        arity = 2**self.dim
        #: first node id of every level, plus the total number of nodes at the end
        self.offsets = [(arity**level - 1) // (arity - 1) for level in range(depth + 1)]
        self.register_buffer("low", low)
        self.register_buffer("high", high)
        self.register_buffer("width", high - low)
        # Per level l: 2^l cells per coordinate, the last cell index, the mixed-radix strides
        # 2^{l j} of the cell coordinates, and the first node id.
        level = torch.arange(depth)
        self.register_buffer("sides", torch.exp2(level.double()), persistent=False)
        self.register_buffer("last_cell", (1 << level) - 1, persistent=False)
        self.register_buffer("strides", 1 << (level[:, None] * torch.arange(self.dim)),
                             persistent=False)
        self.register_buffer("level_offsets", torch.tensor(self.offsets), persistent=False)

    @property
    def n_nodes(self) -> int:
        """Number of nodes of the full tree, ``Σ_l 2^{dl}``."""
        return self.offsets[-1]

    @property
    def diameter(self) -> float:
        """``|X|``, the sup-norm diameter of the root cell."""
        return float(self.width.max())

    def check(self, x: Tensor) -> Tensor:
        """Validate a batch ``(B, d)`` of inputs inside the box; raises ``ValueError``."""
        if not torch.is_tensor(x):
            raise ValueError(f"inputs must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"inputs must have shape (B, {self.dim}), got {tuple(x.shape)}")
        if x.shape[0] == 0:
            raise ValueError("empty batch: inputs have 0 rows")
        if not x.is_floating_point():
            raise ValueError(f"inputs must be floating point, got dtype {x.dtype}")
        if x.device != self.low.device:
            raise ValueError(f"inputs are on {x.device} but the tree is on {self.low.device}")
        inside = ((x >= self.low) & (x <= self.high)).all(1)  # False for NaN too
        if not bool(inside.all()):
            nan = ~torch.isfinite(x).all(1)
            if bool(nan.any()):
                rows = nan.nonzero().flatten()[:10].tolist()
                raise ValueError(f"inputs contain NaN or inf (rows {rows})")
            rows = (~inside).nonzero().flatten()[:10].tolist()
            raise ValueError(f"inputs outside the domain [{self.low.tolist()}, "
                             f"{self.high.tolist()}] (rows {rows}); declare a domain that "
                             "covers the data")
        return x

    def path(self, x: Tensor, levels: Sequence[int] | None = None) -> Tensor:
        """Node ids of the cells containing each point at ``levels`` (default all): ``(B, L)``.

        ``x`` must already be valid (see :meth:`check`). Cells are half-open; a coordinate on
        the upper boundary goes to the last cell.
        """
        sides, last, strides = self.sides, self.last_cell, self.strides
        offsets = self.level_offsets[:-1]
        if levels is not None:
            index = torch.tensor(list(levels), dtype=torch.long, device=sides.device)
            sides, last, offsets = sides[index], last[index], offsets[index]
            strides = strides[index]
        unit = (x.to(torch.float64) - self.low) / self.width
        cells = torch.minimum((unit[:, None, :] * sides[:, None]).floor().long(), last[:, None])
        return offsets + (cells * strides).sum(-1)

    def level(self, ids: Tensor) -> Tensor:
        """Level (depth − 1) of node ids."""
        return torch.searchsorted(self.level_offsets[1:], ids.contiguous(), right=True)

    def center(self, ids: Tensor) -> Tensor:
        """Centres ``x_n`` of the cells of node ids, ``(*ids.shape, d)``."""
        level = self.level(ids)
        index = ids - self.level_offsets[level]
        shift = level[..., None] * torch.arange(self.dim, device=ids.device)
        cells = (index[..., None] >> shift) & ((1 << level[..., None]) - 1)
        unit = torch.ldexp(cells.to(torch.float64) + 0.5, -level[..., None])
        return self.low + self.width * unit

    def extra_repr(self) -> str:
        return f"domain=({self.low.tolist()}, {self.high.tolist()}), depth={self.depth}"


def _parse_domain(domain: Domain, dim: int | None) -> tuple[Tensor, Tensor]:
    try:
        low_raw, high_raw = domain
    except (TypeError, ValueError):
        raise ValueError(f"domain must be a pair (low, high), got {domain!r}") from None
    low = torch.as_tensor(low_raw, dtype=torch.float64).flatten()
    high = torch.as_tensor(high_raw, dtype=torch.float64).flatten()
    size = max(low.numel(), high.numel())
    if dim is not None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if size not in (1, dim):
            raise ValueError(f"domain has {size} coordinates but dim={dim}")
        size = dim
    if low.numel() not in (1, size) or high.numel() not in (1, size):
        raise ValueError(f"domain bounds have {low.numel()} and {high.numel()} coordinates")
    low, high = low.expand(size).clone(), high.expand(size).clone()
    if not bool(torch.isfinite(low).all() and torch.isfinite(high).all()):
        raise ValueError("domain bounds must be finite")
    if not bool((high > low).all()):
        raise ValueError(f"domain needs low < high in every coordinate, got {domain!r}")
    return low, high
