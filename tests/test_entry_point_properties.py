"""One property-based suite over every public entry point (issue 24): for generated bad input
the call raises a ``ValueError`` naming the problem and the object is bitwise as it was
(parameters, buffers, optimizer and schedule state, counters, adapter attributes, the caller's
tensors and files); for generated good input it succeeds.

Entry points: every registered booster's constructor, ``learn``, ``predict`` and
``load_state_dict``; the scikit-learn estimators' ``fit``, ``partial_fit`` and ``predict``; the
river estimators' ``learn_one`` and ``learn_many``; ``DataStream`` and ``ScreenedStream``; and
``check_checkpoint`` / ``latest_checkpoint``. The "ci" profile of ``conftest.py`` runs 30
generated cases per test, derandomised; ``HYPOTHESIS_PROFILE=explore`` runs 500.
"""

from __future__ import annotations

import copy
import pickle
import threading
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch import Tensor

from torchboost.boosters.registry import BOOSTERS, BoosterSpec
from torchboost.testing import (
    ROUND_POINTS,
    assert_same,
    check_raise_anywhere_restores_everything,
    example_batch,
    example_booster,
    raise_in_round,
)

SPECS = sorted(BOOSTERS.values(), key=lambda spec: spec.name)
NON_FINITE = [float("nan"), float("inf"), float("-inf")]
seeds = st.integers(0, 2**31 - 1)
quiet = settings(suppress_health_check=[HealthCheck.too_slow])


def _booster_state(booster) -> Any:
    return copy.deepcopy({"state": booster.state_dict(), "mode": booster.learners.mode,
                      "training": booster.training,
                      "optimizers": [o.state_dict() for o in booster.learners.optimizers]})


_TRAINED: dict[str, Any] = {}


def _trained(spec: BoosterSpec):
    """A booster of ``spec`` after one round (so its input shape is fixed), built once: the
    bad-input properties leave it unchanged, which is what they check."""
    if spec.name not in _TRAINED:
        booster = example_booster(spec)
        booster.learn(*example_batch(spec, 0))
        _TRAINED[spec.name] = booster
    return _TRAINED[spec.name]


# --- boosters: learn / predict ------------------------------------------------------------------
@st.composite
def bad_batches(draw, spec: BoosterSpec, labels: bool = True) -> tuple[str, Tensor, Any]:
    """A batch that is wrong in one generated way, and what is wrong with it."""
    batch = draw(st.integers(1, 12))
    g = torch.Generator().manual_seed(draw(seeds))
    x = torch.randn(batch, 3, generator=g) * draw(st.floats(1e-2, 10))
    classes = spec.task == "classification"
    y = (torch.randint(0, 3, (batch,), generator=g) if classes
         else torch.tanh(torch.randn(batch, generator=g)) * 0.8)
    kinds = ["non-finite feature", "feature width", "feature rank", "empty batch",
             "integer features"]
    if labels:
        kinds += ["label count", "label out of range" if classes else "non-finite label"]
    kind = draw(st.sampled_from(kinds))
    if kind == "non-finite feature":
        x[draw(st.integers(0, batch - 1)), draw(st.integers(0, 2))] = draw(
            st.sampled_from(NON_FINITE))
    elif kind == "feature width":
        x = torch.randn(batch, draw(st.sampled_from([1, 2, 4, 7])), generator=g)
    elif kind == "feature rank":
        x = draw(st.sampled_from([x[:, 0], x[:, :, None], x.reshape(-1)]))
    elif kind == "empty batch":
        x, y = x[:0], y[:0]
    elif kind == "integer features":
        x = x.round().to(draw(st.sampled_from([torch.int64, torch.int32, torch.bool])))
    elif kind == "label count":
        y = y[:-1] if batch > 1 else torch.cat([y, y])
    elif kind == "label out of range":
        y[draw(st.integers(0, batch - 1))] = draw(st.one_of(st.integers(3, 10**6),
                                                           st.integers(-10**6, -1)))
    else:
        y[draw(st.integers(0, batch - 1))] = draw(st.sampled_from(NON_FINITE))
    return kind, x, y


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@quiet
@given(data=st.data())
def test_bad_batches_are_refused_and_change_nothing(spec: BoosterSpec, data) -> None:
    booster = _trained(spec)
    kind, x, y = data.draw(bad_batches(spec))
    given_x, given_y = x.clone(), y.clone()
    before = _booster_state(booster)
    with pytest.raises(ValueError) as refused:
        booster.learn(x, y)
    assert str(refused.value), kind
    assert_same(before, _booster_state(booster), f"{spec.name}: state changed by {kind}")
    assert_same((x, y), (given_x, given_y), "the caller's tensors")


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@quiet
@given(data=st.data())
def test_bad_features_at_predict_are_refused_and_change_nothing(spec: BoosterSpec,
                                                                data) -> None:
    booster = _trained(spec)
    kind, x, _ = data.draw(bad_batches(spec, labels=False))
    call = data.draw(st.sampled_from(["predict", "predict_label"] if spec.task ==
                                     "classification" else ["predict"]))
    before = _booster_state(booster)
    with pytest.raises(ValueError):
        getattr(booster, call)(x)
    assert_same(before, _booster_state(booster), f"{spec.name}: {call} changed by {kind}")


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@quiet
@given(batch=st.integers(1, 24), scale=st.floats(1e-3, 10), seed=seeds,
       rounds=st.integers(1, 3))
