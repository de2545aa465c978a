"""Potential functions of the multiclass 0-1 loss (Jung, Goetz & Tewari 2017, Sec. 3.1).

The 0-1 loss with ties counted as errors is eq. (2), ``L^r(s) = 1[max_{l≠r} s(l) ≥ s(r)]``, and
its potentials are the recursion (3) (the printed ``u_i^r`` is a typo for ``u_γ^r``)::

    φ_0^r(s) = L^r(s),      φ_{m+1}^r(s) = E_{l ~ u_γ^r} φ_m^r(s + e_l),

where ``u_γ^r`` puts ``(1−γ)/k + γ`` on ``r`` and ``(1−γ)/k`` on every other label. ``φ_m^r(s)``
is the probability that ``r`` does not strictly win once ``m`` more votes are drawn from
``u_γ^r`` and added to ``s`` (eq. (16), after Mukherjee & Schapire).

Both estimators below share the symmetry reduction and the cache: ``φ_m^r(s)`` only depends on
``m`` and the multiset of leads ``d_l = s(r) − s(l)`` (``l ≠ r``), and a lead ``d_l ≥ m + 1``
can no longer be caught up with while ``d_l ≤ −m`` can no longer be overtaken, so leads are
clipped to ``[−m, m + 1]`` and sorted. A state with a lead ``≤ −m`` has ``φ = 1``; one with all
leads ``≥ m + 1`` has ``φ = 0``; every other state is evaluated once and memoised.

* :class:`ExactPotentials` evaluates (16) in float64 (see :meth:`ExactPotentials._evaluate`).
* :class:`MonteCarloPotentials` averages the 0-1 loss over a fixed bank of draws per ``m``, as in
  the paper's experiments (App. E), with common random numbers so that the estimate is a proper
  function of the state (properness holds draw by draw).

Examples:
    >>> import numpy as np
    >>> phi = ExactPotentials(n_classes=3, gamma=0.1)
    >>> float(phi([0], [[0, 0, 0]], [0])[0])  # m = 0: a three-way tie is an error
    1.0
    >>> value = phi([2], [[1, 0, 0]], [0])  # label 0 leads by one, two votes to go
    >>> q = 0.3  # u_γ^0 = (0.4, 0.3, 0.3); 0 fails to win iff the two votes are (1,1), (2,2),
    >>> bool(np.isclose(value[0], 4 * q * q))  # (1,2) or (2,1)
    True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["MAX_EXACT_VOTES", "ExactPotentials", "MonteCarloPotentials", "Potentials"]

#: Largest number ``m`` of remaining votes :class:`ExactPotentials` evaluates (float64 range).
MAX_EXACT_VOTES = 1000

# A binomial weight below this cannot move a potential in [0, 1] by more than 1e-17 in total.
_NEGLIGIBLE = 1e-20


class Potentials(ABC):
    """Potentials ``φ_m^r(s)`` of the multiclass 0-1 loss for ``k`` labels and edge ``γ``.

    Calls are vectorised over queries: ``phi(m, s, r)`` takes ``m (Q,)`` remaining votes, integer
    vote vectors ``s (Q, k)`` and labels ``r (Q,)`` and returns ``φ_m^r(s)`` as float64 ``(Q,)``.
    Values are memoised on the reduced state (see the module docstring); :attr:`hits` and
    :attr:`misses` count cache look-ups.
    """

    def __init__(self, n_classes: int, gamma: float) -> None:
        if not (isinstance(n_classes, int) and n_classes >= 2):
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"gamma must lie in [0, 1), got {gamma}")
        self.n_classes = n_classes
        self.gamma = float(gamma)
        #: probability that a vote drawn from ``u_γ^r`` is ``r`` / one given other label
        self.p_right = (1.0 - gamma) / n_classes + gamma
        self.p_other = (1.0 - gamma) / n_classes
        self._cache: dict[bytes, float] = {}
        self.hits = 0
        self.misses = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_classes={self.n_classes}, gamma={self.gamma})"

    def __len__(self) -> int:
        """Number of memoised states."""
        return len(self._cache)

    def __call__(self, m: ArrayLike, s: ArrayLike, r: ArrayLike) -> np.ndarray:
        """``φ_m^r(s)`` for each query, float64 ``(Q,)``."""
        m, s, r = self._check(m, s, r)
        k = self.n_classes
        rows = np.arange(len(r))
        leads = s[rows, r][:, None] - s
        leads = leads[np.arange(k)[None, :] != r[:, None]].reshape(len(r), k - 1)
        leads = np.clip(leads, -m[:, None], m[:, None] + 1)
        leads.sort(axis=1)
        out = np.zeros(len(r))
        out[leads[:, 0] <= -m] = 1.0
        open_ = np.flatnonzero((leads[:, 0] > -m) & (leads[:, 0] <= m))
        if open_.size:
            out[open_] = self._lookup(m[open_], leads[open_])
        return out

    def shifted(self, m: ArrayLike, s: ArrayLike, r: ArrayLike) -> np.ndarray:
        """``φ_m^r(s + e_l)`` for every label ``l``: float64 ``(Q, k)``.

        Row ``r`` of the raw cost matrix (4) of learner ``i`` is this with ``m = N − i`` and
        ``s = s^{i−1}``.
        """
        m, s, r = self._check(m, s, r)
        k = self.n_classes
        grid = s[:, None, :] + np.eye(k, dtype=np.int64)[None]
        values = self(np.repeat(m, k), grid.reshape(-1, k), np.repeat(r, k))
        return values.reshape(len(r), k)

    def weight(self, m: ArrayLike, s: ArrayLike, r: ArrayLike) -> np.ndarray:
        """Alg. 1 line 11: ``w = Σ_l [φ_m^r(s + e_l) − φ_m^r(s + e_r)]``, float64 ``(Q,)``.

        Every term is ``≥ 0`` (potentials are proper), so ``0 ≤ w ≤ k − 1``.
        """
        values = self.shifted(m, s, r)
        diagonal = values[np.arange(values.shape[0]), np.asarray(r, dtype=np.int64)]
        return np.clip(values.sum(1) - self.n_classes * diagonal, 0.0, self.n_classes - 1.0)

    @abstractmethod
    def _evaluate(self, m: np.ndarray, leads: np.ndarray) -> np.ndarray:
        """Potentials of distinct reduced states: ``m (S,)`` votes to go and sorted clipped
        leads ``(S, k − 1)``, at least one in ``(−m, m]`` and none ``≤ −m``."""

    # --- internals ---------------------------------------------------------------------------
    def _check(self, m: ArrayLike, s: ArrayLike, r: ArrayLike) -> tuple[np.ndarray, ...]:
        m = np.asarray(m).reshape(-1)
        s = np.asarray(s)
        r = np.asarray(r).reshape(-1)
        for name, value in (("m", m), ("s", s), ("r", r)):
            if value.size and not np.issubdtype(value.dtype, np.integer):
                raise ValueError(f"{name} must hold integers, got dtype {value.dtype}")
        m, s, r = m.astype(np.int64), s.astype(np.int64), r.astype(np.int64)
        if s.ndim != 2 or s.shape[1] != self.n_classes:
            raise ValueError(f"s must have shape (Q, {self.n_classes}), got {s.shape}")
        if not m.shape[0] == s.shape[0] == r.shape[0]:
            raise ValueError(f"m, s and r hold {m.shape[0]}, {s.shape[0]} and {r.shape[0]} "
                             "queries")
        if m.size and m.min() < 0:
            raise ValueError("m (votes to go) must be >= 0")
        if r.size and (r.min() < 0 or r.max() >= self.n_classes):
            raise ValueError(f"labels r must lie in [0, {self.n_classes})")
        return m, s, r

    def _lookup(self, m: np.ndarray, leads: np.ndarray) -> np.ndarray:
        """Cached potentials of reduced states (rows ``(m, leads)``)."""
        keys = np.ascontiguousarray(np.column_stack([m, leads]).astype(np.int32))
        keys = keys.view(np.dtype((np.void, keys.shape[1] * 4))).ravel()
        cache = self._cache
        values = np.fromiter((cache.get(key, math.nan) for key in keys.tolist()), np.float64,
                             count=keys.shape[0])
        missing = np.flatnonzero(np.isnan(values))
        self.hits += keys.shape[0] - missing.size
        if missing.size:
            _, first, inverse = np.unique(keys[missing], return_index=True, return_inverse=True)
            new = self._evaluate(m[missing[first]], leads[missing[first]])
            cache.update(zip(keys[missing[first]].tolist(), new.tolist(), strict=True))
            self.misses += first.size
            values[missing] = new[inverse.reshape(-1)]
        return values


class ExactPotentials(Potentials):
    """Exact potentials (16) in float64, memoised on the reduced state.

    Conditioning on the number ``x`` of the ``m`` votes that go to ``r`` (a
    ``Binomial(m, (1−γ)/k + γ)`` count), label ``r`` strictly wins iff each other label ``l``
    gets at most ``c_l = x + d_l − 1`` of the remaining ``n = m − x`` votes, which fall
    uniformly on the ``k − 1`` other labels (the digest's DP)::

        1 − φ_m^r(s) = Σ_x Binom(m, p; x) · V_n(c),
        V_n(c) = P(each other label gets ≤ c_l of n uniform votes) = n! [z^n] Π_{l≠r} E_{c_l}(z),

    with ``E_c(z) = Σ_{j≤c} (z/(k−1))^j / j!``. Labels with equal leads share one factor
    ``E_c(z)^h``, read from a table of ``P(h uniform bins each ≤ c | j balls)``, and factors
    whose cap reaches ``n`` are plain exponentials. ``V_n`` only depends on ``n`` and the
    binding caps ``c_l < n``, so it is memoised too: neighbouring states along a round share most
    of their ``V``'s (a vote for ``r`` maps ``(m, x + 1)`` to ``(m − 1, x)``). All sums are of
    non-negative terms; binomial weights below 1e−20 are skipped (absolute error < 1e−17).
    ``m`` is limited to :data:`MAX_EXACT_VOTES`.

    Examples:
        >>> phi = ExactPotentials(n_classes=4, gamma=0.2)
        >>> s = [[3, 1, 0, 0]]
        >>> direct = phi([5], s, [0])[0]
        >>> u = [0.4, 0.2, 0.2, 0.2]   # recursion (3): one vote drawn from u_γ^0
        >>> step = sum(u[l] * phi([4], [[3 + (l == 0), 1 + (l == 1), l == 2, l == 3]], [0])[0]
        ...            for l in range(4))
        >>> bool(abs(direct - step) < 1e-14)
        True
    """

    def __init__(self, n_classes: int, gamma: float) -> None:
        super().__init__(n_classes, gamma)
        self._capped: dict[bytes, float] = {}

    def weight(self, m: ArrayLike, s: ArrayLike, r: ArrayLike) -> np.ndarray:
        """Alg. 1 line 11 from two potentials instead of ``k``: by the recursion (3),
        ``Σ_{l≠r} φ_m^r(s + e_l) = (φ_{m+1}^r(s) − p φ_m^r(s + e_r)) / q`` with ``p``, ``q`` the
        probabilities of ``u_γ^r``, so ``w = (φ_{m+1}^r(s) − p φ_m^r(s + e_r)) / q
        − (k − 1) φ_m^r(s + e_r)``."""
        m, s, r = self._check(m, s, r)
        k = self.n_classes
        both = self(np.concatenate([m + 1, m]),
                    np.concatenate([s, s + np.eye(k, dtype=np.int64)[r]]), np.concatenate([r, r]))
        ahead, right = both[: r.size], both[r.size:]
        others = (ahead - self.p_right * right) / self.p_other
        return np.clip(others - (k - 1) * right, 0.0, k - 1.0)

    def _evaluate(self, m: np.ndarray, leads: np.ndarray) -> np.ndarray:
        top = int(m.max())
        if top > MAX_EXACT_VOTES:
            raise ValueError(f"exact potentials support at most {MAX_EXACT_VOTES} votes to go, "
                             f"got m={top}; use MonteCarloPotentials")
        n_states, others = leads.shape
        # Runs of equal leads: distinct values (padded with m + 1, never binding) and counts.
        starts = np.ones(leads.shape, dtype=bool)
        starts[:, 1:] = leads[:, 1:] != leads[:, :-1]
        group = (np.cumsum(starts, axis=1) - 1).ravel()
        rows = np.repeat(np.arange(n_states), others)
        values = np.repeat(m[:, None] + 1, others, axis=1)
        values[rows, group] = leads.ravel()
        counts = np.zeros(leads.shape, dtype=np.int64)
        np.add.at(counts, (rows, group), 1)

        x = np.arange(top + 1)[None, :]
        rest = m[:, None] - x  # (S, top + 1); negative where x > m
        log_fact = _log_factorials(top)
        with np.errstate(divide="ignore", invalid="ignore"):
            weight = np.where(rest >= 0, np.exp(
                log_fact[m][:, None] - log_fact[x] - log_fact[np.maximum(rest, 0)]
                + x * math.log(self.p_right) + rest * np.log1p(-self.p_right)), 0.0)
        caps = x[..., None] + values[:, None, :] - 1  # (S, top + 1, groups)
        binding = caps < rest[..., None]  # a prefix of the groups: leads are sorted
        room = (counts[:, None, :] * np.minimum(caps, rest[..., None])).sum(-1)
        useful = (weight > _NEGLIGIBLE) & (caps[..., 0] >= 0) & (room >= rest)
        state, xs = np.nonzero(useful)
        rows = np.concatenate([rest[state, xs, None],
                               np.where(binding, caps, -1)[state, xs],
                               np.where(binding, counts[:, None, :], 0)[state, xs]], axis=1)
        rows = np.ascontiguousarray(rows.astype(np.int32))
        keys = rows.view(np.dtype((np.void, rows.shape[1] * 4))).ravel()
        memo = self._capped
        capped = np.fromiter((memo.get(key, math.nan) for key in keys.tolist()), np.float64,
                             count=keys.size)
        missing = np.flatnonzero(np.isnan(capped))
        if missing.size:
            _, first, inverse = np.unique(keys[missing], return_index=True, return_inverse=True)
            new = rows[missing[first]].astype(np.int64)
            values = _capped_probabilities(new[:, 0], new[:, 1:others + 1], new[:, others + 1:],
                                           others)
            memo.update(zip(keys[missing[first]].tolist(), values.tolist(), strict=True))
            capped[missing] = values[inverse.reshape(-1)]
        wins = np.bincount(state, weights=weight[state, xs] * capped, minlength=n_states)
        return np.clip(1.0 - wins, 0.0, 1.0)


class MonteCarloPotentials(Potentials):
    """Monte-Carlo potentials, as in the paper's experiments (App. E: "we estimated the
    potential functions by Monte Carlo simulations"; the number of draws is not given).

    For each ``m`` a bank of ``n_samples`` draws of ``m`` votes from ``u_γ^r`` is generated once
    (seeded by ``(seed, m)``); ``φ̂_m^r(s)`` is the fraction of draws after which ``r`` does not
    strictly win. The same bank serves every state (common random numbers), with the sorted leads
    matched to fixed bank columns, so ``φ̂`` is proper draw by draw and the weights of Alg. 1
    are never negative.

    Examples:
        >>> exact = ExactPotentials(n_classes=3, gamma=0.1)
        >>> mc = MonteCarloPotentials(n_classes=3, gamma=0.1, n_samples=20000, seed=0)
        >>> s, r = [[2, 1, 0]], [0]
        >>> bool(abs(exact([6], s, r)[0] - mc([6], s, r)[0]) < 0.02)
        True
    """

    def __init__(self, n_classes: int, gamma: float, n_samples: int = 1000, seed: int = 0,
                 ) -> None:
        super().__init__(n_classes, gamma)
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        self.n_samples = int(n_samples)
        self.seed = int(seed)
        self._banks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_classes={self.n_classes}, gamma={self.gamma}, "
                f"n_samples={self.n_samples}, seed={self.seed})")

    def _bank(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Votes for ``r`` ``(M,)`` and for the other labels ``(M, k − 1)`` after ``m`` draws."""
        if m not in self._banks:
            probs = np.full(self.n_classes, self.p_other)
            probs[0] = self.p_right
            draws = np.random.default_rng((self.seed, m)).multinomial(
                m, probs / probs.sum(), size=self.n_samples)
            self._banks[m] = (draws[:, 0], draws[:, 1:])
        return self._banks[m]

    def _evaluate(self, m: np.ndarray, leads: np.ndarray) -> np.ndarray:
        out = np.empty(leads.shape[0])
        for votes in np.unique(m).tolist():
            right, others = self._bank(votes)
            gain = others - right[:, None]  # how much each other label gains on r, (M, k − 1)
            rows = np.flatnonzero(m == votes)
            chunk = max(1, 4_000_000 // gain.size)
            for start in range(0, rows.size, chunk):
                part = rows[start:start + chunk]
                out[part] = (gain[None] >= leads[part][:, None, :]).any(-1).mean(-1)
        return out


_TABLES: dict[int, np.ndarray] = {}


_LOG_FACTORIALS = np.zeros(1)


def _log_factorials(m: int) -> np.ndarray:
    """``log j!`` for ``j ≤ m`` (at least; one table, regrown when needed)."""
    global _LOG_FACTORIALS
    if _LOG_FACTORIALS.size <= m:
        _LOG_FACTORIALS = np.cumsum(np.log(np.maximum(np.arange(2 * m + 1), 1.0)))
    return _LOG_FACTORIALS


@lru_cache(maxsize=2048)
def _series(others: int, n: int) -> np.ndarray:
    """``[h, j] = (σh/K)^j / j!`` for ``h ≤ K = others``, ``j ≤ n``, ``σ = max(n/2, 1)``: the
    scaled factor of ``h`` bins without a cap (row 0 is the constant 1)."""
    j = np.arange(n + 1)
    h = np.arange(1, others + 1)[:, None]
    scaled = j * np.log(max(n / 2.0, 1.0) * h / others) - _log_factorials(n)[: n + 1]
    return np.vstack([j[None, :] == 0, np.exp(scaled)])


def _capped_probabilities(n: np.ndarray, caps: np.ndarray, counts: np.ndarray, others: int,
                          ) -> np.ndarray:
    """``V_n(c)`` for a batch: the probability that ``n`` votes spread uniformly over ``others``
    bins leave each binding group ``g`` (``counts[g]`` bins, zero for padding) with at most
    ``caps[g]`` votes per bin; other bins are free. Computed as
    ``n! [z^n] e^{free·z/K} Π_g E_{c_g}(z)^{h_g}`` with ``z`` scaled by ``σ = max(n/2, 1)``,
    so the coefficients ``(σh/K)^j / j!`` stay inside float64 for ``n ≤``
    :data:`MAX_EXACT_VOTES`. Each product keeps only the degrees it can reach (``≤ h·c``)."""
    tables = _cap_tables(others, int(n.max()))
    log_fact = _log_factorials(int(n.max()))
    out = np.empty(n.size)
    for row, (votes, cap_row, count_row) in enumerate(zip(n.tolist(), caps.tolist(),
                                                          counts.tolist(), strict=True)):
        series = _series(others, votes)
        poly = series[others - sum(count_row)]
        for cap, count in zip(cap_row, count_row, strict=True):
            if count:
                top = min(count * cap, votes) + 1
                poly = np.convolve(poly, series[count, :top] * tables[count, cap + 1, :top])
                poly = poly[: votes + 1]
        out[row] = poly[votes] * math.exp(log_fact[votes] - votes * math.log(max(votes / 2, 1)))
    return out


def _cap_tables(others: int, m: int) -> np.ndarray:
    """``tables[h, c + 1, j] = P(each of h uniform bins holds ≤ c balls | j balls)`` for
    ``1 ≤ h ≤ others`` and at least ``−1 ≤ c ≤ m``, ``j ≤ m`` (binomial splitting, one bin at a
    time); ``tables[0] = 1``.

    Entries do not depend on the table size, so one table per ``others`` is kept and regrown
    (doubling) when a larger ``m`` is asked for.
    """
    known = _TABLES.get(others)
    if known is not None and known.shape[2] > m:
        return known
    size = max(m, 2 * (known.shape[2] - 1) if known is not None else m, 16)
    caps = np.arange(-1, size + 1)
    j = np.arange(size + 1)
    log_fact = _log_factorials(size)[: size + 1]
    tables = np.ones((others + 1, size + 2, size + 1))
    tables[1] = j[None, :] <= caps[:, None]
    gap = np.maximum(j[None, :] - j[:, None], 0)
    for h in range(2, others + 1):
        # P(one given bin gets a of the j balls) = Binom(j, 1/h; a), arranged [a, j].
        log_split = (log_fact[j][None, :] - log_fact[j][:, None] - log_fact[gap]
                     + j[:, None] * math.log(1.0 / h) + gap * math.log(1.0 - 1.0 / h))
        split = np.where(j[:, None] <= j[None, :], np.exp(log_split), 0.0)
        table = np.zeros((size + 2, size + 1))
        for a in range(size + 1):
            allowed = (caps >= a)[:, None]
            table[:, a:] += allowed * split[a, a:][None, :] * tables[h - 1][:, : size + 1 - a]
        tables[h] = table
    _TABLES[others] = tables
    return tables
