"""The stall monitor: one warning per booster, with numbers and the fix, and none when
learning."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from boost_helpers import regression_stream

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.stall import BoostingStallWarning, StallMonitor
from torchboost.learners import Prodigy
from torchboost.losses import get_loss

X, Y = regression_stream(6000)


def stream(booster, x=X, y=Y, batch=32):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for t in range(0, len(x), batch):
            booster.learn(x[t:t + batch], y[t:t + batch])
    return [w for w in caught if issubclass(w.category, BoostingStallWarning)]


def test_window_sums_by_hand():
    monitor = StallMonitor(get_loss("squared"), n_learners=2, out_dim=1, window=4)
    z = torch.tensor([[1.0], [3.0]])
    partials = torch.tensor([[0.0, 0.0], [2.0, 2.0], [0.0, 6.0]]).unsqueeze(-1)
    assert monitor.update(partials, z) == []  # the warm-up (4 examples) learns the label mean 2
    assert monitor.update(partials, z) == []
    assert monitor.update(partials, z) == []  # 2 of the 4 window examples
    assert monitor.update(partials, z) == []  # a first bad window: not yet a warning
    assert monitor.update(partials, z) == []
    # mean per example: y^0 = 0 → ½(1 + 9)/2 = 2.5; y^1 = 2 → ½(1 + 1)/2 = 0.5;
    # y^2 = (0, 6) → ½(1 + 9)/2 = 2.5; the constant 2 → 0.5. So y^2 is no better than the
    # constant (and no better than in the window before), and y^1 has less than half its loss
    assert monitor.update(partials, z) == ["not_beating_constant", "learners_hurt"]
    assert monitor.last_window["anytime"].tolist() == pytest.approx([2.5, 0.5, 2.5])
    assert float(monitor.last_window["constant"]) == pytest.approx(0.5)
    assert all(monitor.update(partials, z) == [] for _ in range(4))  # once each
    assert monitor.flags() == {"not_beating_constant": 1.0, "learners_hurt": 1.0,
                               "learners_still": 0.0}


def test_a_slow_start_and_a_small_gap_do_not_warn():
    """Behind the constant in two windows but better in the second (a slow start): nothing;
    the same loss again in a third: not_beating_constant. A shorter ensemble ahead by 41 %
    (< the tolerance ½): no learners_hurt; ahead by 100 %: flagged."""
    monitor = StallMonitor(get_loss("squared"), n_learners=1, out_dim=1, window=2)
    z = torch.tensor([[1.0], [3.0]])  # the constant 2 scores ½(1 + 1)/2 = 0.5
    assert monitor.update(torch.zeros(2, 2, 1), z) == []  # the warm-up
    # y^0 = y^1 = (0, 5): ½(1 + 4)/2 = 1.25; then (0, 4.5): ½(1 + 2.25)/2 = 0.8125, better
    for last in (5.0, 4.5):
        assert monitor.update(torch.tensor([[0.0, last]] * 2).unsqueeze(-1), z) == []
    assert monitor.flags() == {"not_beating_constant": 0.0, "learners_hurt": 0.0,
                               "learners_still": 0.0}
    stalled = monitor.update(torch.tensor([[0.0, 4.5]] * 2).unsqueeze(-1), z)
    assert stalled == ["not_beating_constant"]

    y = torch.tensor([[0.0], [0.0]])
    for first, last, hurt in ((0.6, 0.78, 0.0), (0.0, 1.0, 1.0)):
        gap = StallMonitor(get_loss("squared"), n_learners=1, out_dim=1, window=2)
        gap.update(torch.zeros(2, 2, 1), y)
        for _ in range(3):  # y^0 = 0.6 scores 0.18, y^1 = 0.78 scores 0.3042: 41 % better
            gap.update(torch.tensor([[first, first], [last, last]]).unsqueeze(-1), y)
        assert gap.flags()["learners_hurt"] == hurt


def test_a_booster_that_does_not_learn_warns_once_with_the_fix():
    # learners frozen by a zero learning rate, y0 = 0 while the labels' mean is not 0
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, step=0.25, stall_window=1500,
                  standardize=False,  # y0 = 0 in the labels' own units
                  optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.0})
    caught = stream(booster, y=Y + 3.0)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "no better than the best constant" in text and "lr=0" in text
    assert "over the last 1500 examples" in text
    assert booster.stall.flags()["not_beating_constant"] == 1.0


def test_the_hint_quotes_prodigys_estimates():
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, step=0.25, stall_window=1500,
                  standardize=False, optimizer=Prodigy,
                  optimizer_kwargs={"lr": 0.0, "d0": 2e-3})  # γ = 0: frozen learners
    caught = stream(booster, y=Y + 3.0)
    assert len(caught) == 1
    assert "now Prodigy's lr=0 × estimates d in [0.002, 0.002]" in str(caught[0].message)


def test_overshooting_learners_are_flagged():
    # η = 1.9 on squared loss: each learner that fits its target overshoots past the label
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8), n_learners=6, step=1.9, y0="mean",
                  stall_window=1500, optimizer_kwargs={"lr": 1e-2})
    caught = stream(booster)
    assert len(caught) == 1  # one warning per booster, naming what it saw first
    text = str(caught[0].message)
    assert "no better than the best constant" in text and "step η=1.9" in text
    # the second learner's partial sum beats y^N by far more than ½: flagged too
    assert booster.stall.flags() == {"not_beating_constant": 1.0, "learners_hurt": 1.0,
                                     "learners_still": 0.0}
    anytime = booster.stall.last_window["anytime"]
    assert float(anytime[:-1].min()) < 0.5 * float(anytime[-1])
    assert "make the prediction much worse. Lower the step η or the learning rate (" in text


def test_a_round_warns_with_the_boosters_own_remedy():
    """learn() passes the booster's _stall_remedy() to the warning (ConvexHullOGB's differs)."""
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8), n_learners=6, step=1.9, y0="mean",
                  stall_window=1500, optimizer_kwargs={"lr": 1e-2})
    booster._stall_remedy = lambda: "the number of widgets"
    caught = stream(booster)
    assert "make the prediction much worse. Lower the number of widgets (" in str(
        caught[0].message)


def test_a_learning_booster_does_not_warn():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8), n_learners=4, step=0.3, y0="mean",
                  stall_window=1500, optimizer_kwargs={"lr": 1e-2})
    assert stream(booster) == []
    anytime = booster.stall.last_window["anytime"]
    # the second window (examples 3000-4500): well below the constant, falling with k
    assert float(anytime[-1]) < 0.8 * float(booster.stall.last_window["constant"])
    assert anytime.tolist() == sorted(anytime.tolist(), reverse=True)
    assert all(not math.isnan(v) for v in anytime.tolist())
    assert booster.stall.flags() == {"not_beating_constant": 0.0, "learners_hurt": 0.0,
                                     "learners_still": 0.0}


def test_stall_window_none_switches_the_monitor_off():
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=None,
                  optimizer_kwargs={"lr": 0.0}, optimizer=torch.optim.SGD)
    assert booster.stall is None and stream(booster, y=Y + 3.0) == []
    with pytest.raises(ValueError, match="stall_window must be an integer >= 1, got 0"):
        SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=0)


def test_a_state_saved_before_the_monitor_loads_and_the_window_is_configuration():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500)
    stream(booster, x=X[:2000], y=Y[:2000])
    assert booster.stall.seen == 2000 and booster.stall.in_window > 0
    state = booster.state_dict()
    copy = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500)
    copy.load_state_dict(state)  # the counters travel too
    assert (copy.stall.seen, copy.stall.in_window) == (2000, booster.stall.in_window)
    old = {k: v for k, v in state.items() if not k.startswith("stall.")}
    old["_extra_state"] = {k: v for k, v in old["_extra_state"].items() if k != "config"}
    fresh = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500)
    fresh.load_state_dict(old)  # an older checkpoint: the monitor starts afresh
    assert fresh.stall.seen == 0 and torch.equal(fresh.predict(X[:8]), booster.predict(X[:8]))
    with pytest.raises(ValueError, match="stall_window"):
        SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=None).load_state_dict(state)


def test_multiclass_boosters_are_monitored_on_their_error_rate():
    """Votes are not scores on the loss's scale: the monitor judges their error rate against
    the majority class's. Frozen learners (rate 0) vote at random: one warning."""
    from torchboost import AdaboostOLM
    from torchboost import BoostingStallWarning as exported

    assert exported is BoostingStallWarning
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10000, 5, generator=g)  # a warm-up and four windows
    y = (x[:, 0] > 0.3).long() + (x[:, 1] > 0).long()  # 3 classes
    torch.manual_seed(0)
    frozen = AdaboostOLM(lambda: torch.nn.Linear(5, 3), n_classes=3, n_learners=4,
                         state_updates="batch", optimizer_kwargs={"lr": 0.0})
    assert frozen.stall.metric == "error" and frozen.stall.window == 2000
    caught = stream(frozen, x=x, y=y)
    assert len(caught) == 1 and "progressive error" in str(caught[0].message)
    torch.manual_seed(0)
    learning = AdaboostOLM(lambda: torch.nn.Linear(5, 3), n_classes=3, n_learners=4,
                           state_updates="batch")
    assert stream(learning, x=x, y=y) == []
    errors = learning.stall.last_window
    assert float(errors["anytime"][-1]) < 0.6 * float(errors["constant"])


