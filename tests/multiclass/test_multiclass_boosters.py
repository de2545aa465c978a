"""Streaming behaviour shared by OnlineMBBM, AdaboostOLM and OzaBoost: predictions before the
update, input validation with unchanged state, state_dict, compute units, mini-batch modes."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.multiclass import (
    AdaboostOLM,
    MonteCarloPotentials,
    MulticlassBooster,
    OnlineMBBM,
    OzaBoost,
)

pytestmark = pytest.mark.usefixtures("single_thread")

KINDS = ["mbbm", "mbbm_mc", "olm", "oza"]
K, D, N = 3, 4, 6


@pytest.fixture(scope="module")
def single_thread():
    """Tiny tensors: intra-op threads only contend (10× slower on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def net() -> nn.Module:
    return nn.Sequential(nn.Linear(D, 8), nn.Tanh(), nn.Linear(8, K))


def make(kind: str, seed: int = 0, **kwargs) -> MulticlassBooster:
    """The papers' setting unless told otherwise: Adam (one point, so ``learn``'s prediction is
    ``predict``'s before the update) on the features as given (so that a batch's rounds equal
    single-example rounds); the defaults are checked by ``test_defaults_learn_a_simple_stream``
    and the conformance suite."""
    torch.manual_seed(seed)
    kwargs.setdefault("optimizer", torch.optim.Adam)
    kwargs.setdefault("optimizer_kwargs", {"lr": 0.02})
    kwargs.setdefault("standardize", False)
    if kind == "mbbm":
        return OnlineMBBM(net, K, 0.1, n_learners=N, seed=seed, **kwargs)
    if kind == "mbbm_mc":
        return OnlineMBBM(net, K, 0.1, n_learners=N, potentials="monte_carlo", mc_samples=200,
                          seed=seed, **kwargs)
    if kind == "olm":
        return AdaboostOLM(net, K, n_learners=N, seed=seed, **kwargs)
    return OzaBoost(net, K, n_learners=N, seed=seed, **kwargs)


def stream(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Three classes cut by two hyperplanes: learnable by the small nets above."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, D, generator=g)
    return x, (x[:, 0] > 0.5).long() + (x[:, 1] > -0.5).long()


def snapshot(booster: MulticlassBooster) -> dict:
    return {"state": copy.deepcopy(booster.state_dict()),
            "generator": booster.generator.get_state().clone(),
            "counters": (booster.rounds, booster.samples_seen, booster.compute_units)}


def assert_same_state(before: dict, booster: MulticlassBooster) -> None:
    after = snapshot(booster)
    assert after["counters"] == before["counters"]
    assert torch.equal(after["generator"], before["generator"])
    for key, value in before["state"].items():
        if torch.is_tensor(value):
            assert torch.equal(value, after["state"][key]), key


@pytest.mark.parametrize("kind", KINDS)
def test_learn_returns_the_prediction_made_before_the_update(kind: str) -> None:
    booster = make(kind)
    x, y = stream(40)
    for i in range(40):
        before = booster.predict(x[i:i + 1])
        out = booster.learn(x[i:i + 1], y[i:i + 1])
        assert out.is_floating_point() and out.shape == (1, K)  # scores, like every booster
        assert torch.equal(before, out)
        assert torch.equal(booster.loss.predict_label(out), out.argmax(-1))
    assert booster.samples_seen == 40 and booster.compute_units == 40 * 3 * N


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", ["label_high", "label_negative", "label_float", "label_shape",
                                 "label_count", "nan", "feature_shape", "one_dim", "empty"])
