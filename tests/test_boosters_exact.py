"""Each booster against its pseudo-code on tiny hand-checkable cases.

Learners are bias-free linear maps with scripted weights trained by plain SGD, so a learner's
target t_i (or linear loss) is visible in its weight update: for the squared fit
(t − w·x)² the SGD step is w ← w + 2·lr·(t − w·x)·x; for the linear loss (1/L) g·(w·x) it is
w ← w − lr·g·x / L. Every expected number below is written out by hand from the algorithms.
"""

from __future__ import annotations

import math

import pytest
import torch
from boost_helpers import linear_learners

from torchboost import OGB, SGB, Box, ConvexHullOGB, ResidualSGB, StagewiseGB
from torchboost.boosters import ogb_radius
from torchboost.losses import SquaredLoss

SGD = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.1}}
#: the same, on the data as given: hand-checks in the papers' raw units
RAW_SGD = {**SGD, "standardize": False}


def weights(booster):
    return [booster.learners.learner_state(i)["weight"].flatten().tolist()
            for i in range(booster.n_learners)]


def scalar_weights(booster):
    """The single weight of each one-input learner, as a flat list."""
    return [w for ws in weights(booster) for w in ws]


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_sgb_alg1_partial_sums_targets_and_updates(mode):
    booster = SGB(linear_learners([[0.5, 0.25], [1.0, -1.0]]), "squared",
                  standardize=False, step=0.5, y0=0.2,
                  mode=mode, **SGD)
    x, z = torch.tensor([[1.0, 2.0]]), torch.tensor([3.0])
    # h1 = 1, h2 = -1; y0 = .2, y1 = .2 - .5*1 = -.3, y2 = -.3 + .5 = .2
    assert booster.predict(x, n_learners=1).item() == pytest.approx(-0.3)
    assert booster.learn(x, z).item() == pytest.approx(0.2)
    # targets g1 = y0 - z = -2.8, g2 = y1 - z = -3.3
    w = weights(booster)
    assert w[0] == pytest.approx([0.5 + 0.2 * (-2.8 - 1.0) * 1, 0.25 + 0.2 * (-2.8 - 1.0) * 2])
    assert w[1] == pytest.approx([1.0 + 0.2 * (-3.3 + 1.0) * 1, -1.0 + 0.2 * (-3.3 + 1.0) * 2])
    d = booster.diagnostics()
    assert d["target_norm"].tolist() == pytest.approx([2.8, 3.3])
    assert d["fit_error"].tolist() == pytest.approx([3.8**2, 2.3**2])
    assert d["edge"].tolist() == pytest.approx([1 - 3.8**2 / 2.8**2, 1 - 2.3**2 / 3.3**2])
    assert booster.compute_units == 3 * 2 * 1


def test_sgb_running_mean_y0():
    booster = SGB(linear_learners([[0.0]]), "squared",
                  standardize=False, y0="mean", step=0.5, **SGD)
    x = torch.zeros(2, 1)
    assert booster.learn(x, torch.tensor([1.0, 3.0])).flatten().tolist() == [0.0, 0.0]
    assert booster.predict(x).flatten().tolist() == [2.0, 2.0]
    logistic = SGB(linear_learners([[0.0]]), "logistic", standardize=False, y0="mean", **SGD)
    logistic.learn(torch.zeros(4, 1), torch.tensor([1, 1, 1, 0]))
    assert logistic.predict(torch.zeros(1, 1)).item() == pytest.approx(math.log(3), rel=1e-5)


def test_sgb_default_step_is_theorem_5_1_with_unit_edge():
    assert SGB(linear_learners([[1.0]]), "squared").step == 0.25
    assert SGB(linear_learners([[1.0]]), "logistic", targets="gradient").step == 1.0
    newton = SGB(linear_learners([[1.0]]), "logistic")  # the default for classification
    assert (newton.targets, newton.step) == ("newton", 0.5)
    with pytest.raises(ValueError, match="not smooth"):
        SGB(linear_learners([[1.0]]), "hinge")


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_residual_sgb_alg2_projection_average_and_residuals(mode):
    booster = ResidualSGB(linear_learners([[2.0], [-0.5], [0.25]]), "absolute",
                          domain=Box(-1.0, 1.0), mode=mode, **RAW_SGD)
    x, z = torch.tensor([[1.0]]), torch.tensor([0.5])
    # eta_i = 1/i (lambda = 1); y0 = 0, y1 = P(-2) = -1, y2 = P(-1 + .25) = -.75,
    # y3 = P(-.75 - .25/3) = -.8333; prediction = mean(y0..y3)
    y3 = -0.75 - 0.25 / 3
    assert booster.learn(x, z).item() == pytest.approx((0 - 1 - 0.75 + y3) / 4)
    # subgradients sign(y_{i-1} - z) = -1, -1, -1; targets: -1, -1 + (-1 - 2) = -4,
    # -4 - (-.5) - 1 = -4.5; residuals: -3, -3.5, -4.75
    assert scalar_weights(booster) == pytest.approx(
        [2.0 + 0.2 * (-1 - 2.0), -0.5 + 0.2 * (-4 + 0.5), 0.25 + 0.2 * (-4.5 - 0.25)])
    h = torch.tensor([2.0, -0.5, 0.25]).view(3, 1, 1)
    partials = booster.partial_sums(h, torch.zeros(1, 1))
    assert booster.residuals(h, partials, z.view(1, 1)).flatten().tolist() == pytest.approx(
        [-3.0, -3.5, -4.75])


