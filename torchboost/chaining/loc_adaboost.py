"""LocAdaBoost: locally adaptive boosting over a core tree of chaining trees (Alg. 2, Sec. 3.3).

Liautaud et al. place experts in the nodes of a core tree ``T₀`` (the same regular ``2^d``-ary
partition of ``X``): node ``n`` carries ``K`` experts ``(n, k)``, each a chaining tree ``T_{n,k}``
rooted at ``X_n`` whose root starts at ``γ_k ∈ Γ = {−B + (k − 1)ε}`` (``ε = T^{−1/2}``,
``K = ⌈2B/ε⌉``) and whose other nodes start at 0. At round ``t``:

1. the awake experts are those of the ``depth(T₀)`` core nodes on the path of ``x_t`` (lines 2–3);
2. the prediction is ``f̂_t(x_t) = Σ w_{n,k,t} f̂_{n,k,t}(x_t)``, the sleeping renormalisation
   (eq. 9) of ML-Prod's weights (:class:`~torchboost.chaining.MLProd`) over the awake experts, of
   their clipped predictions ``f̂_{n,k} = [f̃_{n,k}]_B`` — so ``|f̂_t| ≤ B`` (lines 4–5);
3. the weights are updated with the gradient ``g̃`` of eq. 32 (line 7): awake experts get
   ``ℓ'_t(f̂_t) f̂_{n,k,t}``, sleeping ones ``ℓ'_t(f̂_t) f̂_t``, i.e. zero linearised regret (eq. 33);
4. every awake expert's tree is boosted as in Sec. 3.2 with the gradient of the loss at its **own
   unclipped** prediction, ``g_{n,k,t} = ℓ'_t(f̃_{n,k,t}(x_t))`` (lines 8–12; sleeping experts
   have zero gradients and are skipped).

Theorem 2 then bounds the regret against any Hölder ``f`` by an infimum over prunings of ``T₀``
that adapts to the local Hölder constants of ``f`` and to the curvature of the loss: for ``d = 1``,
``α = 1``, ``O(L^{2/3} T^{1/3})`` for exp-concave losses (the squared loss) and ``O(√(LT))`` for
convex ones (Corollary 1).

``roots="ftl"`` is the variant of the paper's experiments (Appendix F): one expert per core node
whose root plays Follow the Leader (:class:`~torchboost.chaining.FollowTheLeaderRoots`) instead of
``K`` grid values; ``roots="grid"`` is the algorithm of the theorems.

Depths (the digest's resolution of the paper's integer depths): the core tree has
``core_depth`` levels (default ``⌈log2(T)/d⌉``) and every expert's tree stops at the absolute depth
``depth`` (default ``⌈log2(T)/d⌉``), so the tree of a core node at level ``l`` has ``depth − l``
levels — the depth ``(1/d) log2 |T_n|`` its proof tunes when the ``|T_n| ≈ T 2^{−dl}`` points of
``X_n`` are spread evenly. All trees and weights are stored lazily; a round costs
``O(K · core_depth · depth)`` node updates. See :mod:`~torchboost.chaining.rounds` for batches.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from torchboost.atomic_load import AtomicLoad
from torchboost.chaining.coin_betting import build_grad_step
from torchboost.chaining.follow_the_leader import FollowTheLeaderRoots
from torchboost.chaining.grad_step import GradStepSpec
from torchboost.chaining.ml_prod import MLProd
from torchboost.chaining.partition import Domain, DyadicPartition
from torchboost.chaining.rounds import (
    check_labels,
    check_n_streams,
    check_streams,
    round_weights,
    scalar_loss,
)
from torchboost.losses import Loss

__all__ = ["LocAdaBoost", "Roots"]

#: ``"ftl"``: one expert per core node with a Follow-the-Leader root (Appendix F);
#: ``"grid"``: ``K = ⌈2B/ε⌉`` experts per core node with roots ``γ_k`` (Alg. 2, Theorem 2).
Roots = Literal["ftl", "grid"]

_MAX_KEY = 2**63 - 1


class LocAdaBoost(AtomicLoad, nn.Module):
    """Alg. 2 of Liautaud et al. (see the module docstring).

    Args:
        domain: the box ``X`` as ``(low, high)`` (see :class:`~torchboost.chaining.ChainingTree`);
            inputs outside it raise ``ValueError``.
        horizon: the number of rounds ``T`` (default depths, grid step ``ε = T^{−1/2}``).
        depth: absolute depth of the experts' trees (levels, root of ``X`` included).
        core_depth: levels of the core tree ``T₀`` (``≤ depth``; default ``depth``).
        dim: dimension when ``domain`` is given by two numbers.
        loss: single-output loss or its name.
        bound: ``B``: expert predictions are clipped to ``[−B, B]``, so is the output; it also
            sets the gradient bound ``G``.
        roots: ``"ftl"`` (Appendix F, default) or ``"grid"`` (:data:`Roots`).
        grid_step: ``ε`` of the grid ``Γ`` (default ``T^{−1/2}``).
        grad_step: the experts' per-node step: ``"kt"`` or a fresh
            :class:`~torchboost.chaining.GradStep`.
        n_streams: independent learners run in lockstep (:mod:`~torchboost.chaining.rounds`).

    Examples:
        >>> import torch
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = LocAdaBoost(domain=(0.0, 1.0), horizon=500, bound=8.0)
        >>> model.core_depth, model.n_experts
        (9, 511)
        >>> f = lambda x: torch.sin(10 * x) + torch.cos(5 * x) + 5
        >>> for _ in range(500):
        ...     x = torch.rand(1, 1)
        ...     _ = model.learn(x, f(x) + 0.5 * torch.randn(1, 1))
        >>> x = torch.tensor([[0.1], [0.5], [0.9]])
        >>> bool((model.predict(x) - f(x)).abs().max() < 1.0)
        True
    """

    def __init__(self, domain: Domain, horizon: int | None = None, *, depth: int | None = None,
                 core_depth: int | None = None, dim: int | None = None,
                 loss: str | Loss = "squared", bound: float = 1.0, roots: Roots = "ftl",
                 grid_step: float | None = None, grad_step: GradStepSpec = "kt",
                 n_streams: int = 1) -> None:
        super().__init__()
        self.partition = DyadicPartition(domain, depth, horizon=horizon, dim=dim)
        self.core_depth = self.partition.depth if core_depth is None else core_depth
        if not isinstance(self.core_depth, int) or not 1 <= self.core_depth <= self.depth:
            raise ValueError(f"core_depth must be an integer in [1, depth={self.depth}], got "
                             f"{core_depth!r}")
        self.loss = scalar_loss(loss)
        self.bound = float(bound)
        self.grad_step = build_grad_step(grad_step, self.loss, self.bound)
        self.n_streams = check_n_streams(n_streams)
        self.roots: Roots = roots
        self.register_buffer("grid", self._root_grid(roots, grid_step, horizon), persistent=False)
        self.leaders = FollowTheLeaderRoots(self.loss, self.bound) if roots == "ftl" else None
        #: number of core nodes and of experts (per stream)
        self.n_core = self.partition.offsets[self.core_depth]
        self.n_experts = self.n_roots * self.n_core
        if n_streams * self.n_roots * self.core_depth * self.partition.n_nodes > _MAX_KEY:
            raise ValueError("streams × grid × core depth × nodes overflows the int64 node keys")
        self.aggregator = MLProd(self.n_experts)
        self._register_pairs()

    # --- construction --------------------------------------------------------------------------
    def _root_grid(self, roots: str, grid_step: float | None, horizon: int | None) -> Tensor:
        """``Γ = {−B + (k − 1)ε}`` (``K = ⌈2B/ε⌉``), or ``[0]`` for Follow-the-Leader roots."""
        if roots == "ftl":
            return torch.zeros(1, dtype=torch.float64)
        if roots != "grid":
            raise ValueError(f"roots must be 'ftl' or 'grid', got {roots!r}")
        if grid_step is None:
            if horizon is None:
                raise ValueError("grid roots need the horizon T (ε = T^-1/2) or a grid_step")
            grid_step = horizon**-0.5
        if not grid_step > 0:
            raise ValueError(f"grid_step must be > 0, got {grid_step}")
        n_roots = math.ceil(2.0 * self.bound / grid_step)
        return -self.bound + grid_step * torch.arange(n_roots, dtype=torch.float64)

    def _register_pairs(self) -> None:
        """The nodes of the experts' trees on a path, as (core level ``a``, level ``l ≥ a``)
        pairs; the roots (``l = a``) are trained only with grid roots."""
        first = 1 if self.roots == "ftl" else 0
        pairs = torch.tensor([(a, level) for a in range(self.core_depth)
                              for level in range(a + first, self.depth)], dtype=torch.long)
        core, level = pairs.reshape(-1, 2).unbind(1)
        relative = (level - core).double()
        self.register_buffer("pair_core", core, persistent=False)
        self.register_buffer("pair_level", level, persistent=False)
        self.register_buffer("pair_volume", torch.exp2(-self.dim * relative), persistent=False)
        self.register_buffer("pair_diameter", self.partition.diameter * torch.exp2(-level.double()),
                             persistent=False)
        # θ_{n,1}: γ_k at a root (grid roots), 0 elsewhere; shape (pairs, K)
        initial = torch.where((relative == 0)[:, None], self.grid[None, :], 0.0)
        self.register_buffer("pair_initial", initial, persistent=False)

    # --- properties ----------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        return self.partition.depth

    @property
    def dim(self) -> int:
        return self.partition.dim

    @property
    def n_roots(self) -> int:
        """``K``, the number of experts per core node."""
        return self.grid.numel()

    @property
    def gradient_bound(self) -> float:
        return self.grad_step.gradient_bound

    # --- public API ----------------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, x: Tensor, stream: Tensor | None = None) -> Tensor:
        """``f̂_t(x)`` (Alg. 2 line 5), ``(B, 1)`` in ``[−B, B]``."""
        x = self.partition.check(x)
        streams = check_streams(stream, x.shape[0], self.n_streams, x.device)
        return self._forward(x, streams)[0].to(x.dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.predict(x)

    @torch.no_grad()
    def learn(self, x: Tensor, y: Tensor, stream: Tensor | None = None) -> Tensor:
        """One round per stream of Alg. 2; returns the prediction made before the update,
        ``(B, 1)``. Bad input raises ``ValueError`` and leaves the model unchanged."""
        x = self.partition.check(x)
        streams = check_streams(stream, x.shape[0], self.n_streams, x.device)
        z = check_labels(self.loss, y, x.shape[0], x.device).to(torch.float64)
        prediction, cache = self._forward(x, streams)
        core_keys, node_keys, rows, raw, clipped, expert_keys = cache
        batch, bound = x.shape[0], self.gradient_bound
        weights, distinct = round_weights(streams, self.n_streams)
        # Line 7, eqs. 32-33: linearised regrets r = ℓ'(f̂)(f̂ − f̂_{n,k}) of the awake experts.
        grad = self.loss.gradient(prediction, z).reshape(batch).clamp(-bound, bound) * weights
        self.aggregator.update(expert_keys.reshape(-1),
                               (grad[:, None] * (prediction - clipped)).reshape(-1), distinct)
        # Lines 8-12: boost each awake expert's tree on ℓ' at its own unclipped prediction.
        own = self.loss.gradient(raw.reshape(batch, -1).T[..., None], z)[..., 0].T
        own = own.clamp(-bound, bound).reshape(raw.shape) * weights[:, None, None]
        shape = node_keys.shape
        self.grad_step.step(node_keys.reshape(-1), own[:, self.pair_core].reshape(-1),
                            initial=self.pair_initial.expand(shape).reshape(-1),
                            volume=self.pair_volume[:, None].expand(shape).reshape(-1),
                            diameter=self.pair_diameter[:, None].expand(shape).reshape(-1),
                            rows=rows.reshape(-1) if distinct else None)
        if self.leaders is not None:
            self.leaders.add(core_keys.reshape(-1), z.repeat_interleave(self.core_depth, 0),
                             weights.repeat_interleave(self.core_depth), distinct)
        return prediction.to(x.dtype)

    # --- internals ------------------------------------------------------------------------------
    def _forward(self, x: Tensor, streams: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
        """Prediction ``(B, 1)`` float64 and what the update needs."""
        ids = self.partition.path(x)
        n_roots, core_depth, batch = self.n_roots, self.core_depth, x.shape[0]
        k = torch.arange(n_roots, device=x.device)
        # Tree of expert (core level a, k) of a stream: ((stream·K + k)·core_depth + a); its node
        # at absolute level l is keyed by tree·n_nodes + (id of the cell of x at level l).
        trees = ((streams[:, None] * n_roots + k) * core_depth)[:, None, :]
        trees = trees + self.pair_core[None, :, None]
        node_keys = trees * self.partition.n_nodes + ids[:, self.pair_level, None]
        rows = self.grad_step.find(node_keys)
        theta = self.grad_step.theta_of_rows(rows, self.pair_initial)
        raw = theta.new_zeros(batch, core_depth, n_roots).index_add_(1, self.pair_core, theta)
        core_keys = streams[:, None] * self.n_core + ids[:, :core_depth]
        if self.leaders is not None:
            raw = raw + self.leaders.path_values(core_keys)[..., None]
        clipped = raw.clamp(-self.bound, self.bound).reshape(batch, -1)
        expert_keys = (core_keys[..., None] * n_roots + k).reshape(batch, -1)
        prediction = (self.aggregator.weights(expert_keys) * clipped).sum(1, keepdim=True)
        return prediction, (core_keys, node_keys, rows, raw, clipped, expert_keys)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, depth={self.depth}, core_depth={self.core_depth}, "
                f"roots={self.roots}, K={self.n_roots}, loss={self.loss.name}, B={self.bound}, "
                f"n_streams={self.n_streams}")
