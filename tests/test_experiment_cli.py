"""The SGB-vs-GB comparison and the ``torchboost`` command on a small slice of ABALONE."""

from __future__ import annotations

import itertools
import json
import re

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost.harness.cli import format_summary, main
from torchboost.harness.configs import ExperimentConfig
from torchboost.harness.driver import EVAL_GROWTH, make_boosters, prepare_data, run_comparison
from torchboost.lightning import evaluate_held_out

#: 600 ABALONE rows (540 train, 60 validation), 3 learners; SGB and base stream exactly 2
#: passes (min_passes = max_passes = 2, a budget they do not reach), GB trains <= 2 epochs a stage.
SMALL = {"max_train": 600, "n_learners": 3, "gb_max_epochs": 2, "eval_points": 8,
         "methods": ["base", "GB", "SGB"], "min_passes": 2, "max_passes": 2,
         "max_units": 20_000}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("abalone")
    config = ExperimentConfig.for_dataset("abalone", **SMALL)
    return config, out, run_comparison(config, out, progress=False)


def test_comparison_writes_results_figure_and_tensorboard(small_run):
    _, out, results = small_run
    saved = json.loads((out / "results.json").read_text())
    assert saved["config"]["n_learners"] == 3 and saved["config"]["methods"] == SMALL["methods"]
    assert (out / "compute.png").stat().st_size > 10_000
    assert (out / "wall.png").stat().st_size > 10_000
    assert list((out / "tensorboard").rglob("events.out.tfevents*"))
    methods = results["methods"]
    assert list(methods) == ["base", "GB", "SGB"]
    sgb, gb, base = methods["SGB"], methods["GB"], methods["base"]
    # SGB: 3 units per learner per example, every pass (Hu et al. Sec. 6.2)
    assert sgb["final"]["units"] == 3 * 3 * 540 * 2 and sgb["passes"] == 2
    assert base["final"]["units"] == 3 * 540 * 2 and base["passes"] == 2
    assert sgb["stop_reason"] in ("plateau", "max_passes")
    # GB: stage i costs i + 3 units per example per epoch (0-based i)
    epochs = [stage["epochs"] for stage in gb["stages"]]
    assert gb["final"]["units"] == sum(e * 540 * (i + 3) for i, e in enumerate(epochs))
    assert results["budget_units"] == 20_000  # max_units, not GB's units
    for method in (sgb, gb, base):
        units = [p["units"] for p in method["curve"]]
        assert units == sorted(units) and len(units) >= 5
        assert method["final"]["loss"] < method["curve"][0]["loss"]
    assert len(sgb["anytime"]) == 4 and sgb["anytime"][3] == pytest.approx(sgb["final"]["loss"])


def test_comparison_trains_through_lightning_as_a_plain_loop_would(small_run):
    config, out, results = small_run
    # the same booster, batches (pass p in order seed + p) and initialisation, without Lightning
    data = prepare_data(config)
    assert (len(data.x_train), len(data.x_val)) == (540, 60)
    reference = make_boosters(config, data)["SGB"]
    for p in range(2):
        for x, y in data.stream(config.batch_size, config.seed + p):
            reference.learn(x, y)
    expected = evaluate_held_out(reference, data.x_test, data.y_test)["loss"] * data.loss_scale
    sgb = results["methods"]["SGB"]
    assert sgb["final"]["loss"] == pytest.approx(expected, rel=1e-12)
    assert sgb["final"]["mse"] == pytest.approx(2 * expected, rel=1e-12)
    validation = evaluate_held_out(reference, data.x_val, data.y_val)["loss"]
    assert sgb["final"]["val"] == pytest.approx(validation, rel=1e-12)
    # evaluations: at 0 units, after the first batch (32 rows * 3 learners * 3 units = 288),
    # then at the first batch end at or past the next multiple of K = 20,000 / 8 units or
    # EVAL_GROWTH times the last evaluation, whichever comes first, at the end of pass 1
    # (540 * 9 = 4,860 units) and at the end
    every, units = results["eval_every_units"], [p["units"] for p in sgb["curve"]]
    assert every == 2500.0 and units[-1] == 9720.0 and 4860.0 in units
    assert units[:6] == [0.0, 288.0, 576.0, 864.0, 1152.0, 1440.0]
    for before, after in itertools.pairwise(units[1:-1]):
        due = min((before // every + 1) * every, EVAL_GROWTH * before)
        assert due <= after < due + 288.0 or after == 4860.0

    run = out / "tensorboard" / config.name
    tags = {}
    for sub in ("SGB", "base", "GB"):
        events = EventAccumulator(str(run / results["methods"][sub]["run"]),
                                  size_guidance={"scalars": 0})
        events.Reload()
        tags[sub] = set(events.Tags()["scalars"])
    assert {"test/loss", "test/mse", "progressive/loss", "compute_units",
            "learner_profile/edge", "anytime/loss"} <= tags["SGB"]
    assert {"test/loss", "test/mse", "progressive/loss"} <= tags["base"]
    assert {"test/loss", "test/mse", "stagewise/stage"} <= tags["GB"]


def test_summary_table_reports_mse_for_squared_loss(small_run):
    results = small_run[2]
    table = format_summary(results)
    assert "test MSE" in table and "stopped by" in table
    for method in results["methods"].values():
        assert f"{2 * method['final']['loss']:.4f}" in table
        assert f"{method['units']:,.0f}" in table


def test_cli_run_reads_a_yaml_configuration(tmp_path, capsys):
    config = ExperimentConfig.for_dataset("abalone", name="tiny", **{
        **SMALL, "methods": ["SGB"], "max_train": 300, "min_passes": 1, "max_passes": 1})
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config.to_dict()))
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "tiny: N = 3 learners" in printed and "results.json" in printed
    assert (tmp_path / "out" / "results.json").exists()