def test_residual_sgb_constant_step_and_ball_projection():
    booster = ResidualSGB(linear_learners([[3.0, 4.0]]), "squared", step=2.0,
                          domain=None, n_outputs=1, **RAW_SGD)
    assert booster.steps.tolist() == [2.0]
    from torchboost import Ball
    ball = ResidualSGB(linear_learners([[1.0]]), "absolute", domain=Ball(0.5), standardize=False)
    assert ball.predict(torch.tensor([[-10.0]])).item() == pytest.approx((0 + 0.5) / 2)
    for radius in (float("inf"), float("nan"), 0.0):  # inf projected everything to NaN
        with pytest.raises(ValueError, match="Ball radius must be a finite number > 0"):
            Ball(radius)


def test_ogb_radius_from_table():
    # squared loss (table: B = 1) and the linear-loss-like cap eta*N*D
    assert ogb_radius(SquaredLoss(), 0.5, 4, 1.0) == 1.0
    from torchboost.losses import LogisticLoss
    b = ogb_radius(LogisticLoss(), 0.1, 100, 1.0)
    # the infimum is where eta * beta_b * b^2 = eps_b * D (beta_b = 1/4, eps_b = sigmoid(b))
    assert 0.1 * 0.25 * b * b == pytest.approx(1 / (1 + math.exp(-b)), rel=1e-6)
    assert ogb_radius(LogisticLoss(), 0.1, 20, 1.0) == pytest.approx(0.1 * 20)  # capped by eta*N*D


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_ogb_alg1_partial_sums_linear_losses_and_sigma(mode):
    booster = OGB(linear_learners([[0.5], [-0.25]]), "squared", step=0.5, bound_outputs=False,
                  objective="linear", mode=mode, **RAW_SGD)
    assert booster.radius == 1.0 and booster.lipschitz_radius == 2.0  # B = 1, L_B = B + 1
    x = torch.tensor([[1.0]])
    # round 1, z = .8: y1 = .5*.5 = .25, y2 = .25 + .5*(-.25) = .125
    assert booster.learn(x, torch.tensor([0.8])).item() == pytest.approx(0.125)
    # gradients g1 = 0 - .8, g2 = .25 - .8; linear loss SGD: w -= lr * g / L_B
    assert scalar_weights(booster) == pytest.approx([0.5 + 0.1 * 0.8 / 2, -0.25 + 0.1 * 0.55 / 2])
    # sigma: clip(0 + alpha_1 * g * y_prev) = clip(.5 * (-.55) * .25) = 0
    assert booster.sigma.tolist() == [0.0, 0.0]
    # round 2, z = -1: h = (.54, -.2225), y1 = .27, g2 = .27 + 1 = 1.27
    booster.learn(x, torch.tensor([-1.0]))
    alpha2 = 1 / (2.0 * 1.0 * math.sqrt(2))
    assert booster.sigma.tolist() == pytest.approx([0.0, alpha2 * 1.27 * 0.27])
    w1, w2 = 0.54 - 0.1 * 1.0 / 2, -0.2225 - 0.1 * 1.27 / 2
    assert scalar_weights(booster) == pytest.approx([w1, w2])
    # round 3 prediction uses the shrinkage (1 - sigma_2 * eta)
    expected = (1 - alpha2 * 1.27 * 0.27 * 0.5) * (0.5 * w1) + 0.5 * w2
    assert booster.predict(x).item() == pytest.approx(expected)