def test_learners_still_by_hand():
    """θ₀ is read at the end of the warm-up; a window in which θ moved by less than
    STILL_TOLERANCE of ‖θ₀‖ since then is seen, two in a row warn; once θ has moved by more,
    the check is over and θ₀ is freed."""
    from torchboost.boosters.stall import STILL_TOLERANCE

    theta = torch.nn.Parameter(torch.tensor([3.0, 4.0]))  # ‖θ₀‖ = 5
    z = torch.tensor([[1.0], [3.0]])
    good = torch.tensor([[2.0, 2.0], [1.0, 3.0]]).unsqueeze(-1)  # y^1 = the labels: learning
    monitor = StallMonitor(get_loss("squared"), n_learners=1, out_dim=1, window=2)
    assert monitor.update(good, z, parameters=lambda: [theta]) == []  # warm-up: θ₀ = (3, 4)
    assert torch.equal(monitor.reference, torch.tensor([3.0, 4.0], dtype=torch.float64))
    with torch.no_grad():
        theta[0] += 0.5 * STILL_TOLERANCE * 5  # moved by ½ the tolerance
    assert monitor.update(good, z, parameters=lambda: [theta]) == []  # seen once
    assert monitor.movement == pytest.approx(0.5 * STILL_TOLERANCE, rel=1e-4)  # float32 θ
    assert monitor.update(good, z, parameters=lambda: [theta]) == ["learners_still"]
    message = monitor.message("learners_still", "now lr=1e-06", "the step η or the learning rate")
    assert "moved by 0.0005 of their norm" in message and "requires_grad=True" in message
    with torch.no_grad():
        theta[0] += STILL_TOLERANCE * 5  # now 1.5 tolerances from θ₀: moved, for good
    assert monitor.update(good, z, parameters=lambda: [theta]) == []
    assert monitor.moved and monitor.reference is None
    assert monitor.movement == pytest.approx(1.5 * STILL_TOLERANCE, rel=1e-4)
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)  # not counted
    fresh = StallMonitor(get_loss("squared"), n_learners=1, out_dim=1, window=2)
    fresh.update(good, z, parameters=lambda: [frozen, theta])
    assert fresh.reference.numel() == 2


