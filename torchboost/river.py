"""river estimators around the streaming boosters: :class:`SGBRegressor` and
:class:`SGBClassifier` (``pip install 'torchboost[river]'``).

They speak river's dict-per-example protocol (``learn_one``, ``predict_one``,
``predict_proba_one``) and its mini-batch one (``learn_many``, ``predict_many``,
``predict_proba_many`` on a pandas ``DataFrame``, or on a list of dicts), so they drop into
``river.evaluate.progressive_val_score`` and river pipelines as they are.

**Mini-batching inside.** A boosting round on one example is a noisy, costly step, so
``learn_one`` buffers examples and runs one :meth:`Booster.learn` round per ``batch_size`` of
them (``batch_size=1``: a round per example); predictions use the model as of the last round.
``learn_many`` adds its rows to the same buffer.

**Features.** The feature names are those of the first example learnt (sorted by their
``str``, so the order of a dict's keys never matters); a name missing from a later example
counts as 0. A name first seen later is added after them (river's linear models do the same):
the booster grows at its next round, every learner's input layer taking a column of zeros, so
what it learnt is kept and the new feature is learnt from then on (:mod:`torchboost.boosters.
growth`; the examples before it count as 0 in the standardiser's statistics, as river reads
them). Until that round predictions use :attr:`~SGBRegressor.learnt_features`.
The booster standardises the features (and a regressor's labels) itself, by running statistics
(``standardize=True``, :mod:`torchboost.boosters.scaling`): a ``StandardScaler`` in the pipeline
is harmless but not needed (and an exported model takes the features as the estimator got
them).

**Classes.** ``classes=[...]`` fixes the labels up front (logistic loss for two classes, softmax
for more). Without it the classifier is class-incremental: the classes are those seen, in the
order they come (a first ``bool`` label brings ``False`` and ``True``: river's binary
convention), and a label seen for the first time is a new class. Two classes are boosted with
the logistic loss; at a third the booster grows into a softmax one (logits 0 and the binary
score for the first two: the same probabilities), and each new class gets a fresh output row in
every learner and starts at ``y^0``, the log of its frequency so far; until that round it has
probability 0. OGB and ConvexHullOGB keep their predictions in a ball over all outputs, so
there the first classes' probabilities move when one joins. A user's binary ``loss`` cannot
grow: a third class raises. An example bringing a feature or class the learners cannot grow to
take (parameters sized by the width otherwise than a layer's rows or columns) is refused when it
comes.

The other parameters (``booster``, ``n_learners``, ``hidden``, ``learner``, ``chained``,
``optimizer``, ``learning_rate``, ``n_threads``, …) are those of :mod:`torchboost.sklearn`'s
estimators (``n_threads="auto"``: one thread for the small learners and mini-batches of a stream);
``seed`` seeds the learners' initialisation. A river stream has no known end: the default
learners (schedule-free, ``optimizer="schedule_free"``) need no horizon and no schedule;
``lr_schedule`` is ``"constant"`` (default) or ``"decay"`` (the open-ended
:func:`~torchboost.decay_schedule`, for Adam). A classifier boosted by an SGB variant fits
Newton targets, as the README recommends (``booster_kwargs={"targets": "gradient"}``: the
paper's).

**Drift.** ``averaging_window`` (rounds; default ``None``) bounds the schedule-free learners'
weight average to about their last ``averaging_window`` rounds
(:func:`~torchboost.learners.averaging.window_average`): the uniform average over a whole stream
is slow to leave a concept that changed. 30 recovered from every abrupt change of river's
``FriedmanDrift`` as fast as the same learners on Adam (``optimizer="adam"``;
``docs/results/streams.md``).

Examples:
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from torchboost.river import SGBClassifier
    >>> model = preprocessing.StandardScaler() | SGBClassifier(n_learners=4, batch_size=16,
    ...                                                        n_threads=1)
    >>> metric = evaluate.progressive_val_score(datasets.Phishing().take(400), model,
    ...                                         metrics.Accuracy())
    >>> metric.get() > 0.7
    True
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

try:
    from river import base
except ImportError as error:  # pragma: no cover - the optional extra is missing
    raise ImportError("torchboost.river needs river: pip install 'torchboost[river]'") from error

from torchboost._adapters import LearnerFactory, booster_outputs, build_booster, torch_dtype
from torchboost._adapters import lr_schedule as lr_schedule_factory
from torchboost.boosters import Booster
from torchboost.boosters.growth import Growth, grow
from torchboost.params import integer, positive_int
from torchboost.threads import check_threads, thread_count, threads

__all__ = ["SGBClassifier", "SGBRegressor"]


#: the types of the values learn_one's fast path takes as they are (others are checked one by
#: one, which refuses text even where float() would parse it)
_NUMBERS = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32, np.bool_})


def _check_mapping(x: Any) -> None:
    """river's examples are dicts of feature name → value."""
    if not isinstance(x, Mapping):
        raise ValueError(f"an example must be a dict of feature name -> value (river's "
                         f"convention), got a {type(x).__name__}")


