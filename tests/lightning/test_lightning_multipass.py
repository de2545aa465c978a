"""Several passes through Lightning: a MultiPassStream is one epoch, its position travels in
checkpoints, and the evaluation schedule can grow geometrically early on."""

from __future__ import annotations

import pytest
import torch
from crash import CrashAt
from lightning.pytorch.callbacks import ModelCheckpoint

from torchboost.data import DataStream, MultiPassStream
from torchboost.harness.compare import fit_streaming
from torchboost.lightning import HeldOutEvaluator, StreamingCallback

pytestmark = [
    pytest.mark.filterwarnings("ignore:Using ModelCheckpoint with manual optimization"),
    pytest.mark.filterwarnings("ignore:Be aware that when using `ckpt_path`, callbacks used"),
]

PASSES = 3
EVERY = 6000.0  # of 4 learners * 3 units * 2,000 rows * 3 passes = 72,000 units in all


def _fit(data, make_booster, trainer_kwargs, callbacks=(), ckpt_path=None):
    """Three passes of 40 batches through fit_streaming; returns (booster, callback, trainer)."""
    booster = make_booster("sgb")
    stream = MultiPassStream(
        lambda p: DataStream.from_dataset(data, batch_size=50, seed=p, standardize=None), PASSES)
    callback = StreamingCallback(data.x_test, data.y_test, EVERY, eval_growth=1.5)
    settings = {key: value for key, value in trainer_kwargs.items() if key != "logger"}
    settings.update(max_epochs=-1, callbacks=list(callbacks),
                    enable_checkpointing=bool(callbacks))
    trainer = fit_streaming(booster, stream, callback, ckpt_path=ckpt_path,
                            trainer_kwargs=settings)
    return booster, callback, trainer


def test_lightning_multipass_is_one_epoch_and_resumes_exactly(regression, tmp_path,
                                                              make_booster, trainer_kwargs,
                                                              assert_identical):
    booster, callback, trainer = _fit(regression, make_booster, trainer_kwargs)
    # max_epochs=-1: the callback stops at the end of the one epoch that is all three passes
    assert trainer.global_step == 3 * 40 and trainer.current_epoch == 1
    assert booster.samples_seen == 6000 and booster.compute_units == 72_000
    units = [p["units"] for p in callback.history]
    # 0, the first batch (600 units), the first batch at or past 1.5x the last evaluation
    # while that comes before the next multiple of 6,000, then the multiples
    assert units[:8] == [0.0, 600.0, 1200.0, 1800.0, 3000.0, 4800.0, 6000.0, 9000.0]
    assert units[8:] == [12_000.0 + 6000.0 * k for k in range(11)]
    # at the default learners and rate: measured 0.62 (Adam at its old default 2e-2: 0.76)
    assert callback.history[-1]["test_loss"] < 0.65 * callback.history[0]["test_loss"]

    saver = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=25, save_last=True)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _fit(regression, make_booster, trainer_kwargs, callbacks=[saver, CrashAt(60)])
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == 50
    position = checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]
    assert (position["pass"], position["stream"]["batches_consumed"]) == (1, 10)
    resumed, resumed_callback, trainer = _fit(regression, make_booster, trainer_kwargs,
                                              ckpt_path=tmp_path / "last.ckpt")
    assert trainer.global_step == 120
    assert_identical(booster.state_dict(), resumed.state_dict())
    assert resumed_callback.history == callback.history


def test_lightning_evaluator_growth_schedule():
    evaluator = HeldOutEvaluator(torch.randn(4, 3), torch.randn(4), every_units=1000,
                                 growth=1.25)
    evaluator.scores = lambda *args, **kwargs: {"loss": 0.0}  # the schedule alone
    booster = type("Units", (), {"compute_units": 0})()
    schedule = []
    for units in (0, 96, 120, 400, 3990, 5000):
        booster.compute_units = units
        evaluator(booster)
        schedule.append(evaluator.next_at)
    # min(next multiple of 1000, 1.25 x units): the first batch after 0 is always evaluated
    assert schedule == [0.0, 120.0, 150.0, 500.0, 4000.0, 6000.0]
    plain = HeldOutEvaluator(evaluator.x, evaluator.y, every_units=1000)
    with pytest.raises(ValueError, match=r"grew by 1\.25"):
        plain.load_state_dict(evaluator.state_dict())
    with pytest.raises(ValueError, match="growth must be > 1"):
        HeldOutEvaluator(evaluator.x, evaluator.y, every_units=1000, growth=1.0)