def test_bad_input_raises_and_leaves_state_unchanged(kind: str, bad: str) -> None:
    booster = make(kind)
    x, y = stream(8)
    booster.learn(x, y)
    cases = {
        "label_high": (x, torch.full((8,), K)),
        "label_negative": (x, y - 1),
        "label_float": (x, y.float()),
        "label_shape": (x, torch.stack([y, y], 1)),
        "label_count": (x, y[:5]),
        "nan": (torch.where(torch.arange(8)[:, None] == 3, float("nan"), x), y),
        "feature_shape": (torch.randn(8, D + 1), y),
        "one_dim": (x[:, 0], y),
        "empty": (x[:0], y[:0]),
    }
    before = snapshot(booster)
    with pytest.raises(ValueError):
        booster.learn(*cases[bad])
    assert_same_state(before, booster)


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_round_trip_continues_identically(kind: str) -> None:
    x, y = stream(60)
    first = make(kind)
    for i in range(0, 30, 3):
        first.learn(x[i:i + 3], y[i:i + 3])
    second = make(kind, seed=7)
    # a deep copy, as torch.save/load gives: loading a live state_dict would alias the first
    # booster's optimizer moments (WeakLearners.set_extra_state keeps the tensors it is given)
    second.load_state_dict(copy.deepcopy(first.state_dict()))
    assert second.samples_seen == 30
    for i in range(30, 60, 3):
        assert torch.equal(first.learn(x[i:i + 3], y[i:i + 3]),
                           second.learn(x[i:i + 3], y[i:i + 3]))
    for key, value in first.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, second.state_dict()[key]), key


def test_mbbm_refuses_a_state_saved_with_other_potentials() -> None:
    """The potentials are part of the configuration (a red-team finding: a Monte Carlo state
    loaded silently into exact potentials, or into other draws and seed, and trained on with
    other weights); a state saved before they were recorded still loads."""
    x, y = stream(12)
    saved = make("mbbm_mc")
    saved.learn(x, y)
    state = copy.deepcopy(saved.state_dict())
    for other in (make("mbbm"), make("mbbm", potentials="monte_carlo", mc_samples=200,
                                     mc_seed=1)):
        before = snapshot(other)
        with pytest.raises(ValueError, match=r"potentials_setting: saved 'MonteCarloPotentials"
                                             r"\(n_classes=3, gamma=0.1, n_samples=200, seed=0\)'"):
            other.load_state_dict(copy.deepcopy(state))
        assert_same_state(before, other)
    class Mine(MonteCarloPotentials):  # a subclass is told apart from its base
        pass

    assert repr(Mine(K, 0.1, 200, 0)).startswith("Mine(n_classes=3")
    del state["_extra_state"]["config"]["potentials_setting"]  # as saved before
    same = make("mbbm_mc", seed=7)
    same.load_state_dict(copy.deepcopy(state))
    assert torch.equal(same.learn(x, y), saved.learn(x, y))


@pytest.mark.parametrize("entry", ["alpha", "hedge.log_weights", "cost_of_vote", "generator"])
def test_a_state_with_values_the_booster_cannot_run_with_is_refused(entry: str) -> None:
    """Non-finite vote weights or Hedge weights, or a generator entry that is not a generator's
    state, are refused by name, nothing loaded (a red-team finding: they loaded, and the
    booster voted with inf or raised torch's RuntimeError)."""
    x, y = stream(12)
    booster = make("olm")
    booster.learn(x, y)
    bad = copy.deepcopy(booster.state_dict())
    if entry == "generator":
        bad["_extra_state"]["generator"] = torch.zeros(3, dtype=torch.uint8)
    else:
        bad[entry] = torch.full_like(bad[entry], float("nan"))
    before = snapshot(booster)
    with pytest.raises(ValueError, match=f"nothing was loaded.*{entry.split('.')[0]}"):
        booster.load_state_dict(bad)
    assert_same_state(before, booster)


@pytest.mark.parametrize("kind", KINDS)
def test_boosters_learn_a_simple_stream(kind: str) -> None:
    booster = make(kind)
    x, y = stream(800)
    hits = torch.cat([booster.learn(x[i:i + 2], y[i:i + 2]).argmax(-1)
                      for i in range(0, 800, 2)]) == y
    assert hits[-200:].double().mean() > 0.8
    assert booster.evaluate(*stream(200, seed=1))["error"] < 0.25
    assert booster.predict(x[:5], n_learners=2).shape == (5, K)
    assert booster.predict_label(x[:5], n_learners=2).shape == (5,)
    assert booster.votes(x[:5]).shape == (5, K)
    edges = booster.diagnostics()["edge"]
    assert edges.shape == (N,) and (edges > 0.3).all()


