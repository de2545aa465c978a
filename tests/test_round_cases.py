"""Issue 31: a round is one transaction whatever raises, and the cases a red team broke in
loading, diagnostics and the adapters; each test failed before its fix."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from boost_helpers import regression_stream
from torch import nn

from torchboost import OGB, SGB, StagewiseGB, TwoLayerNet
from torchboost.testing import assert_same


def test_load_state_dict_with_assign_is_refused_and_changes_nothing():
    """assign=True replaced the parameters under the optimizers: the booster never learnt
    again while its rounds kept counting."""
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    booster.learn(torch.randn(8, 3), torch.randn(8))
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match="assign=True"):
        booster.load_state_dict(copy.deepcopy(before), assign=True)
    assert_same(booster.state_dict(), before)


def test_edges_of_learners_that_never_trained_are_zero_not_perfect():
    torch.manual_seed(0)
    gb = StagewiseGB(lambda: TwoLayerNet(3, 4), n_learners=3)
    assert gb.diagnostics()["edge"].tolist() == [0.0, 0.0, 0.0]
    x, y = regression_stream(64, d=3)
    gb.learn(x, y)
    edges = gb.diagnostics()["edge"]
    assert edges[1:].tolist() == [0.0, 0.0] and edges[0] != 0


def test_ogb_radius_warning_turned_into_an_error_rolls_the_round_back():
    torch.manual_seed(0)
    booster = OGB(lambda: nn.Linear(3, 1), n_learners=4, standardize=False)
    before = copy.deepcopy(booster.state_dict())
    x, y = torch.randn(16, 3), 10 + torch.randn(16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="radius"):
            booster.learn(x, y)
    assert_same(booster.state_dict(), before)
    assert (booster.rounds, booster._radius_warned) == (0, False)
    with pytest.warns(UserWarning, match="radius"):  # warned, as the first round should
        booster.learn(x, y)


def test_partial_fit_after_a_cosine_fit_is_refused_instead_of_learning_at_rate_zero():
    from torchboost.sklearn import SGBRegressor

    X, y = np.random.default_rng(0).normal(size=(64, 3)), np.random.default_rng(1).normal(
        size=64)
    model = SGBRegressor(n_learners=2, max_passes=1, lr_schedule="cosine", optimizer="adam",
                         n_threads=1).fit(X, y)
    state = copy.deepcopy(model.booster_.state_dict())
    with pytest.raises(ValueError, match="rate reached 0"):
        model.partial_fit(X[:8], y[:8])
    assert_same(model.booster_.state_dict(), state)
    default = SGBRegressor(n_learners=2, max_passes=1, n_threads=1).fit(X, y)
    rounds = default.booster_.rounds
    default.partial_fit(X[:8], y[:8])  # schedule-free: nothing decays, the stream goes on
    assert default.booster_.rounds == rounds + 1


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_a_schedule_shorter_than_the_stream_raises_and_changes_nothing(mode):
    """OneCycleLR past total_steps raised after the parameters, the optimizer state and the
    standardiser had moved, and again on every later call."""
    from functools import partial

    from torch.optim.lr_scheduler import OneCycleLR

    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2, mode=mode,
                  optimizer=torch.optim.Adam,
                  lr_scheduler=partial(OneCycleLR, max_lr=0.05, total_steps=3))
    x, y = regression_stream(64, d=3)
    for t in range(3):
        booster.learn(x[t * 8:(t + 1) * 8], y[t * 8:(t + 1) * 8])
    before = copy.deepcopy(booster.state_dict())
    for _ in range(2):
        with pytest.raises(ValueError, match="total"):
            booster.learn(x[24:32], y[24:32])
        assert_same(booster.state_dict(), before)
    assert booster.rounds == 3


def _sk_cases():
    import pandas as pd
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    return {
        "sparse X": (sp.csr_matrix(X), y, {}, "sparse"),
        "column names of mixed types": (pd.DataFrame(X, columns=["a", 1, "c"]), y, {},
                                        "str"),
        "a datetime column": (pd.DataFrame({"a": X[:, 0], "t": pd.date_range(
            "2020", periods=40)}), y, {}, "not numbers"),
        "text regression targets": (X, np.array(["a"] * 40), {}, "numbers"),
        "device tpu": (X, y, {"device": "tpu"}, "device"),
        "device meta": (X, y, {"device": "meta"}, "meta"),
    }


@pytest.mark.parametrize("case", list(_sk_cases()))
def test_scikit_learn_names_what_it_cannot_take(case):
    """Issue 31: these raised raw TypeError, UFuncTypeError or RuntimeError."""
    from torchboost.sklearn import SGBRegressor

    X, y, options, words = _sk_cases()[case]
    model = SGBRegressor(n_learners=2, max_passes=1, n_threads=1, **options)
    with pytest.raises(ValueError, match=words):
        model.fit(X, y)
    assert not hasattr(model, "booster_")
    if not options:
        with pytest.raises(ValueError, match=words):
            model.partial_fit(X, y)


def test_a_classifier_names_none_among_its_labels():
    from torchboost.sklearn import SGBClassifier

    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ValueError, match="None"):
        SGBClassifier(n_learners=2, max_passes=1).fit(X, np.array([0, 1, None, 1] * 10,
                                                                  dtype=object))


def test_a_stall_warning_turned_into_an_error_rolls_the_round_back():
    """Red team (issue 31): under -W error the BoostingStallWarning escaped learn() after the
    round had been committed (rounds, parameters and the monitor's 'warned' had moved)."""
    from torchboost import BoostingStallWarning

    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randn(8)
    booster = SGB(lambda: TwoLayerNet(4, 5), n_learners=3, optimizer_kwargs={"lr": 1e-12},
                  stall_window=8)
    for _ in range(20):
        before = copy.deepcopy(booster.state_dict())
        rounds = booster.rounds
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                booster.learn(x, y)
        except BoostingStallWarning:
            assert_same(before, booster.state_dict())
            assert booster.rounds == rounds and not booster.stall.warned
            break
    else:
        raise AssertionError("no stall warning in 20 rounds")
    with pytest.warns(BoostingStallWarning):  # it warns again, as the round should
        booster.learn(x, y)


def test_the_auto_mode_fall_back_warning_turned_into_an_error_changes_nothing():
    """Red team (issue 31): learn() raised the fall-back warning after the learners had been
    rebuilt as a loop."""

    class ItemNet(nn.Module):  # .item() on a learner tensor: cannot run under vmap
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :1] if self.linear.weight.sum().item() > 1e9 else self.linear(x)

    torch.manual_seed(0)
    booster = SGB(ItemNet, n_learners=2)
    before = copy.deepcopy(booster.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="falls back"):
            booster.learn(torch.randn(8, 4), torch.randn(8))
    assert booster.learners.mode == "stacked"
    assert_same(before, booster.state_dict())
    with pytest.warns(UserWarning, match="falls back"):
        booster.learn(torch.randn(8, 4), torch.randn(8))
    assert booster.learners.mode == "loop"


