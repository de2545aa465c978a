"""Second-order (Newton) targets and learned step sizes of SGB, against hand-computed rounds.

Learners are bias-free linear maps with scripted weights trained by plain SGD (lr 0.1), as in
``test_boosters_exact.py``: a learner with weight matrix ``W`` fitting the target ``t`` with
per-output weights ``w`` by ``mean_b Σ_k w_k (t_k − h_k)²`` takes the SGD step
``W ← W − lr · 2 w (h − t) xᵀ / B``. Every expected number is written out from the formulas.
"""

from __future__ import annotations

import math

import pytest
import torch
from boost_helpers import linear_learners
from torch import nn

from torchboost import SGB, SingleLearner, StagewiseGB, TwoLayerNet
from torchboost.boosters.sgb import StepSizeAdam
from torchboost.losses import HuberLoss, LogisticLoss, SoftmaxCrossEntropy, SquaredLoss, get_loss

SGD = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.1}}


def matrix_learners(weights: list[list[list[float]]]) -> list[nn.Module]:
    """Bias-free linear learners ``h_i(x) = W_i x`` with the given ``(m, d)`` matrices."""
    modules = []
    for w in weights:
        lin = nn.Linear(len(w[0]), len(w), bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(w))
        modules.append(lin)
    return modules


def sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


@pytest.mark.parametrize("loss", [SquaredLoss(), HuberLoss(0.7), LogisticLoss(),
                                  SoftmaxCrossEntropy()])
def test_hessian_is_the_diagonal_of_autograd_hessian(loss):
    torch.manual_seed(0)
    m = 4 if loss.name == "softmax" else 1
    y = torch.randn(6, m, dtype=torch.float64) * 2
    if loss.name == "softmax":
        z = torch.tensor([0, 1, 2, 3, 1, 0])
    elif loss.is_classifier:
        z = loss.encode_target(torch.tensor([0, 1, 1, 0, 1, 0]), 1).double()
    else:
        z = torch.randn(6, 1, dtype=torch.float64)
    for b in range(6):
        full = torch.autograd.functional.hessian(
            lambda row, b=b: loss.value(row.unsqueeze(0), z[b:b + 1]).sum(), y[b])
        torch.testing.assert_close(loss.hessian(y[b:b + 1], z[b:b + 1])[0], full.diagonal())


def test_newton_direction_and_floor():
    logistic = LogisticLoss()
    z = torch.tensor([[1.0], [-1.0]])
    y = torch.tensor([[0.0], [10.0]])
    direction, weights = logistic.newton(y, z, floor=1e-2)
    # y = 0, z = +1: g = −½, H = ¼ → −2, weight ¼.  y = 10, z = −1: g = σ(10), H = σ(10)σ(−10)
    # ≈ 4.5e−5 < floor → weight 0.01, direction σ(10)/0.01
    assert weights.flatten().tolist() == pytest.approx([0.25, 0.01])
    assert direction.flatten().tolist() == pytest.approx([-2.0, sigmoid(10.0) / 0.01])
    huber = HuberLoss(1.0)  # quadratic part: Newton = gradient; linear part: g / floor
    direction, weights = huber.newton(torch.tensor([[0.5], [3.0]]), torch.zeros(2, 1), 0.1)
    assert direction.flatten().tolist() == pytest.approx([0.5, 10.0])
    assert weights.flatten().tolist() == pytest.approx([1.0, 0.1])
    assert not get_loss("absolute").has_hessian and not get_loss("hinge").has_hessian
    with pytest.raises(ValueError, match="no Hessian"):
        SGB(linear_learners([[1.0]]), "absolute", step=0.1, targets="newton")
    with pytest.raises(ValueError, match="hessian_floor"):
        SGB(linear_learners([[1.0]]), "logistic", targets="newton", hessian_floor=0.0)


def test_newton_targets_are_clipped_as_logitboosts_working_response():
    """The direction is clipped to ±newton_clip (default 4), its weights are not."""
    partials = torch.tensor([[[0.0], [10.0]], [[0.0], [0.0]]])  # y^0 for 2 examples, y^1
    z = torch.tensor([[1.0], [-1.0]])
    clipped = SGB(linear_learners([[1.0]]), "logistic", targets="newton", standardize=False)
    assert clipped.newton_clip == 4.0 and clipped.config()["newton_clip"] == 4.0
    # y = 0, z = +1: −½ / ¼ = −2 (within); y = 10, z = −1: σ(10) / 0.01 ≈ 99.995 → 4
    direction, weights = clipped.learner_objective(torch.zeros(1, 2, 1), partials, z)
    assert direction.flatten().tolist() == pytest.approx([-2.0, 4.0])
    assert weights.flatten().tolist() == pytest.approx([0.25, 0.01])
    free = SGB(linear_learners([[1.0]]), "logistic", targets="newton", standardize=False,
               newton_clip=None)
    direction, _ = free.learner_objective(torch.zeros(1, 2, 1), partials, z)
    assert direction.flatten().tolist() == pytest.approx([-2.0, sigmoid(10.0) / 0.01])
    with pytest.raises(ValueError, match="newton_clip"):
        SGB(linear_learners([[1.0]]), "logistic", targets="newton", newton_clip=0.0)