def _plain_floats(values: Sequence[Any], limit: float) -> list[float] | None:
    """``values`` as floats when every one is a plain number, finite and within ``±limit`` (one
    pass over the common case); ``None`` otherwise, for the checks that name the bad one."""
    try:
        floats = [float(v) for v in values]
    except (TypeError, ValueError):
        return None
    good = (set(map(type, values)) <= _NUMBERS and math.isfinite(sum(floats))
            and -limit <= min(floats) and max(floats) <= limit)
    return floats if good else None


def _is_nan(label: Any) -> bool:
    """Whether a label is a NaN (not equal to itself)."""
    try:
        return bool(label != label)
    except (TypeError, ValueError):
        return True  # pd.NA and the like: missing


@functools.lru_cache
def _largest(dtype: str | torch.dtype) -> float:
    return torch.finfo(torch_dtype(dtype)).max


def _number(name: Hashable, value: Any, limit: float = math.inf) -> float:
    """A feature's value as a finite float of magnitude at most ``limit`` (the learners'
    dtype's largest), or a ``ValueError`` naming the feature. Text is refused even where
    ``float()`` would parse it ("3", b"3"): it is a category or a parsing slip, not a number."""
    if isinstance(value, np.generic):
        value = value.item()  # shown as 1.5, not np.float64(1.5)
    if value is None:
        raise ValueError(f"feature {name!r} is None, a missing value: impute it (e.g. river's "
                         "preprocessing.StatImputer) or leave the key out (a missing key reads "
                         "as 0); nothing was learnt from this example")
    try:
        if isinstance(value, str | bytes):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"feature {name!r} is {value!r}, not a number: encode it (e.g. "
                         "river's preprocessing.OneHotEncoder) or drop it; nothing was "
                         "learnt from this example") from None
    if not math.isfinite(number):
        raise ValueError(f"feature {name!r} is {value!r}: NaN and inf cannot be learnt; impute "
                         "it (e.g. river's preprocessing.StatImputer) or drop the example; "
                         "nothing was learnt from it")
    if abs(number) > limit:
        raise ValueError(f"feature {name!r} is {value!r}, beyond the learners' range "
                         f"(±{limit:.3g}): scale it (e.g. river's preprocessing.StandardScaler) "
                         "or build the model with dtype='float64'; nothing was learnt from it")
    return number


def _rows(X: Any, features: list[Hashable] | None, limit: float = math.inf,
          new_features: bool = False) -> tuple[list[Hashable], list[list[float]]]:
    """The feature names and every row of ``X`` (a pandas ``DataFrame`` or a sequence of dicts)
    as finite floats in their order; a bad value raises naming its feature (and its row). The
    names are ``features`` (those of the first row, sorted, if ``None``), followed where
    ``new_features`` by every other name in ``X`` (sorted)."""
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        columns = list(X.columns)
        names = _with_new(features or [], columns) if new_features or features is None \
            else features
        if X.shape[0] == 0:
            return names, []
        matrix, present = np.zeros((X.shape[0], len(names))), set(columns)
        for j, name in enumerate(names):
            if name in present:
                matrix[:, j] = _finite_column(name, X[name].to_numpy(), limit)
        return names, matrix.tolist()
    if isinstance(X, np.ndarray | torch.Tensor | str | bytes) or not isinstance(X, Iterable):
        raise ValueError(f"X must be a pandas DataFrame or a sequence of dicts (feature name "
                         f"-> value, river's rows), got {type(X).__name__}; for an array "
                         "pass pandas.DataFrame(X), whose columns name the features")
    rows = list(X)
    bad = next((i for i, x in enumerate(rows) if not isinstance(x, Mapping)), None)
    if bad is not None:
        raise ValueError(f"row {bad} of X is a {type(rows[bad]).__name__}, not a dict of "
                         "feature name -> value (river's rows)")
    if not rows:
        return features or [], []
    names = features if features is not None else sorted(rows[0], key=str)
    if new_features:
        names = _with_new(names, (name for x in rows for name in x))
    return names, [[_checked(name, x.get(name, 0.0), i, limit) for name in names]
                   for i, x in enumerate(rows)]


