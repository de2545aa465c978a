"""The comparison driver: stopping rule, wide baseline, and one tiny end-to-end run."""

from __future__ import annotations

import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost.data import Dataset, synthetic_regression
from torchboost.harness import METHODS, ExperimentConfig, LearnerConfig, StoppingRule, TrainingClock
from torchboost.harness.driver import make_boosters, parameter_count, prepare_data, run_comparison
from torchboost.harness.driver import table_row as driver_row

RULE = StoppingRule(plateau_tol=0.01, min_passes=2, max_passes=5, max_units=1000)


def test_stopping_rule_plateau_on_a_scripted_curve():
    improving = [(0, 1.0), (100, 0.8), (200, 0.7), (300, 0.6), (400, 0.5)]
    # last quarter (300, 400]: 0.5 vs 0.6 before -> 17 % better: go on
    assert not RULE.plateaued(improving)
    assert RULE.check(improving, units=400, passes=3, end_of_pass=True) is None
    flat = [*improving, (500, 0.498), (600, 0.497)]
    # last quarter (450, 600]: 0.497 vs 0.5 before -> 0.6 % < 1 %: plateau
    assert RULE.plateaued(flat)
    assert RULE.check(flat, units=600, passes=3, end_of_pass=True) == "plateau"
    # 1.2 % better in the last quarter is not a plateau; a worse last quarter is
    assert not RULE.plateaued([*improving, (500, 0.5), (600, 0.494)])
    assert RULE.plateaued([*improving, (500, 0.52), (600, 0.51)])
    # only at the end of a pass, and only after min_passes passes
    assert RULE.check(flat, units=600, passes=3, end_of_pass=False) is None
    assert RULE.check(flat, units=600, passes=1, end_of_pass=True) is None
    assert not RULE.plateaued([(0, 1.0)]) and not RULE.plateaued([])


def test_stopping_rule_budget_and_max_passes():
    improving = [(0, 1.0), (500, 0.5), (999, 0.2)]
    # the budget stops at any batch, even inside a pass and before min_passes
    assert RULE.check(improving, units=1000, passes=0, end_of_pass=False) == "budget"
    assert RULE.check(improving, units=999, passes=4, end_of_pass=False) is None
    assert RULE.check(improving, units=999, passes=5, end_of_pass=True) == "max_passes"
    assert StoppingRule(max_passes=3).check(improving, units=1e12, passes=3,
                                            end_of_pass=True) == "max_passes"
    for bad in ({"min_passes": 0}, {"min_passes": 4, "max_passes": 3}, {"plateau_tol": 1.0},
                {"max_units": 0}):
        with pytest.raises(ValueError):
            StoppingRule(**bad)


@pytest.mark.parametrize(("kind", "hidden", "shape"), [("two_layer", 3, (7,)),
                                                       ("conv", 2, (1, 12, 12))])
