"""scikit-learn estimators around the streaming boosters: :class:`SGBRegressor` and
:class:`SGBClassifier` (``pip install 'torchboost[sklearn]'``).

Both follow scikit-learn's conventions: ``__init__`` only stores its parameters (so
``get_params``/``set_params``/``clone`` work), numpy arrays (or anything array-like) go in and
numpy arrays come out.

* ``fit(X, y)`` starts afresh and streams ``max_passes`` passes over the rows, each in its own
  seeded order, in mini-batches of ``batch_size`` (one boosting round per mini-batch).
* ``partial_fit(X, y[, classes])`` is one streaming round: one :meth:`Booster.learn` call on the
  mini-batch ``(X, y)``. The first call builds the booster (a classifier needs ``classes`` there,
  unless ``fit`` came first); later calls continue it.

The booster is chosen with ``booster=``: ``"sgb"`` (:class:`~torchboost.SGB`, the default),
``"residual_sgb"`` (:class:`~torchboost.ResidualSGB`), ``"ogb"`` (:class:`~torchboost.OGB`),
``"convex_hull_ogb"`` (:class:`~torchboost.ConvexHullOGB`), ``"single"``
(:class:`~torchboost.SingleLearner`: one learner trained on the loss, the baseline) or any
:class:`~torchboost.Booster` subclass built as ``cls(factory, loss, n_learners=..., ...)``;
``booster_kwargs`` go to its constructor (e.g. ``{"step": 0.1}``). The stagewise, non-streaming
:class:`~torchboost.StagewiseGB` is left out on purpose.

A classifier boosted by an SGB variant fits Newton targets (``targets="newton"``, which the
README recommends for classification) unless ``booster_kwargs`` choose ``targets``. Without a
``learning_rate`` every booster follows the boosters' one default rule
(:mod:`~torchboost.boosters.default_lr`): schedule-free learners, which need no schedule
(``lr_schedule="constant"``, the default, whether ``fit`` or ``partial_fit`` drives them);
``lr_schedule="cosine"`` (over ``fit``'s passes) and ``"decay"`` are for the other optimizers
(``optimizer="adam"``).

The weak learner is the SGB paper's two-layer net (:class:`~torchboost.TwoLayerNet`, ``hidden``
units, ``activation``) unless ``learner`` is given: a factory ``learner(n_features, n_outputs)``
returning a fresh ``nn.Module`` that maps ``(B, n_features)`` to ``(B, n_outputs)``.

With ``standardize=True`` (default) features, and a regressor's targets, are standardised with
the mean and standard deviation of the first rows the estimator sees (all of ``X`` in ``fit``,
the first mini-batch with ``partial_fit``), frozen from then on, like
:class:`~torchboost.data.DataStream`'s warm-up statistics.

Examples:
    >>> import numpy as np
    >>> from torchboost.sklearn import SGBClassifier, SGBRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> reg = SGBRegressor(n_learners=4, max_passes=5, random_state=0, n_threads=1)
    >>> reg.fit(X, X[:, 0] - X[:, 1]).predict(X[:2]).shape
    (2,)
    >>> clf = SGBClassifier(n_learners=4, max_passes=5, random_state=0, n_threads=1)
    >>> clf = clf.fit(X, np.where(X[:, 0] > 0, "yes", "no"))
    >>> clf.classes_.tolist(), clf.predict_proba(X[:2]).shape
    (['no', 'yes'], (2, 2))
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import Tensor

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils.metaestimators import available_if
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data
except ImportError as error:  # pragma: no cover - the optional extra is missing
    raise ImportError("torchboost.sklearn needs scikit-learn >= 1.6: "
                      "pip install 'torchboost[sklearn]'") from error

from torchboost._adapters import (
    BOOSTERS,
    LearnerFactory,
    build_booster,
    checked_device,
    lr_schedule,
    torch_dtype,
)
from torchboost.boosters import Booster
from torchboost.params import flag, positive_int
from torchboost.threads import thread_count, threads

__all__ = ["BOOSTERS", "SGBClassifier", "SGBRegressor"]

_STD_FLOOR = 1e-8
_PREDICT_CHUNK = 8192


@contextmanager
def _naming_text_columns(X: Any) -> Iterator[None]:
    """scikit-learn's "could not convert string to float" names no column: for a DataFrame, add
    the columns that are not numeric. Its TypeErrors (sparse input, column names of mixed
    types) and numpy's (a datetime column) become ValueErrors saying what to do."""
    dtypes = getattr(X, "dtypes", None)
    text = ([str(c) for c, dtype in dtypes.items() if getattr(dtype, "kind", "O") not in "biuf"]
            if dtypes is not None else [])
    try:
        yield
    except ValueError as error:
        if dtypes is None or "convert" not in str(error):
            raise
        raise ValueError(f"{error} (columns that are not numbers: {text}; encode them first, e.g. "
                         "a ColumnTransformer with OneHotEncoder in a Pipeline)") from error
    except TypeError as error:  # numpy's DTypePromotionError is a TypeError too
        if "sparse" in str(error).lower():
            raise ValueError("sparse X is not supported: the learners take dense tensors; pass "
                             "X.toarray() (or a dense DataFrame)") from error
        if "feature names" in str(error).lower():
            raise ValueError(f"{error}: name every column with a str (e.g. "
                             "X.columns = X.columns.astype(str))") from error
        if not isinstance(error, np.exceptions.DTypePromotionError):
            raise  # scikit-learn's own TypeErrors (objects in X) are what its checks expect
        raise ValueError(f"X holds values that are not numbers ({error}); columns that are "
                         f"not numbers: {text} (convert datetimes to numbers, encode "
                         "categories, e.g. with a ColumnTransformer)") from error


