"""The evaluation pieces: chunked held-out scores, the unit schedule, per-learner scalars."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from torchboost import SGB, TwoLayerNet
from torchboost.lightning import (
    HeldOutEvaluator,
    booster_hparams,
    evaluate_held_out,
    learner_scalars,
    learner_values,
)

LEARNER = partial(TwoLayerNet, 3, 2)


def test_lightning_chunked_evaluation_matches_one_pass():
    booster = SGB(LEARNER, "logistic", n_learners=3)
    x, y = torch.randn(203, 3), (torch.rand(203) > 0.5).long()
    booster.learn(x, y)
    whole = booster.evaluate(x, y, 2)
    chunked = evaluate_held_out(booster, x, y, batch_size=50, n_learners=2)
    assert chunked == pytest.approx(whole, rel=1e-6)
    doubled = evaluate_held_out(booster, x / 2, y, transform=lambda v: v * 2)
    assert doubled == pytest.approx(booster.evaluate(x, y), rel=1e-6)
    assert booster.score(booster.predict(x), y) == pytest.approx(
        booster.evaluate(x, y), rel=1e-6)
    with pytest.raises(ValueError, match="empty"):
        evaluate_held_out(booster, x[:0], y[:0])


def test_lightning_evaluator_schedule_and_state():
    booster = SGB(LEARNER, n_learners=2)
    evaluator = HeldOutEvaluator(torch.randn(10, 3), torch.randn(10), every_units=100)
    assert evaluator.due(0)
    evaluator(booster)
    assert evaluator.next_at == 100 and not evaluator.due(99) and evaluator.due(100)
    booster.learn(torch.randn(40, 3), torch.randn(40))  # 40 * 3 * 2 = 240 units
    evaluator(booster)
    assert evaluator.next_at == 300  # one evaluation, then the next multiple above 240
    restored = HeldOutEvaluator(torch.randn(10, 3), torch.randn(10), every_units=100)
    restored.load_state_dict(evaluator.state_dict())
    assert restored.next_at == 300
    with pytest.raises(ValueError, match="every"):
        HeldOutEvaluator(evaluator.x, evaluator.y, every_units=50).load_state_dict(
            evaluator.state_dict())
    with pytest.raises(ValueError, match="> 0"):
        HeldOutEvaluator(evaluator.x, evaluator.y, every_units=0)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_lightning_learner_scalars(mode):
    booster = SGB(LEARNER, n_learners=2, mode=mode, optimizer_kwargs={"lr": 0.03})
    booster.learn(torch.randn(8, 3), torch.randn(8))
    values = learner_values(booster)
    assert set(values) == {"edge", "target_norm", "fit_error", "lr"}
    assert values["lr"] == pytest.approx([0.03, 0.03])
    assert values["edge"] == pytest.approx(booster.edges().tolist())
    scalars = learner_scalars(booster)  # the same, flat, for loggers without histograms
    assert set(scalars) == {f"learners/{name}/learner_{i}" for name in values for i in (1, 2)}
    assert scalars["learners/edge/learner_2"] == pytest.approx(float(booster.edges()[1]))
    assert booster_hparams(booster) == {"booster": "SGB", "loss": "squared", "n_learners": 2,
                                        "mode": mode, "optimizer": "AdamWScheduleFree", "lr": 0.03,
                                        "step": 0.25, "targets": "gradient"}