def test_config_rejects_unknown_keys_and_missing_paths(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown configuration keys"):
        ExperimentConfig.from_dict({"nam": "x"})
    with pytest.raises(ValueError, match="unknown or no methods"):
        ExperimentConfig(methods=["SGB", "XGBoost"])
    with pytest.raises(ValueError, match="val_fraction"):
        ExperimentConfig(val_fraction=0.0)
    with pytest.raises(ValueError, match="needs path"):
        run_comparison(ExperimentConfig.for_dataset("csv"), "/tmp/unused", progress=False)
    monkeypatch.setenv("TORCHBOOST_DATA", str(tmp_path))  # an empty data folder
    with pytest.raises(FileNotFoundError, match=r"mnist.*not found\. Put train-images"):
        run_comparison(ExperimentConfig.for_dataset("mnist"), "/tmp/unused", progress=False)


@pytest.mark.parametrize("text, message", [
    ("", "a configuration is a mapping of keys to values, got NoneType"),
    ("- a\n- b\n", "got list"),
    ("learner:\n  widthh: 3\n", r"unknown learner keys: \['widthh'\]"),
    ("n_learners: -3\n", "n_learners must be an integer >= 1, got -3"),
    ("max_passes: 0\n", "max_passes must be an integer >= 1, got 0"),
    ("a: [\n", "expected the node content"),
])
def test_cli_refuses_a_bad_configuration_before_any_training(tmp_path, capsys, text, message):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    with pytest.raises(SystemExit) as stop:
        main(["run", str(config), "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "bad.yaml: " in err and re.search(message, err)
    assert not (tmp_path / "out").exists()


def test_cli_demo_refuses_a_pass_count_below_one(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--max-passes", "-1"])
    assert "--max-passes: must be an integer >= 1, got -1" in capsys.readouterr().err


def test_cli_demo_says_how_its_settings_differ_from_the_readme_table(capsys, monkeypatch,
                                                                      tmp_path):
    from torchboost.harness import cli

    monkeypatch.setattr(cli, "DEMO", {"gb_max_epochs": 1, "max_passes": 1, "eval_points": 2,
                                      "max_train": 200, "methods": ["base"]})
    assert main(["demo", "--max-passes", "1", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert cli.DEMO_DIFFERS in printed and "base" in printed
    assert "3 seeds" in cli.DEMO_DIFFERS and "validation" in cli.DEMO_DIFFERS


def test_the_demo_ends_with_its_verdict_in_a_line():
    from torchboost.harness.cli import DEMO, verdict

    assert DEMO["optimizer"] == "schedule_free" and DEMO["lr"] == 0.1  # the library's defaults
    methods = {name: {"mean": value} for name, value in
               (("base", 4.9), ("wide", 4.43), ("deep", 4.42), ("GB", 4.96), ("SGB", 4.68),
                ("SGB_newton", 4.55))}
    line = verdict({"methods": methods, "metric": "mse", "best_SGB": "SGB_newton"})
    assert line == ("Verdict: streaming boosting (SGB_newton, the SGB variant chosen on "
                    "validation) ranks 3. of 5 on test mse: deep 4.42 < wide 4.43 < SGB_newton "
                    "4.55 < base 4.9 < GB 4.96 (one seed; the README's table has three)")
    methods["SGB_newton"]["mean"] = 4.0
    assert "ranks best" in verdict({"methods": methods, "metric": "mse",
                                    "best_SGB": "SGB_newton"})
    assert verdict({"methods": {"base": {"mean": 1.0}}, "metric": "mse", "best_SGB": None}) == ""
