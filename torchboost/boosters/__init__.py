"""The boosters: streaming (SGB, ResidualSGB, OGB, ConvexHullOGB) and stagewise (StagewiseGB)."""

from torchboost.boosters.base import Booster
from torchboost.boosters.convex_hull_ogb import ConvexHullOGB
from torchboost.boosters.ogb import OGB, ogb_radius
from torchboost.boosters.online_linear import OnlineLinearBooster
from torchboost.boosters.residual_sgb import ResidualSGB
from torchboost.boosters.sgb import SGB
from torchboost.boosters.single_learner import SingleLearner
from torchboost.boosters.stagewise_gb import StagewiseGB

__all__ = [
    "OGB",
    "SGB",
    "Booster",
    "ConvexHullOGB",
    "OnlineLinearBooster",
    "ResidualSGB",
    "SingleLearner",
    "StagewiseGB",
    "ogb_radius",
]