def test_learners_that_never_move_warn_even_when_they_beat_the_constant():
    """Fixed learners that happen to explain part of the labels (as random nets of ABALONE's
    size features do) beat the constant: only their parameters show they do not learn. A rate
    of 1e-6 is caught the same way; the default rate, or a trainable head on a frozen body, is
    not."""

    def fixed() -> torch.nn.Module:  # h = −0.3 · x_0, so y^k = y^{k−1} − η h moves toward x_0
        layer = torch.nn.Linear(5, 1)
        with torch.no_grad():
            layer.weight.copy_(torch.tensor([[-0.3, 0, 0, 0, 0]]))
            layer.bias.zero_()
        return layer

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8000, 5, generator=g)
    y = x[:, :1] + 0.3 * torch.randn(8000, 1, generator=g)
    for rate in (0.0, 1e-6):
        booster = SGB(fixed, n_learners=2, step=0.5, stall_window=2000,
                      optimizer_kwargs={"lr": rate})
        caught = stream(booster, x=x, y=y)
        assert len(caught) == 1, rate
        assert "learners' trainable parameters moved by" in str(caught[0].message)
        flags = booster.stall.flags()
        assert flags["learners_still"] == 1.0 and flags["not_beating_constant"] == 0.0
        assert booster.stall.movement == 0.0 if rate == 0.0 else 0 < booster.stall.movement < 1e-3
        anytime = booster.stall.last_window["anytime"]  # y^2 beats the constant by half
        assert float(anytime[-1]) < 0.6 * float(booster.stall.last_window["constant"])
    torch.manual_seed(0)
    learning = SGB(fixed, n_learners=2, step=0.5, stall_window=2000)
    assert stream(learning, x=x, y=y) == []
    assert learning.stall.moved and learning.stall.reference is None

    def frozen_body() -> torch.nn.Module:
        body = torch.nn.Linear(5, 64)
        body.requires_grad_(False)
        return torch.nn.Sequential(body, torch.nn.Tanh(), torch.nn.Linear(64, 1))

    torch.manual_seed(0)
    head_only = SGB(frozen_body, n_learners=2, step=0.5, stall_window=2000)
    assert stream(head_only, x=x, y=y) == [] and head_only.stall.moved


