"""What the scikit-learn and river adapters share: building a booster from plain parameters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from torchboost.boosters import SGB, Booster, SingleLearner
from torchboost.boosters.online_linear import OnlineLinearBooster
from torchboost.boosters.registry import BOOSTERS as REGISTRY
from torchboost.learners import TwoLayerNet
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import LRSchedulerFactory, cosine_schedule, decay_schedule
from torchboost.losses import get_loss
from torchboost.params import flag

__all__ = [
    "BOOSTERS",
    "LR_SCHEDULES",
    "OPTIMIZERS",
    "LearnerFactory",
    "booster_outputs",
    "build_booster",
    "checked_device",
    "lr_schedule",
    "torch_dtype",
]

class _EstimatorBoosters(Mapping[str, type[Booster]]):
    """The registered boosters marked ``estimator``, read from the registry at every use (a
    booster registered after this module was imported is offered too)."""

    def _current(self) -> dict[str, type[Booster]]:
        return {name: spec.cls for name, spec in REGISTRY.items() if spec.estimator}

    def __getitem__(self, name: str) -> type[Booster]:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return repr(self._current())


#: The names ``booster=`` accepts: the registered boosters marked ``estimator``
#: (:mod:`torchboost.boosters.registry`), as registered when they are read.
BOOSTERS: Mapping[str, type[Booster]] = _EstimatorBoosters()

#: The names ``optimizer=`` accepts.
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "schedule_free": DEFAULT_OPTIMIZER,
    "adam": torch.optim.Adam,
    "sgd": torch.optim.SGD,
    "adagrad": torch.optim.Adagrad,
    "rmsprop": torch.optim.RMSprop,
}
_DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: The names ``lr_schedule=`` accepts: a constant rate; a cosine decay to 0 over ``fit``'s
#: known number of rounds (``max_passes`` passes); the open-ended decay
#: :func:`~torchboost.decay_schedule` for streams of unknown length (``partial_fit``, river).
LR_SCHEDULES = ("constant", "cosine", "decay")

#: ``lr_schedule="decay"``'s time scale in rounds: the rate halves after ``3 ×`` this many
#: rounds (:func:`~torchboost.decay_schedule`); 300 was the best of 100…3000 in
#: ``experiments/open_ended.py`` (the README, "Learning-rate schedules").
DECAY_TIMESCALE = 300

#: ``learner(n_features, n_outputs) -> nn.Module``: a fresh weak learner mapping
#: ``(B, n_features)`` to ``(B, n_outputs)``.
LearnerFactory = Callable[[int, int], nn.Module]


def torch_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32"``/``"float64"`` (or a floating ``torch.dtype``) as a ``torch.dtype``."""
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype]
    raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")


