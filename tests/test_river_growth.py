"""Streams that bring a class or a feature not seen before: the river estimators grow their
booster (:mod:`torchboost.boosters.growth`), keeping what it learnt."""

from __future__ import annotations

import pickle
import random

import pytest
import torch
from boost_helpers import InterruptedLinear

pytest.importorskip("river")

from torchboost.boosters.growth import Growth
from torchboost.river import SGBClassifier, SGBRegressor

CENTRES = {"a": (0.0, 3.0), "b": (3.0, -2.0), "c": (-3.0, -2.0)}


def gaussians(labels: str, n: int, rng: random.Random) -> list[tuple[dict[str, float], str]]:
    rows = []
    for _ in range(n):
        label = rng.choice(labels)
        cx, cy = CENTRES[label]
        rows.append(({"x": cx + rng.gauss(0, 1), "y": cy + rng.gauss(0, 1)}, label))
    return rows


# --- the state, by hand ---------------------------------------------------------------------
def test_growth_by_hand() -> None:
    features = Growth(features=2)
    old = torch.tensor([[1.0, 2.0], [3.0, 4.0]])  # (hidden 2, features 2)
    assert features.tensor(old, torch.Size([2, 3]), "w").tolist() == [[1.0, 2.0, 0.0],
                                                                        [3.0, 4.0, 0.0]]
    moments = torch.tensor([[1.0, 3.0], [5.0, 7.0]])  # second moments: the row's mean
    assert features.tensor(moments, torch.Size([2, 3]), "v", by_mean=True).tolist() == [
        [1.0, 3.0, 2.0], [5.0, 7.0, 6.0]]
    assert features.tensor(old, old.shape, "w") is old
    # outputs: old output 0 becomes output 1 of 3; output 2 takes its initial values
    outputs = Growth(outputs=[1], initial_at=[2])
    grown = outputs.tensor(torch.tensor([[5.0], [6.0]]), torch.Size([2, 3]), "b",
                           initial=torch.tensor([[7.0, 8.0, 9.0]] * 2))
    assert grown.tolist() == [[0.0, 5.0, 9.0], [0.0, 6.0, 9.0]]
    with pytest.raises(ValueError, match=r"axis 1 is 4 long, neither the old width \(2\)"):
        features.tensor(torch.zeros(3, 4), torch.Size([3, 6]), "e")
    with pytest.raises(ValueError, match="one at a time"):
        Growth(features=2, outputs=[0])


def test_growth_past_the_fan_in_rule_keeps_the_optimizer_state_by_name() -> None:
    """64 features share one rate; at 65 the default rule gives the first layer its own
    (a red-team finding: the optimizers' groups no longer matched by position)."""
    model = SGBRegressor(n_learners=2, batch_size=4, n_threads=1)
    rng = random.Random(0)
    for _ in range(8):
        model.learn_one({f"f{j}": rng.gauss(0, 1) for j in range(64)}, 1.0)
    before = model.booster_
    for _ in range(4):
        model.learn_one({f"f{j}": rng.gauss(0, 1) for j in range(65)}, 1.0)
    grown = model.booster_
    assert grown.input_shape == (65,) and grown.rounds == before.rounds + 1
    old_groups = before.learners.optimizers[0].param_groups
    new_groups = grown.learners.optimizers[0].param_groups
    assert len(old_groups) == 1 and len(new_groups) == 3  # the wide layer apart
    assert {g["k"] for g in new_groups} == {old_groups[0]["k"] + 1}
    wide = next(g for g in new_groups if g["lr"] < old_groups[0]["lr"])
    assert wide["lr"] == pytest.approx(old_groups[0]["lr"] * 64 / 65)


