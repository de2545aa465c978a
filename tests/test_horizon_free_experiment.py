"""experiments/horizon_free.py: one run reads the metric at the passes it names, and the summary
divides every schedule-free setting by the best tuned Adam, by hand."""

from __future__ import annotations

import json
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


def two_seed_rows(horizon_free):
    """One stream, two seeds (the second 0.2 above the first): the cosine at 1.5, Adam's
    constant rates at 3, 2 and 4, the decay at 2.5, the default at 1."""
    rows = []
    for seed, shift in ((0, 0.0), (1, 0.2)):
        for method, value in (("adam_7e-03", 3.0), ("adam_2e-02", 2.0), ("adam_6e-02", 4.0),
                              ("adam_decay", 2.5), ("sf_1e-01_w0", 1.0)):
            rows.append({"stream": "s", "seed": seed, "method": method,
                         **{f"pass{p}": value + shift for p in horizon_free.PASSES}})
        rows += [{"stream": "s", "seed": seed, "method": "adam_cosine", f"pass{p}": 1.5 + shift}
                 for p in horizon_free.PASSES]
    return rows


def test_the_summary_divides_by_the_best_tuned_adam(horizon_free):
    rows = two_seed_rows(horizon_free)
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
        "lr": horizon_free.DEFAULT_LR, "warmup_steps": horizon_free.DEFAULT_WARMUP,
        "betas": horizon_free.DEFAULT_BETAS}))


def test_the_variants_change_the_default_rule_in_one_respect(horizon_free):
    """A variant's run sets the default's rate, warm-up and fan-in rule explicitly plus its one
    change; Adam's cosine knows the run's rounds; the default sets nothing."""
    by_name = {m["method"]: m for m in horizon_free.methods() if m["passes"] == 10}
    assert horizon_free.booster_options(by_name["sf_1e-01_w0"], 100) == {}
    decay = horizon_free.booster_options(by_name["sf_1e-01_w0_decay300"], 100)
    assert decay["optimizer_kwargs"] == {"lr": 0.1, "warmup_steps": 0, "betas": (0.92, 0.999)}
    assert decay["lr_fan_in"] == 64 and decay["lr_scheduler"].multiplier(300) == 0.5 ** 0.5
    beta = horizon_free.booster_options(by_name["sf_1e-01_w0_beta95"], 100)
    assert beta["optimizer_kwargs"]["betas"] == (0.95, 0.999) and "lr_scheduler" not in beta
    old_rule = horizon_free.booster_options(by_name["sf_1e-01_w0_beta90"], 100)
    assert old_rule["optimizer_kwargs"] == {"lr": 0.1, "warmup_steps": 0, "betas": (0.9, 0.999)}
    grid = horizon_free.booster_options(by_name["sf_5e-02_w0"], 100)  # the package's β
    assert grid["optimizer_kwargs"] == {"lr": 0.05, "warmup_steps": 0}
    cosine = horizon_free.booster_options(by_name["adam_cosine"], 40)
    assert cosine["lr_scheduler"].multiplier(20) == pytest.approx(0.5)


def test_merged_results_replace_a_rerun_and_keep_the_rest(horizon_free, tmp_path):
    path = tmp_path / "results.json"

    def row(seed, value, passes=10):
        return {"stream": "s", "method": "m", "seed": seed, "passes": passes, "pass1": value}

    horizon_free.write_merged(path, [row(0, 1.0), row(1, 2.0), row(0, 5.0, passes=1)])
    horizon_free.write_merged(path, [row(1, 3.0), row(2, 4.0)])
    merged = json.loads(path.read_text())
    assert sorted((r["seed"], r["passes"], r["pass1"]) for r in merged) == [
        (0, 1, 5.0), (0, 10, 1.0), (1, 10, 3.0), (2, 10, 4.0)]
    assert not path.with_suffix(".tmp").exists()