def test_the_still_check_resumes_exactly_and_older_states_load():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500,
                  optimizer_kwargs={"lr": 0.0})
    stream(booster, x=X[:2000], y=Y[:2000])  # past the warm-up: θ₀ is held
    state = booster.state_dict()
    copy = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500,
               optimizer_kwargs={"lr": 0.0})
    copy.load_state_dict(state)
    assert torch.equal(copy.stall.reference, booster.stall.reference)
    assert len(stream(copy, x=X[2000:], y=Y[2000:])) == 1
    assert copy.stall.flags()["learners_still"] == 1.0
    # a state saved with two symptoms: the third unseen, and no check (θ₀ unknown)
    old = dict(state)
    for name in ("stall.flagged", "stall.last_seen"):
        old[name] = old[name][:2]
    old["stall._extra_state"] = {k: v for k, v in old["stall._extra_state"].items()
                                 if k not in ("moved", "reference", "movement")}
    older = SGB(lambda: TwoLayerNet(5, 4), n_learners=2, stall_window=1500,
                optimizer_kwargs={"lr": 0.0})
    older.load_state_dict(old)
    assert older.stall.moved and older.stall.reference is None
    assert older.stall.flags()["learners_still"] == 0.0


def test_the_stall_hint_names_each_boosters_own_steps():
    from torch import nn

    from torchboost import OGB, ConvexHullOGB, SingleLearner, StagewiseGB

    def learner():
        return nn.Linear(3, 1)

    assert SGB(learner, n_learners=2, step="learned")._stall_hint().endswith(
        "learned steps η in [0.25, 0.25]")
    assert SGB(learner, n_learners=2, step=0.3)._stall_hint().endswith(", step η=0.3")
    assert StagewiseGB(learner, n_learners=2, step=0.2)._stall_hint().endswith(", step η=0.2")
    assert OGB(learner, n_learners=4, step=0.5)._stall_hint().endswith(", step η=0.5")
    assert "step" not in ConvexHullOGB(learner, n_learners=4)._stall_hint()
    assert "step" not in SingleLearner(learner)._stall_hint()


