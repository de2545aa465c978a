"""torchboost — deep online boosting in PyTorch.

Boost ``nn.Module`` weak learners over a data stream in one pass: Streaming Gradient Boosting
(Hu et al. 2017), Online Gradient Boosting (Beygelzimer et al. 2015), and a stagewise batch
gradient-boosting baseline with the same learners and honest compute accounting.
"""

from torchboost import losses
from torchboost.boosters import (
    OGB,
    SGB,
    Booster,
    ConvexHullOGB,
    ResidualSGB,
    SingleLearner,
    StagewiseGB,
)
from torchboost.learners import BoundedOutput, ConvNet, TwoLayerNet, WeakLearners
from torchboost.projections import Ball, Box

__version__ = "0.1.0"

__all__ = [
    "OGB",
    "SGB",
    "Ball",
    "Booster",
    "BoundedOutput",
    "Box",
    "ConvNet",
    "ConvexHullOGB",
    "ResidualSGB",
    "SingleLearner",
    "StagewiseGB",
    "TwoLayerNet",
    "WeakLearners",
    "losses",
]
