"""Parameter-free online gradient boosting over chaining trees, and LocAdaBoost.

Liautaud, Gaillard & Wintenberger, "Minimax Adaptive Boosting for Online Nonparametric
Regression": Alg. 1 (stepwise online gradient boosting, :class:`StepwiseOGB`) applied to the
nodes of a chaining tree (Definition 1, :class:`ChainingTree`) with a parameter-free per-node
``grad-step`` (Assumption 1: :class:`KTCoinBetting`; tuned alternative :class:`ProjectedOGD`), and
Alg. 2 (:class:`LocAdaBoost`), which aggregates chaining trees rooted at the nodes of a core tree
with ML-Prod over sleeping experts (:class:`MLProd`). Batch semantics: :mod:`.rounds`.
"""

from torchboost.chaining.coin_betting import KTCoinBetting, default_gradient_bound
from torchboost.chaining.follow_the_leader import FollowTheLeaderRoots
from torchboost.chaining.grad_step import GradStep
from torchboost.chaining.lazy_table import LazyTable
from torchboost.chaining.loc_adaboost import LocAdaBoost
from torchboost.chaining.ml_prod import MLProd
from torchboost.chaining.ogd import ProjectedOGD
from torchboost.chaining.partition import DyadicPartition, default_depth
from torchboost.chaining.stepwise_ogb import OnlineLearner, StepwiseOGB
from torchboost.chaining.streaming import ChainingBooster
from torchboost.chaining.tree import ChainingTree, chaining_coefficients

__all__ = [
    "ChainingBooster",
    "ChainingTree",
    "DyadicPartition",
    "FollowTheLeaderRoots",
    "GradStep",
    "KTCoinBetting",
    "LazyTable",
    "LocAdaBoost",
    "MLProd",
    "OnlineLearner",
    "ProjectedOGD",
    "StepwiseOGB",
    "chaining_coefficients",
    "default_depth",
    "default_gradient_bound",
]