def test_when_later_learners_hurt_the_warning_names_what_each_booster_can_lower():
    """SGB: its step or rate; ConvexHullOGB (fixed Frank-Wolfe steps): the number of learners."""
    from torchboost import ConvexHullOGB

    def hurt(booster):
        monitor = StallMonitor(get_loss("squared"), n_learners=2, out_dim=1, window=4)
        z = torch.tensor([[1.0], [3.0]])
        partials = torch.tensor([[0.0, 0.0], [2.0, 2.0], [0.0, 6.0]]).unsqueeze(-1)
        with pytest.warns(BoostingStallWarning) as caught:
            for _ in range(6):
                monitor.warn(monitor.update(partials, z), booster._stall_hint(),
                             booster._stall_remedy())
        return str(caught[0].message)

    learner = lambda: torch.nn.Linear(3, 1)  # noqa: E731
    assert "make the prediction much worse. Lower the step η or the learning rate (" in hurt(
        SGB(learner, n_learners=2))
    text = hurt(ConvexHullOGB(learner, n_learners=2))
    assert "Lower the number of learners (n_learners; ConvexHullOGB's steps" in text
    assert "step η or" not in text and "step η=" not in text


def test_residual_sgb_is_judged_on_its_averaged_anytime_predictions():
    """ResidualSGB predicts the average of y^0..y^k (Alg. 2 line 8): the monitor judges exactly
    the predictions predict(x, n_learners=k) makes."""
    from torchboost import ResidualSGB

    torch.manual_seed(0)
    booster = ResidualSGB(lambda: TwoLayerNet(5, 8), n_learners=4)
    partials = booster.partial_sums(torch.randn(4, 7, 1), torch.zeros(7, 1))
    anytime = booster.anytime_predictions(partials)
    for k in range(5):
        assert torch.allclose(anytime[k], partials[:k + 1].mean(0), atol=1e-6)
    assert booster._stall_hint().endswith("with λ=1; a larger strong_convexity λ takes smaller "
                                          "steps, and fewer learners or a domain that bounds the "
                                          "partial sums help too, since each learner's target "
                                          "carries the residuals of all learners before it")
    one = ResidualSGB(lambda: TwoLayerNet(5, 8), n_learners=1, strong_convexity=2.0)
    assert "steps η_i = 1/(λ i) with λ=2;" in one._stall_hint()  # the schedule, even for N = 1
    constant = ResidualSGB(lambda: TwoLayerNet(5, 8), n_learners=3, step=0.3)
    assert constant._stall_hint().endswith(", step η=0.3")


def _residual_sgb_on_abalone(n: int) -> tuple[list, float]:
    from torchboost import ResidualSGB
    from torchboost.data import load_abalone
    from torchboost.harness import DATASETS, LearnerConfig

    ds = load_abalone()
    torch.manual_seed(0)
    booster = ResidualSGB(LearnerConfig(**DATASETS["abalone"].learner).factory(ds, 1),
                          n_learners=n)
    caught = []
    order = torch.Generator().manual_seed(1)
    for _ in range(3):
        rows = torch.randperm(len(ds.y_train), generator=order)
        caught += stream(booster, ds.x_train[rows], ds.y_train[rows])
    error = float((booster.predict(ds.x_test).flatten() - ds.y_test).abs().mean())
    return caught, error


def test_residual_sgb_whose_carried_residuals_run_away_warns_and_a_learning_one_does_not():
    """Abalone, L1 loss, three passes: 64 learners' carried residuals blow the partial sums up
    (test MAE 12.6 where 8 learners reach 1.7), which used to pass silently; now it warns."""
    caught, error = _residual_sgb_on_abalone(64)
    assert error > 4.0 and len(caught) == 1, error
    assert "strong_convexity" in str(caught[0].message)
    caught, error = _residual_sgb_on_abalone(8)
    assert error < 2.0 and caught == [], error


