"""The comparison driver's Lightning pieces: identically seeded boosters, stagewise GB with
validation early stopping on the unit schedule, and streaming passes until a stopping rule."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost import SGB, StagewiseGB, TwoLayerNet
from torchboost.data import BatchGroups, DataStream, MultiPassStream
from torchboost.harness import (
    ConvergenceCallback,
    StoppingRule,
    build_seeded,
    fit_streaming,
    run_stagewise,
)
from torchboost.lightning import evaluate_held_out

LEARNER = partial(TwoLayerNet, 5, 4)
OPTIONS = {"n_learners": 4}  # the default learners and rate rule


def test_lightning_build_seeded_gives_identical_learners_and_keeps_the_rng():
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    sgb = build_seeded(lambda: SGB(LEARNER, **OPTIONS), seed=7)
    gb = build_seeded(lambda: StagewiseGB(LEARNER, **OPTIONS), seed=7)
    assert torch.equal(torch.rand(3), expected_next)
    assert sgb.learners.mode == "stacked" and gb.learners.mode == "loop"
    for i in range(4):
        for name, value in sgb.learners.learner_state(i).items():
            assert torch.equal(value, gb.learners.learner_state(i)[name])


def test_lightning_run_stagewise_early_stops_on_validation(regression, tmp_path):
    """GB on 1,600 training rows, early stopping each stage on 400 held-out training rows."""
    from lightning.pytorch.loggers import TensorBoardLogger

    x, y = regression.x_train, regression.y_train
    gb = build_seeded(lambda: StagewiseGB(LEARNER, **OPTIONS), seed=7)
    epochs = iter(range(100))
    logger = TensorBoardLogger(tmp_path, name="gb", version="v0")
    run = run_stagewise(gb, lambda: DataStream(x[:1600], y[:1600], batch_size=50,
                                               seed=next(epochs), standardize=None),
                        regression.x_test, regression.y_test, eval_every_units=4000,
                        loggers=logger, max_epochs=4, patience=1, tol=0.05,
                        validation=(x[1600:], y[1600:]))
    logger.finalize("success")
    history, stages = run["history"], run["stages"]
    assert [s["stage"] for s in stages] == [0, 1, 2, 3]
    assert all(1 <= s["best_epoch"] <= s["epochs"] <= 4 for s in stages)
    assert any(s["epochs"] < 4 for s in stages)  # some stage stopped early
    # the kept learners are the best epochs': the final validation loss is the last stage's best
    final_val = evaluate_held_out(gb, x[1600:], y[1600:])["loss"]
    assert final_val == pytest.approx(stages[-1]["val_score"], rel=1e-6)
    # GB re-reads the data and re-evaluates frozen learners: stage i costs i + 3 units/example
    assert gb.compute_units == sum(s["epochs"] * 1600 * (i + 3) for i, s in enumerate(stages))
    units = [p["units"] for p in history]
    assert units[0] == 0 and units == sorted(set(units)) and units[-1] == gb.compute_units
    assert history[-1]["test_loss"] < 0.85 * history[0]["test_loss"]  # measured 0.82
    seconds = [p["seconds"] for p in history]
    assert seconds[0] == pytest.approx(0, abs=0.05) and seconds == sorted(seconds)
    events = EventAccumulator(logger.log_dir, size_guidance={"scalars": 0})
    events.Reload()
    assert [e.step for e in events.Scalars("test/loss")] == [int(u) for u in units]


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize(("rule", "reason", "passes"), [
    (StoppingRule(min_passes=1, max_passes=3), "max_passes", 3),
    (StoppingRule(plateau_tol=0.5, min_passes=2, max_passes=10), "plateau", 2),
    (StoppingRule(max_passes=10, max_units=25_000), "budget", 1),
])
def test_lightning_convergence_callback_stops_by_its_rule(regression, rule, reason, passes,
                                                          group):
    """SGB streams passes of 1,600 rows (32 batches, 19,200 units each) until the rule stops it:
    after 3 passes, at the end of pass 2 (a 50 % plateau tolerance), or at the first batch at or
    past 25,000 units (inside pass 2, after 1 complete pass). In BatchGroups of 4 batches the
    passes end at group ends, and the budget stops at the first group end past it."""
    x, y = regression.x_train, regression.y_train
    booster = build_seeded(lambda: SGB(LEARNER, **OPTIONS), seed=7)
    callback = ConvergenceCallback(regression.x_test, regression.y_test, 4000,
                                   val_x=x[1600:], val_y=y[1600:], rule=rule, pass_batches=32)
    stream = MultiPassStream(lambda p: DataStream(x[:1600], y[:1600], batch_size=50, seed=p,
                                                  standardize=None), passes=10)
    fit_streaming(booster, stream if group == 1 else BatchGroups(stream, group), callback)
    assert callback.stop_reason == reason and callback.passes == passes
    units = booster.compute_units
    if reason == "budget":
        assert 25_000 <= units < 25_000 + 600 * group and booster.samples_seen % 1600 != 0
    else:
        assert units == 19_200 * passes
    assert callback.history[-1]["units"] == units and callback.val_curve[-1][0] == units
    assert callback.val_curve[-1][1] == pytest.approx(
        evaluate_held_out(booster, x[1600:], y[1600:])["loss"], rel=1e-9)
    # every pass end is a validation point
    assert {19_200.0 * k for k in range(1, callback.passes + 1)} <= {
        u for u, _ in callback.val_curve}


def test_lightning_convergence_callback_counts_passes_that_end_inside_a_group(regression):
    """Groups of 5 batches over passes of 32: pass 3 ends at batch 96, inside the group of
    batches 96–100, which is where the max_passes rule stops the run."""
    x, y = regression.x_train, regression.y_train
    booster = build_seeded(lambda: SGB(LEARNER, **OPTIONS), seed=7)
    callback = ConvergenceCallback(regression.x_test, regression.y_test, 4000,
                                   val_x=x[1600:], val_y=y[1600:], pass_batches=32,
                                   rule=StoppingRule(min_passes=1, max_passes=3))
    stream = MultiPassStream(lambda p: DataStream(x[:1600], y[:1600], batch_size=50, seed=p,
                                                  standardize=None), passes=10)
    fit_streaming(booster, BatchGroups(stream, 5), callback)
    assert (callback.stop_reason, callback.passes, callback.batches) == ("max_passes", 3, 100)
    assert booster.rounds == 100
    # the ends of passes 1-3 are evaluated at the ends of their groups (batches 35, 65, 100)
    assert {600.0 * batches for batches in (35, 65, 100)} <= {u for u, _ in callback.val_curve}