def test_ogb_projects_partial_sums_onto_the_ball():
    booster = OGB(linear_learners([[1.0], [1.0]]), "squared", step=1.0, radius=0.3,
                  bound_outputs=False)
    partials = booster.partial_sums(torch.ones(2, 1, 1), torch.zeros(1, 1))
    assert partials.flatten().tolist() == pytest.approx([0.0, 0.3, 0.3])


def test_ogb_rejects_step_outside_range():
    with pytest.raises(ValueError, match=r"\[1/N, 1\]"):
        OGB(linear_learners([[1.0], [1.0], [1.0]]), step=0.1)


@pytest.mark.parametrize("objective", ["linear", "greedy"])
def test_convex_hull_ogb_alg2_frank_wolfe(objective):
    booster = ConvexHullOGB(linear_learners([[0.6], [-0.3], [0.9]]), "squared",
                            bound_outputs=False, objective=objective, **RAW_SGD)
    x, z = torch.tensor([[1.0]]), torch.tensor([0.2])
    # eta = 1, 2/3, 1/2: y1 = .6, y2 = .6/3 - .2 = 0, y3 = .45
    assert booster.learn(x, z).item() == pytest.approx(0.45)
    g = [0.0 - 0.2, 0.6 - 0.2, 0.0 - 0.2]
    w = [0.6, -0.3, 0.9]
    if objective == "linear":  # L_D = D + 1 = 2
        expected = [wi - 0.1 * gi / 2 for wi, gi in zip(w, g, strict=True)]
    else:  # Sec. 4.1: learner i suffers ½(y'_i + eta_i h_i - z)², y'_i = (1 - eta_i) y^{i-1}
        # offsets 0, .6/3 = .2, 0; gradients eta_i (y'_i + eta_i h_i - z)
        grads = [1.0 * (0.0 + 0.6 - 0.2), 2 / 3 * (0.2 - 0.2 - 0.2), 0.5 * (0.0 + 0.45 - 0.2)]
        expected = [wi - 0.1 * gi for wi, gi in zip(w, grads, strict=True)]
    assert scalar_weights(booster) == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_ogb_greedy_fits_the_loss_at_the_partial_sum_before_it(mode):
    """Sec. 4.1 in Alg. 1 (Friedman's greedy fitting): learner i suffers ℓ(y^{i−1} + A_i(x))
    and line 8 adds η A_i(x), shrunk by σ."""
    booster = OGB(linear_learners([[0.5], [-0.25]]), "squared", step=0.5, bound_outputs=False,
                  objective="greedy", mode=mode, **RAW_SGD)
    x = torch.tensor([[1.0]])
    booster.sigma.fill_(0.5)
    # y1 = .5*.5 = .25, y2 = (1 - .25)*.25 + .5*(-.25) = .0625; gradients y^{i-1} + h_i - z
    assert booster.learn(x, torch.tensor([0.8])).item() == pytest.approx(0.0625)
    expected = [0.5 - 0.1 * (0.0 + 0.5 - 0.8), -0.25 - 0.1 * (0.25 - 0.25 - 0.8)]
    assert scalar_weights(booster) == pytest.approx(expected)


def test_greedy_targets_are_clipped_to_the_learners_reach():
    """D = 0.5, z = .8: the minimisers (z − y'_i)/η_i = .8, .9 and 1.6 are beyond reach, so each
    learner is pulled to D, with the weight η_i² of its loss."""
    booster = ConvexHullOGB(linear_learners([[0.6], [-0.3], [0.9]]), "squared", bound=0.5,
                            bound_outputs=False, **RAW_SGD)
    x, z = torch.tensor([[1.0]]), torch.tensor([[0.8]])
    assert booster.plan_round(x, z).targets.flatten().tolist() == [0.5, 0.5, 0.5]
    booster.learn(x, z.flatten())
    # gradients eta_i² (h_i − D): 1·(.6 − .5), 4/9·(−.3 − .5), 1/4·(.9 − .5)
    grads = [0.1, 4 / 9 * -0.8, 0.25 * 0.4]
    assert scalar_weights(booster) == pytest.approx(
        [w - 0.1 * g for w, g in zip([0.6, -0.3, 0.9], grads, strict=True)])


@pytest.mark.parametrize("cls", [OGB, ConvexHullOGB])
def test_a_state_saved_when_greedy_fitted_the_gradient_is_refused(cls):
    """Before Sec. 4.1's offsets, objective="greedy" fitted −∇ℓ(y^{i−1}) by squared error; such
    a state (its configuration without "greedy_fit") must not resume under the new algorithm,
    and the booster stays as it was."""
    import copy

    torch.manual_seed(0)
    old = copy.deepcopy(cls(lambda: torch.nn.Linear(3, 1), n_learners=2).state_dict())
    del old["_extra_state"]["config"]["greedy_fit"]
    booster = cls(lambda: torch.nn.Linear(3, 1), n_learners=2)
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match=r"saved when objective='greedy' fitted .* cannot resume"):
        booster.load_state_dict(old)
    assert all(torch.equal(v, booster.state_dict()[k]) for k, v in before.items()
               if torch.is_tensor(v))