def test_good_batches_are_learnt(spec: BoosterSpec, batch: int, scale: float, seed: int,
                                 rounds: int) -> None:
    booster = example_booster(spec, seed=seed % 7)
    g = torch.Generator().manual_seed(seed)
    for _ in range(rounds):
        x = torch.randn(batch, 3, generator=g, dtype=torch.float64) * scale
        y = (torch.randint(0, 3, (batch,), generator=g) if spec.task == "classification"
             else torch.tanh(x.sum(1)) * 0.8)
        out = booster.learn(x, y)
        assert out.shape == (batch, booster.out_dim) and bool(torch.isfinite(out).all())
    assert booster.rounds == rounds and booster.samples_seen == rounds * batch
    assert booster.predict(x).shape == (batch, booster.out_dim)


# --- boosters: load_state_dict and constructors -------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@quiet
@given(data=st.data())
def test_states_that_do_not_fit_are_refused_and_load_nothing(spec: BoosterSpec, data) -> None:
    booster = _trained(spec)
    other = example_booster(spec, seed=1)
    other.learn(*example_batch(spec, 1))
    state = dict(other.state_dict())
    tensors = sorted(k for k, v in state.items() if torch.is_tensor(v) and v.ndim > 0)
    kind = data.draw(st.sampled_from(["missing key", "unexpected key", "another shape"]))
    key = data.draw(st.sampled_from(tensors))
    if kind == "missing key":
        del state[key]
    elif kind == "unexpected key":
        state[data.draw(st.sampled_from(["extra", "learners.extra", key + "_copy"]))] = \
            torch.zeros(2)
    else:
        grown = list(state[key].shape)
        grown[data.draw(st.integers(0, len(grown) - 1))] += data.draw(st.integers(1, 3))
        state[key] = torch.zeros(grown, dtype=state[key].dtype)
    before = _booster_state(booster)
    with pytest.raises(ValueError, match="does not fit this booster"):
        booster.load_state_dict(state)
    assert_same(before, _booster_state(booster), f"{spec.name}: {kind} {key} loaded part")


BAD_COUNTS = [0, -1, 1.5, True, "3", float("nan"), None]


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@quiet
@given(name=st.sampled_from(["n_learners", "n_outputs"]), value=st.sampled_from(BAD_COUNTS))
def test_constructors_refuse_bad_counts_naming_them(spec: BoosterSpec, name: str,
                                                    value: Any) -> None:
    assume(not (spec.name == "single" and name == "n_learners"))  # one learner by definition
    options = {"n_learners": 2, "n_outputs": 3 if spec.task == "classification" else 1,
               name: value}
    with pytest.raises(ValueError, match="n_classes" if name == "n_outputs" and spec.task ==
                       "classification" and spec.build is not None else name):
        spec.make(lambda: torch.nn.Linear(3, options["n_outputs"] if isinstance(
            options["n_outputs"], int) and options["n_outputs"] > 0 else 1), **options)


@quiet
@given(name=st.sampled_from(["step", "stall_window", "hessian_floor", "lr_output_scale",
                             "standardize", "mode"]),
       value=st.sampled_from([0, -2.0, float("nan"), float("inf"), "x", None, 2.5, True]))