def test_the_table_gives_each_ratio_its_standard_error(horizon_free):
    """Ratio 1.1 / 1.6 with the two means' relative standard errors added in quadrature."""
    summary = horizon_free.summarize(two_seed_rows(horizon_free))
    se = statistics.stdev([0.0, 0.2]) / 2 ** 0.5
    expected = (1.1 / 1.6) * ((se / 1.1) ** 2 + (se / 1.6) ** 2) ** 0.5
    cell = summary["cells"]["s/1"]
    assert horizon_free.ratio_error(cell, "sf_1e-01_w0", "adam_cosine") == pytest.approx(expected)
    table = horizon_free.markdown(summary)
    assert f"| s | 1 | 1.6 ± 0.14 | 2.1 ± 0.14 (0.02) | 2.1 ± 0.14 | 1.1 ± 0.14 | **0.69** ± " \
           f"{expected:.2f} | 0.52 ± " in table


def test_a_spread_knob_changes_the_default_rule_in_one_respect(horizon_free):
    """``--spread-knobs``: the default's rate, warm-up, fan-in rule and β made explicit, and the
    one knob; a variant of the main grid is a knob too; each knob's deviation over the old
    default's, by hand."""
    r1 = horizon_free.booster_options(horizon_free.spread_knob("r1"), 100)
    assert r1 == {"lr_fan_in": 64.0, "optimizer_kwargs": {
        "lr": 0.1, "warmup_steps": 0, "betas": (0.92, 0.999), "r": 1.0}}
    warm = horizon_free.booster_options(horizon_free.spread_knob("warmup50"), 100)
    assert warm["optimizer_kwargs"]["warmup_steps"] == 50
    decay = horizon_free.booster_options(horizon_free.spread_knob("decay300"), 100)
    assert decay["lr_scheduler"].multiplier(300) == 0.5 ** 0.5
    rows = [{"stream": "s", "method": method, "pass1": value}
            for method, values in (("adam_2e-02", (1.0, 3.0)), ("default", (1.0, 2.0)),
                                   ("default_r1", (1.0, 1.5)))
            for value in values]
    cell = horizon_free.spread(rows)["s"]
    assert cell["std_ratio"] == pytest.approx(0.5)
    assert cell["default_r1"]["std_ratio"] == pytest.approx(0.25)
    assert "std_ratio" not in cell["default"] and cell["default_r1"]["seeds"] == 2


def test_spread_sources_vary_one_seed_and_hold_the_other(horizon_free):
    """``--spread-sources``: a job varies the initialisation or the order, the other at seed 0;
    a run reads the order from ``order_seed`` (the same seed is the same run, another order is
    another run); the table is :func:`spread` of each source's runs, by hand."""
    jobs = horizon_free.source_jobs(["s"], 2, 96)
    assert {(job[1]["source"], job[2], job[4]) for job in jobs} == {
        ("init", 0, 0), ("init", 1, 0), ("order", 0, 0), ("order", 0, 1)}
    assert len(jobs) == 2 * 2 * len(horizon_free.SPREAD_METHODS)
    method = {**horizon_free.SPREAD_METHODS[1], "source": "order"}
    same = horizon_free.run("abalone", method, 0, 96, order_seed=0)
    other = horizon_free.run("abalone", method, 0, 96, order_seed=1)
    assert same["pass1"] == horizon_free.run("abalone", method, 0, 96)["pass1"]
    assert other["pass1"] != same["pass1"] and other["order_seed"] == 1
    rows = [{"stream": "s", "source": source, "method": method, "pass1": value}
            for source, old, new in (("init", (1.0, 3.0), (1.0, 2.0)),
                                     ("order", (1.0, 2.0), (1.0, 3.0)))
            for method, values in (("adam_2e-02", old), ("default", new)) for value in values]
    table = horizon_free.sources(rows)["s"]
    assert table["init"]["std_ratio"] == pytest.approx(0.5)
    assert table["order"]["std_ratio"] == pytest.approx(2.0)


def test_a_run_of_some_methods_summarises_and_plots(horizon_free, tmp_path):
    """``--methods`` (the held-out seeds run the default and Adam's baselines only): the
    figure leaves out what was not run instead of failing, and the table still divides by
    the best tuned Adam."""
    rows = [r for r in two_seed_rows(horizon_free) if r["method"] != "adam_decay"]
    summary = horizon_free.summarize(rows)
    horizon_free.plot(summary, tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 0
    assert summary["cells"]["s/1"]["ratio_to_tuned"]["sf_1e-01_w0"] == pytest.approx(1.1 / 1.6)
