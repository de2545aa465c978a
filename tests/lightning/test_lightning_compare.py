"""stream_and_compare / run_stagewise: SGB and stagewise GB from one configuration, one run."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost import SGB, StagewiseGB, TwoLayerNet
from torchboost.lightning import build_seeded, stream_and_compare

pytestmark = [
    pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no"),
    pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated"),
]

LEARNER = partial(TwoLayerNet, 5, 4)
OPTIONS = {"n_learners": 4, "optimizer_kwargs": {"lr": 0.05}}


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


def test_lightning_stream_and_compare(regression, tmp_path):
    results = stream_and_compare(
        lambda: SGB(LEARNER, **OPTIONS), lambda: StagewiseGB(LEARNER, **OPTIONS),
        regression.x_train, regression.y_train, regression.x_test, regression.y_test,
        batch_size=50, eval_every_units=4000, log_dir=tmp_path, name="cmp", version="v0",
        max_gb_epochs=2, gb_patience=1, history_path=tmp_path / "results.json",
        trainer_kwargs={"log_every_n_steps": 10})
    sgb, gb = results["sgb"], results["gb"]
    assert sgb[-1]["units"] == 2000 * 3 * 4 and sgb[-1]["samples"] == 2000
    # GB re-reads the data and re-evaluates frozen learners: stage i costs i + 3 units/example
    assert len(results["gb_stages"]) == 4
    assert gb[-1]["units"] >= 2000 * (3 + 4 + 5 + 6) > sgb[-1]["units"]
    assert [p["stage"] for p in gb] == sorted(p["stage"] for p in gb) and gb[-1]["stage"] == 3
    for history in (sgb, gb):
        units = [p["units"] for p in history]
        assert units[0] == 0 and units == sorted(set(units))
        assert history[-1]["test_loss"] < history[0]["test_loss"]
    assert [p["n_learners"] for p in results["anytime"]] == [1, 2, 3, 4]
    assert json.loads((tmp_path / "results.json").read_text()) == results

    events = EventAccumulator(results["log_dir"], size_guidance={"scalars": 0})
    events.Reload()
    assert {"test/loss", "gb/test_loss", "gb/stage", "anytime/loss"} <= set(
        events.Tags()["scalars"])
    gb_steps = [e.step for e in events.Scalars("gb/test_loss")]
    assert gb_steps == [int(p["units"]) for p in gb]
    assert [e.step for e in events.Scalars("test/loss")] == [int(p["units"]) for p in sgb]