def test_sgb_refuses_bad_hyper_parameters_naming_them(name: str, value: Any) -> None:
    from torchboost import SGB

    valid = {"step": [2.5, None], "hessian_floor": [2.5], "lr_output_scale": [2.5],
             "standardize": [True], "stall_window": [None], "mode": []}
    assume(value not in valid[name] or (value is True and name != "standardize"))  # bad only
    with pytest.raises(ValueError, match=name):
        SGB(lambda: torch.nn.Linear(3, 1), n_learners=2, **{name: value})


# --- scikit-learn estimators --------------------------------------------------------------------
_FITTED: dict[str, Any] = {}


def _fitted(kind: str):
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBClassifier, SGBRegressor

    if kind not in _FITTED:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(48, 3))
        options = dict(n_learners=2, max_passes=1, random_state=0, n_threads=1, batch_size=16)
        _FITTED[kind] = (SGBRegressor(**options).fit(X, X[:, 0]) if kind == "regressor"
                         else SGBClassifier(**options).fit(X, np.where(X[:, 0] > 0, "a", "b")))
    return _FITTED[kind]


def _estimator_state(estimator) -> Any:
    attributes = {k: v for k, v in vars(estimator).items()
                  if k.endswith("_") and not k.startswith("__") and k != "booster_"}
    return copy.deepcopy({"attributes": attributes, "booster": _booster_state(estimator.booster_)})


@st.composite
def bad_tables(draw, classifier: bool) -> tuple[str, Any, Any]:
    rows = draw(st.integers(1, 10))
    rng = np.random.default_rng(draw(seeds))
    X = rng.normal(size=(rows, 3))
    y = np.where(X[:, 0] > 0, "a", "b") if classifier else X[:, 0].copy()
    kind = draw(st.sampled_from(["non-finite feature", "feature width", "empty", "text feature",
                                 "one-dimensional", "label count",
                                 "unknown label" if classifier else "non-finite label"]))
    if kind == "non-finite feature":
        X[draw(st.integers(0, rows - 1)), draw(st.integers(0, 2))] = draw(
            st.sampled_from(NON_FINITE))
    elif kind == "feature width":
        X = rng.normal(size=(rows, draw(st.sampled_from([1, 2, 5]))))
    elif kind == "empty":
        X, y = X[:0], y[:0]
    elif kind == "text feature":
        X = X.astype(object)
        X[draw(st.integers(0, rows - 1)), draw(st.integers(0, 2))] = draw(
            st.sampled_from(["x", "1,5", ""]))
    elif kind == "one-dimensional":
        X = X[:, 0]
    elif kind == "label count":
        y = np.concatenate([y, y[:1]])
    elif kind == "unknown label":
        y[draw(st.integers(0, rows - 1))] = "c"
    else:
        y[draw(st.integers(0, rows - 1))] = draw(st.sampled_from(NON_FINITE))
    return kind, X, y


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
@pytest.mark.parametrize("call", ["fit", "partial_fit", "predict"])
@quiet
@given(data=st.data())
def test_estimators_refuse_bad_tables_and_keep_their_fit(kind: str, call: str, data) -> None:
    estimator = _fitted(kind)
    what, X, y = data.draw(bad_tables(kind == "classifier"))
    assume(not (call == "predict" and "label" in what))  # predict takes no labels
    assume(not (call == "fit" and what in ("feature width", "unknown label")))  # a refit may
    before = _estimator_state(estimator)
    with pytest.raises(ValueError):
        getattr(estimator, call)(*((X,) if call == "predict" else (X, y)))
    assert_same(before, _estimator_state(estimator), f"{kind}.{call} changed by {what}")


# --- river estimators ---------------------------------------------------------------------------
BAD_VALUES = [float("nan"), float("inf"), None, "x", "3", b"3", 1e40, [1.0], {"a": 1},
              np.float32("nan")]


def _river_state(model) -> Any:
    return copy.deepcopy({"features": model.features, "x": model._x, "y": model._y,
                      "booster": None if model.booster_ is None
                      else _booster_state(model.booster_)})


@quiet
@given(good=st.integers(0, 5), bad_at=st.sampled_from(["a", "b", "c"]),
       value=st.sampled_from(BAD_VALUES), many=st.booleans(), first=st.booleans(),
       classifier=st.booleans())
