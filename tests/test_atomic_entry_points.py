"""Public entry points either succeed or change nothing (issue 24)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from torchboost import SGB, TwoLayerNet
from torchboost.testing import assert_same


def _trained(hidden: int, rounds: int, **options) -> SGB:
    torch.manual_seed(hidden)
    booster = SGB(lambda: TwoLayerNet(3, hidden), n_learners=2, **options)
    g = torch.Generator().manual_seed(rounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(rounds):
            booster.learn(torch.randn(16, 3, generator=g), torch.randn(16, generator=g))
    return booster


def test_loading_another_architecture_names_it_and_loads_nothing():
    saved = _trained(10, 3).state_dict()
    booster = _trained(20, 1)
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match=r"(?s)other shapes, so its learners have another "
                                         r"architecture.*size mismatch"):
        booster.load_state_dict(saved)
    assert_same(before, booster.state_dict())
    assert booster.rounds == 1
    booster.learn(torch.randn(16, 3), torch.randn(16))  # and it trains on
    assert booster.rounds == 2


def test_a_refused_configuration_leaves_the_mode_and_the_window_alone():
    saved = _trained(10, 3, mode="loop", stall_window=500).state_dict()
    booster = _trained(10, 1, step=0.3)  # stacked, window 2000, another step
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match="configured differently"):
        booster.load_state_dict(saved)
    assert booster.learners.mode == "stacked" and booster.stall.window == 2000
    assert_same(before, booster.state_dict())


class _Touch:
    """Unpickling this runs code: it creates ``path`` (stands in for a malicious checkpoint)."""

    def __init__(self, path) -> None:
        self.path = path

    def __reduce__(self):
        import pathlib
        return pathlib.Path.touch, (pathlib.Path(self.path),)


def test_a_zero_filled_checkpoint_is_named_and_skipped(tmp_path):
    import os

    from torchboost.lightning import (
        AtomicCheckpointIO,
        CorruptCheckpointError,
        atomic_save,
        check_checkpoint,
        latest_checkpoint,
    )

    good = atomic_save({"state_dict": {"w": torch.randn(100)}}, tmp_path / "good.ckpt")
    zeros = tmp_path / "zeros.ckpt"
    zeros.write_bytes(bytes(good.stat().st_size))  # what a power loss leaves behind
    stamp = good.stat().st_mtime_ns + 10**9
    os.utime(zeros, ns=(stamp, stamp))
    with pytest.raises(CorruptCheckpointError, match=r"zeros\.ckpt.*bytes are zero"):
        check_checkpoint(zeros)
    with pytest.raises(CorruptCheckpointError, match=r"zeros\.ckpt.*latest_checkpoint"):
        AtomicCheckpointIO().load_checkpoint(zeros)
    with pytest.warns(UserWarning, match=r"zeros\.ckpt"):
        assert latest_checkpoint(tmp_path) == good


def test_checking_a_legacy_checkpoint_never_runs_its_code(tmp_path):
    from torchboost.lightning import CorruptCheckpointError, check_checkpoint

    marker = tmp_path / "the-code-ran"
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "x": _Touch(marker)}, evil, _use_new_zipfile_serialization=False)
    with pytest.raises(CorruptCheckpointError, match=r"evil\.ckpt.*never runs it"):
        check_checkpoint(evil)
    assert not marker.exists()
    plain = tmp_path / "plain.ckpt"  # a legacy file of tensors and containers is fine
    torch.save({"state_dict": {"w": torch.ones(3)}, "epoch": 2}, plain,
               _use_new_zipfile_serialization=False)
    check_checkpoint(plain)


# --- scikit-learn estimators: a refused fit or partial_fit leaves the estimator as it was -------
def _sk_data(n: int = 60, d: int = 3, seed: int = 0):
    import numpy as np
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X[:, 0] - X[:, 1]


def _sk_attributes(estimator) -> dict:
    import numpy as np
    out = {}
    for key, value in estimator.__dict__.items():
        if key.endswith("_") and not key.startswith("_"):
            out[key] = value.copy() if isinstance(value, np.ndarray) else value
    return out


def test_a_refused_refit_keeps_the_previous_fit():
    import numpy as np
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBClassifier, SGBRegressor

    X, y = _sk_data()
    reg = SGBRegressor(n_learners=2, max_passes=2, random_state=0, n_threads=1).fit(X, y)
    before, prediction = _sk_attributes(reg), reg.predict(X)
    booster_state = copy.deepcopy(reg.booster_.state_dict())
    wider, _ = _sk_data(d=5, seed=1)
    with pytest.raises(ValueError, match="max_passes must be an int"):
        reg.set_params(max_passes=0).fit(wider * 100, y)
    assert_same(before, _sk_attributes(reg), "fitted attributes")
    assert reg.n_features_in_ == 3
    assert np.array_equal(reg.predict(X), prediction)
    assert_same(booster_state, reg.booster_.state_dict())

    labels = np.where(X[:, 0] > 0, "a", "b")
    clf = SGBClassifier(n_learners=2, max_passes=2, random_state=0, n_threads=1).fit(X, labels)
    before, prediction = _sk_attributes(clf), clf.predict(X)
    three = np.array(["a", "b", "c"])[np.arange(60) % 3]
    with pytest.raises(ValueError, match="loss='logistic' does not fit 3 classes"):
        clf.set_params(loss="logistic").fit(X[:, ::-1] * 7, three)
    assert_same(before, _sk_attributes(clf), "fitted attributes")
    assert clf.classes_.tolist() == ["a", "b"]
    assert np.array_equal(clf.predict(X), prediction)


def test_a_refused_first_partial_fit_leaves_the_estimator_unfitted():
    import numpy as np
    pytest.importorskip("sklearn")
    from sklearn.exceptions import NotFittedError

    from torchboost.sklearn import SGBClassifier

    X, _ = _sk_data(n=8)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    clf = SGBClassifier(n_learners=2, random_state=0, n_threads=1)
    with pytest.raises(ValueError, match=r"labels \[2\] are not among classes_ \[0, 1\]"):
        clf.partial_fit(X, labels, classes=[0, 1])
    assert _sk_attributes(clf) == {}
    with pytest.raises(NotFittedError):
        clf.predict(X)
    clf.partial_fit(X, labels, classes=[0, 1, 2])  # the corrected call is accepted
    assert clf.classes_.tolist() == [0, 1, 2] and clf.booster_.rounds == 1


def test_hidden_zero_is_refused_naming_it():
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBRegressor

    X, y = _sk_data()
    reg = SGBRegressor(hidden=0, n_learners=2, max_passes=1)
    with pytest.raises(ValueError, match="hidden must be an integer >= 1, got 0"):
        reg.fit(X, y)
    assert _sk_attributes(reg) == {}


def test_huge_features_and_targets_are_scaled_not_overflowed():
    import numpy as np
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBRegressor

    X, y = _sk_data()
    options = dict(n_learners=2, max_passes=3, random_state=0, n_threads=1)
    plain = SGBRegressor(**options).fit(X, y)
    huge_x = SGBRegressor(**options).fit(X * 1e200, y)
    assert np.all(np.isfinite(huge_x.x_scale_)) and np.all(huge_x.x_scale_ > 1e199)
    np.testing.assert_allclose(huge_x.predict(X * 1e200), plain.predict(X), rtol=1e-4, atol=1e-5)
    huge_y = SGBRegressor(**options).fit(X, y * 1e300)
    np.testing.assert_allclose(huge_y.predict(X) / 1e300, plain.predict(X), rtol=1e-4, atol=1e-5)


# --- river estimators: a bad example is refused at learn_one, naming it, and costs nothing ------
@pytest.mark.parametrize("bad", [float("nan"), None, "3.5 cm", float("inf")])
def test_river_refuses_a_bad_feature_at_learn_one_and_keeps_the_good_examples(bad):
    pytest.importorskip("river")
    from torchboost.river import SGBRegressor

    model = SGBRegressor(n_learners=2, batch_size=3, n_threads=1)
    with pytest.raises(ValueError, match=r"feature 'b' is .*nothing was learnt"):
        model.learn_one({"a": 1.0, "b": bad}, 1.0)  # the very first example
    assert model.features is None and model.n_pending == 0
    model.learn_one({"a": 1.0, "b": 2.0}, 1.0)
    model.learn_one({"a": 2.0, "b": 1.0}, 2.0)
    with pytest.raises(ValueError, match="feature 'b'"):
        model.learn_one({"a": 3.0, "b": bad}, 3.0)
    with pytest.raises(ValueError, match=r"label .* is not a finite number"):
        model.learn_one({"a": 3.0, "b": 3.0}, bad if bad != "3.5 cm" else "x")
    assert model.n_pending == 2 and model.booster_ is None and model.features == ["a", "b"]
    model.learn_one({"a": 3.0, "b": 0.0}, 3.0)  # the third good example makes the round
    assert model.n_pending == 0 and model.booster_.rounds == 1
    assert model.booster_.samples_seen == 3


def test_river_learn_many_checks_every_row_first():
    pytest.importorskip("river")
    pd = pytest.importorskip("pandas")
    from torchboost.river import SGBClassifier

    model = SGBClassifier(n_learners=2, batch_size=4, n_threads=1)
    model.learn_one({"a": 0.0, "b": 1.0}, True)
    frame = pd.DataFrame({"a": [1.0, 2.0, float("nan")], "b": [0.0, 1.0, 2.0]})
    with pytest.raises(ValueError, match=r"row 2: feature 'a' is nan"):
        model.learn_many(frame, pd.Series([True, False, True]))
    with pytest.raises(ValueError, match=r"row 1: feature 'b' is 'x', not a number"):
        model.learn_many([{"a": 1.0, "b": 2.0}, {"a": 1.0, "b": "x"}], [True, False])
    assert model.n_pending == 1 and model.booster_ is None
    model.learn_many(frame.iloc[:2], pd.Series([True, False]))
    assert model.n_pending == 3


def test_finite_float64_features_that_overflow_float32_are_named_as_such():
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    x = torch.randn(4, 3, dtype=torch.float64)
    x[2, 1] = 1e39
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match=r"rows \[2\] are finite in torch.float64 but overflow "
                                         r"the booster's torch.float32 \(largest magnitude 1e\+39"):
        booster.learn(x, torch.randn(4))
    x[2, 1] = float("inf")
    with pytest.raises(ValueError, match=r"features contain NaN or inf \(rows \[2\]\)"):
        booster.learn(x, torch.randn(4))
    assert_same(before, booster.state_dict())
    assert booster.rounds == 0


# --- unusual learners: our words, or the default mode just works --------------------------------
class _IntegerScores(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, x):
        return self.linear(x).round().long()


class _Tied(torch.nn.Module):
    """Two layers sharing one weight, legal in PyTorch."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.out = (torch.nn.Linear(3, 3), torch.nn.Linear(3, 3),
                                    torch.nn.Linear(3, 1))
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.out(torch.tanh(self.b(torch.tanh(self.a(x)))))