@pytest.mark.parametrize("cls", [OGB, ConvexHullOGB])
def test_a_state_of_the_linear_default_resumes_in_a_default_booster(cls):
    """A checkpoint or pickled estimator saved when the default was the linear losses loads into
    a booster built with defaults, which resumes with them; a given objective is never replaced,
    and a refused load leaves the default objective."""
    def make(**options):
        torch.manual_seed(0)
        return cls(lambda: torch.nn.Linear(3, 1), n_learners=2, **options)

    saved = make(objective="linear").state_dict()
    default = make()
    default.load_state_dict(saved)
    assert default.objective == "linear"
    with pytest.raises(ValueError, match="objective: saved 'linear', this booster 'greedy'"):
        make(objective="greedy").load_state_dict(saved)
    other = make(bound=2.0)  # differs in more than the objective: refused, objective kept
    with pytest.raises(ValueError, match="bound"):
        other.load_state_dict(saved)
    assert other.objective == "greedy"


@pytest.mark.parametrize("loss", ["squared", "huber", "logistic"])
@pytest.mark.parametrize("cls", [OGB, ConvexHullOGB])
def test_greedy_learners_descend_the_loss_at_their_offsets(cls, loss):
    """The greedy learner's output gradient is autograd's of mean_b ℓ(y'_i + α_i h_i), for any
    loss, where its target is within reach (a wide bound D here); for the squared loss its
    reported target is the minimiser (z − y'_i)/α_i."""
    torch.manual_seed(0)
    booster = cls(lambda: torch.nn.Linear(3, 1), loss, n_learners=3, objective="greedy",
                  standardize=False, bound=100.0)
    if cls is OGB:  # a learned shrinkage in the offsets
        booster.sigma.fill_(0.4)
    x = torch.randn(5, 3)
    z = booster.loss.encode_target(torch.tensor([0, 1, 1, 0, 1]) if loss == "logistic"
                                   else torch.randn(5), 1)
    plan = booster.plan_round(x, z)
    offsets = booster.greedy_offsets(plan.partials[:-1])
    steps = booster.greedy_steps(plan.h)
    h = plan.h.clone().requires_grad_(True)
    booster.loss.value(offsets + steps * h, z).mean(-1).sum().backward()
    assert torch.allclose(booster.learner_loss_grad(plan.h, plan.targets), h.grad, atol=1e-6)
    if loss == "squared":
        assert torch.allclose(plan.targets, (z - offsets) / steps, atol=1e-6)


def test_stagewise_gb_trains_one_stage_at_a_time_without_caching():
    # the paper's rule as it is: one repeated label bounds nothing (bound_predictions=False)
    booster = StagewiseGB(linear_learners([[0.4], [2.0]]), "squared",
                          standardize=False, step=0.5, bound_predictions=False, **SGD)
    x, z = torch.tensor([[1.0]]), torch.tensor([1.0])
    assert booster.learn(x, z).item() == pytest.approx(-0.2)  # y1 = 0 - .5*.4
    assert scalar_weights(booster) == pytest.approx([0.4 + 0.2 * (-1.0 - 0.4), 2.0])
    assert booster.compute_units == 3  # 1 predict + 2 update
    booster.next_stage()
    # frozen h1 = .12 -> y1 = -.06; h2 = 2 -> y2 = -1.06; target y1 - z = -1.06
    assert booster.learn(x, z).item() == pytest.approx(-1.06)
    assert scalar_weights(booster) == pytest.approx([0.12, 2.0 + 0.2 * (-1.06 - 2.0)])
    assert booster.compute_units == 3 + 4  # + 1 frozen prediction
    with pytest.raises(ValueError, match="already trained"):
        booster.next_stage()


def test_stagewise_gb_needs_loop_mode():
    from torchboost import WeakLearners
    with pytest.raises(ValueError, match="mode='loop'"):
        StagewiseGB(WeakLearners(linear_learners([[1.0], [2.0]]), mode="stacked"))


