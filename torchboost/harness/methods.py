"""The methods a comparison runs, one registry entry each: how to build the method's booster and
how the driver treats it (module docstring of :mod:`torchboost.harness.driver`).

* ``single`` — one module trained on the loss (the base learner, the wide and the deep network);
* ``stagewise`` — stagewise GB, trained stage by stage;
* ``streaming`` — a streaming boosting variant: the driver records its anytime curve, and the
  best of them on the validation split is compared with GB;
* ``online`` — another streaming booster (OGB, ConvexHullOGB): run and recorded like the
  streaming variants, anytime curve included, and compared on its own (never picked as the
  best SGB variant).

The boosters chain their learners where the configuration's learner says so
(``LearnerConfig.chained``; for stagewise GB this is GrowNet proper); a method whose booster
cannot (``chains=False``) is skipped there. Adding a method is one :func:`register_method`
call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from torchboost.boosters import OGB, SGB, Booster, ConvexHullOGB, SingleLearner, StagewiseGB
from torchboost.boosters.gradient_boosting import paper_step
from torchboost.boosters.online_linear import OnlineLinearBooster
from torchboost.learners.schedules import LRSchedulerFactory
from torchboost.losses import get_loss
from torchboost.registries import add

__all__ = ["METHODS", "MethodInputs", "MethodSpec", "methods_of_kind", "register_method",
           "streaming_variants"]


@dataclass(frozen=True)
class MethodInputs:
    """What a method's builder gets: the configuration's learner factory (and the widened one),
    the options every method shares (``common``: outputs, ``y0``, the optimizer and its rate,
    the fan-in rule, ``standardize=False`` on data standardised beforehand), its schedule, and
    whether the loss has a Hessian. ``deep_factory`` builds the deep baseline (``None`` where
    the learner has no deep counterpart); ``labels_standardized``: the driver standardised the
    labels beforehand (regression under squared or absolute loss)."""

    config: Any
    factory: Callable[[], Any]
    wide_factory: Callable[[], Any]
    deep_factory: Callable[[], Any] | None
    wide_units: int
    common: dict[str, Any]
    schedule: LRSchedulerFactory | None
    hessian: bool
    labels_standardized: bool = False


@dataclass(frozen=True)
class MethodSpec:
    """One method: its ``name``, ``kind`` (module docstring), its ``build`` from
    :class:`MethodInputs`, whether it needs Newton targets (``newton``: skipped, with the
    reason, for a loss without a Hessian), whether it runs on classification losses only
    (``classification``: a twin of another method on regression losses) and whether it runs
    with chained learners (``chains``: else skipped, with the reason, where the configuration
    chains them)."""

    name: str
    kind: Literal["single", "stagewise", "streaming", "online"]
    build: Callable[[MethodInputs], Booster]
    newton: bool = False
    classification: bool = False
    chains: bool = True


#: Every method, in the tables' order (:func:`register_method` adds one).
METHODS: dict[str, MethodSpec] = {}


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` to :data:`METHODS` (a name registered twice is an error)."""
    return add(METHODS, spec, "method")


def methods_of_kind(kind: str) -> tuple[str, ...]:
    """The registered methods of ``kind`` (:class:`MethodSpec`), in the tables' order."""
    return tuple(name for name, spec in METHODS.items() if spec.kind == kind)


def streaming_variants() -> tuple[str, ...]:
    """The streaming boosting variants, in order: the best of them is compared with GB."""
    return methods_of_kind("streaming")


def _sgb(i: MethodInputs, **options: Any) -> SGB:
    """An SGB variant at the configuration's step, or the paper's (¼ for squared loss, ½ for
    Newton targets) for every N: the variants are defined by their step, which the library's
    default caps for many learners (``STEP_BUDGET``), and by their targets (the paper's
    gradient targets unless named: the library's default is Newton for classification)."""
    n, loss = i.config.n_learners, i.config.loss
    options.setdefault("targets", "gradient")
    if "step" not in options:
        options["step"] = (i.config.step if i.config.step is not None else
                           paper_step(get_loss(loss), options["targets"]))
    return SGB(i.factory, loss, n_learners=n, lr_scheduler=i.schedule,
               chained=i.config.learner.chained, **options, **i.common)


register_method(MethodSpec("base", "single", lambda i: SingleLearner(
    i.factory, i.config.loss, lr_scheduler=i.schedule, **i.common)))
register_method(MethodSpec("wide", "single", lambda i: SingleLearner(
    i.wide_factory, i.config.loss, prediction_units=i.wide_units, lr_scheduler=i.schedule,
    **i.common)))
register_method(MethodSpec("deep", "single", lambda i: SingleLearner(
    i.deep_factory, i.config.loss, prediction_units=i.wide_units, lr_scheduler=i.schedule,
    **i.common)))


def _gb(i: MethodInputs, **options: Any) -> StagewiseGB:
    """Stagewise GB at the configuration's step, on gradient targets unless named (Friedman's;
    the library's default is Newton for classification)."""
    options.setdefault("targets", "gradient")
    return StagewiseGB(i.factory, i.config.loss, n_learners=i.config.n_learners,
                       step=i.config.step, lr_scheduler=i.schedule,
                       chained=i.config.learner.chained, **options, **i.common)


#: the Newton methods' targets, unclipped (``newton_clip=None``): the comparison's published
#: figures (docs/results/sgb-vs-gb.md, the README's table) were measured before the library
#: clipped Newton targets (:data:`~torchboost.boosters.gradient_boosting.DEFAULT_NEWTON_CLIP`),
#: which is to be re-measured; until then the command reproduces them
_NEWTON = {"targets": "newton", "newton_clip": None}

register_method(MethodSpec("GB", "stagewise", _gb))
# GB with SGB_newton's targets: on a regression loss (squared: Hessian 1) it is GB itself
register_method(MethodSpec("GB_newton", "stagewise", lambda i: _gb(i, **_NEWTON),
                           newton=True, classification=True))
# the SGB paper: gradient targets, a fixed step
register_method(MethodSpec("SGB", "streaming", _sgb))
register_method(MethodSpec("SGB_newton", "streaming", lambda i: _sgb(i, **_NEWTON),
                           newton=True))
# Newton targets where the loss has a Hessian, and learned steps
register_method(MethodSpec("SGB_learned", "streaming", lambda i: _sgb(
    i, step="learned", **(_NEWTON if i.hessian else {"targets": "gradient"}))))


def _online(cls: type[OnlineLinearBooster]) -> Callable[[MethodInputs], Booster]:
    """OGB or ConvexHullOGB with its default algorithm (greedy fitting; OGB's step and radius
    from the paper) and the driver's shared settings (``y0="mean"``, the optimizer and the rate
    under trial), told whether the driver standardised the labels beforehand
    (``standardized_labels``): then its bound and radius warning are those of the booster's own
    standardisation (on a huber loss the driver leaves the labels alone, where the booster
    would standardise them)."""
    def build(i: MethodInputs) -> Booster:
        return cls(i.factory, i.config.loss, n_learners=i.config.n_learners,
                   standardized_labels=i.labels_standardized, lr_scheduler=i.schedule,
                   **i.common)
    return build


# Online Gradient Boosting (Beygelzimer et al. 2015): Alg. 1 over span(F), Alg. 2 over its
# convex hull
register_method(MethodSpec("OGB", "online", _online(OGB), chains=OGB.chains_learners))
register_method(MethodSpec("ConvexHullOGB", "online", _online(ConvexHullOGB),
                           chains=ConvexHullOGB.chains_learners))
