"""StumpRegressor: per-feature SGD on each feature's own loss, best-feature selection, and OGB
over stumps beating one stump (Beygelzimer et al. 2015, Sec. 5)."""

from __future__ import annotations

import pytest
import torch

from torchboost import OGB, ConvexHullOGB, SingleLearner, StumpRegressor, WeakLearners

# Two examples, three features; feature 2 is zero in example 0 and feature 1 in example 1.
X = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, -1.0]])
# Per-feature outputs s = X·w + b: example 0 → [0.6, −1.8, −0.3], example 1 → [1.6, 0.2, −2.3].
W, BIAS = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([0.1, 0.2, -0.3])
# Ranking by running loss: feature 1, then 2, then 0.
RUNNING = torch.tensor([0.3, 0.1, 0.2], dtype=torch.float64)


def _stump(curvature: float, bound: float | None = None) -> WeakLearners:
    stump = StumpRegressor(3, curvature=curvature, bound=bound)
    with torch.no_grad():
        stump.weight.copy_(W)
        stump.bias.copy_(BIAS)
        stump.running_loss.copy_(RUNNING)
    return WeakLearners([stump], optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.1})


def _state(learners: WeakLearners) -> dict[str, torch.Tensor]:
    return learners.learner_state(0)


def test_prediction_uses_best_nonzero_feature_and_runs_in_loop_mode():
    learners = _stump(1.0)
    assert learners.mode == "loop"
    # example 0: features 0, 1 non-zero → feature 1 (running 0.1) predicts −1.8;
    # example 1: features 0, 2 non-zero → feature 2 (running 0.2, feature 1 is zero) → −2.3.
    assert torch.allclose(learners(X)[0, :, 0], torch.tensor([-1.8, -2.3]))
    # no non-zero feature → the best feature overall (1) predicts its bias.
    assert torch.allclose(learners(torch.zeros(1, 3)), torch.tensor(0.2))
    # ties go to the lowest index: a fresh stump predicts with feature 0 (its weight set to 1).
    fresh = StumpRegressor(3, curvature=0.0)
    with torch.no_grad():
        fresh.weight.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(fresh.select(torch.tensor([[5.0, 5.0, 5.0], [0.0, 5.0, 5.0]])),
                       torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="running per-feature losses in backward"):
        WeakLearners(lambda: StumpRegressor(3, 0.0), 2, mode="stacked")


def test_squared_loss_one_sgd_step_is_each_features_own_update():
    """Curvature 1: the learner loss is mean_b ½(o_b − y_b)², so the booster passes
    g_b = (o_b − y_b)/B at the selected outputs o = [−1.8, −2.3]."""
    learners = _stump(1.0)
    y = torch.tensor([1.0, -1.0])
    out = learners(X)
    learners.step_outputs(out, (out.detach() - y.view(1, 2, 1)) / 2)
    # residuals s_j − y: f0 [−0.4, 2.6], f1 [−2.8, 1.2], f2 [−1.3, −1.3];
    # ∂w_j = mean_b r_jb x_jb = [3.7, −2.8, 0.65], ∂b_j = mean_b r_jb = [1.1, −0.8, −1.3].
    state = _state(learners)
    assert torch.allclose(state["weight"], torch.tensor([0.13, -0.72, 1.935]))
    assert torch.allclose(state["bias"], torch.tensor([-0.01, 0.28, -0.17]))
    # own losses mean ½ r² = [1.73, 2.32, 0.845], selected predictions' loss 2.3825.
    increment = state["running_loss"] - RUNNING
    assert torch.allclose(increment, torch.tensor([-0.6525, -0.0625, -1.5375],
                                                  dtype=torch.float64), atol=1e-6)
    # now feature 2 is best overall: example 1 (features 0 and 2) predicts with it.
    assert int(learners.learner(0).select(X)[1]) == 2


def test_linear_loss_one_sgd_step_is_each_features_own_update():
    """Curvature 0: the learner loss is mean_b v_b · o_b (OGB's linear loss), gradient v_b/B."""
    learners = _stump(0.0)
    v = torch.tensor([0.5, -2.0])
    learners.step_outputs(learners(X), v.view(1, 2, 1) / 2)
    # ∂w_j = mean_b v_b x_jb = [−2.75, 0.5, 1.0], ∂b_j = mean_b v_b = −0.75.
    state = _state(learners)
    assert torch.allclose(state["weight"], torch.tensor([0.775, -1.05, 1.9]))
    assert torch.allclose(state["bias"], torch.tensor([0.175, 0.275, -0.225]))
    # excess losses mean_b v_b (s_jb − o_b) = [−3.3, −2.5, 0.375].
    increment = state["running_loss"] - RUNNING
    assert torch.allclose(increment, torch.tensor([-3.3, -2.5, 0.375], dtype=torch.float64),
                          atol=1e-6)


