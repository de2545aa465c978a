"""Weak-learner containers and ready-made weak-learner modules."""

from torchboost.learners.chained import ChainedSequential, chainable
from torchboost.learners.cocob import COCOBBackprop
from torchboost.learners.loop import LoopEngine
from torchboost.learners.modules import BoundedOutput, ConvNet, ResidualNet, TwoLayerNet
from torchboost.learners.optimizers import (
    ELEMENTWISE_OPTIMIZERS,
    PER_LEARNER_OPTIMIZERS,
    OptimizerSpec,
)
from torchboost.learners.prodigy import Prodigy
from torchboost.learners.schedules import cosine_schedule, decay_schedule
from torchboost.learners.stacked import StackedEngine
from torchboost.learners.stumps import StumpRegressor
from torchboost.learners.weak_learners import LearnerSource, WeakLearners

__all__ = [
    "ELEMENTWISE_OPTIMIZERS",
    "PER_LEARNER_OPTIMIZERS",
    "BoundedOutput",
    "COCOBBackprop",
    "ChainedSequential",
    "ConvNet",
    "LearnerSource",
    "LoopEngine",
    "OptimizerSpec",
    "Prodigy",
    "ResidualNet",
    "StackedEngine",
    "StumpRegressor",
    "TwoLayerNet",
    "WeakLearners",
    "chainable",
    "cosine_schedule",
    "decay_schedule",
]