def _with_new(features: list[Hashable], names: Iterable[Hashable]) -> list[Hashable]:
    """``features`` followed by the ``names`` not among them, sorted by their ``str`` (so the
    order in which a dict lists its keys never matters)."""
    known = set(features)
    return features + sorted({name for name in names if name not in known}, key=str)


def _finite_column(name: Hashable, column: np.ndarray, limit: float) -> np.ndarray:
    """A DataFrame column as finite float64 within ``±limit``, or the error of its first bad
    value (text columns are read value by value, so that "3" is refused as text)."""
    values = None
    if column.dtype.kind in "biuf":
        values = column.astype(np.float64)
    if values is None or not (np.isfinite(values).all() and np.abs(values).max() <= limit):
        values = np.array([_checked(name, value, i, limit) for i, value in enumerate(column)])
    return values


def _checked(name: Hashable, value: Any, row: int, limit: float) -> float:
    try:
        return _number(name, value, limit)
    except ValueError as error:
        raise ValueError(f"row {row}: {error}") from None


class _RiverBoosting:
    """What the river regressor and classifier share (see the module docstring)."""

    #: :attr:`features` as a set (estimators pickled before it existed: rebuilt as they learn)
    _known: frozenset[Hashable] = frozenset()
    #: a grown booster for the next round and what it is for (:meth:`_require_growth`)
    _next: tuple[tuple[Any, int, int], Booster] | None = None
    #: the classes so far (a classifier's; a regressor has none)
    _labels: Sequence[Hashable] = ()

    def __init__(self, booster: str | type[Booster] = "sgb", n_learners: int = 8,
                 hidden: int = 10, activation: str = "sigmoid",
                 learner: LearnerFactory | None = None, loss: str | None = None,
                 booster_kwargs: dict[str, Any] | None = None,
                 optimizer: str | type[torch.optim.Optimizer] = "schedule_free",
                 learning_rate: float | None = None, batch_size: int = 32, seed: int = 0,
                 device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32",
                 n_threads: int | str | None = "auto", lr_schedule: str = "constant",
                 chained: bool = False, averaging_window: int | None = None) -> None:
        batch_size, seed = positive_int("batch_size", batch_size), integer("seed", seed)
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
        lr_schedule_factory(lr_schedule, None)  # a bad name (or "cosine": no horizon) raises now
        self.batch_size = batch_size
        self.seed = seed
        self.device = device
        self.dtype = dtype
        self.n_threads = check_threads(n_threads)
        self.averaging_window = (None if averaging_window is None
                                 else positive_int("averaging_window", averaging_window))
        if averaging_window is not None and isinstance(optimizer, str) \
                and optimizer != "schedule_free":
            raise ValueError(f"averaging_window bounds the weight average of schedule-free "
                             f"learners; optimizer={optimizer!r} keeps none (leave "
                             "averaging_window out, or use optimizer='schedule_free')")
        self.features: list[Hashable] | None = None
        self.booster_: Booster | None = None
        self._x: list[list[float]] = []
        self._y: list[Any] = []

    # --- to be provided ----------------------------------------------------------------------
    def _default_loss(self) -> str:
        raise NotImplementedError

    def _n_outputs(self) -> int:
        raise NotImplementedError

    def _encode(self, y: Sequence[Any]) -> torch.Tensor:
        raise NotImplementedError

    # --- learning ----------------------------------------------------------------------------
    @property
    def n_pending(self) -> int:
        """Examples buffered for the next round."""
        return len(self._x)

    def _vector(self, x: dict[Hashable, Any]) -> list[float]:
        """``x`` as finite floats in the order of :attr:`learnt_features`."""
        _check_mapping(x)
        limit = self._limit
        return [_number(name, x.get(name, 0.0), limit) for name in self.learnt_features]

    def flush(self) -> None:
        """Run one round on the buffered examples now (however few). If the round raises, the
        booster is as it was and the examples stay buffered."""
        if not self._x:
            return
        x = self._tensor(self._x)
        y = self._encode(self._y).to(self.device)
        # a first round that raises leaves no booster (the builder forks the RNG); a grown
        # booster (grown when the example that needs it came) is kept once its round succeeds
        if self.booster_ is None:
            booster = self._build()
        elif self._next is not None and self._next[0] == self._shape():
            booster = self._next[1]
        else:
            booster = self._grown(self.booster_)
        with threads(thread_count(self.n_threads, self.device, booster, len(x))):
            booster.learn(x, y)
        self.booster_, self._next = booster, None
        self._x, self._y = [], []

    def _build(self, n_features: int | None = None, loss: str | None = None,
               n_outputs: int | None = None) -> Booster:
        """A fresh booster for ``n_features`` features (default: :attr:`features`), ``loss`` and
        ``n_outputs`` (default: this estimator's)."""
        assert self.features is not None
        return build_booster(
            self.booster, loss=loss or self._loss_name(),
            n_features=n_features or len(self.features), n_outputs=n_outputs or self._n_outputs(),
            n_learners=self.n_learners, hidden=self.hidden, activation=self.activation,
            learner=self.learner, booster_kwargs=self.booster_kwargs, optimizer=self.optimizer,
            learning_rate=self.learning_rate, dtype=self.dtype, device=self.device,
            seed=self.seed, classifier=self._is_classifier,
            lr_scheduler=lr_schedule_factory(self.lr_schedule, None), chained=self.chained,
            averaging_window=self.averaging_window)

    def _loss_name(self) -> str:
        return self.loss if self.loss is not None else self._default_loss()

    def _grown(self, booster: Booster) -> Booster:
        """``booster``, or a grown copy of it where the stream brought features it has not
        seen (``booster`` itself is left as it is)."""
        assert self.features is not None and booster.input_shape is not None
        width = booster.input_shape[0]
        if width == len(self.features):
            return booster
        return self._widened(booster, len(self.features), booster.loss.name, booster.out_dim,
                             Growth(features=width))

    def _widened(self, booster: Booster, n_features: int, loss: str, n_outputs: int,
                 growth: Growth, drop: Sequence[str] = ()) -> Booster:
        """A fresh booster for ``n_features``, ``loss`` and ``n_outputs``, wider than
        ``booster``, holding what ``booster`` learnt (:func:`~torchboost.boosters.growth.grow`).
        A twin of it learns one round of zeros first, which sizes what a round builds lazily
        (the standardiser's statistics)."""
        grown, sized = (self._build(n_features, loss, n_outputs) for _ in range(2))
        labels = torch.zeros(2, dtype=torch.int64 if self._is_classifier
                             else torch_dtype(self.dtype), device=self.device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sized.learn(torch.zeros(2, n_features, dtype=torch.float64, device=self.device),
                        labels)
        grow(booster, grown, sized, growth, drop)
        return grown

    def learn_one(self, x: dict[Hashable, Any], y: Any) -> None:
        """Buffer ``(x, y)``; a full buffer is one boosting round. A feature that is not a
        finite number, or a non-finite label (or, with ``classes=[...]``, one not listed),
        raises a ``ValueError`` naming it before anything is buffered. A feature or class seen
        for the first time is added (the module docstring), and only if the example is
        accepted."""
        _check_mapping(x)
        features = self.features
        if features is None:
            if not x:
                raise ValueError("the first example has no features: a model needs at least "
                                 "one to learn from; nothing was learnt")
            features = sorted(x, key=str)
        elif not self._known.issuperset(x):  # a feature seen for the first time
            features = _with_new(features, x)
        values = [x.get(name, 0.0) for name in features]
        limit = self._limit
        row = _plain_floats(values, limit)  # the common case fast; the checks name the feature
        if row is None:
            row = [_number(name, v, limit) for name, v in zip(features, values, strict=True)]
        self._accept(features, row, y)

    def _accept(self, features: list[Hashable], row: list[float], y: Any,
                checked: bool = False) -> None:
        """Take the names ``features`` (the current ones, maybe with new ones at the end) and
        buffer the checked ``row`` with its label ``y``: a bad label raises now (unless
        ``checked`` already), a feature or class the booster cannot grow to take too
        (:meth:`_require_growth`), and a round that raises forgets what the example brought
        (:meth:`_buffer`)."""
        undo = (len(self.features or ()), self._register([y], checked))
        self._set_features(features)
        if self.booster_ is not None and (len(features) > undo[0] or self._grows(undo[1])):
            self._require_growth(undo)
        self._buffer(row, y, undo)

    def _grows(self, n_classes: int) -> bool:
        """Whether classes were added since there were ``n_classes`` (a classifier's)."""
        return False

    def _require_growth(self, undo: tuple[int, int]) -> None:
        """Grow the booster once, now, to see that it can take what this example brought (the
        round that grows it comes later, when the buffer is full); if it cannot, forget what
        the example brought and raise: the estimator is as before, and later rounds are not
        held up by an example already accepted."""
        assert self.booster_ is not None and self.features is not None
        try:
            self._next = (self._shape(), self._grown(self.booster_))  # for the round (flush)
        except BaseException as error:  # an interrupt too: as before the call
            new = [*self.features[undo[0]:], *self._classes_after(undo[1])]
            self._forget(undo)
            if not isinstance(error, ValueError):
                raise
            raise ValueError(f"this example brings {new}, which the booster cannot grow to "
                             f"take: {error}; nothing was learnt from it") from None

    def _shape(self) -> tuple[Booster | None, int, int]:
        """What a grown booster is for: the booster it grew from, the features and classes."""
        return self.booster_, len(self.features or ()), len(self._labels)

    def _forget(self, undo: tuple[int, int]) -> None:
        """Forget the features and classes after the first ``undo[0]`` and ``undo[1]`` (and a
        booster grown for them)."""
        assert self.features is not None
        for buffered in self._x:
            del buffered[undo[0]:]
        self._set_features(self.features[:undo[0]])
        self._unregister(undo[1])
        self._next = None

    def _classes_after(self, n_classes: int) -> list[Hashable]:
        """The classes added after the first ``n_classes`` (a classifier's)."""
        return []

    @property
    def _limit(self) -> float:
        """The largest magnitude the learners' dtype holds."""
        return _largest(self.dtype)

    def _set_features(self, features: list[Hashable] | None) -> None:
        """Take ``features`` (the names so far, maybe with new ones at the end: the buffered
        rows get them as 0, a missing feature's value)."""
        if features is self.features:
            return
        width = len(features or ())
        for row in self._x:
            row.extend([0.0] * (width - len(row)))
        self.features = features
        self._known = frozenset(features or ())

    def _register(self, labels: Sequence[Any], checked: bool = False) -> int:
        """Check ``labels`` (``ValueError`` naming a bad one; not if ``checked`` already; a
        classifier also adds the new classes, :meth:`SGBClassifier._register`); the number of
        classes before, for :meth:`_unregister`."""
        if not checked:
            self._encode(labels)
        return 0

    def _check_labels(self, labels: Sequence[Any]) -> None:
        """``ValueError`` naming a bad label (changes nothing)."""
        self._encode(labels)

    def _unregister(self, n_classes: int) -> None:
        """Forget the classes after the first ``n_classes`` (a classifier's)."""

    def _buffer(self, row: list[float], y: Any, undo: tuple[int, int]) -> None:
        """Append one example; a full buffer is a round. If the round raises, the example is
        taken back out and the features and classes it brought (after the first ``undo[0]``
        and ``undo[1]``) forgotten, so the call changed nothing (the booster's round is all or
        nothing; a first round that raises forgets the feature names too)."""
        self._x.append(row)
        self._y.append(y)
        if len(self._x) >= self.batch_size:
            try:
                self.flush()
            except BaseException:
                self._x.pop()
                self._y.pop()
                self._forget(undo)
                if self.booster_ is None and not self._x:  # no example was ever accepted
                    self._set_features(None)
                raise

    def learn_many(self, X: Any, y: Any) -> None:
        """Buffer every row of ``X`` (a pandas ``DataFrame`` or a sequence of dicts) with its
        label in ``y``; each full buffer is one round. Every row and label is checked before any
        is buffered: a bad one raises naming its feature and row, and nothing is learnt. Then it
        is one :meth:`learn_one` per row (features and classes seen for the first time are
        added as they come): if a row is refused or a round fails, the rows before it stay
        learnt."""
        try:
            labels = list(y.to_numpy() if hasattr(y, "to_numpy") else y)
        except TypeError:
            raise ValueError(f"y must be a sequence of labels, one per row of X, got "
                             f"{type(y).__name__}") from None
        features, vectors = _rows(X, self.features, self._limit, new_features=True)
        if len(vectors) != len(labels):
            raise ValueError(f"{len(vectors)} rows but {len(labels)} labels")
        if not vectors:
            return
        self._check_labels(labels)  # a bad label raises now, not at the round
        if hasattr(X, "columns"):  # every column in every row: the rows as checked
            for row, label in zip(vectors, labels, strict=True):
                self._accept(features, row, label, checked=True)
            return
        for x, label in zip(X, labels, strict=True):  # a feature may come at any row
            self.learn_one(x, label)

    def export(self, n_learners: int | None = None, output: str = "scores") -> torch.nn.Module:
        """The model learnt so far as a plain ``nn.Module`` (:func:`torchboost.export.
        export_booster`) on float rows whose columns follow :attr:`learnt_features`: scores
        ``(n, m)`` (the regressor's predictions in column 0), or for the classifier
        ``output="proba"`` / ``"label"`` (indices into :attr:`SGBClassifier.classes_`)."""
        if self.booster_ is None:
            raise ValueError("nothing to export before the first boosting round (learn_one "
                             "fills a buffer of batch_size examples first)")
        return self.booster_.export(n_learners, output)

    @property
    def learnt_features(self) -> list[Hashable]:
        """The features the booster has learnt from: :attr:`features` but those first seen
        since its last round (it grows to take them at the next round)."""
        if self.booster_ is None or self.features is None:
            return []
        assert self.booster_.input_shape is not None
        width = self.booster_.input_shape[0]
        return self.features if width == len(self.features) else self.features[:width]

    # --- prediction --------------------------------------------------------------------------
    def _tensor(self, rows: list[list[float]]) -> torch.Tensor:
        """Rows as float64 (the booster casts them to its learners' dtype, and says so when a
        value overflows that dtype)."""
        return torch.tensor(rows, dtype=torch.float64, device=self.device)

    def _scores_many(self, X: Any) -> np.ndarray | None:
        """Raw booster outputs ``(n, m)`` for ``X`` (``None`` before the first round)."""
        if self.booster_ is None:
            return None
        _, vectors = _rows(X, self.learnt_features, self._limit)
        if not vectors:
            return np.zeros((0, self.booster_.out_dim))
        with threads(thread_count(self.n_threads, self.device, self.booster_, len(vectors))):
            out = self.booster_.predict(self._tensor(vectors))
        return out.to("cpu", torch.float64).numpy()

    def _scores_one(self, x: dict[Hashable, Any]) -> np.ndarray | None:
        if self.booster_ is None:
            return None
        with threads(thread_count(self.n_threads, self.device, self.booster_, 1)):
            out = self.booster_.predict(self._tensor([self._vector(x)]))
        return out[0].to("cpu", torch.float64).numpy()


class SGBRegressor(_RiverBoosting, base.MiniBatchRegressor):
    """A river regressor (squared loss by default); see the module docstring.

    Before the first round it predicts the mean of the targets buffered so far (0 before any).
    """

    _is_classifier = False

    def _default_loss(self) -> str:
        return "squared"

    def _n_outputs(self) -> int:
        return 1

    def _encode(self, y: Sequence[Any]) -> torch.Tensor:
        limit = self._limit
        values = _plain_floats(y, limit)
        if values is None:
            for i, v in enumerate(y):
                try:
                    _number("", v, limit)
                except ValueError:
                    raise ValueError(f"label {v!r} (row {i}) is not a finite number within the "
                                     f"learners' range (±{limit:.3g}); nothing was "
                                     "learnt") from None
            values = [float(v) for v in y]  # each fine (their sum overflowed, say)
        return torch.tensor(values, dtype=torch_dtype(self.dtype))

    def _before_first_round(self) -> float:
        return float(np.mean(self._y)) if self._y else 0.0

    def predict_one(self, x: dict[Hashable, Any]) -> float:
        scores = self._scores_one(x)
        return self._before_first_round() if scores is None else float(scores[0])

    def predict_many(self, X: Any) -> Any:
        """Predictions for every row: a pandas ``Series`` for a ``DataFrame``, else a list."""
        scores = self._scores_many(X)
        values = ([self._before_first_round()] * len(_as_list(X)) if scores is None
                  else scores[:, 0].tolist())
        return _series(values, X)


class SGBClassifier(_RiverBoosting, base.MiniBatchClassifier):
    """A river classifier: class-incremental, or the fixed set ``classes`` lists (the module
    docstring); :attr:`classes_` are its classes so far, in the order of its outputs. Before the
    first round the probabilities are those of the labels buffered so far (uniform before any;
    ``False``/``True`` before any label, river's binary convention)."""

    _is_classifier = True

    def __init__(self, classes: Sequence[Hashable] | None = None,
                 booster: str | type[Booster] = "sgb", n_learners: int = 8, hidden: int = 10,
                 activation: str = "sigmoid", learner: LearnerFactory | None = None,
                 loss: str | None = None, booster_kwargs: dict[str, Any] | None = None,
                 optimizer: str | type[torch.optim.Optimizer] = "schedule_free",
                 learning_rate: float | None = None, batch_size: int = 32, seed: int = 0,
                 device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32",
                 n_threads: int | str | None = "auto", lr_schedule: str = "constant",
                 chained: bool = False, averaging_window: int | None = None) -> None:
        super().__init__(booster, n_learners, hidden, activation, learner, loss, booster_kwargs,
                         optimizer, learning_rate, batch_size, seed, device, dtype, n_threads,
                         lr_schedule, chained, averaging_window)
        self.classes = classes
        if isinstance(classes, str | bytes):  # list("ogb") would be the labels o, g and b
            raise ValueError(f"classes must list the labels, got the string {classes!r}; the "
                             f"booster comes second, by name: SGBClassifier(booster={classes!r})")
        if classes is not None:
            labels = list(classes)
            if len(labels) < 2 or len(set(labels)) != len(labels):
                raise ValueError(f"classes must list at least 2 distinct labels, got {classes!r}")
        #: the classes so far, in the order of the booster's outputs (module docstring)
        self._labels: list[Hashable] = [] if classes is None else labels
        self._index = {label: i for i, label in enumerate(self._labels)}

    @classmethod
    def _unit_test_params(cls) -> Any:
        yield {"n_learners": 2, "batch_size": 4}

    @property
    def classes_(self) -> list[Hashable]:
        """The classes so far, in the order of the booster's outputs: ``export(output="label")``
        gives indices into this list, ``export(output="proba")`` its columns."""
        return list(self._labels)

    @property
    def _multiclass(self) -> bool:
        """Whether it can learn more than two classes (river reads it): without ``classes``,
        yes."""
        return self.classes is None or len(self._labels) > 2

    def _default_loss(self) -> str:
        return "logistic" if len(self._labels) <= 2 else "softmax"

    def _n_outputs(self) -> int:
        return max(2, len(self._labels))

    def _encode(self, y: Sequence[Any]) -> torch.Tensor:
        try:
            return torch.tensor([self._index[label] for label in y], dtype=torch.int64)
        except TypeError:  # an unhashable label: a list, a dict
            raise ValueError(f"labels must be hashable class labels among {self._labels}, got "
                             f"{next(v for v in y if not isinstance(v, Hashable))!r}") from None
        except KeyError as error:
            raise ValueError(f"label {error.args[0]!r} is not among the classes {self._labels} "
                             "given by classes=[...] (list every label there, or leave classes "
                             "out to add the classes as they come)") from None

    def _register(self, labels: Sequence[Any], checked: bool = False) -> int:
        """Without ``classes``, add the labels not seen before (:meth:`_new_classes`); the
        number of classes before."""
        before = len(self._labels)
        if checked and self.classes is not None:
            return before
        added = self._new_classes(labels)
        if added:
            self._labels = self._labels + added
            self._index = {label: i for i, label in enumerate(self._labels)}
        return before

    def _check_labels(self, labels: Sequence[Any]) -> None:
        self._new_classes(labels)

    def _new_classes(self, labels: Sequence[Any]) -> list[Hashable]:
        """The classes ``labels`` would add, in the order they come (a first ``bool`` label
        brings ``False`` and ``True``, river's binary convention); ``ValueError`` for a label
        that cannot be a class, one not among fixed ``classes``, or a third class that a binary
        loss cannot take. Changes nothing."""
        if self.classes is not None:
            self._encode(labels)
            return []
        new: dict[Hashable, None] = {}
        for label in labels:
            try:
                if _is_nan(label):
                    raise TypeError
                if label not in self._index:  # an unhashable one (in a tuple too) raises
                    new[label] = None
            except TypeError:
                raise ValueError(f"labels must be hashable class labels, not NaN or missing; "
                                 f"got {label!r}; nothing was learnt") from None
        added = list(new)
        if added and not self._labels and isinstance(added[0], bool | np.bool_):
            added = [False, True] + [label for label in added if label not in (False, True)]
        if len(self._labels) + len(added) > 2:
            self._require_more_classes()
        return added

    def _require_more_classes(self) -> None:
        """``ValueError`` where the loss is binary (a user's ``loss``)."""
        if self.loss is not None and self.loss != "softmax":
            raise ValueError(f"the stream brings a class beyond {self._labels}, but loss="
                             f"{self.loss!r} is binary: leave loss out (softmax for more than "
                             "2 classes) or list every label with classes=[...]")

    def _grows(self, n_classes: int) -> bool:
        return len(self._labels) > max(n_classes, 2)  # a second class fills the binary slot

    def _classes_after(self, n_classes: int) -> list[Hashable]:
        return [f"class {label!r}" for label in self._labels[n_classes:]]

    def _unregister(self, n_classes: int) -> None:
        if len(self._labels) > n_classes:
            self._labels = self._labels[:n_classes]
            self._index = {label: i for i, label in enumerate(self._labels)}

    def _grown(self, booster: Booster) -> Booster:
        """``booster``, or a grown copy of it where the stream brought features or classes it
        has not seen: a binary booster becomes a softmax one whose logits are 0 for the first
        class and the binary score for the second (the same probabilities), and every new
        class starts at ``y^0`` (the log of its frequency)."""
        booster = super()._grown(booster)
        loss, n_outputs = self._loss_name(), self._n_outputs()
        if booster.loss.name == loss and booster.out_dim == booster_outputs(loss, n_outputs):
            return booster
        if booster.loss.name == loss:  # softmax: the old classes keep their outputs
            index = list(range(booster.out_dim))
        elif booster.loss.name == "logistic" and loss == "softmax":
            index = [1]  # the binary score is class 1's logit against class 0's 0
        else:  # pragma: no cover - _require_more_classes refuses the rest
            raise AssertionError(f"cannot grow a {booster.loss.name} booster to {loss}")
        assert self.features is not None
        known = max(2, booster.out_dim)  # the classes the booster has outputs for
        grown = self._widened(booster, len(self.features), loss, n_outputs,
                              Growth(outputs=index, initial_at=range(known, n_outputs)),
                              drop=("stall.",))
        if booster.loss.name == "logistic":  # a binary booster's statistic counts class 1;
            with torch.no_grad():            # softmax's counts each class
                grown.label_statistic_sum[0] = (booster.samples_seen
                                                - booster.label_statistic_sum[0])
        return grown

    def _before_first_round(self) -> dict[Hashable, float]:
        """The buffered labels' frequencies, add-one (uniform before any label; before any
        class is seen, over ``False``/``True``: river's binary convention)."""
        labels = self._labels or [False, True]
        counts = np.ones(len(labels))
        for label in self._y:
            counts[self._index[label]] += 1
        return dict(zip(labels, (counts / counts.sum()).tolist(), strict=True))

    def _proba(self, scores: np.ndarray) -> np.ndarray:
        """``(n, k)`` probabilities of the ``k`` classes so far from ``(n, m)`` scores (hinge:
        0/1 by the sign; a binary booster that has seen one class: 1 for it; 0 for a class
        still buffered, which the booster learns from its next round)."""
        s = torch.from_numpy(scores)
        if s.shape[1] == 1:
            loss = self.booster_.loss.name if self.booster_ is not None else "logistic"
            p = torch.sigmoid(s[:, 0]) if loss == "logistic" else (s[:, 0] > 0).double()
            proba = torch.stack([1.0 - p, p], 1)[:, :len(self._labels)]
            proba = proba / proba.sum(1, keepdim=True)
        else:
            proba = torch.softmax(s, 1)
        return torch.nn.functional.pad(proba, (0, len(self._labels) - proba.shape[1])).numpy()

    def predict_proba_one(self, x: dict[Hashable, Any], **kwargs: Any) -> dict[Hashable, float]:
        scores = self._scores_one(x)
        if scores is None:
            return self._before_first_round()
        proba = self._proba(scores[None])[0]
        return dict(zip(self._labels, proba.tolist(), strict=True))

    def predict_proba_many(self, X: Any) -> Any:
        """Probabilities per row and class: a pandas ``DataFrame`` (columns: the classes) for a
        ``DataFrame``, else a list of dicts (before the first round, :meth:`predict_proba_one`'s
        for every row)."""
        scores = self._scores_many(X)
        if scores is None:
            prior = self._before_first_round()
            rows: list[dict[Hashable, float]] = [dict(prior) for _ in range(len(_as_list(X)))]
        else:
            rows = [dict(zip(self._labels, p, strict=True)) for p in self._proba(scores).tolist()]
        if hasattr(X, "columns"):
            import pandas as pd

            columns = list(rows[0]) if rows else self._labels
            return pd.DataFrame(rows, index=X.index, columns=columns)
        return rows

    def predict_many(self, X: Any) -> Any:
        """Predicted labels: a pandas ``Series`` for a ``DataFrame``, else a list."""
        scores = self._scores_many(X)
        if scores is None:
            prior = self._before_first_round()
            guess = max(prior, key=prior.get) if prior else None  # None: no class seen yet
            values: list[Any] = [guess] * len(_as_list(X))
        else:
            values = [self._labels[i] for i in self._proba(scores).argmax(1).tolist()]
        return _series(values, X)


def _as_list(X: Any) -> Any:
    return X if hasattr(X, "columns") else list(X)


def _series(values: list[Any], X: Any) -> Any:
    if hasattr(X, "columns"):
        import pandas as pd

        return pd.Series(values, index=X.index)
    return values