def _mean_and_std(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations in float64 that do not overflow for finite values
    of any size: each column is divided by its largest magnitude first (``np.std`` of values
    near 1e200 squares them to inf)."""
    top = np.abs(X).max(0).astype(np.float64) if X.shape[0] else np.ones(X.shape[1])
    top = np.where(top > 0, top, 1.0)
    scaled = X / top
    return scaled.mean(0, dtype=np.float64) * top, scaled.std(0, dtype=np.float64) * top


class _StreamingBoosting(BaseEstimator):
    """What the regressor and the classifier share (see the module docstring).

    Args:
        booster: a name in :data:`BOOSTERS` or a :class:`~torchboost.Booster` subclass.
        n_learners: ``N``, the number of weak learners (ignored by ``"single"``).
        hidden, activation: the default :class:`~torchboost.TwoLayerNet`'s hidden units and
            activation (``"sigmoid"``, ``"tanh"``, ``"relu"``, ``"leaky_relu"``).
        learner: a factory ``learner(n_features, n_outputs) -> nn.Module`` replacing the
            default two-layer net.
        chained: chained learners, a streaming GrowNet: learner ``i`` also gets learner
            ``i − 1``'s hidden features (:mod:`~torchboost.learners.chained`). Default ``False``.
        loss: the booster's loss name; ``None`` picks ``"squared"`` for regression,
            ``"logistic"`` for two classes and ``"softmax"`` for more.
        booster_kwargs: extra keyword arguments for the booster (``step``, ``targets``, …).
        optimizer: every learner's optimizer: ``"schedule_free"`` (default: schedule-free
            AdamW, no horizon, predictions on its averaged weights), ``"adam"``, ``"sgd"``,
            ``"adagrad"``, ``"rmsprop"`` or a ``torch.optim.Optimizer`` class; ``learning_rate``
            is its ``lr`` (``None``: the boosters' default rule,
            :mod:`~torchboost.boosters.default_lr`).
        lr_schedule: ``"constant"`` (default; the schedule-free default needs nothing else);
            for Adam and the other optimizers, ``"cosine"``, a cosine decay of the rate to 0
            over ``fit``'s ``max_passes`` passes (not for ``partial_fit``, whose stream has no
            known end), or ``"decay"``, the open-ended :func:`~torchboost.decay_schedule`.
        batch_size: mini-batch size of ``fit``'s passes.
        max_passes: passes over the rows in ``fit``.
        standardize: standardise features (and regression targets) with frozen statistics.
        random_state: seeds the learners' initialisation and ``fit``'s orders (``None``: fresh).
        device: where the booster lives (``"cpu"``, ``"cuda"``, …).
        dtype: ``"float32"`` or ``"float64"`` (or the ``torch.dtype``) of the learners.
        n_threads: torch's intra-op threads while fitting and predicting (restored after);
            ``"auto"`` (default): one thread on a CPU for small learners and batches, where a
            thread pool costs more than it saves (:data:`~torchboost.threads.AUTO_THREADS_WORK`,
            measured by ``benchmarks/threads.py``), torch's setting otherwise; ``None`` keeps
            torch's setting.
    """

    def __init__(self, booster: str | type[Booster] = "sgb", *, n_learners: int = 8,
                 hidden: int = 10, activation: str = "sigmoid",
                 learner: LearnerFactory | None = None, chained: bool = False,
                 loss: str | None = None, booster_kwargs: dict[str, Any] | None = None,
                 optimizer: str | type[torch.optim.Optimizer] = "schedule_free",
                 learning_rate: float | None = None, lr_schedule: str = "constant",
                 batch_size: int = 32, max_passes: int = 10,
                 standardize: bool = True, random_state: int | None = None,
                 device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32",
                 n_threads: int | str | None = "auto") -> None:
        self.booster = booster
        self.n_learners = n_learners
        self.hidden = hidden
        self.activation = activation
        self.learner = learner
        self.chained = chained
        self.loss = loss
        self.booster_kwargs = booster_kwargs
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.batch_size = batch_size
        self.max_passes = max_passes
        self.standardize = standardize
        self.random_state = random_state
        self.device = device
        self.dtype = dtype
        self.n_threads = n_threads

    # --- to be provided by the regressor / the classifier ------------------------------------
    def _default_loss(self) -> str:
        raise NotImplementedError

    def _n_outputs(self) -> int:
        raise NotImplementedError

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # --- fitting -----------------------------------------------------------------------------
    @contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """Restores every fitted attribute (``booster_``, ``classes_``, ``n_features_in_``, the
        scaling, …) when the block raises — a refused or interrupted ``fit`` or ``partial_fit``
        leaves the estimator as it was; the booster's own ``learn`` is all-or-nothing too."""
        saved = dict(self.__dict__)
        try:
            yield
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def fit(self, X: Any, y: Any) -> Any:
        """Build a fresh booster and stream ``max_passes`` seeded passes over ``(X, y)``; if it
        raises (or is interrupted) the estimator keeps its previous fit."""
        positive_int("max_passes", self.max_passes)
        positive_int("batch_size", self.batch_size)
        with self._all_or_nothing():
            self._fit(X, y)
        return self

    def _fit(self, X: Any, y: Any) -> None:
        X, y = self._validate(X, y, reset=True)
        rounds = self.max_passes * -(-X.shape[0] // self.batch_size)
        self._start(X, y, classes=None, rounds=rounds)
        with threads(self._threads(self.batch_size)):
            x, z = self._tensors(X, self._encode_targets(y))
            n = x.shape[0]
            for p in range(self.max_passes):
                generator = torch.Generator().manual_seed(self._seed + 1 + p)
                order = torch.randperm(n, generator=generator).to(x.device)
                for start in range(0, n, self.batch_size):
                    rows = order[start:start + self.batch_size]
                    self.booster_.learn(x[rows], z[rows])
        self.n_iter_ = self.max_passes

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> Any:
        """One streaming round on the mini-batch ``(X, y)`` (building the booster first if
        needed; a classifier's first call needs ``classes``); if it raises, the estimator is
        left as it was (a refused first call leaves it unfitted)."""
        with self._all_or_nothing():
            self._partial_fit(X, y, classes)
        return self

    def _partial_fit(self, X: Any, y: Any, classes: Any) -> None:
        first = not hasattr(self, "booster_")
        X, y = self._validate(X, y, reset=first)
        if first:
            if isinstance(self, ClassifierMixin) and classes is None:
                raise ValueError("the first partial_fit call of a classifier needs classes= "
                                 "(all the labels the stream may show)")
            self._start(X, y, classes=classes)
            self.n_iter_ = 0
        else:
            self._check_partial_classes(classes)
            checked_device(self.device)  # set_params may have changed it since the fit
            if self.booster_.learners.schedulers and self.lr_schedule == "cosine":
                raise ValueError("this estimator was fitted under lr_schedule='cosine', whose "
                                 "rate reached 0 at the end of fit: partial_fit would not "
                                 "learn. For a stream that goes on, fit with the default "
                                 "(schedule-free learners need no schedule) or "
                                 "lr_schedule='decay'")
        with threads(self._threads(len(X))):
            self.booster_.learn(*self._tensors(X, self._encode_targets(y)))

    def _threads(self, rows: int) -> int | None:
        """The intra-op threads for ``rows`` rows (:func:`~torchboost.threads.thread_count`)."""
        return thread_count(self.n_threads, self.device, self.booster_, rows)

    def _check_partial_classes(self, classes: Any) -> None:
        """Nothing to check for a regressor."""

    def _validate(self, X: Any, y: Any, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        if not reset:
            self._check_columns(X)
        labels = np.asarray(y) if y is not None and not hasattr(y, "dtype") else y
        if getattr(labels, "dtype", None) is not None and labels.dtype.kind in "OUS":
            if isinstance(self, ClassifierMixin):
                if any(label is None for label in np.ravel(labels)):
                    raise ValueError("y holds None among the class labels: every example "
                                     "needs a label (drop the unlabelled rows first)")
            elif labels.dtype.kind in "US" or not all(
                    isinstance(v, numbers.Real) and not isinstance(v, bool)
                    for v in np.ravel(labels)):
                raise ValueError("a regressor's targets must be numbers; y holds text or other "
                                 "objects (convert it with y.astype(float), or use "
                                 "SGBClassifier for labels)")
        with _naming_text_columns(X):
            return validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32],
                                 y_numeric=not isinstance(self, ClassifierMixin))

    def _check_columns(self, X: Any) -> None:
        """A DataFrame whose columns differ from ``feature_names_in_`` (other names, or the same
        in another order) is refused with both lists (scikit-learn's own message names neither
        for a reordering)."""
        expected = getattr(self, "feature_names_in_", None)
        columns = getattr(X, "columns", None)
        if expected is None or columns is None:
            return
        given = [str(c) for c in columns]
        if given != list(expected):
            missing = [c for c in expected if c not in given]
            extra = [c for c in given if c not in set(expected)]
            detail = (f"missing {missing}, unexpected {extra}" if missing or extra
                      else "the same names in another order")
            raise ValueError(f"X has columns {given} but the estimator was fitted on "
                             f"{list(expected)} ({detail}); pass the columns as in fit")

    def _start(self, X: np.ndarray, y: np.ndarray, classes: Any,
               rounds: int | None = None) -> None:
        """Classes, frozen statistics, seed and a fresh booster (``rounds``: how many rounds
        ``fit`` will run, for a cosine schedule; ``None`` for ``partial_fit``)."""
        self._set_classes(y, classes)
        if flag("standardize", self.standardize):
            self.x_mean_, std = _mean_and_std(X)
            self.x_scale_ = np.where(std > _STD_FLOOR, std, 1.0)
        else:
            self.x_mean_ = np.zeros(X.shape[1])
            self.x_scale_ = np.ones(X.shape[1])
        self._set_target_statistics(y)
        self._seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        self._rounds = rounds
        self._float64_cache: dict[str, Any] = {}
        self.booster_ = self._build_booster(X.shape[1])

    def _set_classes(self, y: np.ndarray, classes: Any) -> None:
        """Nothing to record for a regressor."""

    def _set_target_statistics(self, y: np.ndarray) -> None:
        """Nothing to record for a classifier."""

    def _torch_dtype(self) -> torch.dtype:
        return torch_dtype(self.dtype)

    def _build_booster(self, n_features: int) -> Booster:
        default = self._default_loss()  # also checks a classifier's loss against its classes
        return build_booster(
            self.booster, loss=self.loss if self.loss is not None else default,
            n_features=n_features, n_outputs=self._n_outputs(), n_learners=self.n_learners,
            hidden=self.hidden, activation=self.activation, learner=self.learner,
            booster_kwargs=self.booster_kwargs, optimizer=self.optimizer,
            learning_rate=self.learning_rate, dtype=self.dtype, device=self.device,
            seed=self._seed, classifier=isinstance(self, ClassifierMixin),
            lr_scheduler=lr_schedule(self.lr_schedule, getattr(self, "_rounds", None)),
            chained=self.chained,
            standardized_labels=self.standardize and not isinstance(self, ClassifierMixin))

    # --- prediction --------------------------------------------------------------------------
    def _tensors(self, X: np.ndarray, z: np.ndarray | None = None) -> tuple[Tensor, Tensor]:
        dtype = self._torch_dtype()
        x = torch.as_tensor((X - self.x_mean_) / self.x_scale_, dtype=dtype, device=self.device)
        if z is None:
            return x, None  # type: ignore[return-value]
        return x, torch.as_tensor(z, device=self.device)

    def _scores(self, X: Any) -> np.ndarray:
        """The booster's raw outputs ``(n, m)`` as float64 numpy."""
        check_is_fitted(self, "booster_")
        self._check_columns(X)
        with _naming_text_columns(X):
            X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        predictor = self._predictor()
        x = torch.as_tensor((X - self.x_mean_) / self.x_scale_, device=self.device,
                            dtype=predictor.learners.dtype)
        with threads(self._threads(min(x.shape[0], _PREDICT_CHUNK))):
            out = [predictor.predict(x[i:i + _PREDICT_CHUNK])
                   for i in range(0, x.shape[0], _PREDICT_CHUNK)]
        return torch.cat(out).to("cpu", torch.float64).numpy()

    def export(self, n_learners: int | None = None, output: str = "scores") -> torch.nn.Module:
        """The fitted model as a plain ``nn.Module`` on float features ``(n, n_features_in_)``
        (:func:`torchboost.export.export_booster`, with this estimator's feature scaling and, for
        the regressor, its target scaling folded in): scores ``(n, m)`` as :meth:`predict`
        computes them before the final step (the regressor's predictions in column 0); for the
        classifier ``output="proba"`` gives :meth:`predict_proba` and ``"label"`` indices into
        ``classes_``."""
        check_is_fitted(self, "booster_")
        from torchboost.export import export_booster
        outputs = ((self.y_mean_, self.y_scale_) if hasattr(self, "y_scale_") else None)
        return export_booster(self.booster_, n_learners, output,  # type: ignore[arg-type]
                              inputs=(torch.as_tensor(self.x_mean_), torch.as_tensor(
                                  self.x_scale_)), outputs=outputs)

    def _predictor(self) -> Booster:
        """The booster that predicts: ``booster_`` itself in float64, else a float64 copy of it
        (made again after it learns), so that a row's prediction does not depend on the other
        rows predicted with it: float32 matrix products round differently for different
        numbers of rows (scikit-learn checks that a subset's predictions equal the whole's;
        with float32 they differed by one unit in the last place on about 1 row in 60)."""
        booster = self.booster_
        if booster.learners.dtype == torch.float64:
            return booster
        key = (id(booster), booster.rounds)
        cache = self.__dict__.setdefault("_float64_cache", {})  # a holder: predict leaves
        if cache.get("key") != key:                              # __dict__ as it was
            cache.update(key=key, booster=copy.deepcopy(booster).double())
        return cache["booster"]

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the fitted booster as a (CPU) state dict: the learners' modules are rebuilt
        from the parameters on unpickling."""
        state = self.__dict__.copy()
        state.pop("_float64_cache", None)
        booster = state.pop("booster_", None)
        if booster is not None:
            state["_booster_state"] = {k: v.cpu() if torch.is_tensor(v) else v
                                       for k, v in booster.state_dict().items()}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        booster_state = state.pop("_booster_state", None)
        self.__dict__.update(state)
        if booster_state is not None:
            self._float64_cache = {}
            self.booster_ = self._build_booster(self.n_features_in_)
            self.booster_.load_state_dict(booster_state)


class SGBRegressor(RegressorMixin, _StreamingBoosting):
    """A streaming-boosting regressor (squared loss by default); see the module docstring and
    :class:`_StreamingBoosting` for the parameters. ``y`` is one target per row.

    Fitted attributes: ``booster_`` (the :class:`~torchboost.Booster`), ``n_features_in_``,
    ``n_iter_`` (passes of the last ``fit``), ``x_mean_``/``x_scale_`` and
    ``y_mean_``/``y_scale_`` (the frozen standardisation).
    """

    def _default_loss(self) -> str:
        return "squared"

    def _n_outputs(self) -> int:
        return 1

    def _set_target_statistics(self, y: np.ndarray) -> None:
        if self.standardize:
            mean, std = _mean_and_std(y[:, None])
            self.y_mean_ = float(mean[0])
            self.y_scale_ = float(std[0]) if std[0] > _STD_FLOOR else 1.0
        else:
            self.y_mean_, self.y_scale_ = 0.0, 1.0

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        return ((y - self.y_mean_) / self.y_scale_).astype(
            np.float64 if self._torch_dtype() == torch.float64 else np.float32)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted targets, ``(n,)``."""
        return self._scores(X)[:, 0] * self.y_scale_ + self.y_mean_