def test_wide_learner_has_the_ensembles_parameters_but_one_output_bias(kind, hidden, shape):
    n, m = 5, 4
    import torch
    x = torch.zeros(6, *shape)
    data = Dataset("d", x, torch.zeros(6, dtype=torch.long), x, torch.zeros(6, dtype=torch.long),
                   "multiclass", m)
    weak = LearnerConfig(kind, hidden).factory(data, m)()
    wide = LearnerConfig(kind, hidden).widened(n).factory(data, m)()
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert count(wide) == n * count(weak) - (n - 1) * m
    assert LearnerConfig(kind, hidden).wide_prediction_units(n) == n
    linear = LearnerConfig("linear")
    assert linear.widened(n) == linear and linear.wide_prediction_units(n) == 1


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Every method on 480 synthetic rows (432 train, 48 validation), 3 learners of 4 units."""
    out = tmp_path_factory.mktemp("driver")
    config = ExperimentConfig(name="tiny", dataset="synthetic", n_learners=3, lr=0.02,
                              batch_size=48, learner=LearnerConfig(hidden=4), gb_max_epochs=3,
                              gb_patience=1, max_passes=4, eval_points=8)
    data = synthetic_regression(n=600, d=5, seed=0)
    return config, data, out, run_comparison(config, out, progress=False, dataset=data)


def test_driver_runs_every_method_and_writes_the_table_row(tiny_run):
    config, data, _, results = tiny_run
    methods = results["methods"]
    assert list(methods) == list(METHODS)
    prepared = prepare_data(config, data)
    n = len(prepared.x_train)
    assert (n, len(prepared.x_val)) == (432, 48)
    for name, method in methods.items():
        units = [p["units"] for p in method["curve"]]
        seconds = [p["seconds"] for p in method["curve"]]
        assert units[0] == 0 and units == sorted(units) and units[-1] == method["units"]
        assert seconds == sorted(seconds) and method["wall_seconds"] <= method["elapsed_seconds"]
        assert method["final"]["mse"] < method["curve"][0]["mse"], name
        # the streaming methods are validated at every evaluation point, GB after every epoch
        assert all(("val" in p) == (name != "GB") for p in method["curve"])
    # compute: 3 units per example for the base learner, 3N for the wide net and SGB*, GB's
    # stage i (0-based) i + 3 per example per epoch; the streaming methods stop at GB's units
    assert methods["base"]["units"] == 3 * methods["base"]["final"]["samples"]
    for name in ("wide", "SGB", "SGB_newton", "SGB_learned"):
        assert methods[name]["units"] == 9 * methods[name]["final"]["samples"]
    gb = methods["GB"]
    assert gb["units"] == sum(s["epochs"] * n * (i + 3) for i, s in enumerate(gb["stages"]))
    assert all(1 <= s["best_epoch"] <= s["epochs"] <= 3 for s in gb["stages"])
    assert results["budget_units"] == gb["units"]
    for name, method in methods.items():
        if name == "GB":
            continue
        assert method["stop_reason"] in ("budget", "plateau", "max_passes")
        assert method["units"] < gb["units"] + 9 * config.batch_size  # within one batch
        if method["stop_reason"] == "max_passes":
            assert method["passes"] == config.max_passes
    # parameters: 3 learners of 5*4 + 4 + 4 + 1 = 29; the wide net 3 * 29 - 2
    assert [methods[m]["params"] for m in METHODS] == [29, 85, 87, 87, 87, 87]
    best = results["best_SGB"]
    assert methods[best]["final"]["mse"] == min(methods[m]["final"]["mse"]
                                                for m in ("SGB", "SGB_newton", "SGB_learned"))
    reach = results["units_SGB_to_GB_final"]
    if reach is not None:
        first = next(p for p in methods[best]["curve"] if p["units"] == reach)
        assert first["mse"] <= gb["final"]["mse"]
    equal = results["at_equal_units"]
    assert equal["limit"] == min(m["units"] for m in methods.values())
    assert equal["base"] == methods["base"]["final"]["mse"]  # the base learner spends least
    assert set(results["at_equal_wall"]) == {"limit", *METHODS}
    row = driver_row("tiny", results)
    assert list(row)[:8] == ["data", "metric", *METHODS]
    for name in METHODS:
        assert row[name] == methods[name]["final"]["mse"]
        assert row[f"units_{name}"] == methods[name]["units"]
        assert row[f"wall_s_{name}"] == methods[name]["wall_seconds"]
    assert row["units_SGB_to_GB_final"] == reach and row["metric"] == "MSE"


def test_driver_learned_steps_and_outputs(tiny_run):
    config, data, out, results = tiny_run
    methods = results["methods"]
    assert len(methods["SGB_learned"]["steps"]) == 3 and "steps" not in methods["SGB"]
    assert methods["SGB_newton"]["anytime"][-1] == pytest.approx(methods["SGB_newton"]["final"]
                                                                 ["loss"])
    saved = json.loads((out / "results.json").read_text())
    assert saved["methods"]["GB"]["final"] == methods["GB"]["final"]
    assert (out / "compute.png").stat().st_size > 10_000
    assert (out / "wall.png").stat().st_size > 10_000
    for method in METHODS:  # one run per method, the same tags in each
        events = EventAccumulator(str(out / "tensorboard" / "tiny" / method),
                                  size_guidance={"scalars": 0})
        events.Reload()
        assert {"test/loss", "test/mse"} <= set(events.Tags()["scalars"]), method
        steps = [e.step for e in events.Scalars("test/mse")]
        assert steps == [int(p["units"]) for p in methods[method]["curve"]], method
    # the same seed builds the same initial learners for the boosters
    boosters = make_boosters(config, prepare_data(config, data))
    first = [boosters[m].learners.learner_state(0) for m in ("GB", "SGB", "SGB_learned")]
    for state in first[1:]:
        for key, value in state.items():
            assert value.equal(first[0][key])
    assert parameter_count(boosters["wide"]) == 85
    assert boosters["wide"].units_per_example == 9


def test_training_clock_resumes_from_the_saved_seconds():
    clock = TrainingClock()
    clock.start(12.5)  # a resumed run: 12.5 s were trained before the checkpoint
    assert 12.5 <= clock.seconds < 13.5
    with clock.paused():
        pass
    assert clock.seconds >= 12.5


@pytest.mark.parametrize("rounds", [0, -2, True, 2.0])
def test_rounds_per_step_must_be_a_positive_integer(rounds):
    with pytest.raises(ValueError, match="rounds_per_step must be an integer >= 1"):
        ExperimentConfig(rounds_per_step=rounds)


def test_driver_in_rounds_per_step_trains_the_same_booster(tmp_path):
    """SGB alone for 4 passes of 9 batches (no GB: no budget, and the plateau rule may only
    fire where max_passes does), once with one round per Lightning step and once in groups of
    4: pass 4 ends at batch 36, a group's end, so both runs stop there with the same model."""
    data = synthetic_regression(n=600, d=5, seed=0)
    runs = {}
    for rounds in (1, 4):
        config = ExperimentConfig(name=f"rounds{rounds}", dataset="synthetic", n_learners=3,
                                  lr=0.02, batch_size=48, learner=LearnerConfig(hidden=4),
                                  methods=["SGB"], max_passes=4, eval_points=8,
                                  rounds_per_step=rounds)
        runs[rounds] = run_comparison(config, tmp_path / str(rounds), progress=False,
                                      dataset=data)["methods"]["SGB"]
    for run in runs.values():
        assert (run["passes"], run["stop_reason"]) == (4, "max_passes")
        assert run["units"] == 9 * 432 * 4
    timeless = [{k: v for k, v in runs[r]["final"].items() if k != "seconds"} for r in (1, 4)]
    assert timeless[0] == timeless[1]  # same units, samples, loss and MSE


