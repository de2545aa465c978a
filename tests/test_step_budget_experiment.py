"""experiments/step_budget.py: the steps it compares (the library's default among them), one
run, and the summary's ratios to each cell's best rule, by hand."""

from __future__ import annotations

import pytest
import torch
from boost_helpers import imported_experiment

from torchboost import SGB
from torchboost.boosters.gradient_boosting import STEP_BUDGET


@pytest.fixture
def step_budget(monkeypatch):
    with imported_experiment(monkeypatch, "step_budget") as module:
        yield module


def test_the_rules_steps_and_the_librarys_default_among_them(step_budget):
    assert step_budget.step_for("squared", 64, None) == 0.25
    assert step_budget.step_for("squared", 64, 4.0) == 1 / 16
    assert step_budget.step_for("squared", 8, 4.0) == 0.25  # the cap does not bind
    assert step_budget.step_for("logistic", 16, 4.0) == 0.25  # Newton targets: ½ capped
    assert STEP_BUDGET in step_budget.CAPS
    for loss, targets in (("squared", "gradient"), ("logistic", "newton")):
        for n in step_budget.NS:
            default = SGB(lambda: torch.nn.Linear(1, 1), loss, n_learners=n, targets=targets)
            assert default.step == step_budget.step_for(loss, n, STEP_BUDGET)


def test_a_run_reads_the_metric_after_each_pass(step_budget):
    row = step_budget.run("abalone", 4, 0.25, seed=0, max_train=96)
    assert row["loss"] == "squared" and 0 < row["pass10"] < 50
    assert set(row) >= {f"pass{p}" for p in step_budget.PASSES}


def test_the_summary_divides_by_each_cells_best_rule(step_budget):
    """N = 64, squared loss: the paper's η (¼) scores 4 and 6 over two seeds, cap 4 (1/16) 2,
    cap 6 (6/64) 3, cap 8 (⅛) 2.5; cap 16 is the paper's step at N = 64."""
    rows = [{"stream": "s", "loss": "squared", "n": 64, "step": step, "seed": seed,
             **{f"pass{p}": value for p in step_budget.PASSES}}
            for step, values in ((0.25, (4.0, 6.0)), (1 / 16, (2.0, 2.0)), (6 / 64, (3.0, 3.0)),
                                 (1 / 8, (2.5, 2.5)))
            for seed, value in enumerate(values)]
    summary = step_budget.summarize(rows)
    cell = summary["cells"]["s/64/1"]
    assert cell["paper"]["mean"] == 5.0 and cell["paper"]["ratio_to_best"] == 2.5
    assert cell["cap16"]["ratio_to_best"] == 2.5  # the same runs
    assert cell["cap6"]["ratio_to_best"] == 1.5 and cell["cap4"]["ratio_to_best"] == 1.0
    assert summary["worst_ratio_to_best"]["cap8"] == 1.25
    assert "| `cap4` | 1.000 | 1.000 |" in step_budget.markdown(summary)
