"""The SGB-vs-GB comparison and the ``torchboost`` command on a small slice of ABALONE."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost.cli import format_summary, main
from torchboost.configs import ExperimentConfig
from torchboost.experiment import EVAL_GROWTH, make_boosters, prepare_data, run_comparison
from torchboost.lightning import evaluate_held_out

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


def test_comparison_trains_through_lightning_as_a_plain_loop_would(tmp_path):
    config = ExperimentConfig.for_dataset("abalone", **SMALL)
    results = run_comparison(config, tmp_path, progress=False)
    # the same booster, batches (pass p in order seed + p) and initialisation, without Lightning
    data = prepare_data(config)
    reference = make_boosters(config, data)["SGB"]
    for p in range(config.passes):
        for x, y in data.stream(config.batch_size, config.seed + p):
            reference.learn(x, y)
    expected = evaluate_held_out(reference, data.x_test, data.y_test)["loss"] * data.loss_scale
    assert results["SGB"]["final"]["loss"] == pytest.approx(expected, rel=1e-12)
    assert results["SGB"]["final"]["mse"] == pytest.approx(2 * expected, rel=1e-12)
    # evaluations: at 0 units, after the first batch (32 rows * 3 learners * 3 units = 288),
    # then at the first batch end at or past the next multiple of K = 10,800 / 8 units or
    # EVAL_GROWTH times the last evaluation, whichever comes first; and at the end
    every, units = results["eval_every_units"], [p["units"] for p in results["SGB"]["curve"]]
    assert every == 1350.0 and units[-1] == 10_800.0
    assert units[:6] == [0.0, 288.0, 576.0, 864.0, 1152.0, 1440.0]  # 1.25 x, then 1350 first
    for before, after in itertools.pairwise(units[1:-1]):
        due = min((before // every + 1) * every, EVAL_GROWTH * before)
        assert due <= after < due + 288.0

    run = tmp_path / "tensorboard" / config.name
    tags = {}
    for sub in ("", "SGB", "base", "GB"):
        events = EventAccumulator(str(run / sub), size_guidance={"scalars": 0})
        events.Reload()
        tags[sub] = set(events.Tags()["scalars"])
    assert {"SGB/test_loss", "SGB/test_mse", "GB/test_mse", "base/test_mse", "SGB/anytime_loss",
            "SGB/edge"} <= tags[""]
    assert {"test/loss", "progressive/loss", "compute_units", "edge/learner_3"} <= tags["SGB"]
    assert {"test/loss", "progressive/loss"} <= tags["base"]
    assert {"gb/test_loss", "gb/stage"} <= tags["GB"]


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
