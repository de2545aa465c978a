"""StreamingCallback's TensorBoard curves, read back from the event files."""

from __future__ import annotations

import json
import math

import lightning.pytorch as pl
import pytest
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost.lightning import StreamingBoosterModule, StreamingCallback

pytestmark = [
    pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no"),
    pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated"),
]

EVAL_EVERY_UNITS = 5000.0


def _train_and_read(kind, data, tmp_path, make_booster, make_stream, trainer_kwargs):
    booster = make_booster(kind)
    stream = make_stream(data)
    history_path = tmp_path / "history.json"
    callback = StreamingCallback(data.x_test, data.y_test, EVAL_EVERY_UNITS,
                                 transform=stream.transform, history_path=history_path,
                                 eval_batch_size=128)
    logger = TensorBoardLogger(save_dir=tmp_path, name="tb", version=kind,
                               default_hp_metric=False)
    trainer = pl.Trainer(**{**trainer_kwargs, "logger": logger, "callbacks": [callback]})
    trainer.fit(StreamingBoosterModule(booster), train_dataloaders=stream)
    events = EventAccumulator(logger.log_dir, size_guidance={"scalars": 0})
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)]
               for tag in events.Tags()["scalars"]}
    return booster, callback, scalars, json.loads(history_path.read_text())


def _values(series):
    return [value for _, value in series]


def test_lightning_tensorboard_curves_against_units(regression, tmp_path, make_booster,
                                                    make_stream, trainer_kwargs):
    booster, callback, scalars, saved = _train_and_read("sgb", regression, tmp_path,
                                                        make_booster, make_stream,
                                                        trainer_kwargs)
    n = booster.n_learners
    expected = {"test/loss", "progressive/loss", "progressive/loss_mean",
                "progressive/loss_vs_units", "compute_units", "anytime/loss", "lr",
                *(f"{name}/learner_{i}" for name in ("edge", "target_norm", "fit_error")
                  for i in range(1, n + 1))}
    assert expected <= set(scalars)
    assert not {"test/error", "sigma/learner_1", "progressive/error"} & set(scalars)
    assert all(math.isfinite(v) for series in scalars.values() for v in _values(series))

    test_loss = scalars["test/loss"]
    steps = [step for step, _ in test_loss]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == booster.compute_units
    assert steps == [int(p["units"]) for p in callback.history]
    assert len(steps) == math.floor(booster.compute_units / EVAL_EVERY_UNITS) + 1 + (
        booster.compute_units % EVAL_EVERY_UNITS != 0)
    assert test_loss[-1][1] < 0.85 * test_loss[0][1]  # an easy stream: boosting helps
    assert all(v <= 1.0 for i in range(1, n + 1) for v in _values(scalars[f"edge/learner_{i}"]))
    assert [step for step, _ in scalars["anytime/loss"]] == list(range(1, n + 1))
    assert _values(scalars["anytime/loss"])[-1] == pytest.approx(test_loss[-1][1], rel=1e-6)
    assert _values(scalars["lr"]) == pytest.approx([0.05] * len(scalars["lr"]))
    units = _values(scalars["compute_units"])  # against Lightning's steps (batches)
    assert units == sorted(units) and units[-1] == booster.compute_units

    first, last = callback.history[0], callback.history[-1]
    assert first["progressive_loss"] is None and first["samples"] == 0
    assert last["samples"] == 2000 and last["test_error"] is None
    assert last["progressive_loss"] == pytest.approx(scalars["progressive/loss_vs_units"][-1][1])
    assert saved == {"history": callback.history, "anytime": callback.anytime}


def test_lightning_tensorboard_ogb_sigma_and_errors(classification, tmp_path, make_booster,
                                                   make_stream, trainer_kwargs):
    booster, callback, scalars, _ = _train_and_read("ogb_logistic", classification, tmp_path,
                                                    make_booster, make_stream, trainer_kwargs)
    n = booster.n_learners
    expected = {"test/error", "progressive/error_vs_units", "anytime/error",
                *(f"sigma/learner_{i}" for i in range(1, n + 1)),
                "lr"}
    assert expected <= set(scalars)
    sigmas = [v for i in range(1, n + 1) for v in _values(scalars[f"sigma/learner_{i}"])]
    assert all(0.0 <= s <= 1.0 for s in sigmas)
    assert _values(scalars[f"sigma/learner_{n}"])[-1] == pytest.approx(float(booster.sigma[-1]))
    errors = _values(scalars["test/error"])
    assert all(0.0 <= e <= 1.0 for e in errors) and errors[-1] < errors[0]
    assert callback.history[-1]["test_error"] == pytest.approx(errors[-1])