# --- what growing keeps -----------------------------------------------------------------------
def test_a_new_feature_keeps_every_prediction_until_it_is_nonzero() -> None:
    rng = random.Random(0)
    model = SGBRegressor(n_learners=3, batch_size=16, n_threads=1)
    for _ in range(64):
        a = rng.gauss(0, 1)
        model.learn_one({"a": a}, 2 * a)
    booster = model.booster_
    probe = [{"a": rng.gauss(0, 1)} for _ in range(8)]
    before = [model.predict_one(x) for x in probe]
    model.learn_one({"a": 0.5, "b": 1.0}, 1.0)  # buffered: the booster grows at the round
    assert model.features == ["a", "b"] and model.learnt_features == ["a"]
    assert [model.predict_one(x) for x in probe] == before
    grown = model._grown(booster)
    assert grown is not booster and grown.input_shape == (2,)
    assert booster.input_shape == (1,)  # the old one is left as it is
    rows = torch.tensor([[x["a"], 0.0] for x in probe], dtype=torch.float64)
    assert grown.predict(rows)[:, 0].tolist() == pytest.approx(before, abs=1e-6)
    assert grown.samples_seen == booster.samples_seen and grown.rounds == booster.rounds
    first = grown.state_dict()["learners.engine.stacked_params.1__weight"]
    assert first.shape[-1] == 2 and bool((first[..., 1] == 0).all())


def test_a_third_class_keeps_the_first_twos_odds() -> None:
    rng = random.Random(0)
    model = SGBClassifier(n_learners=3, batch_size=16, n_threads=1)
    for x, y in gaussians("ab", 64, rng):
        model.learn_one(x, y)
    booster = model.booster_
    assert booster.loss.name == "logistic" and model._labels == ["b", "a"]  # as they came
    probe = [x for x, _ in gaussians("abc", 8, rng)]
    before = [model.predict_proba_one(x) for x in probe]
    x, _ = gaussians("c", 1, rng)[0]
    model.learn_one(x, "c")
    assert model._labels == ["b", "a", "c"] and model.booster_ is booster
    assert [model.predict_proba_one(x) for x in probe] == [{**p, "c": 0.0} for p in before]
    grown = model._grown(booster)
    assert grown.loss.name == "softmax" and grown.out_dim == 3
    rows = torch.tensor([[p["x"], p["y"]] for p in probe], dtype=torch.float64)
    scores = grown.predict(rows).double()
    odds = [p["a"] / p["b"] for p in before]  # class 1 against class 0, as before
    assert (scores[:, 1] - scores[:, 0]).exp().tolist() == pytest.approx(odds, rel=1e-4)
    assert torch.softmax(scores, 1)[:, 2].max() < 1e-3  # y0: the log of its frequency, 0 so far


def test_pickling_and_export_follow_the_grown_model() -> None:
    rng = random.Random(1)
    model = SGBClassifier(n_learners=2, batch_size=16, n_threads=1)
    for x, y in gaussians("ab", 48, rng) + gaussians("abc", 48, rng):
        model.learn_one(x, y)
    model.learn_one({"x": 0.0, "y": 0.0, "z": 1.0}, "a")
    model.flush()
    assert model.features == ["x", "y", "z"] and model.booster_.out_dim == 3
    probe = [x for x, _ in gaussians("abc", 6, rng)]
    copy = pickle.loads(pickle.dumps(model))
    assert [copy.predict_proba_one(x) for x in probe] == [model.predict_proba_one(x)
                                                           for x in probe]
    module = model.export(output="proba")
    rows = torch.tensor([[x["x"], x["y"], 0.0] for x in probe])
    expected = [model.predict_proba_one(x)[c] for x in probe for c in "abc"]
    assert module(rows).flatten().tolist() == pytest.approx(expected, abs=1e-5)
    copy.learn_one(probe[0], "b")  # resumes
    copy.flush()
    assert copy.booster_.rounds == model.booster_.rounds + 1


# --- the two streams ------------------------------------------------------------------
def test_a_third_class_after_600_examples_is_learnt() -> None:
    """Done-when of the issue: accuracy at least 0.8 on the last 300 (0.95 here; seeds 0-5
    and the comparison with the classes listed up front: experiments/stream_growth.py)."""
    rng = random.Random(0)
    stream = gaussians("ab", 600, rng) + gaussians("abc", 900, rng)
    model, hits = SGBClassifier(n_threads=1), []
    for x, y in stream:
        hits.append(model.predict_one(x) == y)
        model.learn_one(x, y)
    assert model._labels == ["b", "a", "c"] and model.booster_.out_dim == 3
    assert sum(hits[-300:]) / 300 >= 0.8


