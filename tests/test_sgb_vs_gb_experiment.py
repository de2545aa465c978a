"""experiments/sgb_vs_gb.py: the table a sceptic reads — every method's optimizer and rate
chosen on validation, mean and spread over seeds, one pass next to the budget."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from torchboost.data import synthetic_classification
from torchboost.harness import METHODS, ExperimentConfig, LearnerConfig
from torchboost.harness.driver import run_comparison

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Four tiny runs of a binary stream (2 regimes × 2 optimizers, 2 seeds each) written
    where the experiment writes them, and the table built from them."""
    sys.path.insert(0, str(EXPERIMENTS))
    import sgb_vs_gb
    sys.path.remove(str(EXPERIMENTS))
    out = tmp_path_factory.mktemp("sgb_vs_gb")
    data = synthetic_classification(n=500, d=4, n_classes=2, seed=0)
    runs = {}
    for regime in sgb_vs_gb.REGIMES:
        for setting, (optimizer, schedule) in sgb_vs_gb.SETTINGS.items():
            config = ExperimentConfig(
                name="adult", dataset="adult", loss="logistic", n_learners=2, batch_size=50,
                learner=LearnerConfig(hidden=2), max_passes=2, eval_points=3, seeds=2,
                one_pass=regime == "one_pass", fixed_budget=True, optimizer=optimizer,
                schedule=schedule, lr_grid=[0.01, 0.1],
                methods=["base", "wide", "GB", "GB_newton", "SGB", "SGB_newton"])
            runs[regime, setting] = run_comparison(
                config, out / "adult" / f"{regime}-{setting}", progress=False, dataset=data)
    rows = sgb_vs_gb.write_table(out)
    sys.modules.pop("sgb_vs_gb", None)
    return out, runs, rows


def test_every_row_has_the_fields_a_sceptic_asks_for(table):
    out, runs, rows = table
    assert json.loads((out / "table.json").read_text()) == rows and len(rows) == 1
    row = rows[0]
    assert row["standardized"] is True and row["best_SGB_by"] == "validation"
    assert (row["seeds"], row["passes"], row["train_rows"]) == (2, 2, 360)
    for suffix, regime in (("", "budget"), ("_one_pass", "one_pass")):
        for m in ("base", "wide", "GB", "GB_newton", "SGB", "SGB_newton"):
            # the optimizer whose chosen rate has the lower validation loss (mean over seeds)
            setting = min(("schedule_free", "adam"),
                          key=lambda s: runs[regime, s]["methods"][m]["val_loss_mean"])
            method = runs[regime, setting]["methods"][m]
            assert row[f"optimizer_{m}{suffix}"] == setting
            assert row[f"schedule_{m}{suffix}"] == ("constant" if setting == "schedule_free"
                                                   else "cosine")
            assert row[f"{m}{suffix}"] == pytest.approx(sum(method["seed_metrics"]) / 2)
            assert len(row[f"seeds_{m}{suffix}"]) == 2 and row[f"std_{m}{suffix}"] >= 0
            assert row[f"lr_{m}{suffix}"] in row[f"lr_grid_{m}{suffix}"]
            assert row[f"lr_grid_{m}{suffix}"] == [0.01, 0.1]
        assert row[f"deep{suffix}"] is None  # not run
        variants = ("SGB", "SGB_newton")
        best = min(variants, key=lambda v: row[f"val_{v}{suffix}"])
        assert row[f"best_SGB{suffix}"] == best
        assert row[f"GB_like_best_SGB{suffix}"] == ("GB_newton" if best == "SGB_newton"
                                                    else "GB")
    # a rate left at an edge of its (unextended) grid is named
    edged = {f"{m}{s}" for m in METHODS for s in ("", "_one_pass")
             if row.get(f"lr_{m}{s}") in (0.01, 0.1)}
    assert set(row["lr_at_edge"]) == edged
    assert (out / "summary.png").stat().st_size > 10_000
    table_md = (out / "table.md").read_text()
    assert "One pass" in table_md and "multi-pass budget" in table_md


