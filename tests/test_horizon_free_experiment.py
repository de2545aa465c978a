"""experiments/horizon_free.py: one run reads the metric at the passes it names, and the summary
divides every schedule-free setting by the best tuned Adam, by hand."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def horizon_free(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import horizon_free

    yield horizon_free
    for name in ("horizon_free", "defaults"):
        sys.modules.pop(name, None)


def test_a_run_reads_the_metric_after_each_named_pass(horizon_free):
    method = {"method": "sf_1e-01_w0", "optimizer": "sf", "lr": 0.1, "warmup": 0, "passes": 2,
              "read": [1, 2]}
    row = horizon_free.run("abalone", method, seed=0, max_train=96)
    assert set(row) >= {"pass1", "pass2", "seconds"} and 0 < row["pass2"] < 50


def test_the_summary_divides_by_the_best_tuned_adam(horizon_free):
    rows = []
    for seed, shift in ((0, 0.0), (1, 0.2)):
        for method, value in (("adam_7e-03", 3.0), ("adam_2e-02", 2.0), ("adam_6e-02", 4.0),
                              ("adam_decay", 2.5), ("sf_1e-01_w0", 1.0)):
            rows.append({"stream": "s", "seed": seed, "method": method,
                         **{f"pass{p}": value + shift for p in horizon_free.PASSES}})
        rows += [{"stream": "s", "seed": seed, "method": "adam_cosine", f"pass{p}": 1.5 + shift}
                 for p in horizon_free.PASSES]
    cell = horizon_free.summarize(rows)["cells"]["s/1"]
    assert cell["best_constant"] == "adam_2e-02"
    assert cell["tuned_best"] == pytest.approx(1.6)  # the cosine's mean beats 2.1
    assert cell["ratio_to_tuned"]["sf_1e-01_w0"] == pytest.approx(1.1 / 1.6)
    assert cell["ratio_to_old_default"]["sf_1e-01_w0"] == pytest.approx(1.1 / 2.1)
    assert cell["stats"]["sf_1e-01_w0"]["std"] == pytest.approx(statistics.stdev([1.0, 1.2]))


def test_the_default_setting_sets_nothing_and_equals_its_explicit_rule(horizon_free):
    """The row reported for the default sets no rate and no schedule; the table's runs at the
    default's rate (set explicitly before this) train bitwise the same booster."""
    import torch

    from torchboost import SGB, TwoLayerNet
    from torchboost.testing import assert_same

    def trained(**options):
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(5, 4), n_learners=3, **options)
        g = torch.Generator().manual_seed(1)
        for _ in range(5):
            booster.learn(torch.randn(16, 5, generator=g), torch.randn(16, generator=g))
        return booster.state_dict()

    assert_same(trained(), trained(lr_fan_in=horizon_free.DEFAULT_LR_FAN_IN, optimizer_kwargs={
        "lr": horizon_free.DEFAULT_LR, "warmup_steps": horizon_free.DEFAULT_WARMUP}))