def test_a_feature_after_600_examples_is_used() -> None:
    """Done-when of the issue: the prequential error on the last 600 at most half that of the
    model never fed the feature (0.04 of it here)."""
    rng = random.Random(0)
    stream = []
    for i in range(1800):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        stream.append(({"a": a, "b": b} if i >= 600 else {"a": a}, a + 2 * b))
    errors = {}
    for fed in (True, False):
        model, squared = SGBRegressor(n_threads=1), []
        for x, y in stream:
            x = x if fed else {"a": x["a"]}
            squared.append((model.predict_one(x) - y) ** 2)
            model.learn_one(x, y)
        errors[fed] = sum(squared[-600:]) / 600
    assert errors[True] <= 0.5 * errors[False]


# --- refusals and the all-or-nothing promise --------------------------------------------------
def test_a_binary_loss_refuses_a_third_class_and_changes_nothing() -> None:
    model = SGBClassifier(loss="hinge", booster="residual_sgb", n_learners=2, batch_size=4,
                          n_threads=1)
    model.learn_one({"x": 1.0}, "a")
    model.learn_one({"x": 2.0}, "b")
    with pytest.raises(ValueError, match="loss='hinge' is binary"):
        model.learn_one({"x": 3.0}, "c")
    assert model._labels == ["a", "b"] and model.n_pending == 2
    with pytest.raises(ValueError, match="not among the classes"):
        SGBClassifier(classes=["a", "b"]).learn_one({"x": 1.0}, "c")
    with pytest.raises(ValueError, match="not NaN"):
        SGBClassifier().learn_one({"x": 1.0}, float("nan"))


class _Failing(InterruptedLinear):
    fail = False


def test_a_round_that_raises_forgets_the_features_and_classes_its_example_brought() -> None:
    model = SGBClassifier(n_learners=2, batch_size=2, learner=_Failing, n_threads=1)
    model.learn_many([{"x": 1.0}, {"x": -1.0}], ["a", "b"])
    booster, state = model.booster_, model.booster_.state_dict()
    model.learn_one({"x": 0.5}, "a")
    _Failing.fail = True
    try:
        with pytest.raises(KeyboardInterrupt):
            model.learn_one({"x": 0.0, "new": 1.0}, "c")
    finally:
        _Failing.fail = False
    assert model.features == ["x"] and model._labels == ["a", "b"]
    assert model.booster_ is booster and model.n_pending == 1 and model._x == [[0.5]]
    assert all(torch.equal(v, booster.state_dict()[k]) for k, v in state.items()
               if torch.is_tensor(v))
    model.learn_one({"x": 0.0, "new": 1.0}, "c")  # now it goes through
    assert model.learnt_features == ["x", "new"] and model.booster_.out_dim == 3


def test_the_first_labels_set_the_classes() -> None:
    model = SGBClassifier(n_learners=2, batch_size=2, n_threads=1)
    assert model.predict_proba_one({"x": 0.0}) == {False: 0.5, True: 0.5}  # river's binary
    model.learn_one({"x": 1.0}, "only")
    model.learn_one({"x": 2.0}, "only")  # one class seen: a binary booster, a free slot
    assert model._labels == ["only"] and model.predict_proba_one({"x": 1.0}) == {"only": 1.0}
    binary = SGBClassifier(n_learners=2, batch_size=2, n_threads=1)
    binary.learn_one({"x": 1.0}, True)  # a bool brings False and True, river's convention
    assert binary._labels == [False, True]
    binary.learn_one({"x": 2.0}, "other")
    assert binary._labels == [False, True, "other"]
    numbers = SGBClassifier(n_learners=2, batch_size=2, n_threads=1)
    for label in (1, 2, 3):  # integers are classes as they come, not bools (a red-team finding)
        numbers.learn_one({"x": float(label)}, label)
    assert numbers._labels == [1, 2, 3] and numbers.predict_one({"x": 1.0}) in (1, 2, 3)
    with pytest.raises(ValueError, match="the first example has no features"):
        SGBClassifier().learn_one({}, 1)