# --- red team (issue 31): raw errors that are now ValueErrors in our words -----------------------
def _red_team_calls():
    from functools import partial

    from torch.optim.lr_scheduler import CosineAnnealingLR

    from torchboost.boosters.registry import register_booster

    def net():
        return TwoLayerNet(4, 5)

    return {
        "a scheduler factory missing its arguments": lambda: SGB(
            net, n_learners=2, lr_scheduler=partial(CosineAnnealingLR)),
        "an unknown optimizer keyword": lambda: SGB(net, n_learners=2,
                                                    optimizer_kwargs={"bogus": 1}),
        "a learned step's rate of text": lambda: SGB(net, n_learners=2, step="learned",
                                                     step_lr="a"),
        "register_booster of a name": lambda: register_booster("my_booster"),
    }


@pytest.mark.parametrize("case", list(_red_team_calls()))
def test_red_team_constructor_cases_are_value_errors(case):
    with pytest.raises(ValueError):
        _red_team_calls()[case]()


def test_red_team_estimator_cases_are_value_errors_and_keep_no_fit():
    from torchboost.river import SGBRegressor as RiverRegressor
    from torchboost.sklearn import SGBClassifier, SGBRegressor

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(32, 3)), rng.normal(size=32)
    for model in (SGBRegressor(n_learners=2, max_passes=1, booster_kwargs={"bogus": 1}),
                  SGBRegressor(n_learners=2, max_passes=1, learner=5),
                  SGBRegressor(n_learners=2, max_passes=1, standardize="no")):
        with pytest.raises(ValueError):
            model.fit(X, y)
        assert not hasattr(model, "booster_")
    with pytest.raises(ValueError, match="sortable"):
        SGBClassifier(n_learners=2).partial_fit(X[:4], np.array([0, 1, 0, 1]),
                                                classes=[0, 1, None])
    with pytest.raises(ValueError, match="sortable"):
        SGBClassifier(n_learners=2, max_passes=1).fit(X, np.array(["a", 1] * 16, dtype=object))
    river = RiverRegressor(n_learners=2)
    river.learn_one({"a": 1.0}, 1.0)
    with pytest.raises(ValueError, match="dict"):
        river.learn_one([1.0], 1.0)