@contextmanager
def _building(dtype: torch.dtype, seed: int) -> Iterator[None]:
    """Build modules in ``dtype`` from a seeded RNG, leaving the global RNG and default dtype as
    they were (the booster's float64 accumulators stay float64)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_default_dtype(previous)


def lr_schedule(name: str, rounds: int | None) -> LRSchedulerFactory | None:
    """The ``lr_scheduler`` factory of an :data:`LR_SCHEDULES` name; ``rounds``: the known
    number of rounds (``None`` for an open-ended stream, where ``"cosine"`` is refused)."""
    if name not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {name!r}")
    if name == "constant":
        return None
    if name == "decay":
        return decay_schedule(DECAY_TIMESCALE)
    if rounds is None:
        raise ValueError("lr_schedule='cosine' decays over a known number of rounds (fit's "
                         "max_passes passes); for a stream of unknown length (partial_fit, "
                         "learn_one) use lr_schedule='decay'")
    return cosine_schedule(max(1, rounds))


def booster_outputs(loss: str, n_outputs: int) -> int:
    """The outputs of a booster for a problem of ``n_outputs`` (classes for a classifier):
    binary losses (logistic, hinge) have one, a score."""
    return 1 if loss in ("logistic", "hinge") else n_outputs


def build_booster(booster: str | type[Booster], *, loss: str, n_features: int, n_outputs: int,
                  n_learners: int, hidden: int, activation: str,
                  learner: LearnerFactory | None, booster_kwargs: dict[str, Any] | None,
                  optimizer: str | type[torch.optim.Optimizer], learning_rate: float | None,
                  dtype: str | torch.dtype, device: str | torch.device, seed: int,
                  classifier: bool = False,
                  lr_scheduler: LRSchedulerFactory | None = None,
                  chained: bool = False, standardized_labels: bool = False,
                  averaging_window: int | None = None) -> Booster:
    """A fresh booster of ``n_learners`` learners (the default :class:`TwoLayerNet` or
    ``learner(n_features, out)``) with ``y0="mean"``, built from ``seed`` in ``dtype`` on
    ``device``. ``n_outputs`` is the problem's (classes for a classifier); binary losses
    (logistic, hinge) get one output. ``learning_rate=None``: the boosters' default rule
    (:mod:`~torchboost.boosters.default_lr`, the same for every booster). A ``classifier``
    boosted by an SGB variant fits Newton targets (``targets="newton"``, as the README
    recommends) unless ``booster_kwargs`` choose ``targets``. ``chained``: chained learners
    (:mod:`~torchboost.learners.chained`). ``standardized_labels``: the caller standardised the
    regression labels, which OGB and ConvexHullOGB are told where ``booster_kwargs`` turn
    their own standardisation off (their bound and radius warning). ``averaging_window``: the
    boosters' (for a stream that changes). ``ValueError`` for an unknown name."""
    if isinstance(booster, str):
        if booster not in BOOSTERS:
            raise ValueError(f"booster must be one of {sorted(BOOSTERS)} or a Booster subclass, "
                             f"got {booster!r}")
        spec = REGISTRY[booster]
        if spec.task == "classification" and not classifier:
            raise ValueError(f"booster {booster!r} is registered for classification; use it "
                             "with SGBClassifier")
        cls = spec.cls
    elif isinstance(booster, type) and issubclass(booster, Booster):
        spec, cls = None, booster
    else:
        raise ValueError(f"booster must be one of {sorted(BOOSTERS)} or a Booster subclass, "
                         f"got {booster!r}")
    if isinstance(optimizer, str):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)} or a "
                             f"torch.optim.Optimizer class, got {optimizer!r}")
        optimizer = OPTIMIZERS[optimizer]
    out_dim = booster_outputs(loss, n_outputs)
    if learner is None:
        def factory() -> nn.Module:
            return TwoLayerNet(n_features, hidden, out_dim, activation)
    else:
        def factory() -> nn.Module:
            return learner(n_features, out_dim)
    kwargs: dict[str, Any] = {"n_outputs": out_dim, "y0": "mean", "optimizer": optimizer}
    if lr_scheduler is not None:
        kwargs["lr_scheduler"] = lr_scheduler
    if flag("chained", chained):
        kwargs["chained"] = True
    if averaging_window is not None:
        given = (booster_kwargs or {}).get("averaging_window", averaging_window)
        if given != averaging_window:
            raise ValueError(f"averaging_window={averaging_window!r} and booster_kwargs' "
                             f"averaging_window={given!r} disagree: set it in one place")
        kwargs["averaging_window"] = averaging_window
    if cls is not SingleLearner:
        kwargs["n_learners"] = n_learners
    if classifier and issubclass(cls, SGB) and get_loss(loss).has_hessian:
        kwargs["targets"] = "newton"
    if booster_kwargs is not None and not isinstance(booster_kwargs, dict):
        raise ValueError(f"booster_kwargs must be a dict of the booster's keyword arguments, "
                         f"got {booster_kwargs!r}")
    owned = sorted(set(booster_kwargs or {}) & set(_ESTIMATOR_OWNED))
    if owned:  # else get_params() would no longer describe the model
        raise ValueError(f"booster_kwargs sets {owned}, which the estimator sets itself: pass "
                         + ", ".join(f"{_ESTIMATOR_OWNED[k]}=..." for k in owned)
                         + " to the estimator instead")
    kwargs.update(booster_kwargs or {})
    if (standardized_labels and issubclass(cls, OnlineLinearBooster)
            and kwargs.get("standardize") is False):
        kwargs.setdefault("standardized_labels", True)
    target = checked_device(device)
    if learner is not None and not callable(learner):
        raise ValueError(f"learner must be a factory learner(n_features, n_outputs) -> "
                         f"nn.Module, got {learner!r}")
    if learning_rate is not None:  # merged into booster_kwargs' optimizer_kwargs, if any
        given = dict(kwargs.get("optimizer_kwargs") or {})
        if "lr" in given and given["lr"] != learning_rate:
            raise ValueError(f"learning_rate={learning_rate!r} and booster_kwargs' optimizer_"
                             f"kwargs lr={given['lr']!r} disagree: set the rate in one place")
        kwargs["optimizer_kwargs"] = {**given, "lr": float(learning_rate)}
    with _building(torch_dtype(dtype), seed):
        try:
            if spec is not None and spec.build is not None:  # the entry's own recipe
                options = {k: v for k, v in kwargs.items() if k not in ("n_learners",
                                                                         "n_outputs")}
                built = spec.make(factory, n_learners=n_learners, n_outputs=out_dim,
                                  loss=loss, **options)
            else:
                built = cls(factory, loss, **kwargs)
        except TypeError as error:  # an option the booster does not take
            raise ValueError(f"{cls.__name__} cannot be built with booster_kwargs="
                             f"{booster_kwargs!r}: {error}") from error
    if not isinstance(built, Booster):
        raise ValueError(f"the registry entry {booster!r} built a {type(built).__name__}, "
                         "not a Booster")
    return built.to(target)


#: the boosters' arguments an estimator sets from its own parameters (named here)
_ESTIMATOR_OWNED = {"chained": "chained", "n_learners": "n_learners",
                    "optimizer": "optimizer", "lr_scheduler": "lr_schedule",
                    "n_outputs": "the classes or labels", "n_threads": "n_threads"}


def checked_device(device: Any) -> torch.device:
    """``device`` as a ``torch.device`` the learners can train on, or a ``ValueError`` saying
    which ones can."""
    try:
        target = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got "
                         f"{device!r}") from error
    if target.type == "meta":
        raise ValueError("device='meta' holds shapes, not values: nothing can learn there; use "
                         "'cpu' or 'cuda'")
    if target.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}, but torch sees no CUDA device here; use 'cpu'")
    if target.type not in ("cpu", "cuda"):
        try:
            torch.empty(0, device=target)
        except RuntimeError as error:
            raise ValueError(f"device {device!r} is not available here ({error}); use 'cpu' "
                             "or 'cuda'") from error
    return target
