"""Ready-made modules: the SGB paper's two-layer nets, OGB's bounded wrapper, and the residual
network that comparisons train end-to-end against an ensemble of the same size."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from torchboost.params import positive_int

__all__ = ["BoundedOutput", "ConvNet", "ResidualNet", "TwoLayerNet"]

_ACTIVATIONS: dict[str, type[nn.Module]] = {
    "sigmoid": nn.Sigmoid,
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "leaky_relu": nn.LeakyReLU,
}


class TwoLayerNet(nn.Sequential):
    """``Linear(d, hidden) → activation → Linear(hidden, m)``: the SGB paper's weak learner
    (Hu et al. 2017, Sec. 6.2, footnote 4: 1 hidden unit for ABALONE/A9A, 10 for YEAR/SLICE,
    sigmoid except leaky ReLU on SLICE).

    Examples:
        >>> TwoLayerNet(384, 10, activation="leaky_relu")(torch.zeros(2, 384)).shape
        torch.Size([2, 1])
    """

    def __init__(self, in_features: int, hidden: int, out_features: int = 1,
                 activation: str = "sigmoid") -> None:
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be in {sorted(_ACTIVATIONS)}, got {activation!r}")
        in_features = positive_int("in_features", in_features)
        hidden = positive_int("hidden", hidden)
        out_features = positive_int("out_features", out_features)
        super().__init__(
            nn.Flatten(),
            nn.Linear(in_features, hidden),
            _ACTIVATIONS[activation](),
            nn.Linear(hidden, out_features),
        )


class ConvNet(nn.Sequential):
    """``Conv2d(c, channels, kernel, stride) → activation → Linear(·, m)``: the SGB paper's MNIST
    weak learner (a 5×5 convolution, stride 2, 5 output channels; Hu et al. 2017, footnote 4).

    Examples:
        >>> ConvNet()(torch.zeros(3, 1, 28, 28)).shape
        torch.Size([3, 10])
    """

    def __init__(self, in_channels: int = 1, image_size: int = 28, out_features: int = 10,
                 channels: int = 5, kernel_size: int = 5, stride: int = 2,
                 activation: str = "sigmoid") -> None:
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be in {sorted(_ACTIVATIONS)}, got {activation!r}")
        side = (image_size - kernel_size) // stride + 1
        super().__init__(
            nn.Conv2d(in_channels, channels, kernel_size, stride=stride),
            _ACTIVATIONS[activation](),
            nn.Flatten(),
            nn.Linear(channels * side * side, out_features),
        )


class ResidualNet(nn.Module):
    """``stem → Linear(f, width) → activation → depth − 1 residual blocks → Linear(width, m)``,
    a block being ``x + activation(Linear(width, width)(x))``: the deep network a comparison
    trains end-to-end against a boosted ensemble with its parameter count
    (:meth:`~torchboost.harness.LearnerConfig.deep_factory`). ``stem`` (default: flatten) maps the
    input to ``in_features`` features, e.g. a convolution for images.

    Examples:
        >>> net = ResidualNet(8, width=6, out_features=1, depth=3)
        >>> net(torch.zeros(2, 8)).shape, sum(p.numel() for p in net.parameters())
        (torch.Size([2, 1]), 145)
    """

    def __init__(self, in_features: int, width: int, out_features: int = 1, depth: int = 3,
                 activation: str = "sigmoid", stem: nn.Module | None = None) -> None:
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be in {sorted(_ACTIVATIONS)}, got {activation!r}")
        super().__init__()
        width = positive_int("width", width)
        self.stem = stem if stem is not None else nn.Flatten()
        self.inner = nn.Linear(positive_int("in_features", in_features), width)
        self.blocks = nn.ModuleList(nn.Linear(width, width)
                                    for _ in range(positive_int("depth", depth) - 1))
        self.activation = _ACTIVATIONS[activation]()
        self.head = nn.Linear(width, positive_int("out_features", out_features))

    def forward(self, x: Tensor) -> Tensor:
        h = self.activation(self.inner(self.stem(x)))
        for block in self.blocks:
            h = h + self.activation(block(h))
        return self.head(h)


class BoundedOutput(nn.Module):
    """Wraps a module so that ``‖A(x)‖₂ ≤ bound``: ``A(x) = D·tanh(‖u‖)·u/‖u‖`` with ``u`` the
    inner output (``D·tanh(u)`` for one output). OGB needs base predictions bounded by ``D``
    (Beygelzimer et al. 2015, Sec. 3).

    Examples:
        >>> wrapped = BoundedOutput(nn.Linear(2, 1), bound=0.5)
        >>> bool(wrapped(100 * torch.randn(8, 2)).abs().max() <= 0.5)
        True
    """

    def __init__(self, module: nn.Module, bound: float = 1.0) -> None:
        super().__init__()
        if not (math.isfinite(bound) and bound > 0):
            raise ValueError(f"bound must be a finite number > 0, got {bound!r}")
        self.module = module
        self.bound = float(bound)

    def forward(self, x: Tensor) -> Tensor:
        u = self.module(x)
        if not torch.is_tensor(u):
            raise ValueError(f"the module inside BoundedOutput returns a {type(u).__name__}, not "
                             "a tensor: a learner's forward must return its scores as one "
                             "(B, m) or (B,) tensor")
        if u.ndim == 1:
            u = u.unsqueeze(-1)
        radius = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
        safe = radius.clamp_min(1e-12)
        scale = torch.where(radius > 1e-12, torch.tanh(safe) / safe, torch.ones_like(radius))
        return self.bound * u * scale

    def extra_repr(self) -> str:
        return f"bound={self.bound}"
