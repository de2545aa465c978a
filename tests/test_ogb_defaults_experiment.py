"""experiments/ogb_defaults.py: the runs it plans, that a default run sets nothing but the
objective, and the summary's ratios by hand."""

from __future__ import annotations

import pytest
import torch
from boost_helpers import imported_experiment

from torchboost import ConvexHullOGB


@pytest.fixture
def ogb_defaults(monkeypatch):
    with imported_experiment(monkeypatch, "ogb_defaults") as module:
        yield module


def test_the_plan_holds_each_objective_against_adams_tuned_baselines(ogb_defaults):
    settings = ogb_defaults.plan()
    for model in ("OGB", "ConvexHullOGB"):
        for objective in ("linear", "greedy"):
            methods = [s["method"] for s in settings
                       if s["model"] == model and s["objective"] == objective]
            # the default, three constant rates and one cosine per horizon
            assert methods.count("default") == 1 and methods.count("adam_cosine") == 3
            assert len(methods) == 7
    alone = [s["method"] for s in settings if s["model"] == "SingleLearner"]
    assert len(alone) == 7 and alone.count("adam_cosine") == 3  # judged as the boosters are
    assert [s["method"] for s in settings if s["model"] == "SGB"] == ["default"]


def test_a_default_run_trains_the_booster_that_sets_nothing_but_the_objective(ogb_defaults):
    setting = next(s for s in ogb_defaults.plan() if s["model"] == "ConvexHullOGB"
                   and s["objective"] == "greedy" and s["method"] == "default")
    row = ogb_defaults.run("abalone", {**setting, "passes": 1, "read": [1]}, seed=0,
                           max_train=64, n_learners=2)
    ds, loss, learner, _ = ogb_defaults.load("abalone", 64)
    torch.manual_seed(0)
    booster = ConvexHullOGB(learner.factory(ds, 1), loss, n_learners=2, stall_window=None)
    reference = ogb_defaults.stream_passes(booster, ds, 1, [1], ogb_defaults.BATCH, 0)
    assert row["pass1"] == reference["pass1"] and row["n"] == 2


def test_the_summary_divides_by_the_constant_sgb_and_the_best_tuned_adam(ogb_defaults):
    """One stream, one pass count: the constant 10; SGB 4, the base learner 8; OGB/greedy's
    default 5 and 7 over two seeds (6), Adam at one rate 3, its cosine 4 (the best tuned: 3)."""
    def row(model, objective, method, seed, value):
        return {"stream": "s", "model": model, "objective": objective, "method": method,
                "seed": seed, "constant": 10.0, **{f"pass{p}": value
                                                  for p in ogb_defaults.PASSES}}

    rows = [row("SGB", None, "default", 0, 4.0), row("SingleLearner", None, "default", 0, 8.0),
            row("OGB", "greedy", "default", 0, 5.0),
            row("OGB", "greedy", "default", 1, 7.0), row("OGB", "greedy", "adam_2e-02", 0, 3.0),
            row("OGB", "greedy", "adam_cosine", 0, 4.0)]
    summary = ogb_defaults.summarize(rows)
    column = summary["cells"]["s/1"]["columns"]["OGB/greedy"]
    assert column["default"] == 6.0 and column["to_constant"] == 0.6
    assert column["to_sgb"] == 1.5 and column["to_tuned"] == 2.0
    assert column["best_tuned"] == "adam_2e-02"
    assert summary["worst"]["OGB/greedy"] == {"to_constant": 0.6, "to_sgb": 1.5, "to_tuned": 2.0}
    assert "| OGB/greedy | 0.60 | 1.50 | 2.00 |" in ogb_defaults.markdown(summary)