def _row(data: str, values: dict[str, float], best: str = "SGB_newton") -> dict:
    """A table row with each method's mean (sd a tenth of it, parameters 100 × it) in both
    regimes, and ``best`` the best SGB variant (GB with its Newton targets)."""
    row: dict = {"data": data, "metric": "MSE", "passes": 5}
    for suffix in ("", "_one_pass"):
        for m, v in values.items():
            row.update({f"{m}{suffix}": v, f"std_{m}{suffix}": v / 10,
                        f"params_{m}{suffix}": int(100 * v)})
        row.update({f"best_SGB{suffix}": best, f"GB_like_best_SGB{suffix}": "GB_newton"})
    return row


def test_the_chained_versus_table_takes_each_column_from_its_comparison():
    sys.path.insert(0, str(EXPERIMENTS))
    import sgb_vs_gb
    sys.path.remove(str(EXPERIMENTS))
    try:
        plain = [_row("pol", {"base": 264.0, "SGB_newton": 70.0, "GB_newton": 111.0,
                              "wide": 52.0, "deep": 10.0}),
                 _row("other", {"SGB_newton": 1.0})]
        chained = [_row("pol", {"SGB_newton": 38.0, "GB_newton": 50.0, "wide": 53.0,
                                "deep": 11.5})]
        rows = sgb_vs_gb.versus_rows(plain, chained)
        markdown = sgb_vs_gb.versus_markdown(rows)
    finally:
        sys.modules.pop("sgb_vs_gb", None)
    assert [(r["data"], r["regime"]) for r in rows] == [("pol", "1 pass"), ("pol", "5 passes")]
    row = rows[0]
    assert (row["SGB"], row["SGB_chained"], row["GB_chained"]) == (70.0, 38.0, 50.0)
    assert (row["wide"], row["deep"], row["wide_chained"], row["deep_chained"]) == (
        52.0, 10.0, 53.0, 11.5)
    assert row["std_SGB_chained"] == pytest.approx(3.8) and row["params_deep_chained"] == 1150
    assert row["method_GB_chained"] == "GB_newton" and row["winner"] == "deep"
    assert row["base"] == 264.0
    assert "| pol | 1 pass | 264 ± 26 | 70 ± 7 | 38 ± 3.8 | 50 ± 5 | 52 ± 5.2 | **10 ± 1** |" \
        in markdown


def test_online_boosting_gets_its_own_glance_table_next_to_the_best_sgb_variant():
    sys.path.insert(0, str(EXPERIMENTS))
    import sgb_vs_gb
    sys.path.remove(str(EXPERIMENTS))
    try:
        values = {"base": 264.0, "wide": 52.0, "deep": 10.0, "GB": 111.0, "SGB": 70.0,
                  "SGB_newton": 77.0, "OGB": 80.0, "ConvexHullOGB": 9.0}
        lines = sgb_vs_gb.online_glance([_row("pol", values, best="SGB")])
        plain = {m: v for m, v in values.items() if m not in ("OGB", "ConvexHullOGB")}
        none = sgb_vs_gb.online_glance([_row("pol", plain, best="SGB")])
    finally:
        sys.modules.pop("sgb_vs_gb", None)
    assert lines[1:3] == ["| data | regime | base learner | wide net | deep net | best SGB "
                          "variant | OGB | ConvexHullOGB |", "|---|---|---|---|---|---|---|---|"]
    assert lines[3:] == [
        "| pol | 1 pass | 264 ± 26 | 52 ± 5.2 | 10 ± 1 | 70 ± 7 (SGB) | 80 ± 8 | **9 ± 0.9** |",
        "| pol | 5 passes | 264 ± 26 | 52 ± 5.2 | 10 ± 1 | 70 ± 7 (SGB) | 80 ± 8 | **9 ± 0.9** |"]
    assert none == []  # a table without them has none