def test_bounded_stump_routes_through_each_features_own_tanh():
    """With bound=D each feature outputs D·tanh(s_j); its gradient must be that of its own loss
    mean_b ½(D·tanh(s_jb) − y_b)², computed here by autograd feature by feature."""
    learners = _stump(1.0, bound=1.5)
    y = torch.tensor([1.0, -1.0])
    out = learners(X)
    learners.step_outputs(out, (out.detach() - y.view(1, 2, 1)) / 2)
    w, b = W.clone().requires_grad_(), BIAS.clone().requires_grad_()
    own = (0.5 * (1.5 * torch.tanh(X * w + b) - y.view(2, 1)).square()).mean(0)
    own.sum().backward()
    state = _state(learners)
    assert torch.allclose(state["weight"], W - 0.1 * w.grad, atol=1e-6)
    assert torch.allclose(state["bias"], BIAS - 0.1 * b.grad, atol=1e-6)
    # the selected features (1, then 2) predict 1.5·tanh(−1.8) and 1.5·tanh(−2.3).
    chosen_loss = (0.5 * (1.5 * torch.tanh(torch.tensor([-1.8, -2.3])) - y).square()).mean()
    increment = (state["running_loss"] - RUNNING).float()
    assert torch.allclose(increment, own.detach() - chosen_loss, atol=1e-6)


def test_prediction_without_backward_leaves_running_losses():
    learners = _stump(1.0)
    with torch.no_grad():
        learners(X)
    assert torch.equal(_state(learners)["running_loss"], RUNNING)


def _additive_stream(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """y = 0.3 x0 − 0.3 x1 + 0.3 sin(3 x2) + noise; x uniform in [−1, 1]⁶ (x3..x5 irrelevant)."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 6, generator=g) * 2 - 1
    y = 0.3 * x[:, 0] - 0.3 * x[:, 1] + 0.3 * torch.sin(3 * x[:, 2])
    return x, y + 0.02 * torch.randn(n, generator=g)


def _second_half_loss(booster, x: torch.Tensor, y: torch.Tensor, batch: int = 16) -> float:
    """Progressive squared loss (predict, then train) on the second half of the stream."""
    total = 0.0
    for start in range(0, len(x), batch):
        xb, yb = x[start:start + batch], y[start:start + batch]
        prediction = booster.learn(xb, yb)
        if start >= len(x) // 2:
            total += float(booster.loss.value(prediction, yb.view(-1, 1)).sum())
    return total / (len(x) - len(x) // 2)


def test_ogb_over_stumps_beats_one_stump_on_an_additive_stream():
    x, y = _additive_stream(3000)
    # the OGB paper's setting: Adam on labels in their own units (stumps bounded by 1)
    adam = {"optimizer": torch.optim.Adam, "optimizer_kwargs": {"lr": 1e-2}, "standardize": False}
    base = _second_half_loss(SingleLearner(lambda: StumpRegressor(6, curvature=1.0), **adam),
                             x, y)
    stumps = lambda: StumpRegressor(6, curvature=0.0, bound=1.0)  # noqa: E731
    linear = {"bound_outputs": False, "objective": "linear", **adam}  # the analysis' losses
    ogb = _second_half_loss(OGB(stumps, n_learners=16, **linear), x, y)
    hull = _second_half_loss(ConvexHullOGB(stumps, n_learners=16, **linear), x, y)
    # half the label variance is 0.054; one stump fits one of the three terms linearly.
    # measured: base 0.0396, OGB 0.0182, ConvexHullOGB 0.0114
    assert 0.035 < base < 0.045
    assert ogb < 0.6 * base
    assert hull < 0.4 * base


def test_state_dict_carries_running_losses_so_a_reload_continues_identically():
    x, y = _additive_stream(256)
    stumps = lambda: StumpRegressor(6, curvature=0.0, bound=1.0)  # noqa: E731
    first, second = (OGB(stumps, n_learners=4, bound_outputs=False, objective="linear")
                     for _ in range(2))
    for start in range(0, 128, 16):
        first.learn(x[start:start + 16], y[start:start + 16])
    second.load_state_dict(first.state_dict())
    running = [m.running_loss for m in second.learners.engine.modules_]
    assert all(bool((r != 0).any()) for r in running)
    for start in range(128, 256, 16):
        assert torch.equal(first.learn(x[start:start + 16], y[start:start + 16]),
                           second.learn(x[start:start + 16], y[start:start + 16]))
