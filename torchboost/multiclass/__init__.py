"""Online multiclass boosting (Jung, Goetz & Tewari 2017, "Online Multiclass Boosting",
NeurIPS 2017) with neural weak learners.

* :class:`OnlineMBBM` — the optimal booster (Alg. 1), cost matrices from the potentials of the
  multiclass 0-1 loss (:class:`ExactPotentials` or :class:`MonteCarloPotentials`);
* :class:`AdaboostOLM` — the adaptive booster (Alg. 2) with the logistic, exponential or
  squared-hinge surrogate (:mod:`~torchboost.multiclass.cost_matrices`) and Hedge over experts;
* :class:`OzaBoost` — Oza & Russell's online boosting, the paper's "OLB" baseline.

Weak learners are ``nn.Module`` classifiers with ``k`` logits in one
:class:`~torchboost.learners.WeakLearners` container; how they use cost matrices and importance
weights is in :mod:`~torchboost.multiclass.weak_classifiers`.

Examples:
    >>> import torch
    >>> from torch import nn
    >>> _ = torch.manual_seed(0)
    >>> booster = AdaboostOLM(lambda: nn.Linear(2, 3), n_classes=3, n_learners=4)
    >>> x = torch.randn(64, 2)
    >>> y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()  # labels 0, 1, 2
    >>> scores = torch.cat([booster.learn(x[i:i + 1], y[i:i + 1]) for i in range(64)])
    >>> scores.shape, booster.samples_seen, booster.compute_units  # 3 units per learner
    (torch.Size([64, 3]), 64, 768)
    >>> booster.predict_label(x).shape
    torch.Size([64])
"""

from torchboost.multiclass.adaboost_olm import AdaboostOLM
from torchboost.multiclass.base import MulticlassBooster, StateUpdates
from torchboost.multiclass.cost_matrices import (
    ExponentialCost,
    LogisticCost,
    SquaredHingeCost,
    SurrogateCost,
    get_surrogate,
    mbbm_cost_matrix,
)
from torchboost.multiclass.hedge import Hedge
from torchboost.multiclass.mbbm import OnlineMBBM
from torchboost.multiclass.oza import OzaBoost
from torchboost.multiclass.potentials import (
    MAX_EXACT_VOTES,
    ExactPotentials,
    MonteCarloPotentials,
    Potentials,
)
from torchboost.multiclass.weak_classifiers import (
    PredictionRule,
    TrainingRule,
    cross_entropy_gradient,
    importance_targets,
    predict_labels,
)

__all__ = [
    "MAX_EXACT_VOTES",
    "AdaboostOLM",
    "ExactPotentials",
    "ExponentialCost",
    "Hedge",
    "LogisticCost",
    "MonteCarloPotentials",
    "MulticlassBooster",
    "OnlineMBBM",
    "OzaBoost",
    "Potentials",
    "PredictionRule",
    "SquaredHingeCost",
    "StateUpdates",
    "SurrogateCost",
    "TrainingRule",
    "cross_entropy_gradient",
    "get_surrogate",
    "importance_targets",
    "mbbm_cost_matrix",
    "predict_labels",
]