def test_a_residual_sgb_state_saved_before_it_was_monitored_loads_and_trains_on():
    """ResidualSGB had no monitor before (its configuration saved ``stall_window: None``): such a
    state loads into today's booster, whose monitor starts afresh, and the model trains on
    exactly as the saved one does."""
    from torchboost import ResidualSGB

    def make(**options):
        torch.manual_seed(0)
        return ResidualSGB(lambda: TwoLayerNet(5, 8), n_learners=3, **options)

    old = make(stall_window=None)
    stream(old, X[:320], Y[:320])
    resumed = make()
    resumed.load_state_dict(old.state_dict())
    assert resumed.stall is not None and resumed.stall.seen == 0
    trained = make()  # a booster whose own monitor has a history: it does not keep it
    stream(trained, X[:2560] * 0, Y[:2560] * 0 + 1)
    assert trained.stall.seen == 2560
    trained.load_state_dict(old.state_dict())
    assert trained.stall.seen == 0 and not trained.stall.flagged.any()
    stream(old, X[320:640], Y[320:640]), stream(resumed, X[320:640], Y[320:640])
    for a, b in zip(old.learners.parameters(), resumed.learners.parameters(), strict=True):
        assert torch.equal(a, b)


def _short_run(rows: int, **options) -> tuple[SGB, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x, y = regression_stream(rows + 400, d=5, seed=3)
    booster = SGB(lambda: TwoLayerNet(5, 10), n_learners=16, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoostingStallWarning)  # no window is ever judged
        for start in range(0, rows, 32):
            booster.learn(x[start:start + 32], y[start:start + 32])
    return booster, x[rows:], y[rows:]


def test_a_stream_too_short_for_the_windows_is_judged_on_the_held_out_rows():
    booster, x_test, y_test = _short_run(350, step=8.0)  # 32 times the default step
    with pytest.warns(BoostingStallWarning, match=r"on 400 held-out rows \(the stream, 352 "
                      r"examples.*no better than the best constant.*fewer learners or several "
                      r"passes"):
        state = {k: v.clone() for k, v in booster.state_dict().items() if torch.is_tensor(v)}
        booster.evaluate(x_test, y_test)
    after = booster.state_dict()  # evaluating changes no state: no flag, not "warned"
    assert all(torch.equal(v, after[k]) for k, v in state.items()) and not booster.stall.warned
    with warnings.catch_warnings():  # once per booster
        warnings.simplefilter("error", BoostingStallWarning)
        booster.evaluate(x_test, y_test)


def test_a_short_healthy_stream_is_judged_and_passes():
    booster, x_test, y_test = _short_run(1500)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoostingStallWarning)
        score = booster.evaluate(x_test, y_test)
    assert booster.stall.last_window and booster.stall.held_out_rows == 400
    constant = 0.5 * float(y_test.var())
    assert score["loss"] < 0.8 * constant  # it learnt: the judgement saw that


def test_held_out_judgement_reads_learners_that_never_moved_after_the_warm_up():
    booster, x_test, y_test = _short_run(3300, optimizer_kwargs={"lr": 0.0})
    with pytest.warns(BoostingStallWarning, match="moved by 0 of their norm"):
        booster.evaluate(x_test, y_test)


def test_periodic_held_out_evaluation_mid_stream_does_not_judge_the_stream():
    """The Lightning callback and the harness evaluate early and often (evaluate_held_out): the
    judgement of a short stream is evaluate()'s, at the end, not theirs."""
    from torchboost.evaluation import evaluate_held_out

    booster, x_test, y_test = _short_run(32, step=8.0)  # one round, far from learnt
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoostingStallWarning)
        evaluate_held_out(booster, x_test, y_test)
    assert booster.stall.judges_held_out()  # still to be judged by evaluate()


def test_the_short_stream_experiment_scores_a_run_as_it_reports_it(monkeypatch):
    from boost_helpers import imported_experiment

    from torchboost.data import load_abalone

    with imported_experiment(monkeypatch, "stall_short_streams") as experiment:
        run = experiment.run(load_abalone(), "abalone", 350, 0)
    assert set(run) >= {"metric", "constant", "loses", "warned"}
    assert run["loses"] == (run["metric"] >= run["constant"])
    assert run["warned"] == run["loses"]  # abalone, 350 rows: beats the constant, silent
