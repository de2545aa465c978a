"""StreamingCallback's TensorBoard curves, read back from the event files."""

from __future__ import annotations

import json
import math

import lightning.pytorch as pl
import pytest
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

from torchboost.boosters.default_lr import DEFAULT_LR
from torchboost.lightning import StreamingBoosterModule, StreamingCallback

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
    events = EventAccumulator(logger.log_dir, size_guidance={"scalars": 0, "histograms": 0,
                                                             "images": 0, "tensors": 0})
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)]
               for tag in events.Tags()["scalars"]}
    return booster, callback, scalars, json.loads(history_path.read_text()), events


def _histograms(events, tag):
    """``[(step, count, min, max)]`` of a histogram tag."""
    return [(e.step, e.histogram_value.num, e.histogram_value.min, e.histogram_value.max)
            for e in events.Histograms(tag)]


def _hparams(events):
    """The run's logged configuration and the metric names of its HParams row."""
    content = events.PluginTagToContent("hparams")
    start = HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    experiment = HParamsPluginData.FromString(content["_hparams_/experiment"])
    params = {key: value.WhichOneof("kind") and getattr(value, value.WhichOneof("kind"))
              for key, value in start.session_start_info.hparams.items()}
    metrics = {info.name.tag for info in experiment.experiment.metric_infos}
    return params, metrics


def _values(series):
    return [value for _, value in series]


def test_lightning_tensorboard_curves_against_units(regression, tmp_path, make_booster,
                                                    make_stream, trainer_kwargs):
    booster, callback, scalars, saved, events = _train_and_read("sgb", regression, tmp_path,
                                                                make_booster, make_stream,
                                                                trainer_kwargs)
    n = booster.n_learners
    quantities = ("edge", "target_norm", "fit_error", "lr")
    expected = {"test/loss", "progressive/loss", "progressive/loss_mean",
                "progressive/loss_vs_units", "compute_units", "anytime/loss",
                "final/test_loss", "final/compute_units",
                *(f"learner_profile/{name}" for name in quantities)}
    assert expected <= set(scalars)
    assert not {"test/error", "learner_profile/sigma", "progressive/error"} & set(scalars)
    # one chart per per-learner quantity, not N tags
    assert not [t for t in scalars if "learner_" in t.split("/")[-1]]
    assert set(events.Tags()["histograms"]) == {f"learners/{name}" for name in quantities}
    assert events.Tags()["images"] == ["anytime/curve"]
    assert all(math.isfinite(v) for series in scalars.values() for v in _values(series))

    test_loss = scalars["test/loss"]
    steps = [step for step, _ in test_loss]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == booster.compute_units
    assert steps == [int(p["units"]) for p in callback.history]
    assert len(steps) == math.floor(booster.compute_units / EVAL_EVERY_UNITS) + 1 + (
        booster.compute_units % EVAL_EVERY_UNITS != 0)
    assert test_loss[-1][1] < 0.85 * test_loss[0][1]  # an easy stream: boosting helps
    edges = _histograms(events, "learners/edge")
    assert [step for step, *_ in edges] == steps[1:]  # from the first batch on
    assert all(count == n and high <= 1.0 for _, count, _, high in edges)
    assert all(low == high == pytest.approx(DEFAULT_LR) for *_, low, high in
               _histograms(events, "learners/lr"))
    profile = scalars["learner_profile/edge"]
    assert [step for step, _ in profile] == list(range(1, n + 1))
    assert _values(profile) == pytest.approx(booster.edges().tolist(), rel=1e-6)
    assert [step for step, _ in scalars["anytime/loss"]] == list(range(1, n + 1))
    assert _values(scalars["anytime/loss"])[-1] == pytest.approx(test_loss[-1][1], rel=1e-6)
    params, metrics = _hparams(events)
    assert params["booster"] == "SGB" and params["n_learners"] == n and params["lr"] == DEFAULT_LR
    assert {"final/test_loss", "final/progressive_loss", "final/compute_units"} <= metrics
    assert _values(scalars["final/test_loss"]) == pytest.approx([test_loss[-1][1]])
    units = _values(scalars["compute_units"])  # against Lightning's steps (batches)
    assert units == sorted(units) and units[-1] == booster.compute_units

    first, last = callback.history[0], callback.history[-1]
    assert first["progressive_loss"] is None and first["samples"] == 0
    assert last["samples"] == 2000 and last["test_error"] is None
    assert last["progressive_loss"] == pytest.approx(scalars["progressive/loss_vs_units"][-1][1])
    assert saved == {"history": callback.history, "anytime": callback.anytime}


def test_lightning_tensorboard_ogb_sigma_and_errors(classification, tmp_path, make_booster,
                                                   make_stream, trainer_kwargs):
    booster, callback, scalars, _, events = _train_and_read(
        "ogb_logistic", classification, tmp_path, make_booster, make_stream, trainer_kwargs)
    n = booster.n_learners
    expected = {"test/error", "progressive/error_vs_units", "anytime/error",
                "learner_profile/sigma", "final/test_error"}
    assert expected <= set(scalars)
    sigmas = _histograms(events, "learners/sigma")
    assert all(count == n and 0.0 <= low <= high <= 1.0 for _, count, low, high in sigmas)
    assert _values(scalars["learner_profile/sigma"]) == pytest.approx(booster.sigma.tolist())
    assert _hparams(events)[0]["booster"] == "OGB"
    errors = _values(scalars["test/error"])
    assert all(0.0 <= e <= 1.0 for e in errors) and errors[-1] < errors[0]
    assert callback.history[-1]["test_error"] == pytest.approx(errors[-1])


def test_lightning_tensorboard_follows_the_learning_rate_schedule(regression, tmp_path,
                                                                  make_booster, make_stream,
                                                                  trainer_kwargs):
    """Under a schedule ``learners/lr`` is the current rate at every evaluation (every 5000
    units, about 8 of the 40 rounds: past the 5-round warm-up, down the cosine) and the HParams
    row records the starting rate and the schedule."""
    _, _, _, _, events = _train_and_read("sgb_scheduled", regression, tmp_path, make_booster,
                                         make_stream, trainer_kwargs)
    histograms = _histograms(events, "learners/lr")
    assert all(low == high for _, _, low, high in histograms) and len(histograms) >= 4
    rates = [low for _, _, low, _ in histograms]
    assert rates == sorted(rates, reverse=True) and rates[0] > 10 * rates[-2]
    assert 0.03 < rates[0] < 0.05 and rates[-1] < 1e-4
    params, _ = _hparams(events)
    assert params["lr"] == 0.05 and params["lr_scheduler"] == "SequentialLR"