@pytest.mark.parametrize("kind", KINDS)
def test_defaults_learn_a_simple_stream(kind: str) -> None:
    """Schedule-free learners at the default rule, standardised features: as good as Adam's."""
    booster = make(kind, optimizer=DEFAULT_OPTIMIZER, optimizer_kwargs=None, standardize=True)
    x, y = stream(800)
    hits = torch.cat([booster.learn(x[i:i + 2], y[i:i + 2]).argmax(-1)
                      for i in range(0, 800, 2)]) == y
    assert hits[-200:].double().mean() > 0.8
    assert booster.evaluate(*stream(200, seed=1))["error"] < 0.25


@pytest.mark.parametrize("kind", ["mbbm", "olm"])
def test_cost_sensitive_prediction_rule(kind: str) -> None:
    booster = make(kind, prediction="cost")
    x, y = stream(400)
    hits = torch.cat([booster.learn(x[i:i + 4], y[i:i + 4]).argmax(-1)
                      for i in range(0, 400, 4)]) == y
    assert hits[-100:].double().mean() > 0.75
    h = booster.learners(x[:4]).detach()
    partials = booster.partial_sums(h, torch.zeros(4, K))
    labels = booster.learner_labels(h, partials)
    steps = (partials[1:] - partials[:-1]).abs()  # α e_l, α of either sign
    moved = steps.sum(-1) > 0
    steps = steps.argmax(-1)
    assert torch.equal(labels[moved], steps[moved])  # the votes follow the cost-sensitive labels


@pytest.mark.parametrize("kind", KINDS)
def test_sampling_variant_is_seeded(kind: str) -> None:
    x, y = stream(40)
    runs = []
    for _ in range(2):
        booster = make(kind, training="sampling")
        runs.append(torch.cat([booster.learn(x[i:i + 4], y[i:i + 4]) for i in range(0, 40, 4)]))
        booster.learn(x[:1], y[:1])
        weights = booster.diagnostics()["weight"]  # one example: each learner trained or not
        assert ((weights == 0) | (weights == 1)).all()
    assert torch.equal(runs[0], runs[1])


@pytest.mark.parametrize("kind", KINDS)
def test_training_rule_survives_train_and_eval_modes(kind: str) -> None:
    # the rule once lived in nn.Module's own ``training`` flag, which .eval() overwrote
    x, y = stream(40)
    booster = make(kind, training="sampling")
    booster.eval()
    booster.train()
    assert booster.training_rule == "sampling" and booster.training is True
    for i in range(0, 40, 4):
        booster.learn(x[i:i + 4], y[i:i + 4])
    booster.learn(x[:1], y[:1])
    weights = booster.diagnostics()["weight"]  # sampling: each learner trained or not
    assert ((weights == 0) | (weights == 1)).all()
    fresh = make(kind, training="sampling")
    fresh.eval()
    fresh.load_state_dict(booster.state_dict())  # the configurations still agree
    assert torch.equal(fresh.predict(x), booster.predict(x))


@pytest.mark.parametrize("kind", ["olm", "oza"])
def test_sequential_state_updates_match_single_example_rounds(kind: str) -> None:
    """With frozen learners, a batch processed in "sequential" mode equals its examples fed one
    at a time; "batch" mode agrees for batches of one."""
    frozen = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.0}}
    x, y = stream(24)
    batched, single, batch_mode = (make(kind, **frozen), make(kind, **frozen),
                                   make(kind, state_updates="batch", **frozen))
    out_batched = torch.cat([batched.learn(x[i:i + 8], y[i:i + 8]) for i in range(0, 24, 8)])
    out_single = torch.cat([single.learn(x[i:i + 1], y[i:i + 1]) for i in range(24)])
    out_batch_mode = torch.cat([batch_mode.learn(x[i:i + 1], y[i:i + 1]) for i in range(24)])
    assert torch.equal(out_batched, out_single) and torch.equal(out_single, out_batch_mode)
    for key, value in single.state_dict().items():
        if torch.is_tensor(value) and value.is_floating_point():
            torch.testing.assert_close(batched.state_dict()[key], value, msg=key)
            torch.testing.assert_close(batch_mode.state_dict()[key], value, msg=key)


