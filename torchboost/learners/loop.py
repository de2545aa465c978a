"""Per-learner execution path: a plain loop over N (possibly heterogeneous) modules."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from torchboost.learners.chained import ChainStep, chain
from torchboost.learners.optimizers import OptimizerSpec

__all__ = ["LoopEngine"]


class LoopEngine(nn.Module):
    """Runs N modules one after another, each with its own optimizer instance.

    This is the reference path: any ``nn.Module`` works (different architectures, BatchNorm with
    running statistics, modules with internal state). :class:`~torchboost.learners.StackedEngine`
    computes the same thing in one batched call when the modules are homogeneous.

    With ``chained=True`` the modules are chained learners
    (:mod:`~torchboost.learners.chained`): each gets the previous one's detached features.
    """

    def __init__(self, modules: Sequence[nn.Module], optimizer: OptimizerSpec,
                 chained: bool = False) -> None:
        super().__init__()
        self.modules_ = nn.ModuleList(modules)
        self.optimizers = [optimizer.build(m.parameters()) for m in self.modules_]
        self.chained = chained

    def __len__(self) -> int:
        return len(self.modules_)

    def forward(self, x: Tensor, n_learners: int) -> list[Tensor]:
        """Raw outputs of the first ``n_learners`` modules, in order (chained: each with the
        previous one's detached features)."""
        if self.chained:
            return chain(self.step(x), n_learners)[0]
        return [module(x) for module in self.modules_[:n_learners]]

    def step(self, x: Tensor) -> ChainStep:
        """Chained learner ``i`` on ``x`` with a carry: ``(output, features)``."""
        return lambda i, carry: self.modules_[i](x, carry)

    def forward_one(self, index: int, x: Tensor, carry: Tensor | None = None) -> Tensor:
        """Module ``index``'s output (chained: given its ``carry``)."""
        if self.chained:
            return self.modules_[index](x, carry)[0]
        return self.modules_[index](x)

    def zero_grad(self) -> None:
        for param in self.modules_.parameters():
            param.grad = None

    def optimizer_step(self, index: int | None = None) -> None:
        """Step every learner's optimizer (or only learner ``index``'s)."""
        chosen = self.optimizers if index is None else [self.optimizers[index]]
        for opt in chosen:
            opt.step()

    def learner(self, index: int) -> nn.Module:
        return self.modules_[index]

    def learner_state(self, index: int) -> dict[str, Tensor]:
        return {k: v.detach() for k, v in self.modules_[index].state_dict().items()}

    def optimizer_states(self) -> list[dict]:
        return [opt.state_dict() for opt in self.optimizers]

    def load_optimizer_states(self, states: list[dict]) -> None:
        if len(states) != len(self.optimizers):
            raise ValueError(f"expected {len(self.optimizers)} optimizer states, got {len(states)}")
        for opt, state in zip(self.optimizers, states, strict=True):
            opt.load_state_dict(state)

    @torch.no_grad()
    def set_learner_state(self, index: int, state: dict[str, Tensor]) -> None:
        self.modules_[index].load_state_dict(state)