class SGBClassifier(ClassifierMixin, _StreamingBoosting):
    """A streaming-boosting classifier, binary (logistic loss) or multiclass (softmax); see the
    module docstring and :class:`_StreamingBoosting` for the parameters. Labels may be of any
    type numpy can sort; ``loss="hinge"`` gives a binary classifier without probabilities.

    Fitted attributes: ``classes_``, ``booster_``, ``n_features_in_``, ``n_iter_``,
    ``x_mean_``/``x_scale_``.
    """

    def _default_loss(self) -> str:
        binary = len(self.classes_) == 2
        if self.loss is not None and self.loss not in (
                ("logistic", "hinge", "softmax") if binary else ("softmax",)):
            raise ValueError(f"loss={self.loss!r} does not fit {len(self.classes_)} classes: use "
                             + ("'logistic', 'hinge' or 'softmax'" if binary else "'softmax'"))
        return "logistic" if binary else "softmax"

    def _n_outputs(self) -> int:
        return len(self.classes_)

    def _validate(self, X: Any, y: Any, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        X, y = super()._validate(X, y, reset)
        try:
            check_classification_targets(y)
        except TypeError as error:  # labels of mixed types cannot be sorted
            raise ValueError(f"class labels must be of one sortable type (numbers, or "
                             f"strings): {error}") from error
        return X, y

    def _set_classes(self, y: np.ndarray, classes: Any) -> None:
        given = np.asarray(y if classes is None else classes)
        try:
            classes = np.unique(given)
        except TypeError as error:  # None among them, or labels of mixed types
            raise ValueError(f"classes must be labels of one sortable type (numbers, or "
                             f"strings), got {sorted(set(map(repr, given.tolist())))[:10]}"
                             ) from error
        if len(classes) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 classes, got "
                             f"{len(classes)} class ({classes.tolist()})")
        self.classes_ = classes

    def _check_partial_classes(self, classes: Any) -> None:
        if classes is not None and not np.array_equal(np.unique(np.asarray(classes)),
                                                      self.classes_):
            raise ValueError(f"classes={classes!r} differs from the classes of the first "
                             f"partial_fit call, {self.classes_.tolist()}")

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        index = np.searchsorted(self.classes_, y)
        index = np.clip(index, 0, len(self.classes_) - 1)
        if not np.array_equal(self.classes_[index], y):
            unknown = sorted(set(np.asarray(y).tolist()) - set(self.classes_.tolist()))
            raise ValueError(f"labels {unknown[:10]} are not among classes_ "
                             f"{self.classes_.tolist()}")
        return index.astype(np.int64)

    def _has_proba(self) -> bool:
        return self.loss in (None, "logistic", "softmax")

    def decision_function(self, X: Any) -> np.ndarray:
        """The booster's scores: ``(n,)`` for two classes (positive: ``classes_[1]``), else
        ``(n, n_classes)``."""
        scores = self._scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    @available_if(_has_proba)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``(n, n_classes)`` in the order of ``classes_``: the sigmoid of
        the logistic score, or the softmax of the scores."""
        scores = torch.from_numpy(self._scores(X))
        if scores.shape[1] == 1:
            p = torch.sigmoid(scores[:, 0])
            return torch.stack([1.0 - p, p], 1).numpy()
        return torch.softmax(scores, 1).numpy()

    @available_if(_has_proba)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithms of :meth:`predict_proba`."""
        scores = torch.from_numpy(self._scores(X))
        if scores.shape[1] == 1:
            s = scores[:, 0]
            return torch.stack([torch.nn.functional.logsigmoid(-s),
                                torch.nn.functional.logsigmoid(s)], 1).numpy()
        return torch.log_softmax(scores, 1).numpy()

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels, ``(n,)``, from ``classes_``."""
        scores = self._scores(X)
        index = (scores[:, 0] > 0).astype(np.int64) if scores.shape[1] == 1 else scores.argmax(1)
        return self.classes_[index]
