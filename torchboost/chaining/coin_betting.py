"""Krichevsky–Trofimov coin betting: the parameter-free ``grad-step`` of Assumption 1.

Orabona & Pál (2016, "Coin betting and parameter-free online learning") turn a bettor on the
coins ``c_t = −g_t / G ∈ [−1, 1]`` into an online linear optimiser. With the KT bettor each node
keeps its wealth ``W`` (initially ``ε₀ > 0``), the sum ``S`` of its coins and their number ``τ``:

* play ``θ_{n,t} = θ_{n,1} + β W`` with the betting fraction ``β = S / (τ + 1)``;
* after ``g``: ``W ← W + c β W``, ``S ← S + c``, ``τ ← τ + 1``.

Since ``|β| ≤ τ / (τ + 1) < 1`` and ``|c| ≤ 1``, ``W`` is multiplied by ``1 + cβ > 0``: the wealth
never becomes negative, whatever the gradients. The regret against any ``θ`` is of order
``G(ε₀ + |θ − θ_{n,1}| √(τ log(1 + |θ − θ_{n,1}| τ / ε₀)))``: Assumption 1 of Liautaud et al.
with a logarithmic ``C₁`` and an additive ``G ε₀``, with no step size to tune. The initial wealth
of a node is ``ε₀ = initial_wealth × 2^{−d(depth(n) − 1)}`` (its share of the root's volume), so
each level of a chaining tree starts with ``initial_wealth`` in total and the additive terms sum to
``G × initial_wealth × depth`` (the implementer's digest, Sec. 2.2).
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchboost.chaining.grad_step import GradStep, GradStepSpec
from torchboost.losses import Loss, SquaredLoss

__all__ = ["KTCoinBetting", "build_grad_step", "default_gradient_bound"]


class KTCoinBetting(GradStep):
    """Per-node Krichevsky–Trofimov coin betting (see the module docstring).

    Args:
        gradient_bound: ``G``; coins are ``c = −g / G`` after clipping ``g`` to ``[−G, G]``.
        initial_wealth: ``ε₀`` of a root node; a node at depth ``m`` starts with
            ``initial_wealth × 2^{−d(m − 1)}``.

    Examples:
        >>> import torch
        >>> kt = KTCoinBetting(gradient_bound=1.0, initial_wealth=1.0)
        >>> node, one = torch.tensor([0]), torch.ones(1)
        >>> for _ in range(3):  # the gradient keeps saying "increase θ"
        ...     kt.step(node, -one, initial=0 * one, volume=one, diameter=one)
        ...     print(round(float(kt.theta(node)), 4))
        0.5
        1.0
        1.875
    """

    def __init__(self, gradient_bound: float, initial_wealth: float = 1.0) -> None:
        if not initial_wealth > 0:
            raise ValueError(f"initial_wealth must be > 0, got {initial_wealth}")
        super().__init__(gradient_bound, ["wealth", "coin_sum", "count"])
        self.initial_wealth = float(initial_wealth)

    def initialize(self, rows: Tensor, initial: Tensor, volume: Tensor, diameter: Tensor) -> None:
        zero = torch.zeros_like(initial)
        self.data[rows] = torch.stack([initial, initial, self.initial_wealth * volume, zero, zero],
                                      1)

    def update(self, rows: Tensor, grad: Tensor) -> None:
        theta0, _, wealth, coin_sum, count = self.data[rows].unbind(1)
        coin = -grad / self.gradient_bound
        wealth = wealth * (1.0 + coin * coin_sum / (count + 1.0))  # W + c·(bet), bet = βW
        coin_sum, count = coin_sum + coin, count + 1.0
        theta = theta0 + coin_sum / (count + 1.0) * wealth
        self.data[rows] = torch.stack([theta0, theta, wealth, coin_sum, count], 1)

    def extra_repr(self) -> str:
        return f"G={self.gradient_bound}, initial_wealth={self.initial_wealth}, nodes={len(self)}"


def default_gradient_bound(loss: Loss, bound: float) -> float:
    """``G`` for predictions and labels in ``[−B, B]``: ``2B`` for the squared loss
    ``½(ŷ − y)²``, the loss's own Lipschitz constant otherwise (1 for the absolute loss)."""
    if not bound > 0:
        raise ValueError(f"bound B must be > 0, got {bound}")
    if isinstance(loss, SquaredLoss):
        return 2.0 * bound
    try:
        return loss.lipschitz(bound)
    except NotImplementedError:
        raise ValueError(f"no gradient bound known for {loss!r}; pass a GradStep with "
                         "gradient_bound") from None


def build_grad_step(spec: GradStepSpec, loss: Loss, bound: float) -> GradStep:
    """The grad-step of a learner: ``"kt"`` → :class:`KTCoinBetting` with ``G`` from
    :func:`default_gradient_bound` and root wealth ``ε₀ = B`` (wealth is in the units of ``θ``,
    whose scale is ``B``), or a given, still empty, :class:`GradStep`."""
    if isinstance(spec, GradStep):
        if len(spec):
            raise ValueError("the GradStep already holds node state; pass a fresh one")
        return spec
    if spec == "kt":
        return KTCoinBetting(default_gradient_bound(loss, bound), initial_wealth=bound)
    raise ValueError(f"grad_step must be 'kt' or a GradStep instance, got {spec!r}")