def test_single_learner_trains_directly_on_the_loss():
    """Same trajectory as a plain autograd loop on mean logistic loss with the same SGD."""
    from torchboost import SingleLearner
    x, y = torch.randn(8, 2), torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])
    base = SingleLearner(linear_learners([[0.3, -0.2]]), "logistic", **RAW_SGD)
    reference = linear_learners([[0.3, -0.2]])[0]
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    signs = y.float() * 2 - 1
    for _ in range(3):
        base.learn(x, y)
        opt.zero_grad()
        torch.nn.functional.softplus(-signs * reference(x).squeeze(1)).mean().backward()
        opt.step()
    assert weights(base)[0] == pytest.approx(reference.weight.flatten().tolist())
    assert base.compute_units == 3 * 3 * 8


def test_single_learner_prediction_units_scale_its_compute():
    """A wide learner whose prediction costs k weak-learner predictions spends 3k units per
    example and learns exactly like the same learner with the default cost."""
    from torchboost import SingleLearner
    x, y = torch.randn(8, 2), torch.randn(8)
    wide = SingleLearner(linear_learners([[0.3, -0.2]]), "squared", prediction_units=5, **SGD)
    plain = SingleLearner(linear_learners([[0.3, -0.2]]), "squared", **SGD)
    for _ in range(2):
        assert torch.equal(wide.learn(x, y), plain.learn(x, y))
    assert (wide.units_per_example, plain.units_per_example) == (15, 3)
    assert (wide.compute_units, plain.compute_units) == (2 * 8 * 15, 2 * 8 * 3)
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="prediction_units"):
            SingleLearner(linear_learners([[0.3, -0.2]]), prediction_units=bad)


def test_stagewise_gb_early_stops_each_stage_on_validation_and_keeps_its_best_learner():
    """Scripted validation scores: stage 0 improves twice then worsens twice (patience 2) and
    keeps its epoch-2 learner; stage 1 never improves by tol after epoch 1 and stops at 3."""
    booster = StagewiseGB(linear_learners([[0.4], [2.0]]), "squared",
                          standardize=False, step=0.5, **SGD)
    batches = [(torch.tensor([[1.0]]), torch.tensor([1.0])),
               (torch.tensor([[-0.5]]), torch.tensor([0.3]))]
    scripted = iter([1.0, 0.5, 0.6, 0.7, 0.40, 0.3999, 0.41])
    snapshots = []

    def validate(model):
        snapshots.append(scalar_weights(model))
        return next(scripted)

    history = booster.fit(batches, max_epochs=10, patience=2, tol=1e-3, validate=validate)
    assert [(h["stage"], h["epochs"], h["best_epoch"]) for h in history] == [(0, 4, 2), (1, 3, 1)]
    assert [h["val_score"] for h in history] == [0.5, 0.40]
    # the kept learners: stage 0's after its 2nd epoch, stage 1's after its 1st (snapshot 5)
    assert scalar_weights(booster) == pytest.approx([snapshots[1][0], snapshots[4][1]])
    assert snapshots[3][0] != pytest.approx(snapshots[1][0])  # it did move on, then went back
    # every epoch run is paid for: stage 0 costs 3 units/example, stage 1 costs 4
    assert booster.compute_units == 2 * (4 * 3 + 3 * 4)
    # without validate, the old rule (epoch-mean fit loss) and no best-epoch keys
    plain = StagewiseGB(linear_learners([[0.4], [2.0]]), "squared",
                        standardize=False, step=0.5, **SGD)
    assert "best_epoch" not in plain.fit(batches, max_epochs=2, patience=1)[0]
    # refused: an iterator, before any round; a score that is not a number, after its epoch
    fresh = StagewiseGB(linear_learners([[0.4], [2.0]]), "squared",
                        standardize=False, step=0.5, **SGD)
    from torchboost.data import DataStream

    with pytest.raises(ValueError, match="batches is an iterator"):
        fresh.fit(iter(batches), max_epochs=2)
    stream = DataStream(torch.randn(4, 1), torch.randn(4), batch_size=2, standardize=None)
    with pytest.raises(ValueError, match="batches is a DataStream, which the first epoch"):
        fresh.fit(stream, max_epochs=2)  # one pass: its second epoch had found nothing
    from torchboost.data import ScreenedStream

    with pytest.raises(ValueError, match="batches is a DataStream, which the first epoch"):
        fresh.fit(ScreenedStream(stream, fresh), max_epochs=2)  # screened, still one pass
    assert fresh.rounds == 0
    with pytest.raises(ValueError, match="validate returned nan after epoch 1 of stage 0"):
        fresh.fit(batches, max_epochs=2, validate=lambda model: float("nan"))
    assert fresh.rounds == 2 and int(fresh.stage) == 0  # the epoch's rounds stay learnt
