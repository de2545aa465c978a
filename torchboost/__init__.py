"""torchboost — deep online boosting in PyTorch.

Boost ``nn.Module`` weak learners over a data stream in one pass: Streaming Gradient Boosting
(Hu et al. 2017), Online Gradient Boosting (Beygelzimer et al. 2015), and a stagewise batch
gradient-boosting baseline with the same learners and honest compute accounting.
"""

from torchboost import chaining, distributed, losses, multiclass
from torchboost.boosters import (
    OGB,
    SGB,
    Booster,
    ConvexHullOGB,
    ResidualSGB,
    SingleLearner,
    StagewiseGB,
)
from torchboost.boosters.guards import DivergenceError
from torchboost.boosters.stall import BoostingStallWarning
from torchboost.chaining import (
    ChainingTree,
    KTCoinBetting,
    LocAdaBoost,
    MLProd,
    ProjectedOGD,
    StepwiseOGB,
)
from torchboost.learners import (
    BoundedOutput,
    ConvNet,
    ResidualNet,
    StumpRegressor,
    TwoLayerNet,
    WeakLearners,
    cosine_schedule,
    decay_schedule,
)
from torchboost.multiclass import AdaboostOLM, OnlineMBBM, OzaBoost
from torchboost.projections import Ball, Box

__version__ = "0.1.0"

__all__ = [
    "OGB",
    "SGB",
    "AdaboostOLM",
    "Ball",
    "Booster",
    "BoostingStallWarning",
    "BoundedOutput",
    "Box",
    "ChainingTree",
    "ConvNet",
    "ConvexHullOGB",
    "DivergenceError",
    "KTCoinBetting",
    "LocAdaBoost",
    "MLProd",
    "OnlineMBBM",
    "OzaBoost",
    "ProjectedOGD",
    "ResidualNet",
    "ResidualSGB",
    "SingleLearner",
    "StagewiseGB",
    "StepwiseOGB",
    "StumpRegressor",
    "TwoLayerNet",
    "WeakLearners",
    "chaining",
    "cosine_schedule",
    "decay_schedule",
    "distributed",
    "losses",
    "multiclass",
]