def test_malformed_states_are_value_errors_and_load_nothing():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(4, 5), n_learners=2)
    state = copy.deepcopy(booster.state_dict())
    for bad in (None, [1, 2], {**state, "_extra_state": 5},
                {**state, "learners._extra_state": {"mode": "stacked"}}):
        with pytest.raises(ValueError):
            booster.load_state_dict(bad)
        assert_same(booster.state_dict(), state)


def test_multiclass_edges_before_any_example_are_zero():
    from torchboost.boosters.registry import BOOSTERS
    from torchboost.testing import example_booster

    for name in ("adaboost_olm", "oza_boost", "online_mbbm"):
        assert example_booster(BOOSTERS[name]).diagnostics()["edge"].tolist() == [0.0] * 3


def test_the_estimators_build_a_registry_entry_with_its_own_recipe():
    """Red team (issue 31): the estimators read only spec.cls: an entry's build and task were
    ignored, and a build returning something else was never checked."""
    from torchboost.boosters.registry import BOOSTERS, BoosterSpec, register_booster
    from torchboost.sklearn import SGBClassifier, SGBRegressor

    entries = [
        BoosterSpec("half_step_test", SGB, estimator=True, build=lambda learners, *, n_learners,
                    n_outputs, **o: SGB(learners, n_learners=n_learners, n_outputs=n_outputs,
                                        step=0.1, **o)),
        BoosterSpec("not_a_booster_test", SGB, estimator=True, build=lambda learners, **o: 5),
        BoosterSpec("votes_test", SGB, "classification", estimator=True),
    ]
    for spec in entries:
        register_booster(spec)
    try:
        X = np.random.default_rng(0).normal(size=(32, 3))
        model = SGBRegressor(booster="half_step_test", n_learners=2, max_passes=1).fit(
            X, X[:, 0])
        assert model.booster_.step == 0.1
        with pytest.raises(ValueError, match="not a Booster"):
            SGBRegressor(booster="not_a_booster_test", n_learners=2, max_passes=1).fit(
                X, X[:, 0])
        with pytest.raises(ValueError, match="classification"):
            SGBRegressor(booster="votes_test", n_learners=2, max_passes=1).fit(X, X[:, 0])
        single = SGBClassifier(booster="single", n_learners=2, max_passes=1).fit(
            X, (X[:, 0] > 0).astype(int))
        assert single.booster_.loss.name == "logistic"
    finally:
        for spec in entries:
            del BOOSTERS[spec.name]


def test_a_chained_schedule_that_raises_is_put_back_with_its_parts():
    """A user's LambdaLR inside a SequentialLR raises at its 4th step: the whole schedule
    (the chain and its parts) and the round are as they were."""
    from torch.optim.lr_scheduler import LambdaLR, LinearLR, SequentialLR

    def failing(t: int) -> float:
        if t >= 2:
            raise RuntimeError("the user's lambda")
        return 1.0

    def schedule(optimizer):
        return SequentialLR(optimizer, [LinearLR(optimizer, 0.5, total_iters=2),
                                        LambdaLR(optimizer, failing)], milestones=[2])

    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer=torch.optim.Adam,
                  lr_scheduler=schedule)
    x, y = regression_stream(64, d=3)
    raised = 0
    for t in range(6):
        before = copy.deepcopy(booster.state_dict())
        try:
            booster.learn(x[t * 8:(t + 1) * 8], y[t * 8:(t + 1) * 8])
        except RuntimeError:
            raised += 1
            assert_same(booster.state_dict(), before)
    assert raised > 0 and booster.rounds == 6 - raised
