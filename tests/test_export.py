"""booster.export(): predict as a plain module, through torch.export, torch.compile and ONNX,
loaded without torchboost."""

from __future__ import annotations

import subprocess
import sys
import warnings
from functools import partial

import pytest
import torch
from torch import nn

from torchboost import SGB, ConvNet, SingleLearner, StagewiseGB, TwoLayerNet
from torchboost.boosters.registry import BOOSTERS
from torchboost.testing import example_batch, example_booster

ATOL = 1e-5  # float32 arithmetic in another order (the standardiser unscales in float64)


def _trained(make, x, y, rounds=6):
    torch.manual_seed(0)
    booster = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(rounds):
            booster.learn(x[r * 32:(r + 1) * 32], y[r * 32:(r + 1) * 32])
    return booster


G = torch.Generator().manual_seed(0)
X = torch.randn(256, 6, generator=G)
Y = X[:, 0] * 3 + 10 + 0.1 * torch.randn(256, generator=G)  # off-centre: the scaling matters
CLASSES = (X[:, 0] > 0).long() + (X[:, 1] > 0.5).long()
IMAGES = torch.rand(256, 2, 12, 12, generator=G)

CASES = {
    "sgb_stacked": lambda: SGB(partial(TwoLayerNet, 6, 8), n_learners=4),
    "sgb_loop": lambda: SGB(partial(TwoLayerNet, 6, 8), n_learners=4, mode="loop"),
    "sgb_learned": lambda: SGB(partial(TwoLayerNet, 6, 8), n_learners=4, step="learned"),
    "sgb_unstandardized_y0_mean": lambda: SGB(partial(TwoLayerNet, 6, 8), n_learners=3,
                                              standardize=False, y0="mean"),
    "sgb_vmap": lambda: SGB(lambda: nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5),
                                                  nn.Tanh(), nn.Linear(5, 1)), n_learners=3),
    "single": lambda: SingleLearner(partial(TwoLayerNet, 6, 8)),
    "stagewise": lambda: StagewiseGB(partial(TwoLayerNet, 6, 8), n_learners=3),
    "sgb_chained": lambda: SGB(partial(TwoLayerNet, 6, 8), n_learners=4, chained=True),
    "stagewise_chained": lambda: StagewiseGB(partial(TwoLayerNet, 6, 8), n_learners=3,
                                             chained=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_export_computes_predict(case):
    booster = _trained(CASES[case], X, Y)
    module = booster.export()
    assert not any(p.requires_grad for p in module.parameters())
    k = booster.prediction_learners
    torch.testing.assert_close(module(X), booster.predict(X), atol=ATOL, rtol=1e-5)
    if k >= 2:  # anytime prediction, the first 2 learners
        torch.testing.assert_close(booster.export(n_learners=2)(X), booster.predict(X, 2),
                                   atol=ATOL, rtol=1e-5)
    # the booster trains on; the exported module is a frozen copy
    before = module(X[:8]).clone()
    booster.learn(X[:32], Y[:32])
    assert torch.equal(module(X[:8]), before)


def test_a_newton_classifier_exports_scores_probabilities_and_labels():
    booster = _trained(lambda: SGB(partial(TwoLayerNet, 6, 8, 3), "softmax", n_outputs=3,
                                   n_learners=4, targets="newton"), X, CLASSES)
    scores = booster.predict(X)
    torch.testing.assert_close(booster.export()(X), scores, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(booster.export(output="proba")(X), scores.softmax(-1),
                               atol=ATOL, rtol=1e-5)
    assert torch.equal(booster.export(output="label")(X), booster.predict_label(X))
    logistic = _trained(lambda: SGB(partial(TwoLayerNet, 6, 8), "logistic", n_learners=3),
                        X, (CLASSES > 0).long())
    p = torch.sigmoid(logistic.predict(X)[:, 0])
    torch.testing.assert_close(logistic.export(output="proba")(X), torch.stack([1 - p, p], 1),
                               atol=ATOL, rtol=1e-5)
    assert torch.equal(logistic.export(output="label")(X), logistic.predict_label(X))
    with pytest.raises(ValueError, match="needs a classification loss"):
        _trained(CASES["single"], X, Y).export(output="proba")


def test_conv_learners_with_per_channel_standardisation_export():
    booster = _trained(lambda: SGB(partial(ConvNet, 2, 12, 3, channels=3, kernel_size=3),
                                   "softmax", n_outputs=3, n_learners=3, targets="newton"),
                       IMAGES * 5 + 2, CLASSES)
    torch.testing.assert_close(booster.export()(IMAGES * 5 + 2), booster.predict(IMAGES * 5 + 2),
                               atol=ATOL, rtol=1e-5)


def test_boosters_that_are_not_a_weighted_sum_say_why():
    for name, spec in BOOSTERS.items():
        booster = example_booster(spec)
        booster.learn(*example_batch(spec, 0))
        if booster.combination_weights(1) is None:
            with pytest.raises(ValueError, match="cannot be exported: its prediction is not"):
                booster.export()
        else:
            assert name in ("sgb", "single", "stagewise_gb")
    booster = _trained(CASES["sgb_stacked"], X, Y)
    with pytest.raises(ValueError, match=r"n_learners must be in \[1, 4\]"):
        booster.export(n_learners=5)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torch_export_with_a_dynamic_batch_saves_and_loads_without_torchboost(tmp_path):
    booster = _trained(CASES["sgb_stacked"], X, Y)
    program = torch.export.export(booster.export(), (X[:16],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.testing.assert_close(program.module()(X[:7]), booster.predict(X[:7]), atol=ATOL,
                               rtol=1e-5)
    path, inputs, expected = tmp_path / "sgb.pt2", tmp_path / "x.pt", tmp_path / "y.pt"
    torch.export.save(program, path)
    torch.save(X[:50], inputs)
    torch.save(booster.predict(X[:50]), expected)
    script = (f"import sys, torch\nprogram = torch.export.load({str(path)!r})\n"
              f"out = program.module()(torch.load({str(inputs)!r}))\n"
              f"torch.testing.assert_close(out, torch.load({str(expected)!r}), atol={ATOL}, "
              "rtol=1e-5)\nassert not any(m.startswith('torchboost') for m in sys.modules)\n"
              "print('ok', tuple(out.shape))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and "ok (50, 1)" in done.stdout, done.stderr[-2000:]


def test_torch_compile_fullgraph():
    booster = _trained(CASES["sgb_stacked"], X, Y)
    compiled = torch.compile(booster.export(), fullgraph=True, dynamic=False)
    torch.testing.assert_close(compiled(X[:32]), booster.predict(X[:32]), atol=ATOL, rtol=1e-5)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("case", ["sgb_stacked", "sgb_loop", "conv", "sgb_chained",
                                  "conv_chained"])
def test_onnx_export_runs_in_onnx_runtime(tmp_path, case):
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    if case.startswith("conv"):
        booster = _trained(lambda: SGB(partial(ConvNet, 2, 12, 3, channels=3, kernel_size=3),
                                       "softmax", n_outputs=3, n_learners=3, targets="newton",
                                       chained=case == "conv_chained"), IMAGES, CLASSES)
        x = IMAGES
    else:
        booster, x = _trained(CASES[case], X, Y), X
    path = tmp_path / "booster.onnx"
    torch.onnx.export(booster.export(), (x[:16],), str(path), dynamo=True,
                      dynamic_shapes=({0: torch.export.Dim("batch")},), input_names=["x"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": x[:40].numpy()})
    torch.testing.assert_close(torch.from_numpy(out), booster.predict(x[:40]), atol=1e-4,
                               rtol=1e-4)


def test_scikit_learn_estimators_export_with_their_scaling_folded_in():
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBClassifier, SGBRegressor

    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 5)) * [1, 10, 100, 0.1, 1] + [0, 5, -50, 1, 2]
    target = features[:, 0] * 4 + features[:, 1] / 10 + 100
    reg = SGBRegressor(n_learners=4, max_passes=2, random_state=0).fit(features, target)
    x = torch.as_tensor(features, dtype=torch.float32)
    np.testing.assert_allclose(reg.export()(x)[:, 0].numpy(), reg.predict(features), rtol=1e-4,
                               atol=1e-3)
    labels = np.array(["a", "b", "c"])[(features[:, 0] > 0).astype(int) + (features[:, 3] > 0.1)]
    clf = SGBClassifier(n_learners=4, max_passes=2, random_state=0).fit(features, labels)
    np.testing.assert_allclose(clf.export(output="proba")(x).numpy(),
                               clf.predict_proba(features), rtol=1e-4, atol=1e-5)
    index = clf.export(output="label")(x).numpy()
    assert (clf.classes_[index] == clf.predict(features)).mean() > 0.99  # ties: float32 vs 64


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
def test_stump_learners_export_through_torch_export_and_onnx(tmp_path):
    from torchboost.learners import StumpRegressor

    booster = _trained(lambda: SGB(lambda: StumpRegressor(6, curvature=2.0), n_learners=4), X, Y,
                       rounds=8)
    assert booster.learners.mode == "loop"
    module = booster.export()
    torch.testing.assert_close(module(X), booster.predict(X), atol=ATOL, rtol=1e-5)
    program = torch.export.export(module, (X[:16],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.testing.assert_close(program.module()(X[:9]), booster.predict(X[:9]), atol=ATOL,
                               rtol=1e-5)
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "stumps.onnx"
    torch.onnx.export(module, (X[:16],), str(path), dynamo=True,
                      dynamic_shapes=({0: torch.export.Dim("batch")},), input_names=["x"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": X[:40].numpy()})
    torch.testing.assert_close(torch.from_numpy(out), booster.predict(X[:40]), atol=1e-4,
                               rtol=1e-4)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
def test_a_booster_trained_on_real_data_exports_to_onnx_runtime(tmp_path):
    """ABALONE (the data folder's copy of UCI's file): one pass of default SGB, then the held-out
    rows through the exported program and an ONNX Runtime session."""
    from torchboost.data import data_dir, load_abalone

    root = data_dir() / "abalone"
    if not root.is_dir():
        pytest.skip(f"real data not found at {root}: put UCI's abalone.csv there (the data "
                    "folder: TORCHBOOST_DATA, docs/guide/data.md)")
    data = load_abalone(root)
    torch.manual_seed(0)
    booster = SGB(partial(TwoLayerNet, data.x_train.shape[1], 10), n_learners=8)
    for start in range(0, data.x_train.shape[0], 64):
        booster.learn(data.x_train[start:start + 64], data.y_train[start:start + 64])
    x = data.x_test
    expected = booster.predict(x)
    program = torch.export.export(booster.export(), (x[:16],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.testing.assert_close(program.module()(x), expected, atol=1e-4, rtol=1e-5)
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "abalone.onnx"
    torch.onnx.export(booster.export(), (x[:16],), str(path), dynamo=True,
                      dynamic_shapes=({0: torch.export.Dim("batch")},), input_names=["x"])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(out), expected, atol=1e-4, rtol=1e-4)


# --- issue 31: what a red team broke in export ------------------------------------------------
@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_export_of_dropout_learners_is_deterministic_in_any_booster_mode(mode):
    """Dropout in the learners: the exported module (and its torch.export program) runs them
    in eval mode, as predict does, though the booster itself is in training mode."""
    torch.manual_seed(0)
    booster = SGB(lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5),
                                        nn.Linear(8, 1)), n_learners=3, mode=mode)
    x, y = torch.randn(64, 4), torch.randn(64)
    booster.learn(x, y)
    assert booster.training
    module = booster.export()
    assert not module.training and not any(m.training for m in module.modules())
    with torch.no_grad():
        torch.testing.assert_close(module(x), booster.predict(x), rtol=1e-5, atol=1e-6)
        program = torch.export.export(module, (x,))
        torch.testing.assert_close(program.module()(x), booster.predict(x), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("bad", [1.5, True, "2", torch.tensor(2)])
def test_export_refuses_what_predict_refuses_as_n_learners(bad):
    booster = SGB(lambda: nn.Linear(3, 1), n_learners=3)
    with pytest.raises(ValueError, match="n_learners"):
        booster.export(n_learners=bad)


def test_export_refuses_probabilities_of_a_hinge_classifier():
    booster = SGB(lambda: nn.Linear(3, 1), "hinge", n_learners=2, step=0.5)
    booster.learn(torch.randn(8, 3), torch.tensor([0, 1] * 4))
    with pytest.raises(ValueError, match="margins, not probabilities"):
        booster.export(output="proba")
    assert booster.export(output="label")(torch.randn(5, 3)).shape == (5,)


def test_torch_export_save_of_a_stacked_export_warns_nothing(tmp_path):
    """The README's deploy lines: the stacked weights are copied contiguous, so torch's archive
    finds each one complete (it warned "No complete tensor found in the group!")."""
    import warnings

    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(10, 10), n_learners=4)
    x = torch.randn(32, 10)
    booster.learn(x, x[:, 0])
    program = torch.export.export(booster.export(), (x[:16],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="No complete tensor")
        torch.export.save(program, tmp_path / "sgb.pt2")
    loaded = torch.export.load(tmp_path / "sgb.pt2").module()
    assert torch.allclose(loaded(x), booster.predict(x), atol=1e-5)