def test_a_state_saved_before_the_clip_resumes_without_it():
    saved = SGB(linear_learners([[1.0]]), "logistic", targets="newton").state_dict()
    config = saved["_extra_state"]["config"]
    del config["newton_clip"]  # as saved before the clip was recorded
    booster = SGB(linear_learners([[1.0]]), "logistic", targets="newton")
    booster.load_state_dict(saved)
    assert booster.newton_clip is None
    again = SGB(linear_learners([[1.0]]), "logistic", targets="newton")
    again.load_state_dict(booster.state_dict())  # resumed, saved, resumed (a red-team finding)
    assert again.newton_clip is None
    config["hessian_floor"] = 0.5  # refused: the clip is put back with everything else
    other = SGB(linear_learners([[1.0]]), "logistic", targets="newton")
    with pytest.raises(ValueError, match="hessian_floor"):
        other.load_state_dict(saved)
    assert other.newton_clip == 4.0


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_softmax_newton_round_by_hand(mode):
    booster = SGB(matrix_learners([[[1.0], [-1.0]], [[0.5], [0.5]]]), "softmax",
                  standardize=False, n_outputs=2,
                  targets="newton", step=0.5, mode=mode, **SGD)
    x, z = torch.tensor([[1.0]]), torch.tensor([0])
    # h1 = (1, −1), h2 = (½, ½); y0 = 0, y1 = y0 − ½ h1 = (−½, ½), y2 = y1 − ½ h2 = (−¾, ¼)
    assert booster.learn(x, z).flatten().tolist() == pytest.approx([-0.75, 0.25])
    # learner 1 at y0: p = (½, ½), g = (−½, ½), H = ¼ → target (−2, 2), weights ¼;
    # gradient 2·¼·(h − t) = ½·(3, −3) → W1 = (1 − 0.15, −1 + 0.15)
    # learner 2 at y1: p = (σ(−1), σ(1)), g = (σ(−1) − 1, σ(1)), H = σ(1)σ(−1) for both
    # → target (−(1 + e), 1 + e); gradient 2H(h − t)
    p1 = sigmoid(1.0)
    hess = p1 * (1.0 - p1)
    target = 1.0 + math.e
    w2 = [0.5 - 0.1 * 2 * hess * (0.5 + target), 0.5 - 0.1 * 2 * hess * (0.5 - target)]
    w = [booster.learners.learner_state(i)["weight"].flatten().tolist() for i in range(2)]
    assert w[0] == pytest.approx([0.85, -0.85])
    assert w[1] == pytest.approx(w2, rel=1e-5)
    # edges are weighted: γ1 = 1 − Σ w (t − h)² / Σ w t² = 1 − ¼·18 / (¼·8)
    assert booster.diagnostics()["edge"].tolist() == pytest.approx(
        [1 - 18 / 8, 1 - ((0.5 + target) ** 2 + (0.5 - target) ** 2) / (2 * target**2)],
        rel=1e-5)


def test_logistic_newton_round_by_hand():
    booster = SGB(linear_learners([[0.25]]), "logistic",
                  standardize=False, targets="newton", step=0.5, **SGD)
    booster.learn(torch.tensor([[2.0]]), torch.tensor([1]))
    # h = ½; at y0 = 0: g = −σ(0) = −½, H = ¼ → target −2, weight ¼;
    # gradient 2·¼·(½ − (−2)) = 1.25, times x = 2 → w = 0.25 − 0.1·2.5 = 0
    assert booster.learners.learner_state(0)["weight"].item() == pytest.approx(0.0, abs=1e-7)
    assert booster.diagnostics()["target_norm"].tolist() == pytest.approx([2.0])


def test_squared_loss_newton_targets_equal_gradient_targets():
    torch.manual_seed(0)
    x, y = torch.randn(64, 3), torch.randn(64)
    boosters = []
    for targets in ("gradient", "newton"):
        torch.manual_seed(1)
        booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=3, targets=targets, step=0.3)
        for t in range(0, 64, 16):
            booster.learn(x[t:t + 16], y[t:t + 16])
        boosters.append(booster)
    gradient, newton = boosters
    for key, value in gradient.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, newton.state_dict()[key]), key


