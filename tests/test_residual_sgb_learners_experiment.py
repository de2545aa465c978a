"""experiments/residual_sgb_learners.py: one run's errors and warnings, and the summary's counts."""

from __future__ import annotations

import pytest
from boost_helpers import imported_experiment


@pytest.fixture
def experiment(monkeypatch):
    with imported_experiment(monkeypatch, "residual_sgb_learners") as module:
        yield module


def test_a_run_reads_the_absolute_error_after_each_pass(experiment):
    row = experiment.run("abalone", 4, seed=0, max_train=96)
    assert 0 < row["pass1"] < 20 and 0 < row["pass3"] < 20 and row["warnings"] == []


def test_the_summary_counts_the_runs_that_warned(experiment):
    rows = [{"stream": "s", "n": 8, "seed": seed, "pass1": 1.0 + seed, "pass3": 2.0,
             "warnings": ["w"] if seed else []} for seed in range(3)]
    assert experiment.summarize(rows) == {
        "s/8": {"pass1": 2.0, "pass3": 2.0, "runs": 3, "warned": 2}}
