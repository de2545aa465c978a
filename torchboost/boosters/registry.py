"""Every booster of the library, one registry entry each: its class, the task its examples
learn, and how to build one from a learner factory. The conformance checks
(:mod:`torchboost.testing`) run on every entry, and the scikit-learn / river estimators offer the
entries marked ``estimator`` as ``booster=``.

A new booster is one file (its class) and one :func:`register_booster` call, here for the
library's own boosters, or in the user's code for theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from torchboost.boosters.base import Booster
from torchboost.boosters.convex_hull_ogb import ConvexHullOGB
from torchboost.boosters.ogb import OGB
from torchboost.boosters.residual_sgb import ResidualSGB
from torchboost.boosters.sgb import SGB
from torchboost.boosters.single_learner import SingleLearner
from torchboost.boosters.stagewise_gb import StagewiseGB
from torchboost.multiclass import AdaboostOLM, OnlineMBBM, OzaBoost
from torchboost.registries import add

__all__ = ["BOOSTERS", "BoosterSpec", "register_booster"]

#: ``build(learners, n_learners=N, n_outputs=m, **options) -> Booster``
Build = Callable[..., Booster]


@dataclass(frozen=True)
class BoosterSpec:
    """One booster: its registry ``name``, its class, the ``task`` of the examples it learns
    (``"regression"``: real labels ``(B,)`` and one output; ``"classification"``: class labels
    and one score per class), ``build`` (a learner factory, ``n_learners``, ``n_outputs`` and
    options to a booster; default: ``cls(learners, n_learners=..., n_outputs=..., **options)``)
    and whether the estimators offer it as ``booster=``."""

    name: str
    cls: type[Booster]
    task: Literal["regression", "classification"] = "regression"
    build: Build | None = None
    estimator: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.name, str) and self.name):
            raise ValueError(f"a booster's registry name must be a non-empty str, got "
                             f"{self.name!r}")
        if not (isinstance(self.cls, type) and issubclass(self.cls, Booster)):
            raise ValueError(f"BoosterSpec({self.name!r}, cls=...) needs a Booster subclass, "
                             f"got {self.cls!r}")
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got "
                             f"{self.task!r}")
        if self.build is not None and not callable(self.build):
            raise ValueError(f"build must be callable (learners, n_learners=..., "
                             f"n_outputs=..., **options) -> Booster, got {self.build!r}")
        if not isinstance(self.estimator, bool):
            raise ValueError(f"estimator must be True or False, got {self.estimator!r}")

    def make(self, learners: Any, *, n_learners: int, n_outputs: int = 1,
             **options: Any) -> Booster:
        """A booster of this kind over ``learners``."""
        if self.build is not None:
            return self.build(learners, n_learners=n_learners, n_outputs=n_outputs, **options)
        return self.cls(learners, n_learners=n_learners, n_outputs=n_outputs, **options)


#: Every registered booster, by name (:func:`register_booster` adds one).
BOOSTERS: dict[str, BoosterSpec] = {}


def register_booster(spec: BoosterSpec) -> BoosterSpec:
    """Add ``spec`` to :data:`BOOSTERS` (a name registered twice is an error)."""
    if not isinstance(spec, BoosterSpec):
        raise ValueError(f"register_booster takes a BoosterSpec(name, cls, ...), got {spec!r}")
    return add(BOOSTERS, spec, "booster")


def _multiclass(cls: type[Booster], *args: Any) -> Build:
    """The multiclass boosters take the number of classes (and their own settings) first."""
    def build(learners: Any, *, n_learners: int, n_outputs: int, **options: Any) -> Booster:
        return cls(learners, n_outputs, *args, n_learners=n_learners, **options)
    return build


register_booster(BoosterSpec("sgb", SGB, estimator=True))
register_booster(BoosterSpec("residual_sgb", ResidualSGB, estimator=True))
register_booster(BoosterSpec("ogb", OGB, estimator=True))
register_booster(BoosterSpec("convex_hull_ogb", ConvexHullOGB, estimator=True))
register_booster(BoosterSpec(
    "single", SingleLearner, estimator=True,
    build=lambda learners, *, n_learners, **options: SingleLearner(learners, **options)))
register_booster(BoosterSpec("stagewise_gb", StagewiseGB))
register_booster(BoosterSpec("adaboost_olm", AdaboostOLM, "classification",
                             _multiclass(AdaboostOLM)))
register_booster(BoosterSpec("oza_boost", OzaBoost, "classification", _multiclass(OzaBoost)))
register_booster(BoosterSpec("online_mbbm", OnlineMBBM, "classification",
                             _multiclass(OnlineMBBM, 0.1)))
