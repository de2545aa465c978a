"""The SGB-vs-GB comparison and the ``torchboost`` command on a small slice of ABALONE."""

from __future__ import annotations

import json

import pytest
import yaml

from torchboost.cli import format_summary, main
from torchboost.configs import ExperimentConfig
from torchboost.experiment import run_comparison

SMALL = {"max_train": 600, "passes": 2, "n_learners": 3, "gb_max_epochs": 2, "eval_points": 8}


def test_comparison_writes_results_figure_and_tensorboard(tmp_path):
    config = ExperimentConfig.for_dataset("abalone", **SMALL)
    results = run_comparison(config, tmp_path, progress=False)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["config"]["n_learners"] == 3
    assert (tmp_path / "compute.png").stat().st_size > 10_000
    assert list((tmp_path / "tensorboard").rglob("events.out.tfevents*"))
    sgb, gb, base = results["SGB"], results["GB"], results["base"]
    # SGB: 3 units per learner per example, every pass (Hu et al. Sec. 6.2)
    assert sgb["final"]["units"] == 3 * 3 * 600 * 2
    assert base["final"]["units"] == 3 * 600 * 2
    # GB: stage i costs i + 2 units per example per epoch (1-based i)
    epochs = [stage["epochs"] for stage in gb["stages"]]
    assert gb["final"]["units"] == sum(e * 600 * (i + 3) for i, e in enumerate(epochs))
    for method in (sgb, gb, base):
        units = [p["units"] for p in method["curve"]]
        assert units == sorted(units) and len(units) >= 5
        assert method["final"]["loss"] < method["curve"][0]["loss"]
    assert len(sgb["anytime"]) == 4 and sgb["anytime"][3] == pytest.approx(sgb["final"]["loss"])


def test_summary_table_reports_mse_for_squared_loss(tmp_path):
    config = ExperimentConfig.for_dataset("abalone", **SMALL)
    results = run_comparison(config, tmp_path, progress=False)
    table = format_summary(results)
    assert "test MSE" in table
    assert f"{2 * results['SGB']['final']['loss']:.4f}" in table


def test_cli_run_reads_a_yaml_configuration(tmp_path, capsys):
    config = ExperimentConfig.for_dataset("abalone", name="tiny", **SMALL)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "tiny: N = 3 learners" in printed and "results.json" in printed
    assert (tmp_path / "out" / "results.json").exists()


def test_config_rejects_unknown_keys_and_missing_paths():
    with pytest.raises(ValueError, match="unknown configuration keys"):
        ExperimentConfig.from_dict({"nam": "x"})
    with pytest.raises(ValueError, match="needs path"):
        run_comparison(ExperimentConfig.for_dataset("mnist"), "/tmp/unused", progress=False)