def test_a_feature_the_learners_cannot_take_is_refused_when_it_comes() -> None:
    """A learner whose hidden width follows its input width cannot grow: the example bringing
    the feature is refused at once, and later rounds go on (before: accepted, then every round
    failed, blamed on innocent examples; a red-team finding)."""
    def odd(d: int, m: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(d, d + 3), torch.nn.Tanh(),
                                   torch.nn.Linear(d + 3, m))

    model = SGBRegressor(learner=odd, n_learners=2, batch_size=4, n_threads=1)
    for i in range(8):
        model.learn_one({"a": float(i), "b": 1.0}, 1.0)
    model.learn_one({"a": 1.0, "b": 1.0}, 1.0)
    with pytest.raises(ValueError, match=r"brings \['c'\], which the booster cannot grow"):
        model.learn_one({"a": 1.0, "b": 1.0, "c": 1.0}, 1.0)
    assert model.features == ["a", "b"] and model._x == [[1.0, 1.0]]
    for _ in range(3):
        model.learn_one({"a": 2.0, "b": 1.0}, 1.0)
    assert model.booster_.rounds == 3 and model.n_pending == 0


def test_learn_many_is_learn_one_row_by_row_with_new_classes_and_features() -> None:
    rng = random.Random(3)
    rows = gaussians("ab", 6, rng) + gaussians("abc", 10, rng)
    rows[9] = ({**rows[9][0], "z": 1.0}, rows[9][1])  # a feature first seen in row 9
    one, many = (SGBClassifier(n_learners=2, batch_size=4, n_threads=1) for _ in range(2))
    for x, y in rows:
        one.learn_one(x, y)
    many.learn_many([x for x, _ in rows], [y for _, y in rows])
    probe = {"x": 0.5, "y": -0.5, "z": 1.0}
    assert one._labels == many._labels and one.features == many.features
    assert many.predict_proba_one(probe) == pytest.approx(one.predict_proba_one(probe))


def test_labels_that_cannot_be_classes_are_refused_in_our_words() -> None:
    pandas = pytest.importorskip("pandas")
    model = SGBClassifier(n_learners=2, batch_size=2, n_threads=1)
    for label in (pandas.NA, ([1],), [1], float("nan")):
        with pytest.raises(ValueError, match="hashable class labels, not NaN or missing"):
            model.learn_one({"x": 1.0}, label)
    assert model._labels == [] and model.n_pending == 0 and model.features is None


def test_estimators_pickled_before_growth_learn_on() -> None:
    """Attributes added since have class-level defaults (before: AttributeError)."""
    model = SGBClassifier(n_learners=2, batch_size=4, n_threads=1)
    for x, y in gaussians("ab", 8, random.Random(0)):
        model.learn_one(x, y)
    del model.__dict__["_known"], model.booster_.__dict__["newton_clip"]
    del model.booster_.learners.__dict__["averaging_window"]
    model = pickle.loads(pickle.dumps(model))
    for x, y in gaussians("c", 2, random.Random(1)) + gaussians("abc", 6, random.Random(1)):
        model.learn_one({**x, "z": 1.0}, y)
    assert model.booster_.out_dim == 3 and model.learnt_features == ["x", "y", "z"]


def test_predict_proba_many_before_the_first_round_has_a_row_per_row() -> None:
    """A newcomer's finding: a DataFrame's columns were taken for its rows."""
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame({"x": [0.0, 1.0, 2.0, 3.0, 4.0], "y": [1.0] * 5})
    model = SGBClassifier(n_learners=2, batch_size=8, n_threads=1)
    fresh = model.predict_proba_many(frame)
    assert fresh.shape == (5, 2) and list(fresh.columns) == [False, True]
    model.learn_one({"x": 1.0, "y": 1.0}, "a")
    proba = model.predict_proba_many(frame)
    assert proba.shape == (5, 1) and proba["a"].tolist() == [1.0] * 5
    assert model.classes_ == ["a"] and model.classes_ is not model._labels


def test_the_booster_grown_when_a_feature_comes_is_the_one_its_round_trains() -> None:
    """Growing is done once: the check at arrival keeps its grown booster for the round."""
    model = SGBRegressor(n_learners=2, batch_size=4, n_threads=1)
    for i in range(4):
        model.learn_one({"a": float(i)}, float(i))
    model.learn_one({"a": 1.0, "b": 2.0}, 1.0)
    assert model._next is not None
    grown = model._next[1]
    for i in range(3):
        model.learn_one({"a": float(i), "b": 1.0}, 1.0)
    assert model.booster_ is grown and model._next is None and grown.input_shape == (2,)
