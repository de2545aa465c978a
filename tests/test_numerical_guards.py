"""Numerical guards: stable losses at huge margins; a diverging round raises DivergenceError naming
the learner and leaves no NaN/inf in the model (torchboost/boosters/guards.py)."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from boost_helpers import assert_identical, linear_learners, regression_stream
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from torchboost import SGB, DivergenceError, TwoLayerNet
from torchboost.boosters.guards import check_round
from torchboost.distributed import Synchronizer
from torchboost.lightning import StreamingBoosterModule
from torchboost.losses import (
    AbsoluteLoss,
    HingeLoss,
    HuberLoss,
    LogisticLoss,
    SoftmaxCrossEntropy,
    SquaredLoss,
)

MODES = ["stacked", "loop"]


# --- helpers --------------------------------------------------------------------------------------
def _tensors(state: Any) -> list[Tensor]:
    """Every tensor in a nested state (state_dict with optimizer states as extra state)."""
    if torch.is_tensor(state):
        return [state]
    if isinstance(state, dict):
        return [t for value in state.values() for t in _tensors(value)]
    if isinstance(state, list | tuple):
        return [t for value in state for t in _tensors(value)]
    return []


def assert_finite_state(booster: nn.Module) -> None:
    """Parameters, buffers and optimizer states all finite."""
    tensors = [t for t in _tensors(booster.state_dict()) if t.is_floating_point()]
    assert tensors and all(bool(torch.isfinite(t).all()) for t in tensors)


class Scaled(nn.Module):
    """A linear learner on ``scale · x``; ``scale`` is a buffer, so learners with different
    scales still stack (same architecture) and one of them can be made to blow up."""

    def __init__(self, scale: float = 1.0, d: int = 3) -> None:
        super().__init__()
        self.lin = nn.Linear(d, 1)
        self.register_buffer("scale", torch.tensor(scale))

    def forward(self, x: Tensor) -> Tensor:
        return self.lin(x * self.scale)


def scaled_booster(scales: list[float], mode: str, **kwargs: Any) -> SGB:
    torch.manual_seed(0)
    return SGB([Scaled(s) for s in scales], "squared",
               standardize=False, step=0.5, mode=mode, **kwargs)


def set_scale(booster: SGB, index: int, scale: float) -> None:
    state = dict(booster.learners.learner_state(index))
    state["scale"] = torch.tensor(scale)
    booster.learners.engine.set_learner_state(index, state)


# --- losses at huge margins -----------------------------------------------------------------------
HUGE = torch.tensor([[1e30], [-1e30], [3e38], [-3e38], [0.0]])


@pytest.mark.parametrize("loss", [LogisticLoss(), HingeLoss()], ids=lambda loss: loss.name)
def test_binary_losses_are_finite_and_exact_at_huge_margins(loss):
    z = loss.encode_target(torch.tensor([1, 0, 1, 0, 1]), 1)
    margin = (z * HUGE).flatten()  # +1e30, +1e30, +3e38, +3e38, 0
    value, grad = loss.value(HUGE, z), loss.gradient(HUGE, z)
    assert value.dtype == torch.float32 and bool(torch.isfinite(value).all())
    expected = torch.tensor([0.0, 0.0, 0.0, 0.0, math.log(2) if loss.name == "logistic" else 1.0])
    assert torch.allclose(value, expected)
    assert margin[:4].tolist() == pytest.approx([1e30, 1e30, 3e38, 3e38], rel=1e-6)
    wrong = loss.value(-HUGE, z)  # margins −1e30 and −3e38: the loss equals the margin's size
    assert wrong[:4].tolist() == pytest.approx([1e30, 1e30, 3e38, 3e38], rel=1e-6)
    assert torch.equal(loss.gradient(-HUGE[:4], z[:4]), -z[:4])
    assert torch.equal(grad[:4], torch.zeros(4, 1))


@pytest.mark.parametrize("loss", [AbsoluteLoss(), HuberLoss(0.5)], ids=lambda loss: loss.name)
def test_robust_regression_losses_are_finite_at_huge_residuals(loss):
    z = torch.zeros(5, 1)
    value, grad = loss.value(HUGE, z), loss.gradient(HUGE, z)
    delta = getattr(loss, "delta", None)
    residuals = [abs(v) for v in HUGE.flatten().tolist()[:4]]
    expected = [delta * (r - 0.5 * delta) for r in residuals] if delta else residuals
    assert value[:4].tolist() == pytest.approx(expected, rel=1e-6)
    assert grad.flatten().tolist() == [v * (delta or 1.0) for v in (1.0, -1.0, 1.0, -1.0, 0.0)]


def test_squared_loss_gradient_is_finite_where_its_value_cannot_be():
    z = torch.zeros(5, 1)
    assert torch.equal(SquaredLoss().gradient(HUGE, z), HUGE)
    assert float(SquaredLoss().value(torch.tensor([[1e19]]), torch.zeros(1, 1))) == \
        pytest.approx(5e37, rel=1e-6)  # finite up to the float range of ½y²


def test_softmax_is_finite_and_exact_at_huge_scores():
    loss = SoftmaxCrossEntropy()
    y = torch.tensor([[1e30, -1e30, 0.0], [-1e30, 1e30, 0.0], [3e38, -3e38, 0.0],
                      [1e30, 1e30, 1e30]])
    z = torch.tensor([0, 0, 0, 2])
    value, grad = loss.value(y, z), loss.gradient(y, z)
    # log-softmax: three tied scores of 1e30 cost ln 3 (logsumexp − y_z would round to 0)
    assert value.tolist() == pytest.approx([0.0, 2e30, 0.0, math.log(3)], rel=1e-6)
    assert torch.allclose(grad, torch.tensor([[0.0, 0, 0], [-1, 1, 0], [0, 0, 0],
                                              [1 / 3, 1 / 3, -2 / 3]]))


@pytest.mark.parametrize("loss, y0, labels", [
    ("logistic", 1e30, torch.randint(0, 2, (20, 16), generator=torch.Generator().manual_seed(1))),
    ("softmax", torch.tensor([1e30, -1e30, 0.0]),
     torch.randint(0, 3, (20, 16), generator=torch.Generator().manual_seed(1))),
])
def test_sgb_with_huge_margins_stays_finite(loss, y0, labels):
    k = 3 if loss == "softmax" else 1
    booster = SGB(lambda: TwoLayerNet(4, 5, out_features=k), loss, n_learners=3, n_outputs=k,
                  y0=y0, step=0.5)
    x = torch.randn(20, 16, 4, generator=torch.Generator().manual_seed(2))
    total = 0.0
    for xb, yb in zip(x, labels, strict=True):
        prediction = booster.learn(xb, yb)
        assert bool(torch.isfinite(prediction).all())
        total += booster.score(prediction, yb)["loss"] * len(yb)
    # the learners' O(1) outputs vanish next to y0 = 1e30: every example costs 0 or its margin,
    # 1e30 for a wrong binary label, 1e30 − (−1e30) or 1e30 − 0 for softmax classes 1 and 2
    cost = {"logistic": [1e30, 0.0], "softmax": [0.0, 2e30, 1e30]}[loss]
    expected = sum(cost[int(c)] for c in labels.flatten())
    assert total == pytest.approx(expected, rel=1e-5)
    assert booster.rounds == 20
    assert_finite_state(booster)


# --- check 1: outputs, partial sums, targets ------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_exploding_partial_sum_names_its_learner_and_changes_nothing(mode):
    # h = (0.5, 0.5, 3, 1) at x = 1: y^i = −1e38 Σ_{j≤i} h_j overflows at i = 3, learner index 2
    booster = SGB(linear_learners([[0.5], [0.5], [3.0], [1.0]]), "squared",
                  standardize=False, step=1e38, mode=mode)
    x, y = torch.ones(4, 1), torch.zeros(4)
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match=r"learner 2 diverged: its partial sum") as info:
        booster.learn(x, y)
    assert info.value.learner == 2 and "lower the learners' learning rate" in str(info.value)
    assert_identical(booster.state_dict(), before)
    assert booster.rounds == 0 and booster.compute_units == 0

    booster.step = 0.1  # still usable: a sane step learns from the same batch
    prediction = booster.learn(x, y)
    assert prediction.flatten().tolist() == pytest.approx([-0.1 * 5.0] * 4)
    assert booster.rounds == 1
    assert_finite_state(booster)


def _expected_learner(booster: SGB, x: Tensor, y: Tensor) -> int | None:
    """Reference for check 1: the first learner whose output, partial sum (y^i is learner i−1's)
    or target is not finite, computed directly."""
    with torch.no_grad():
        h = booster.learners(x)
        partials = booster.partial_sums(h, booster.initial_prediction(x))
        targets = booster.learner_targets(h, partials, booster._check_labels(y, len(x)))
    candidates = [i for i in range(booster.n_learners) if not (
        torch.isfinite(h[i]).all() and torch.isfinite(partials[i + 1]).all()
        and torch.isfinite(targets[i]).all())]
    return min(candidates, default=None)


@pytest.mark.parametrize("mode", MODES)
def test_huge_step_on_a_stream_raises_for_the_right_learner(mode):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), "squared", n_learners=8,
                  standardize=False, step=3e38, mode=mode)
    xs, ys = regression_stream(400, d=5, seed=3)
    raised = []
    for x, y in zip(xs.split(20), ys.split(20), strict=True):
        expected = _expected_learner(booster, x, y)
        before = copy.deepcopy(booster.state_dict())
        try:
            booster.learn(x, y)
            assert expected is None
        except DivergenceError as error:
            raised.append(error.learner)
            assert error.learner == expected
            assert_identical(booster.state_dict(), before)
        assert_finite_state(booster)
    assert len(set(raised)) > 1 and booster.rounds == 20 - len(raised)
    booster.step = 0.5  # unchanged by the rejected rounds, and still usable
    booster.learn(xs[:20], ys[:20])
    assert booster.rounds == 21 - len(raised)
    assert_finite_state(booster)


def test_check_round_ignores_sums_that_overflow_over_finite_entries():
    h = torch.full((2, 4, 1), 3e38)
    check_round(h, torch.zeros(3, 4, 1), torch.zeros(2, 4, 1))  # h.sum() = inf, entries finite
    h[1, 2, 0] = float("nan")
    with pytest.raises(DivergenceError, match="learner 1 diverged: its output"):
        check_round(h, torch.zeros(3, 4, 1), torch.zeros(2, 4, 1))


def test_input_checks_accept_sums_that_overflow_over_finite_entries():
    """Features and labels are checked by one sum each; a sum that overflows although every
    entry is finite falls back to the entrywise scan, which accepts the batch, and a NaN or inf
    among such entries is still found (rows named, nothing learnt)."""
    booster = SGB(linear_learners([[0.0], [0.0]]), "squared", step=0.5, standardize=False,
                  optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.0})
    huge = torch.full((4, 1), 3e38)  # its float32 sum is inf
    assert booster.learn(huge, torch.zeros(4)).flatten().tolist() == [0.0] * 4
    assert booster.learn(torch.zeros(4, 1), huge.flatten()).flatten().tolist() == [0.0] * 4
    assert booster.rounds == 2
    bad = huge.clone()
    bad[2, 0] = float("inf")
    with pytest.raises(ValueError, match=r"features contain NaN or inf \(rows \[2\]\)"):
        booster.learn(bad, torch.zeros(4))
    bad[2, 0] = float("nan")
    with pytest.raises(ValueError, match="labels contain NaN or inf"):
        booster.learn(torch.zeros(4, 1), bad.flatten())
    assert booster.rounds == 2 and booster.samples_seen == 8


class OtherReplica(Synchronizer):
    """A one-rank synchronizer whose all-reduce adds what a second replica would contribute."""

    def __init__(self, remote: Tensor) -> None:
        super().__init__(0, 2)
        self.remote = remote

    def all_reduce_(self, tensor: Tensor) -> None:
        tensor += self.remote


def test_check_round_with_sync_raises_when_another_replica_diverged():
    h, partials, targets = torch.zeros(3, 4, 1), torch.zeros(4, 4, 1), torch.zeros(3, 4, 1)
    check_round(h, partials, targets, OtherReplica(torch.zeros(3)))
    with pytest.raises(DivergenceError, match=r"learner 1 .* on another replica") as info:
        check_round(h, partials, targets, OtherReplica(torch.tensor([0.0, 1.0, 1.0])))
    assert info.value.learner == 1
    targets[0, 1, 0] = float("inf")  # this replica's learner 0 is the first one overall
    with pytest.raises(DivergenceError, match="learner 0 diverged: its target"):
        check_round(h, partials, targets, OtherReplica(torch.tensor([0.0, 1.0, 0.0])))


# --- check 2: gradients ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_infinite_gradient_names_its_learner_and_steps_nothing(mode):
    booster = scaled_booster([1.0, 1.0, 1.0, 1.0], mode)
    x, y = torch.randn(16, 3), torch.randn(16)
    for _ in range(3):
        booster.learn(x, y)  # Adam has moments and a step count by now
    set_scale(booster, 1, 1e30)  # h_1 ≈ 1e30 is finite; its weight gradient ≈ 1e30 · 1e30 is not
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match=r"learner 1 diverged: its gradient") as info:
        booster.learn(x, y)
    assert info.value.learner == 1
    assert_identical(booster.state_dict(), before)  # parameters and Adam state untouched
    assert booster.rounds == 3


# --- check 3: stepped parameters ------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_overflowing_step_is_rolled_back_and_names_its_learner(mode):
    # SGD keeps no state, so the whole booster must come back exactly. Gradients are finite but
    # learner 2 sees 1000·x: lr · g overflows for it (and learner 3, fitting its residual) only.
    booster = scaled_booster([1.0, 1.0, 1e3, 1.0], mode, optimizer=torch.optim.SGD,
                             optimizer_kwargs={"lr": 1e36})
    x, y = torch.randn(16, 3), torch.randn(16)
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match=r"learner 2 diverged: the optimizer step") as info:
        booster.learn(x, y)
    assert info.value.learner == 2
    assert_identical(booster.state_dict(), before)
    assert_finite_state(booster)


def test_overflowing_adam_step_restores_the_parameters():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), "squared", n_learners=3, mode="stacked",
                  optimizer=torch.optim.Adam, optimizer_kwargs={"lr": 1e38})
    params = copy.deepcopy(dict(booster.learners.named_parameters()))
    with pytest.raises(DivergenceError, match="the optimizer step made its parameters"):
        booster.learn(torch.randn(8, 3), torch.randn(8))
    assert_identical(dict(booster.learners.named_parameters()), params)
    assert_finite_state(booster)  # Adam's moments keep the rejected step but are finite


@pytest.mark.parametrize("mode", MODES)
def test_adam_with_a_huge_lr_never_leaves_a_nan(mode):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8), "squared", n_learners=4, step=0.5, mode=mode,
                  optimizer_kwargs={"lr": 1e12})
    xs, ys = regression_stream(600, d=5, seed=4)
    errors = 0
    for x, y in zip(xs.split(20), ys.split(20), strict=True):
        try:
            booster.learn(x, y)
        except DivergenceError:
            errors += 1
        assert_finite_state(booster)
    assert booster.rounds + errors == 30


def test_divergence_error_is_a_floating_point_error_that_pickles():
    error = pickle.loads(pickle.dumps(DivergenceError(3, "its target is NaN or inf")))
    assert isinstance(error, FloatingPointError) and isinstance(error, ArithmeticError)
    assert error.learner == 3 and str(error).startswith("learner 3 diverged: its target")
    told = pickle.loads(pickle.dumps(DivergenceError(1, "its output", "look at the forward")))
    assert told.fix == "look at the forward" and str(told).endswith("; look at the forward")


class _LogOfInputs(nn.Module):
    """A learner whose forward is NaN on negative inputs: its own doing, not the rate's."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(torch.log(x))


def test_nan_outputs_before_any_step_point_at_the_forward_not_the_rate():
    """A newcomer's finding: a learner NaN in the first round was told to lower its rate."""
    booster = SGB(_LogOfInputs, n_learners=2, standardize=False)
    with pytest.raises(DivergenceError, match="no step has been taken yet") as first:
        booster.learn(-torch.rand(8, 4), torch.randn(8))
    assert "learning rate" not in str(first.value) and booster.rounds == 0
    booster.learn(torch.rand(8, 4) + 0.5, torch.randn(8))
    with pytest.raises(DivergenceError, match="lower the learners' learning rate"):
        booster.learn(-torch.rand(8, 4), torch.randn(8))  # trained: the rate is one suspect


# --- Lightning ------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore")
def test_lightning_fit_surfaces_the_divergence():
    booster = SGB(linear_learners([[0.5], [0.5], [3.0], [1.0]]), "squared", step=0.1,
                  standardize=False)  # features of 1e30 reach the learners as they are
    module = StreamingBoosterModule(booster)
    x = torch.ones(40, 1)
    x[20:] = 1e30  # batches 0..4 are fine; in batch 5 the weight gradients, ≈ 1e30 · 1e30, are not
    stream = DataLoader(TensorDataset(x, torch.zeros(40)), batch_size=4)
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_model_summary=False,
                         enable_progress_bar=False)
    with pytest.raises(DivergenceError) as info:
        trainer.fit(module, train_dataloaders=stream)
    assert info.value.learner == 0 and "gradient" in str(info.value)
    assert booster.rounds == 5 and trainer.global_step == 5
    assert_finite_state(booster)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_too_large_to_square_names_its_learner_and_steps_nothing(mode):
    # finite gradients ≈ 1e21 > sqrt(float32 max) ≈ 1.8e19: Adam's g² would overflow to inf and
    # freeze the learner silently (m / sqrt(inf) = 0), so the round is rejected instead
    booster = scaled_booster([1.0, 1.0, 1.0, 1.0], mode)
    x, y = torch.randn(16, 3), torch.randn(16)
    booster.learn(x, y)
    set_scale(booster, 2, 1e10)  # h_2 ≈ 1e10, its weight gradient ≈ 1e10 · 1e10 · 2: finite
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError, match=r"learner 2 diverged: its gradient") as info:
        booster.learn(x, y)
    assert info.value.learner == 2
    assert_identical(booster.state_dict(), before)
    set_scale(booster, 2, 1.0)
    booster.learn(x, y)
    assert_finite_state(booster)  # Adam's second moments all finite
