"""Boosters: bad input leaves the state unchanged; save/load round trips exactly."""

from __future__ import annotations

import copy
import io

import pytest
import torch

from torchboost import OGB, SGB, ConvexHullOGB, ResidualSGB, StagewiseGB, TwoLayerNet

BOOSTERS = {
    "SGB": lambda: SGB(lambda: TwoLayerNet(4, 3, out_features=3), "softmax", n_learners=3,
                       n_outputs=3, y0="mean"),
    "SGB_newton_learned": lambda: SGB(lambda: TwoLayerNet(4, 3, out_features=3), "softmax",
                                      n_learners=3, n_outputs=3, targets="newton",
                                      step="learned", step_lr=0.05),
    "ResidualSGB": lambda: ResidualSGB(lambda: TwoLayerNet(4, 3), "hinge", n_learners=3),
    "OGB": lambda: OGB(lambda: TwoLayerNet(4, 3), "squared", n_learners=3),
    "ConvexHullOGB": lambda: ConvexHullOGB(lambda: TwoLayerNet(4, 3), "logistic", n_learners=3),
    "StagewiseGB": lambda: StagewiseGB(lambda: TwoLayerNet(4, 3), "squared", n_learners=3),
}


def labels_for(booster, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    if booster.loss.name == "softmax":
        return torch.randint(0, 3, (n,), generator=g)
    if booster.loss.is_classifier:
        return torch.randint(0, 2, (n,), generator=g)
    return torch.rand(n, generator=g) * 2 - 1


def snapshot(booster):
    state = copy.deepcopy(booster.state_dict())
    return state, [copy.deepcopy(o.state_dict()) for o in booster.learners.optimizers]


def assert_same_state(a, b):
    (sa, oa), (sb, ob) = a, b
    assert sa.keys() == sb.keys()
    for key in sa:
        if torch.is_tensor(sa[key]):
            assert torch.equal(sa[key], sb[key]), key
        else:  # extra state: counters, input shape, optimizer states
            assert repr(sa[key]) == repr(sb[key]), key
    assert repr(oa) == repr(ob)


def bad_inputs(booster):
    x, y = torch.randn(8, 4), labels_for(booster, 8)
    nan_x = x.clone()
    nan_x[3, 1] = float("nan")
    inf_y = torch.full((8,), float("inf"))
    cases = {
        "wrong feature shape": (torch.randn(8, 5), y, "shape"),
        "features not a batch": (torch.randn(4), y, "shape"),
        "integer features": (torch.ones(8, 4, dtype=torch.long), y, "floating point"),
        "NaN features": (nan_x, y, r"NaN or inf \(rows \[3\]\)"),
        "inf labels": (x, inf_y, "NaN or inf"),
        "label count": (x, y[:5], "5 labels for 8"),
        "empty batch": (torch.randn(0, 4), y[:0], "empty"),
        "label shape": (x, y.view(8, 1).expand(8, 2), "shape"),
    }
    if booster.loss.name == "softmax":
        cases["label out of range"] = (x, torch.full((8,), 3), r"\[0, 3\)")
        cases["float class labels"] = (x, y.float(), "integer dtype")
    elif booster.loss.is_classifier:
        cases["label out of range"] = (x, torch.full((8,), 2), r"\{0, 1\}")
    return cases


@pytest.mark.parametrize("name", list(BOOSTERS))
def test_bad_input_raises_and_leaves_state_unchanged(name):
    booster = BOOSTERS[name]()
    x = torch.randn(8, 4)
    booster.learn(x, labels_for(booster, 8))
    before = snapshot(booster)
    for bx, by, message in bad_inputs(booster).values():
        with pytest.raises(ValueError, match=message):
            booster.learn(bx, by)
        assert_same_state(before, snapshot(booster))
    with pytest.raises(ValueError, match="shape"):
        booster.predict(torch.randn(2, 7))


@pytest.mark.parametrize("name", list(BOOSTERS))
def test_save_load_gives_identical_predictions_and_training(name):
    torch.manual_seed(0)
    a = BOOSTERS[name]()
    for t in range(5):
        a.learn(torch.randn(16, 4), labels_for(a, 16, seed=t))
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(123)  # different initialisation, all overwritten by the load
    b = BOOSTERS[name]()
    b.load_state_dict(torch.load(buffer, weights_only=False))
    x = torch.randn(32, 4)
    assert torch.equal(a.predict(x), b.predict(x))
    assert b.input_shape == (4,)
    for t in range(3):
        xb, yb = torch.randn(16, 4), labels_for(a, 16, seed=10 + t)
        assert torch.equal(a.learn(xb, yb), b.learn(xb, yb))
    assert torch.equal(a.predict(x), b.predict(x))
    assert a.compute_units == b.compute_units
    assert torch.equal(a.edges(), b.edges())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", list(BOOSTERS))
def test_booster_moved_to_cuda_mid_stream_matches_cpu(name):
    torch.manual_seed(0)
    cpu = BOOSTERS[name]()
    torch.manual_seed(0)
    gpu = BOOSTERS[name]()
    batches = [(torch.randn(16, 4), labels_for(cpu, 16, seed=t)) for t in range(6)]
    for x, y in batches[:3]:
        cpu.learn(x, y)
        gpu.learn(x, y)
    gpu.to("cuda")  # parameters, optimizer moments, σ and running statistics move together
    for x, y in batches[3:]:
        cpu.learn(x, y)
        gpu.learn(x.cuda(), y.cuda())
    x = torch.randn(32, 4)
    assert torch.allclose(cpu.predict(x), gpu.predict(x.cuda()).cpu(), atol=1e-4)
    with pytest.raises(ValueError, match="cuda"):
        gpu.learn(x, labels_for(cpu, 32))


@pytest.mark.parametrize("stage", [3, -1])
def test_stagewise_refuses_a_stage_beyond_its_learners(stage):
    """A red-team finding: stage 7 of 3 learners loaded, then predict and learn failed."""
    torch.manual_seed(0)
    booster = StagewiseGB(lambda: TwoLayerNet(3, 4), n_learners=3)
    booster.learn(torch.randn(8, 3), torch.randn(8))
    bad = copy.deepcopy(booster.state_dict())
    bad["stage"] = torch.tensor(stage)
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match=f"its stage is {stage}, not one of this booster's "
                                         r"learners 0\.\.2"):
        booster.load_state_dict(bad)
    after = booster.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items() if torch.is_tensor(v))