def test_batch_mode_uses_the_batch_start_state() -> None:
    """AdaboostOLM "batch": every example of a batch sees the same α and Hedge weights, and α
    takes the sum of the examples' OGD steps before one projection."""
    frozen = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.0}}
    booster = make("olm", state_updates="batch", **frozen)
    x, y = stream(8)
    booster.learn(x[:4], y[:4])
    alpha0 = booster.alpha.clone()
    h = booster.learners(x[4:]).detach()
    partials = booster.partial_sums(h, torch.zeros(4, K))
    labels = booster.learner_labels(h, partials)
    truth = y[4:].expand(N, -1)
    slope = booster.loss_fn.alpha_derivative(partials[:-1].double(),
                                             alpha0[:, None].expand(N, 4), labels, truth)
    eta = 2 * 2**0.5 / ((K - 1) * torch.arange(5, 9, dtype=torch.float64).sqrt())
    booster.learn(x[4:], y[4:])
    torch.testing.assert_close(booster.alpha, (alpha0 - (eta * slope).sum(1)).clamp(-2, 2))
    assert int(booster.t) == 8


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="n_classes"):
        OnlineMBBM(net, 1, n_learners=2)
    with pytest.raises(ValueError, match="prediction"):
        AdaboostOLM(net, K, n_learners=2, prediction="vote")
    with pytest.raises(ValueError, match="state_updates"):
        OzaBoost(net, K, n_learners=2, state_updates="parallel")
    with pytest.raises(ValueError, match="potentials"):
        OnlineMBBM(net, K, n_learners=2, potentials="approximate")
    with pytest.raises(ValueError, match="hedge"):
        AdaboostOLM(net, K, n_learners=2, hedge="best")
    with pytest.raises(ValueError, match="at least one"):
        make("mbbm").predict(torch.zeros(1, D), n_learners=0)


def test_stacked_and_loop_paths_agree() -> None:
    x, y = stream(30)
    outs = []
    for mode in ("stacked", "loop"):
        booster = make("olm", mode=mode)
        assert booster.learners.mode == mode
        outs.append(torch.cat([booster.learn(x[i:i + 3], y[i:i + 3]) for i in range(0, 30, 3)]))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", KINDS)
def test_booster_on_cuda_matches_cpu(kind: str) -> None:
    """Same decisions and scores up to float32 rounding (the GPU's kernels sum in another order:
    bitwise equality failed on an H200; float64 on the CPU differs from float32 by < 1e-6)."""
    x, y = stream(30)
    cpu, gpu = make(kind), make(kind).to("cuda")
    for i in range(0, 30, 3):
        torch.testing.assert_close(gpu.learn(x[i:i + 3].cuda(), y[i:i + 3].cuda()).cpu(),
                                   cpu.learn(x[i:i + 3], y[i:i + 3]), rtol=1e-5, atol=1e-5)


def test_the_range_of_n_learners_is_the_one_accepted() -> None:
    """Issue 31: the message named [0, N] and then 0 was refused."""
    booster = make("olm")
    with pytest.raises(ValueError, match=rf"\[1, {N}\]"):
        booster.predict(torch.zeros(1, D), n_learners=N + 1)
    with pytest.raises(ValueError, match=rf"\[1, {N}\]"):
        booster.predict(torch.zeros(1, D), n_learners=0)
    assert booster.predict(torch.zeros(1, D), n_learners=1).shape == (1, K)
