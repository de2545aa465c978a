"""``n_threads="auto"``: the estimators run small learners on one CPU thread and leave torch's
setting alone for large ones (and on other devices), restoring it after."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchboost import SGB, TwoLayerNet
from torchboost.river import SGBRegressor as RiverRegressor
from torchboost.sklearn import SGBRegressor
from torchboost.threads import AUTO_THREADS_WORK, thread_count, threads


def test_auto_is_one_thread_up_to_the_measured_work_and_torchs_setting_above():
    booster = SGB(lambda: TwoLayerNet(4, 5), n_learners=3)
    params = 3 * (4 * 5 + 5 + 5 + 1)
    rows = AUTO_THREADS_WORK // params
    assert thread_count("auto", "cpu", booster, rows) == 1
    assert thread_count("auto", "cpu", booster, rows + 1) is None
    assert thread_count("auto", "cuda", booster, 1) is None
    assert thread_count(3, "cpu", booster, 1) == 3 and thread_count(None, "cpu", booster, 1) is None
    for bad in (0, "many", True, 1.0):
        with (pytest.raises(ValueError, match="n_threads must be an int >= 1, 'auto' or None"),
              threads(thread_count(bad, "cpu", booster, 1))):
            pass


@pytest.mark.parametrize("estimator", [SGBRegressor, RiverRegressor])
def test_estimators_learn_and_predict_on_one_thread_by_default_and_restore(estimator,
                                                                           monkeypatch):
    seen = []
    learn, predict = SGB.learn, SGB.predict
    monkeypatch.setattr(SGB, "learn", lambda self, *a, **k: (seen.append(
        torch.get_num_threads()), learn(self, *a, **k))[1])
    monkeypatch.setattr(SGB, "predict", lambda self, *a, **k: (seen.append(
        torch.get_num_threads()), predict(self, *a, **k))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        X = np.random.default_rng(0).normal(size=(40, 3))
        if estimator is SGBRegressor:
            model = estimator(n_learners=2, max_passes=1, batch_size=8).fit(X, X[:, 0])
            model.predict(X)
        else:
            model = estimator(n_learners=2, batch_size=8)
            for row in X:
                model.learn_one(dict(enumerate(row)), float(row[0]))
            model.predict_one(dict(enumerate(X[0])))
        assert model.n_threads == "auto" and seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, "many", True, 1.5])
def test_constructors_refuse_a_bad_thread_count_by_name(bad):
    from torchboost.lightning import StreamingBoosterModule

    with pytest.raises(ValueError, match="n_threads must be an int >= 1, 'auto' or None"):
        RiverRegressor(n_threads=bad)
    with pytest.raises(ValueError, match="n_threads must be an int >= 1, 'auto' or None"):
        StreamingBoosterModule(SGB(lambda: TwoLayerNet(4, 5), n_learners=2), n_threads=bad)


def _seen_threads(booster, monkeypatch):
    """Thread counts seen inside the learners' forward during the booster's calls."""
    seen = []
    forward = type(booster.learners).forward
    monkeypatch.setattr(type(booster.learners), "forward", lambda self, *a, **k: (seen.append(
        torch.get_num_threads()), forward(self, *a, **k))[1])
    return seen


@pytest.mark.parametrize("n_threads, inside", [("auto", 1), (None, 2), (1, 1), (2, 2)])
def test_a_booster_used_directly_chooses_its_threads_and_restores_them(n_threads, inside,
                                                                      monkeypatch):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(4, 5), n_learners=3, n_threads=n_threads)
    seen = _seen_threads(booster, monkeypatch)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x, y = torch.randn(8, 4), torch.randn(8)
        booster.learn(x, y)
        booster.predict(x)
        booster.evaluate(x, y)
        booster.export()
        assert seen and set(seen) == {inside}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_booster_leaves_the_threads_to_an_enclosing_choice_and_restores_after_errors(
        monkeypatch):
    booster = SGB(lambda: TwoLayerNet(4, 5), n_learners=3)  # "auto": one thread alone
    seen = _seen_threads(booster, monkeypatch)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with threads(None):  # an estimator with n_threads=None: torch's setting stands
            booster.learn(torch.randn(8, 4), torch.randn(8))
        assert seen == [2]
        with pytest.raises(ValueError, match="contain NaN"):
            booster.learn(torch.full((8, 4), float("nan")), torch.randn(8))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="n_threads must be an int >= 1, 'auto' or None"):
        SGB(lambda: TwoLayerNet(4, 5), n_learners=3, n_threads=0)