def test_river_refuses_bad_examples_naming_the_feature(good: int, bad_at: str, value: Any,
                                                        many: bool, first: bool,
                                                        classifier: bool) -> None:
    pytest.importorskip("river")
    from torchboost.river import SGBClassifier, SGBRegressor

    model = (SGBClassifier if classifier else SGBRegressor)(n_learners=2, batch_size=4,
                                                           n_threads=1)
    rng = np.random.default_rng(good)
    rows = [{"a": float(r[0]), "b": float(r[1]), "c": float(r[2])}
            for r in rng.normal(size=(0 if first else good, 3))]
    for row in rows:
        model.learn_one(row, bool(row["a"] > 0) if classifier else row["a"])
    before = _river_state(model)
    bad = {"a": 0.5, "b": -0.5, "c": 1.0, bad_at: value}
    with pytest.raises(ValueError, match=f"feature {bad_at!r}"):
        if many:
            model.learn_many([{"a": 0.1, "b": 0.2, "c": 0.3}, bad], [True, False] if classifier
                             else [0.1, 0.5])
        else:
            model.learn_one(bad, True if classifier else 0.5)
    assert_same(before, _river_state(model), "the river model")
    model.learn_one({"a": 0.5, "b": -0.5, "c": 1.0}, True if classifier else 0.5)
    assert model.n_pending + (model.booster_.samples_seen if model.booster_ else 0) == \
        len(rows) + 1, "a good example was lost"


# --- streams ------------------------------------------------------------------------------------
STREAM_PARAMETERS = {"DataStream": ["batch_size", "warmup", "seed", "start_batch", "shuffle",
                                    "drop_last"],
                     "LoaderStream": ["batch_size", "seed", "start_batch", "num_workers",
                                      "shuffle", "drop_last"],
                     "MultiPassStream": ["passes"]}


@quiet
@given(data=st.data(), value=st.sampled_from([0, -1, 2.5, True, "4", None, float("nan")]))
@pytest.mark.parametrize("stream", sorted(STREAM_PARAMETERS))
def test_streams_refuse_bad_parameters_naming_them(stream: str, data, value: Any) -> None:
    from torch.utils.data import TensorDataset

    from torchboost.data import DataStream, LoaderStream, MultiPassStream

    name = data.draw(st.sampled_from(STREAM_PARAMETERS[stream]))
    flags = name in ("shuffle", "drop_last")
    assume(value is not True if flags else True)
    assume(not (name in ("seed", "start_batch", "num_workers") and value == 0))
    assume(not (name == "seed" and value == -1))  # any integer seeds a generator
    x, y = torch.randn(10, 3), torch.randn(10)
    given_x, given_y = x.clone(), y.clone()
    with pytest.raises(ValueError, match=name):
        if stream == "DataStream":
            DataStream(x, y, **{name: value})
        elif stream == "LoaderStream":
            LoaderStream(TensorDataset(x, y), **{name: value})
        else:
            MultiPassStream(lambda p: DataStream(x, y, seed=p), value)
    assert_same((x, y), (given_x, given_y), "the caller's tensors")


@pytest.mark.parametrize("spec", [BOOSTERS["sgb"], BOOSTERS["adaboost_olm"]],
                         ids=lambda spec: spec.name)
@quiet
@given(data=st.data())
def test_a_screened_stream_refuses_bad_rows_before_the_booster_sees_them(spec: BoosterSpec,
                                                                        data) -> None:
    from torchboost.data import BadInputError, ScreenedStream

    booster = _trained(spec)
    kind, x, y = data.draw(bad_batches(spec))
    assume(kind not in ("feature rank", "integer features", "label count"))  # whole batches:
    # learn's own checks
    before = _booster_state(booster)
    with pytest.raises(BadInputError):
        for bx, by in ScreenedStream([(x, y)], booster):
            booster.learn(bx, by)
    assert_same(before, _booster_state(booster), f"{spec.name}: {kind} reached the booster")


# --- checkpoint files ---------------------------------------------------------------------------
@quiet
@given(kind=st.sampled_from(["truncate", "flip", "zero", "empty"]), where=st.floats(0, 1),
       bit=st.integers(0, 7))