def test_learned_step_adam_on_log_step_by_hand():
    # one frozen learner (lr 0): h = 1 on x = 1; squared loss, z = 3, η starts at ¼ (1/(4β)).
    # ℓ(y1) = ½(y0 − η h − z)², ∂ℓ/∂η = −(y1 − z)·h = η + 3; in log space η(η + 3).
    booster = SGB(linear_learners([[1.0]]), "squared",  # the rule as it is: unbounded
                  standardize=False, step="learned", step_lr=0.1, bound_predictions=False,
                  optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.0})
    assert booster.step == 0.25
    x, z = torch.tensor([[1.0]]), torch.tensor([3.0])
    log_eta, m, v = math.log(0.25), 0.0, 0.0
    for t in (1, 2, 3):
        eta = math.exp(log_eta)
        assert booster.learn(x, z).item() == pytest.approx(-eta)
        grad = eta * (eta + 3.0)
        m, v = 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * grad**2
        log_eta -= 0.1 * (m / (1 - 0.9**t)) / (math.sqrt(v / (1 - 0.999**t)) + 1e-8)
        assert booster.diagnostics()["step"].item() == pytest.approx(math.exp(log_eta))
    assert booster.predict(x).item() == pytest.approx(-math.exp(log_eta))


def test_learned_step_stays_within_a_hundredfold_of_its_start():
    rule = StepSizeAdam(2, 0.5, lr=1.0)
    for _ in range(50):
        rule.update(torch.tensor([1.0, -1.0]))
    assert rule.steps().tolist() == pytest.approx([0.005, 50.0])
    with pytest.raises(ValueError, match="step_lr"):
        StepSizeAdam(2, 0.5, lr=float("nan"))
    with pytest.raises(ValueError, match="step must be"):
        SGB(linear_learners([[1.0]]), step="fast")
    with pytest.raises(ValueError, match="StagewiseGB takes a fixed step"):
        StagewiseGB(linear_learners([[1.0]]), step="learned")


def test_stagewise_gb_newton_stage_equals_sgb_newton_learner():
    # the first stage of GB and the first learner of SGB see the same target and weights
    x, z = torch.tensor([[1.0]]), torch.tensor([1])
    sgb = SGB(matrix_learners([[[0.3]]]), "logistic", standardize=False, targets="newton", **SGD)
    gb = StagewiseGB(matrix_learners([[[0.3]]]), "logistic",
                     standardize=False, targets="newton", **SGD)
    sgb.learn(x, z), gb.learn(x, z)
    assert gb.learners.learner_state(0)["weight"].item() == pytest.approx(
        sgb.learners.learner_state(0)["weight"].item())
    assert gb.diagnostics()["edge"].tolist() == pytest.approx(sgb.diagnostics()["edge"].tolist())


def test_stacked_equals_loop_with_newton_targets_and_learned_steps():
    torch.manual_seed(0)
    x, y = torch.randn(160, 5), torch.randint(0, 3, (160,))
    results = []
    for mode in ("stacked", "loop"):
        torch.manual_seed(3)
        booster = SGB(lambda: TwoLayerNet(5, 4, out_features=3), "softmax", n_learners=4,
                      n_outputs=3, targets="newton", step="learned", mode=mode, step_lr=0.05)
        for t in range(0, 160, 16):
            booster.learn(x[t:t + 16], y[t:t + 16])
        results.append((booster.predict(x), booster.diagnostics()["step"]))
    torch.testing.assert_close(results[0], results[1], rtol=1e-5, atol=1e-5)
    assert (results[0][1] - 0.5).abs().min() > 1e-3  # the steps moved


def blobs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Five overlapping Gaussian classes in 20 dimensions (a linear model errs on ~14 %)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(5, 20, generator=torch.Generator().manual_seed(7)) * 0.6
    z = torch.randint(0, 5, (n,), generator=g)
    return centres[z] + torch.randn(n, 20, generator=g), z


def test_newton_targets_beat_gradient_targets_on_a_multiclass_stream():
    # A sum of linear learners is linear: Newton targets should reach the single linear model
    x, z = blobs(4000, seed=0)
    x_test, z_test = blobs(2000, seed=1)
    scores = {}
    for name in ("gradient", "newton", "single"):
        torch.manual_seed(0)
        kwargs = {"n_outputs": 5, "optimizer": torch.optim.Adam, "optimizer_kwargs": {"lr": 1e-2}}
        booster = (SingleLearner(lambda: nn.Linear(20, 5), "softmax", **kwargs)
                   if name == "single" else
                   SGB(lambda: nn.Linear(20, 5), "softmax", n_learners=4, targets=name,
                       **kwargs))
        for t in range(0, 4000, 32):
            booster.learn(x[t:t + 32], z[t:t + 32])
        scores[name] = booster.evaluate(x_test, z_test)
    # measured: loss / error gradient 1.024 / 0.178, newton 0.417 / 0.147, single 0.417 / 0.142
    assert scores["newton"]["loss"] < 0.6 * scores["gradient"]["loss"], scores
    assert scores["newton"]["error"] < scores["gradient"]["error"] - 0.02, scores
    assert scores["newton"]["error"] < scores["single"]["error"] + 0.01, scores
