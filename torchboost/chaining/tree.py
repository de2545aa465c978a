"""Chaining trees trained by parameter-free online gradient boosting (Liautaud et al., Sec. 3).

A chaining tree (CT, Definition 1) over a box ``X ⊂ R^d`` is the regular ``2^d``-ary partition
tree of :class:`~torchboost.chaining.partition.DyadicPartition` whose every node ``n`` holds a weak
learner ``h_n(x) = θ_n 1{x ∈ X_n}`` (eq. 4). Unlike a decision tree it predicts with **all** its
nodes: ``f̂(x) = Σ_n θ_n 1{x ∈ X_n}``, the sum of ``θ`` along the path of ``x``. Boosting these
weak learners with Alg. 1 (``β_n = 1``) reduces, by the chain rule, to eq. 7:

    ``g_{n,t} = ℓ'_t(f̂_t(x_t)) 1{x_t ∈ X_n}``,

one scalar gradient sent to the ``depth`` nodes on the path of ``x_t``; every other node keeps its
``θ`` (eq. 5 with a zero gradient). With a ``grad-step`` satisfying Assumption 1 (coin betting by
default), ``θ_{n,1} = 0`` and ``depth = (1/d) log2 T``, Theorem 1 bounds the regret against every
``L``-Lipschitz (``α``-Hölder) function by ``O(L T^{max(1/2, 1 − α/d)})`` (``√T log T`` when
``d = 2α``) without knowing ``L`` or ``α``. The proof compares with the chaining parametrisation
of eq. 16 (:func:`chaining_coefficients`).

Nodes get state only when they first receive a non-zero gradient, so memory grows with the visited
nodes, not with ``2^{d·depth}``. See :mod:`torchboost.chaining.rounds` for what a batch means.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from torchboost.atomic_load import AtomicLoad
from torchboost.chaining.coin_betting import build_grad_step
from torchboost.chaining.grad_step import GradStepSpec
from torchboost.chaining.partition import Domain, DyadicPartition
from torchboost.chaining.rounds import (
    check_gradients,
    check_labels,
    check_n_streams,
    check_streams,
    round_weights,
    scalar_loss,
)
from torchboost.losses import Loss

__all__ = ["ChainingTree", "chaining_coefficients"]

_MAX_KEY = 2**63 - 1


def chaining_coefficients(partition: DyadicPartition, f: Callable[[Tensor], Tensor]) -> Tensor:
    """Eq. 16: ``θ_root = f(x_root)`` and ``θ_n = f(x_n) − f(x_{p(n)})``, ``x_n`` the centre of
    ``X_n``, for every node of ``partition`` (``(n_nodes,)``, float64, indexed by node id).

    Summed along a path they give ``f`` at the centre of the leaf (eq. 15), and for ``f`` in
    ``Lip^α_L`` they shrink with depth: ``|θ_n| ≤ L |X|^α 2^{−α depth(n)}`` (eq. 17).
    ``f`` maps ``(N, d)`` float64 points to ``(N,)`` or ``(N, 1)`` values.
    """
    ids = torch.arange(partition.n_nodes, device=partition.low.device)
    centers = partition.center(ids)
    values = f(centers).reshape(-1).to(torch.float64)
    parents = torch.zeros_like(ids)
    for level in range(1, partition.depth):
        span = slice(partition.offsets[level], partition.offsets[level + 1])
        parents[span] = partition.path(centers[span], levels=[level - 1])[:, 0]
    coefficients = values - values[parents]
    coefficients[0] = values[0]
    return coefficients


class ChainingTree(AtomicLoad, nn.Module):
    """A chaining tree trained online by Alg. 1 with per-node coin betting (Sec. 3.2).

    Args:
        domain: the box ``X`` as ``(low, high)``: two numbers (a cube of dimension ``dim``) or
            two length-``d`` sequences. Inputs are rescaled to ``[0, 1]^d``; an input outside
            ``X`` raises ``ValueError`` (no doubling trick).
        horizon: the number of rounds ``T``; sets ``depth = ⌈log2(T) / d⌉`` (Theorem 1).
        depth: explicit depth (levels, root included) instead of ``horizon``.
        dim: dimension when ``domain`` is given by two numbers.
        loss: a single-output :class:`~torchboost.losses.Loss` or its name (``"squared"`` is
            ``½(ŷ − y)²``, ``"absolute"`` is ``|ŷ − y|``).
        bound: ``B``, a bound on the labels; with the loss it fixes the gradient bound ``G``
            (:func:`~torchboost.chaining.coin_betting.default_gradient_bound`).
        grad_step: ``"kt"`` (:class:`~torchboost.chaining.KTCoinBetting`, parameter-free) or a
            fresh :class:`~torchboost.chaining.GradStep` such as
            :class:`~torchboost.chaining.ProjectedOGD`.
        n_streams: number of independent trees run in lockstep (see
            :mod:`~torchboost.chaining.rounds`).

    :meth:`learn` returns the prediction made before the update, so summing its loss over a
    stream is the online (progressive) loss of the regret. State, including every node, travels
    with ``state_dict()`` and ``.to(device)``.

    Examples:
        >>> import torch
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> tree = ChainingTree(domain=(0.0, 1.0), horizon=1000, bound=8.0)
        >>> tree.depth, tree.partition.n_nodes
        (10, 1023)
        >>> f = lambda x: torch.sin(10 * x) + torch.cos(5 * x) + 5
        >>> for _ in range(1000):
        ...     x = torch.rand(1, 1)
        ...     _ = tree.learn(x, f(x) + 0.5 * torch.randn(1, 1))
        >>> grid = torch.linspace(0, 1, 101)[:, None]
        >>> round(float((tree.predict(grid) - f(grid)).abs().mean()), 1)  # 5.0 at the start
        0.6
        >>> tree.n_allocated  # nodes with state, of 1023
        939

    The default ``G = 2B`` is valid for any labels in ``[−B, B]``; a tighter bound on the
    residuals (``grad_step=KTCoinBetting(G, initial_wealth=B)``, gradients beyond ``G`` are
    clipped) makes coin betting bolder: ``G = 4`` brings the error above to 0.2.
    """

    def __init__(self, domain: Domain, horizon: int | None = None, *, depth: int | None = None,
                 dim: int | None = None, loss: str | Loss = "squared", bound: float = 1.0,
                 grad_step: GradStepSpec = "kt", n_streams: int = 1) -> None:
        super().__init__()
        self.partition = DyadicPartition(domain, depth, horizon=horizon, dim=dim)
        self.loss = scalar_loss(loss)
        self.bound = float(bound)
        self.grad_step = build_grad_step(grad_step, self.loss, self.bound)
        self.n_streams = check_n_streams(n_streams)
        if n_streams * self.partition.n_nodes > _MAX_KEY:
            raise ValueError("n_streams × number of nodes overflows the int64 node keys")
        level = torch.arange(self.depth, dtype=torch.float64)
        # Per level: share of the root's volume, 2^{-d l}, and diameter |X| 2^{-l}.
        self.register_buffer("volume", torch.exp2(-self.partition.dim * level), persistent=False)
        self.register_buffer("diameter", self.partition.diameter * torch.exp2(-level),
                             persistent=False)

    @property
    def depth(self) -> int:
        return self.partition.depth

    @property
    def dim(self) -> int:
        return self.partition.dim

    @property
    def gradient_bound(self) -> float:
        """``G``: per-point gradients are clipped to ``[−G, G]`` (the grad-step's bound)."""
        return self.grad_step.gradient_bound

    @property
    def n_allocated(self) -> int:
        """Number of nodes holding state (those that have received a non-zero gradient)."""
        return len(self.grad_step)

    def path(self, x: Tensor, stream: Tensor | None = None) -> Tensor:
        """Keys of the nodes on the path of every input, ``(B, depth)``: ``stream × n_nodes +
        node id`` (node ids of :class:`~torchboost.chaining.partition.DyadicPartition`)."""
        return self._inputs(x, stream)[0]

    @torch.no_grad()
    def predict(self, x: Tensor, stream: Tensor | None = None) -> Tensor:
        """``f̂_t(x) = Σ_{n ∈ path(x)} θ_{n,t}`` (Definition 1), ``(B, 1)`` in ``x.dtype``."""
        rows = self.grad_step.find(self.path(x, stream))
        return self._predict(rows).to(x.dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.predict(x)

    @torch.no_grad()
    def update(self, x: Tensor, grad: Tensor, stream: Tensor | None = None) -> None:
        """One boosting round (Alg. 1, eqs. 5–7) given ``grad[i] = ℓ'(f̂_t(x_i))``: every node on
        the path of ``x_i`` receives ``grad[i]`` (clipped to ``[−G, G]``), averaged over the
        points of its stream (:mod:`~torchboost.chaining.rounds`). This is the weak-learner
        interface used by :class:`~torchboost.chaining.StepwiseOGB`."""
        keys, streams = self._inputs(x, stream)
        grad = check_gradients(grad, x.shape[0], x.device)
        self._step(keys, self.grad_step.find(keys), grad, streams)

    @torch.no_grad()
    def learn(self, x: Tensor, y: Tensor, stream: Tensor | None = None) -> Tensor:
        """Predict ``x`` then update on the labels ``y`` (one round per stream); returns the
        prediction made before the update, ``(B, 1)``. Bad input raises ``ValueError`` and
        leaves the tree unchanged."""
        keys, streams = self._inputs(x, stream)
        z = check_labels(self.loss, y, x.shape[0], x.device)
        rows = self.grad_step.find(keys)
        prediction = self._predict(rows).to(x.dtype)
        grad = self.loss.gradient(prediction, z.to(x.dtype)).reshape(-1)
        self._step(keys, rows, grad, streams)
        return prediction

    @torch.no_grad()
    def warm_start(self, f: Callable[[Tensor], Tensor]) -> None:
        """Set every node of every stream to ``θ_{n,1} =`` :func:`chaining_coefficients` of
        ``f`` (eq. 16), discarding learnt state: the tree then predicts ``f`` at the centre of
        the leaf of ``x``. Allocates all ``n_nodes`` nodes per stream."""
        coefficients = chaining_coefficients(self.partition, f)
        ids = torch.arange(self.partition.n_nodes, device=coefficients.device)
        level = self.partition.level(ids)
        for stream in range(self.n_streams):
            rows, _ = self.grad_step.find_or_insert(stream * self.partition.n_nodes + ids)
            self.grad_step.initialize(rows, coefficients, self.volume[level],
                                      self.diameter[level])

    # --- internals ------------------------------------------------------------------------------
    def _inputs(self, x: Tensor, stream: Tensor | None) -> tuple[Tensor, Tensor]:
        """Validated path keys ``(B, depth)`` and stream indices ``(B,)``."""
        x = self.partition.check(x)
        streams = check_streams(stream, x.shape[0], self.n_streams, x.device)
        return self.partition.path(x) + (streams * self.partition.n_nodes)[:, None], streams

    def _predict(self, rows: Tensor) -> Tensor:
        return self.grad_step.theta_of_rows(rows).sum(1, keepdim=True)

    def _step(self, keys: Tensor, rows: Tensor, grad: Tensor, streams: Tensor) -> None:
        """Eq. 7 for the round(s) of the batch: each path node gets the clipped gradient of its
        points, averaged over the points of their stream."""
        grad = grad.to(torch.float64).clamp(-self.gradient_bound, self.gradient_bound)
        weights, distinct = round_weights(streams, self.n_streams)
        shape = keys.shape
        self.grad_step.step(keys.reshape(-1), (grad * weights)[:, None].expand(shape).reshape(-1),
                            initial=self.volume.new_zeros(shape.numel()),
                            volume=self.volume.expand(shape).reshape(-1),
                            diameter=self.diameter.expand(shape).reshape(-1),
                            rows=rows.reshape(-1) if distinct else None)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, depth={self.depth}, loss={self.loss.name}, B={self.bound}, "
                f"n_streams={self.n_streams}, allocated={self.n_allocated}")