class _Counter(torch.nn.Module):
    """Counts its training forwards in a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if self.training:
            self.calls += 1
        return self.linear(x)


def _frozen():
    return torch.nn.Linear(3, 1).requires_grad_(False)


def test_a_learner_that_cannot_learn_is_named_at_construction_or_first_round():
    with pytest.raises(ValueError, match="learner 0 cannot learn: all its parameters are frozen"):
        SGB(_frozen, n_learners=2)
    for mode in ("auto", "loop", "stacked"):
        booster = SGB(_IntegerScores, n_learners=2, mode=mode)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and no misleading fall-back warning
            with pytest.raises(ValueError, match=r"torch\.int64 scores: a learner's scores must "
                                                 r"be floating point"):
                booster.learn(torch.randn(8, 3), torch.randn(8))
        assert booster.rounds == 0


def test_tied_weights_work_in_the_default_mode_and_stacking_says_why_not():
    x, y = torch.randn(16, 3), torch.randn(16)
    torch.manual_seed(0)
    default = SGB(_Tied, n_learners=2)
    torch.manual_seed(0)
    loop = SGB(_Tied, n_learners=2, mode="loop")
    for booster in (default, loop):
        booster.learn(x, y)
        booster.learn(x, y)
    assert default.learners.mode == "loop"
    assert torch.equal(default.predict(x), loop.predict(x))
    tied = default.learners.learner(1)
    assert tied.a.weight is tied.b.weight  # still one tensor after training
    with pytest.raises(ValueError, match=r"parameters a.weight = b.weight are one tensor"):
        SGB(_Tied, n_learners=2, mode="stacked")


def test_the_auto_mode_probe_leaves_the_learners_buffers_alone():
    x, y = torch.randn(8, 3), torch.randn(8)
    counts = {}
    for mode in ("auto", "loop", "stacked"):
        booster = SGB(_Counter, n_learners=2, mode=mode)
        booster.learn(x, y)
        booster.learn(x, y)
        counts[mode] = [booster.learners.learner(i).calls.item() for i in range(2)]
    assert counts == {"auto": [2, 2], "loop": [2, 2], "stacked": [2, 2]}


def test_river_refuses_text_and_values_beyond_the_learners_range_at_learn_one():
    pytest.importorskip("river")
    pd = pytest.importorskip("pandas")
    from torchboost.river import SGBClassifier, SGBRegressor

    model = SGBRegressor(n_learners=2, batch_size=4, n_threads=1)
    for value in ("3", b"3", 1e40, -1e39):
        with pytest.raises(ValueError, match="feature 'a'"):
            model.learn_one({"a": value}, 1.0)
    with pytest.raises(ValueError, match=r"'a' is None, a missing value: impute it .*StatImputer"):
        model.learn_one({"a": None}, 1.0)  # a missing value, not a category (a newcomer's find)
    for label in ("3.5", 1e300):
        with pytest.raises(ValueError, match=r"label .* is not a finite number within"):
            model.learn_one({"a": 1.0}, label)
    with pytest.raises(ValueError, match="row 1: feature 'a' is '2', not a number"):
        model.learn_many(pd.DataFrame({"a": [1.0, "2"]}), [1.0, 2.0])
    with pytest.raises(ValueError, match="y must be a sequence of labels"):
        model.learn_many([{"a": 1.0}], 1.0)
    assert model.n_pending == 0 and model.features is None
    for i in range(6):  # and it still learns: nothing stuck in the buffer
        model.learn_one({"a": float(i)}, float(i))
    assert model.booster_.rounds == 1 and model.n_pending == 2
    wide = SGBRegressor(n_learners=2, batch_size=2, n_threads=1, dtype="float64")
    wide.learn_one({"a": 1e40}, 1.0)  # within float64's range
    with pytest.raises(ValueError, match=r"labels must be hashable class labels"):
        SGBClassifier(n_learners=2).learn_one({"a": 1.0}, [1])


def test_river_learn_one_whose_round_fails_takes_its_example_back():
    pytest.importorskip("river")
    from torchboost import DivergenceError
    from torchboost.river import SGBRegressor

    model = SGBRegressor(n_learners=2, batch_size=2, n_threads=1, learning_rate=1e30)
    model.learn_one({"a": 1.0}, 1.0)
    with pytest.raises(DivergenceError):
        model.learn_one({"a": 2.0}, 2.0)  # fills the buffer: a round, which diverges
    assert model.n_pending == 1 and model._x == [[1.0]] and model.booster_ is None  # unbuilt


def test_a_nan_row_in_a_data_stream_spoils_only_its_own_batch():
    from torchboost.data import DataStream

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2000, 4, generator=g), torch.randn(2000, generator=g)
    x[5, 1] = float("nan")
    stream = DataStream(x, y, batch_size=100, shuffle=False, warmup=2000)
    spoilt = [k for k, (bx, _) in enumerate(stream) if bool(torch.isnan(bx).any())]
    assert spoilt == [0]  # the batch holding row 5, and that row only
    clean = DataStream(torch.cat([x[:5], x[6:]]), y[:-1], batch_size=100, shuffle=False,
                       warmup=2000)
    torch.testing.assert_close(stream.mean, clean.mean, rtol=1e-12, atol=1e-12)


def test_data_stream_reads_numpy_and_lists_and_names_what_it_cannot():
    from torchboost.data import DataStream

    x, y = torch.randn(10, 3, dtype=torch.float64), torch.randn(10, dtype=torch.float64)
    for xs, ys in ((x.numpy(), y), (x.numpy(), y.numpy()), (x, y.tolist())):
        batches = list(DataStream(xs, ys, batch_size=4, shuffle=False, standardize=None))
        assert torch.equal(torch.cat([b for b, _ in batches]), x)
    with pytest.raises(ValueError, match=r"y must be a tensor .* got list"):
        DataStream(x, [[1.0], "a"])
    with pytest.raises(ValueError, match=r"x must be a tensor .* got set"):
        DataStream({1.0, 2.0}, y)


def test_anytime_prediction_counts_are_checked_the_same_everywhere():
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=3)
    x = torch.randn(4, 3)
    booster.learn(x, torch.randn(4))
    for bad in (2.0, True, -1):
        with pytest.raises(ValueError, match=r"n_learners must be an integer >= 0"):
            booster.predict(x, bad)
    with pytest.raises(ValueError, match=r"n_learners must be in \[0, 3\]"):
        booster.predict(x, 4)
    torch.testing.assert_close(booster.predict(x, 0), booster.predict(x[:1], 0).expand(4, 1))


def test_sklearn_names_the_columns_that_are_not_numbers():
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    from torchboost.sklearn import SGBRegressor

    X = pd.DataFrame({"a": np.arange(8.0), "c": pd.Categorical(list("xyxyxyxy"))})
    with pytest.raises(ValueError, match=r"columns that are not numbers: \['c'\]"):
        SGBRegressor(max_passes=1, n_learners=2).fit(X, np.arange(8.0))


def test_checkpoint_functions_on_directories_say_so(tmp_path):
    from torchboost.lightning import atomic_save, check_checkpoint, latest_checkpoint

    folder = tmp_path / "d.ckpt"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match=r"d\.ckpt: it is a directory"):
        atomic_save({"a": 1}, folder)
    with pytest.raises(IsADirectoryError, match=r"is a directory, not a checkpoint file"):
        check_checkpoint(folder)
    saved = atomic_save({"a": 1}, tmp_path / "last.ckpt")
    with pytest.raises(NotADirectoryError, match="looks in a directory"):
        latest_checkpoint(saved)
    assert latest_checkpoint(tmp_path) == saved  # the folder named *.ckpt is not a candidate
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.ckpt", "last.ckpt"]


def test_a_screened_stream_skips_rows_that_overflow_the_boosters_dtype():
    from torchboost.data import BadInputError, ScreenedStream

    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randn(8)
    x[2, 1] = 1e39  # finite here, inf in the learners' float32
    stream = ScreenedStream([(x, y)], booster, policy="skip")
    for bx, by in stream:
        assert bx.shape == (7, 3) and bx.dtype == torch.float32
        booster.learn(bx, by)
    assert stream.skipped["features_not_finite"] == 1 and booster.rounds == 1
    with pytest.raises(BadInputError, match=r"row 2 .*overflow the booster's torch.float32"):
        list(ScreenedStream([(x, y)], booster))
