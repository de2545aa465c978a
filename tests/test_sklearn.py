"""The scikit-learn estimators: sklearn's own estimator checks, every booster, streaming."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("sklearn")

from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.utils.estimator_checks import parametrize_with_checks

from torchboost import SGB
from torchboost.boosters.default_lr import DEFAULT_LR
from torchboost.sklearn import BOOSTERS, SGBClassifier, SGBRegressor

#: Small enough for the checks to run in seconds, good enough for their accuracy thresholds
#: (one intra-op thread: tiny batches gain nothing from more on a busy machine).
SMALL = {"n_learners": 4, "max_passes": 6, "batch_size": 50, "learning_rate": 0.05,
         "n_threads": 1}

#: The checks scikit-learn itself skips here (no expected failures are declared):
#: ``check_array_api_input`` (needs SCIPY_ARRAY_API=1 and an array-API library; the estimators
#: convert to numpy/torch themselves) and ``check_*_data_not_an_array`` (needs pandas, not a
#: dependency). Checks for ``sample_weight`` do not apply (``fit`` takes none).


@parametrize_with_checks([SGBRegressor(**SMALL), SGBClassifier(**SMALL)])
def test_sklearn_estimator_checks(estimator, check) -> None:
    check(estimator)


def linear(n_features: int, n_outputs: int) -> nn.Module:
    """A learner factory (module level, so that the estimator pickles)."""
    return nn.Linear(n_features, n_outputs)


@pytest.fixture(scope="module")
def regression() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_regression(200, 5, noise=5.0, random_state=0)
    return X, 100.0 + y  # an offset and a large scale: the target standardisation's job


@pytest.fixture(scope="module")
def three_classes() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(200, 5, n_informative=3, n_classes=3, random_state=0)
    return X, np.array(["a", "b", "c"])[y]


@pytest.mark.parametrize("booster", sorted(BOOSTERS))
def test_every_streaming_booster_fits(booster, regression, three_classes) -> None:
    X, y = regression
    reg = SGBRegressor(booster, **SMALL, random_state=0).fit(X, y)
    assert reg.booster_.__class__ is BOOSTERS[booster]
    assert reg.predict(X).shape == (200,) and reg.score(X, y) > 0.3
    X, y = three_classes
    clf = SGBClassifier(booster, **SMALL, random_state=0).fit(X, y)
    assert clf.classes_.tolist() == ["a", "b", "c"]
    proba = clf.predict_proba(X)
    assert proba.shape == (200, 3) and np.allclose(proba.sum(1), 1.0)
    assert clf.score(X, y) > 0.5
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(1)])


def test_binary_classifier_scores_and_probabilities(three_classes) -> None:
    X, y = three_classes
    y = np.where(y == "a", 1, -1)
    clf = SGBClassifier(**SMALL, random_state=0).fit(X, y)
    assert clf.booster_.loss.name == "logistic" and clf.classes_.tolist() == [-1, 1]
    scores, proba = clf.decision_function(X), clf.predict_proba(X)
    assert scores.shape == (200,) and proba.shape == (200, 2)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-scores)), rtol=1e-6)
    np.testing.assert_array_equal(clf.predict(X), np.where(scores > 0, 1, -1))
    hinge = SGBClassifier(loss="hinge", booster="residual_sgb", **SMALL).fit(X, y)
    assert not hasattr(hinge, "predict_proba") and hinge.score(X, y) > 0.6
    two_scores = SGBClassifier(loss="softmax", **SMALL).fit(X, y)
    assert two_scores.decision_function(X).shape == (200, 2)
    assert np.allclose(two_scores.predict_proba(X).sum(1), 1.0)
    with pytest.raises(ValueError, match="does not fit 3 classes"):
        SGBClassifier(loss="hinge", **SMALL).fit(*three_classes)


def test_fit_is_seeded_and_leaves_the_global_rng_alone(regression) -> None:
    X, y = regression
    state, n_threads = torch.get_rng_state(), torch.get_num_threads()
    first = SGBRegressor(**SMALL, random_state=3).fit(X, y).predict(X)
    assert torch.equal(state, torch.get_rng_state()) and torch.get_num_threads() == n_threads
    np.testing.assert_array_equal(first, SGBRegressor(**SMALL, random_state=3).fit(X, y)
                                  .predict(X))
    assert not np.allclose(first, SGBRegressor(**SMALL, random_state=4).fit(X, y).predict(X))


def test_partial_fit_is_one_streaming_round(three_classes) -> None:
    X, y = three_classes
    clf = SGBClassifier(**SMALL, random_state=0)
    with pytest.raises(ValueError, match="classes="):
        clf.partial_fit(X[:50], y[:50])
    for start in range(0, 200, 50):
        clf.partial_fit(X[start:start + 50], y[start:start + 50], classes=["a", "b", "c"])
    assert clf.booster_.rounds == 4 and clf.booster_.samples_seen == 200
    with pytest.raises(ValueError, match="not among"):
        clf.partial_fit(X[:5], np.array(["a", "b", "z", "a", "a"]))
    assert clf.booster_.rounds == 4
    fitted = clone(clf).fit(X, y)
    assert fitted.booster_.rounds == 6 * 4 and fitted.n_iter_ == 6
    fitted.partial_fit(X[:10], y[:10])  # continues a fit
    assert fitted.booster_.rounds == 25


def test_params_clone_learner_factory_dtype_and_pickle(regression) -> None:
    X, y = regression
    reg = SGBRegressor(learner=linear, dtype="float64", booster_kwargs={"step": 0.25},
                       **SMALL, random_state=0)
    params = reg.get_params()
    assert params["learner"] is linear and params["booster_kwargs"] == {"step": 0.25}
    twin = clone(reg).set_params(n_learners=2)
    assert twin.n_learners == 2 and reg.n_learners == 4
    reg.fit(X, y)
    assert isinstance(reg.booster_, SGB) and reg.booster_.step == 0.25
    assert all(isinstance(m, nn.Linear) for m in reg.booster_.learners.learner(0).modules())
    assert next(reg.booster_.parameters()).dtype == torch.float64
    assert reg.score(X, y) > 0.5  # a linear target
    again = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(again.predict(X), reg.predict(X))


@pytest.mark.parametrize("bad", [{"booster": "gb"}, {"optimizer": "lbfgs"}, {"dtype": "int8"},
                                 {"max_passes": 0}, {"n_threads": 0}, {"chained": "False"}])
def test_bad_parameters_raise_at_fit(bad, regression) -> None:
    X, y = regression
    est = SGBRegressor(**{**SMALL, **bad})  # __init__ stores, never validates
    with pytest.raises(ValueError):  # chained="False" had built chained learners (truthy)
        est.fit(X, y)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_device(three_classes) -> None:
    X, y = three_classes
    clf = SGBClassifier(**SMALL, device="cuda", random_state=0).fit(X, y)
    assert next(clf.booster_.parameters()).is_cuda and clf.score(X, y) > 0.6


def test_defaults_the_boosters_rule_newton_targets_for_classifiers_and_schedules():
    X, y = make_classification(n_samples=300, n_features=80, n_informative=6, random_state=0)
    clf = SGBClassifier(n_learners=3, max_passes=2, random_state=0, n_threads=1).fit(X, y)
    booster = clf.booster_
    assert booster.targets == "newton"  # the README's recommendation for classification
    # the rule: DEFAULT_LR up to fan-in 64, DEFAULT_LR · 64 / 80 for the 80-input first layer
    rates = sorted({g["lr"] for g in booster.learners.optimizers[0].param_groups})
    assert rates == pytest.approx([DEFAULT_LR * 64 / 80, DEFAULT_LR])
    assert not booster.learners.schedulers
    paper = SGBClassifier(n_learners=3, max_passes=1, random_state=0, n_threads=1,
                          booster_kwargs={"targets": "gradient"}).fit(X, y)
    assert paper.booster_.targets == "gradient"
    reg = SGBRegressor(n_learners=3, max_passes=1, random_state=0, n_threads=1).fit(X, y * 1.0)
    assert reg.booster_.targets == "gradient"
    # cosine over fit's 3 passes of ceil(300 / 32) = 10 rounds: the rate ends at 0
    cosine = SGBClassifier(n_learners=3, max_passes=3, random_state=0, n_threads=1,
                           learning_rate=0.01, lr_schedule="cosine").fit(X, y)
    scheduler = cosine.booster_.learners.schedulers[0]
    assert scheduler.last_epoch == 30
    assert cosine.booster_.learners.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.0)
    assert clone(cosine).get_params()["lr_schedule"] == "cosine"
    decay = SGBRegressor(n_learners=2, learning_rate=0.01, lr_schedule="decay", n_threads=1)
    for start in range(0, 300, 30):
        decay.partial_fit(X[start:start + 30], y[start:start + 30] * 1.0)
    # decay_schedule(300): after 10 rounds the rate is 0.01 · (1 + 10/300) ** -0.5
    rate = decay.booster_.learners.optimizers[0].param_groups[0]["lr"]
    assert rate == pytest.approx(0.01 * (1 + 10 / 300) ** -0.5)
    with pytest.raises(ValueError, match="use lr_schedule='decay'"):
        SGBRegressor(lr_schedule="cosine").partial_fit(X[:10], y[:10] * 1.0)
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        SGBRegressor(lr_schedule="step").fit(X, y * 1.0)
    again = pickle.loads(pickle.dumps(cosine))
    np.testing.assert_allclose(again.predict_proba(X[:5]), cosine.predict_proba(X[:5]))


def test_dataframes_fit_name_their_columns_and_a_mismatch_is_refused():
    pd = pytest.importorskip("pandas")
    from torchboost.sklearn import SGBRegressor

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(200, 3)), columns=["age", "income", "height"])
    target = frame["age"] * 2 + frame["income"]
    reg = SGBRegressor(n_learners=3, max_passes=2, random_state=0).fit(frame, target)
    assert reg.feature_names_in_.tolist() == ["age", "income", "height"]
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        np.testing.assert_array_equal(reg.predict(frame), reg.predict(frame.to_numpy()))
    with pytest.raises(ValueError, match=r"columns \['income', 'age', 'height'\] .* another order"):
        reg.predict(frame[["income", "age", "height"]])
    with pytest.raises(ValueError, match=r"missing \['height'\], unexpected \['weight'\]"):
        reg.predict(frame.rename(columns={"height": "weight"}))
    with pytest.raises(ValueError, match="another order"):  # and partial_fit the same
        reg.partial_fit(frame[["income", "age", "height"]], target)


def test_learning_rate_joins_the_optimizer_kwargs_of_booster_kwargs():
    """learning_rate was dropped silently when booster_kwargs set optimizer_kwargs (found by a
    red-team review): it now joins them, and a second, different rate is refused."""
    X = np.random.RandomState(0).randn(32, 3).astype("float32")
    betas = {"optimizer_kwargs": {"betas": (0.92, 0.999)}}
    est = SGBRegressor(n_learners=2, learning_rate=0.05, booster_kwargs=betas).fit(X, X[:, 0])
    group = est.booster_.learners.optimizers[0].param_groups[0]
    assert (group["lr"], group["betas"]) == (0.05, (0.92, 0.999))
    with pytest.raises(ValueError, match="disagree"):
        SGBRegressor(n_learners=2, learning_rate=0.05,
                     booster_kwargs={"optimizer_kwargs": {"lr": 0.1}}).fit(X, X[:, 0])


def test_a_regressor_tells_ogb_the_labels_it_standardised():
    """The estimator standardises the targets; an OGB whose own standardisation booster_kwargs
    turn off is told so (the bound and radius warning of standardised labels), and is not told
    where the estimator leaves the targets alone."""
    import warnings

    from torchboost.boosters.online_linear import STANDARDIZED_BOUND

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), 50 + 10 * rng.normal(size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # labels at under 6 standard deviations: no warning
        told = SGBRegressor("ogb", n_learners=3, booster_kwargs={"standardize": False},
                            random_state=0).fit(X, y)
    assert told.booster_.standardized_labels is True
    assert told.booster_.bound == STANDARDIZED_BOUND
    raw = SGBRegressor("ogb", n_learners=3, booster_kwargs={"standardize": False},
                       standardize=False, random_state=0)
    with pytest.warns(UserWarning, match="labels reach norm"):
        raw.fit(X, y)
    assert raw.booster_.standardized_labels is False and raw.booster_.bound == 1.0


def test_partial_fit_names_a_device_set_after_fit(regression) -> None:
    """A red-team finding: torch's 'Expected one of cpu, cuda, ...' before."""
    X, y = regression
    reg = SGBRegressor(**SMALL).partial_fit(X[:32], y[:32]).set_params(device="foo")
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda', 'cuda:N'"):
        reg.partial_fit(X[:32], y[:32])