def test_checkpoint_checks_name_any_damage_and_skip_it(tmp_path_factory, kind: str,
                                                       where: float, bit: int) -> None:
    import os

    from torchboost.lightning import (
        AtomicCheckpointIO,
        CorruptCheckpointError,
        atomic_save,
        check_checkpoint,
        latest_checkpoint,
    )

    directory = tmp_path_factory.mktemp("ckpt")
    payload = {"state_dict": {"w": torch.arange(300.0)}, "epoch": 3}
    good = atomic_save(payload, directory / "good.ckpt")
    data = bytearray(good.read_bytes())
    position = min(int(where * len(data)), len(data) - 1)
    if kind == "truncate":
        data = data[:position]
    elif kind == "flip":
        data[position] ^= 1 << bit
    elif kind == "zero":
        data = bytearray(len(data))
    else:
        data = bytearray()
    damaged = directory / "damaged.ckpt"
    damaged.write_bytes(bytes(data))
    later = good.stat().st_mtime_ns + 10**9
    os.utime(damaged, ns=(later, later))
    try:
        check_checkpoint(damaged)
    except CorruptCheckpointError as error:
        assert "damaged.ckpt" in str(error)
        with pytest.raises(CorruptCheckpointError, match="damaged"):
            AtomicCheckpointIO().load_checkpoint(damaged)
        with pytest.warns(UserWarning, match="damaged.ckpt"):
            assert latest_checkpoint(directory) == good
    else:  # the damage missed everything that matters (zip padding, a comment)
        loaded = torch.load(damaged, weights_only=True)
        assert torch.equal(loaded["state_dict"]["w"], payload["state_dict"]["w"])
        assert loaded["epoch"] == 3
    assert damaged.read_bytes() == bytes(data), "the check changed the file"


@quiet
@given(payload=st.sampled_from([lambda: 0, (i for i in range(3)), threading.Lock()]),
       existing=st.booleans())
def test_a_failed_save_keeps_the_old_checkpoint_and_leaves_no_temporary_file(
        tmp_path_factory, payload: Any, existing: bool) -> None:
    from torchboost.lightning import atomic_save, check_checkpoint

    directory = tmp_path_factory.mktemp("save")
    target = directory / "last.ckpt"
    if existing:
        atomic_save({"epoch": 1}, target)
    before = target.read_bytes() if existing else None
    with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
        atomic_save({"state_dict": {}, "bad": payload}, target)
    assert sorted(p.name for p in directory.iterdir()) == (["last.ckpt"] if existing else [])
    if existing:
        assert target.read_bytes() == before
        check_checkpoint(target)


def test_the_suite_covers_every_registered_booster() -> None:
    assert {spec.name for spec in SPECS} == set(BOOSTERS) and len(SPECS) >= 9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for spec in SPECS:
            assert _trained(spec).rounds == 1


# --- issue 31: raise anywhere in a round --------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.name)
@quiet
@given(point=st.sampled_from(ROUND_POINTS), interrupt=st.booleans(), rounds=st.integers(0, 2))
def test_a_round_that_raises_anywhere_changes_nothing(spec: BoosterSpec, point: str,
                                                      interrupt: bool, rounds: int) -> None:
    """Wherever a round fails (the learners' forward, their objective, backward, after the
    optimizer step, a hook, the schedule) and whatever it raises (an error, Ctrl-C), the booster
    is bitwise as it was and its next round equals an uninterrupted twin's."""
    check_raise_anywhere_restores_everything(spec, point, interrupt, rounds)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
@quiet
@given(point=st.sampled_from([p for p in ROUND_POINTS if p != "schedule"]),
       interrupt=st.booleans())
def test_an_estimator_round_that_raises_anywhere_changes_nothing(kind: str, point: str,
                                                                 interrupt: bool) -> None:
    estimator, twin = copy.deepcopy(_fitted(kind)), copy.deepcopy(_fitted(kind))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(16, 3))
    y = np.where(X[:, 0] > 0, "a", "b") if kind == "classifier" else X[:, 0]
    before = _estimator_state(estimator)
    remove = raise_in_round(estimator.booster_, point, interrupt)
    with pytest.raises((Exception, KeyboardInterrupt), match="injected"):
        estimator.partial_fit(X, y)
    remove()
    assert_same(before, _estimator_state(estimator), f"{kind} after a failure at {point}")
    estimator.partial_fit(X, y)
    twin.partial_fit(X, y)
    assert_same(_estimator_state(twin), _estimator_state(estimator), f"{kind}: the next round")