def test_driver_under_cosine_gives_every_method_its_best_rate_of_the_grid(tmp_path):
    """``schedule="cosine"``: the streaming methods run exactly ``max_passes`` passes, GB the
    epochs per stage that match their units (here 3 passes × 3·3 units = 27 per example, GB's
    3 + 4 + 5 = 12 per epoch: 2 epochs), every run decays its rate to 0 by its end, and each
    method reports the grid's rate with the lowest final validation loss."""
    config = ExperimentConfig(name="cos", dataset="synthetic", n_learners=3, lr=0.02,
                              batch_size=48, learner=LearnerConfig(hidden=4), max_passes=3,
                              eval_points=6, schedule="cosine", lr_grid=[0.002, 0.05],
                              methods=["base", "GB", "SGB"])
    data = synthetic_regression(n=600, d=5, seed=0)
    results = run_comparison(config, tmp_path, progress=False, dataset=data)
    assert results["gb_epochs_per_stage"] == 2
    methods = results["methods"]
    for name, method in methods.items():
        tried = method["lr_candidates"]
        assert [t["lr"] for t in tried] == [0.002, 0.05]
        best = min(tried, key=lambda t: t["val_loss"])
        assert method["lr"] == best["lr"] and method["val_loss"] == best["val_loss"]
        assert method["final"]["mse"] == best["test"]
        assert tried[0]["test"] != tried[1]["test"]
        if name == "GB":
            assert [s["epochs"] for s in method["stages"]] == [2, 2, 2]
        else:
            assert method["passes"] == 3 and method["stop_reason"] == "max_passes"
    assert methods["SGB"]["units"] == 3 * 9 * 432
    assert results["budget_units"] is None
    with pytest.raises(ValueError, match="schedule must be one of"):
        ExperimentConfig(schedule="step")
    with pytest.raises(ValueError, match="lr_grid"):
        ExperimentConfig(lr_grid=[])


def test_driver_lr_fan_in_gives_every_method_the_fan_in_rule():
    """``lr_fan_in``: weights wider than it get the rate times lr_fan_in / fan_in in every
    method (the library's default rule), the wide net's 40-unit hidden layer included."""
    config = ExperimentConfig(name="fan", dataset="synthetic", n_learners=4, lr=0.02,
                              learner=LearnerConfig(hidden=10), lr_fan_in=8.0)
    boosters = make_boosters(config, prepare_data(config, synthetic_regression(n=200, d=5)))
    for name, booster in boosters.items():
        rates = sorted({g["lr"] for opt in booster.learners.optimizers
                        for g in opt.param_groups})
        widest = 40 if name == "wide" else 10  # the output layer's fan-in (d = 5 < 8)
        assert rates == pytest.approx([0.02 * 8 / widest, 0.02]), name
    assert ExperimentConfig.from_dict(config.to_dict()).lr_fan_in == 8.0
