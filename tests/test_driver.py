"""The comparison driver: stopping rule, wide baseline, and one tiny end-to-end run."""

from __future__ import annotations

import json
import math

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from torchboost.data import Dataset, synthetic_regression
from torchboost.harness import METHODS, ExperimentConfig, LearnerConfig, StoppingRule, TrainingClock
from torchboost.harness.driver import (
    choose_rate,
    make_boosters,
    parameter_count,
    prepare_data,
    run_comparison,
)
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
    run = [m for m in METHODS if m != "GB_newton"]  # GB_newton is GB on a regression loss
    assert list(methods) == run and list(results["skipped"]) == ["GB_newton"]
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
    for name in ("wide", "deep", "SGB", "SGB_newton", "SGB_learned", "OGB", "ConvexHullOGB"):
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
    # parameters: 3 learners of 5*4 + 4 + 4 + 1 = 29; the wide net 3 * 29 - 2; the deep net
    # of 3 hidden layers of width 5 (6*5 + 2*6*5 + 6 = 96, the closest to 85 of any width)
    assert [methods[m]["params"] for m in run] == [29, 85, 96, 87, 87, 87, 87, 87, 87]
    best = results["best_SGB"]  # chosen on the validation split, not on the test set
    assert methods[best]["val_loss_mean"] == min(
        methods[m]["val_loss_mean"] for m in ("SGB", "SGB_newton", "SGB_learned"))
    reach = results["units_SGB_to_GB_final"]
    if reach is not None:
        first = next(p for p in methods[best]["curve"] if p["units"] == reach)
        assert first["mse"] <= gb["final"]["mse"]
    equal = results["at_equal_units"]
    assert equal["limit"] == min(m["units"] for m in methods.values())
    assert equal["base"] == methods["base"]["final"]["mse"]  # the base learner spends least
    assert set(results["at_equal_wall"]) == {"limit", *run}
    row = driver_row("tiny", results)
    assert list(row)[:4 + len(METHODS)] == ["data", "metric", "standardized", "best_SGB_by",
                                             *METHODS]
    assert row["standardized"] is True and row["best_SGB_by"] == "validation"
    assert row["GB_newton"] is None and row["optimizer_SGB"] == "adam"
    for name in run:
        # one seed: the mean is the run's final metric, its spread 0
        assert row[name] == methods[name]["final"]["mse"] and row[f"std_{name}"] == 0
        assert row[f"seeds_{name}"] == [row[name]] and row[f"lr_grid_{name}"] == [0.02]
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
    for method in methods:  # one run per method and rate, the same tags in each
        assert methods[method]["run"] == f"{method}/lr=0.02"
        events = EventAccumulator(str(out / "tensorboard" / "tiny" / methods[method]["run"]),
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
    fewest epochs per stage that reach their units (here 3 passes × 3·3 units = 27 per example,
    GB's 3 + 4 + 5 = 12 per epoch: 3 epochs, 36 units), every run decays its rate to 0 by its
    end, and each method reports the grid's rate with the lowest final validation loss."""
    config = ExperimentConfig(name="cos", dataset="synthetic", n_learners=3, lr=0.02,
                              batch_size=48, learner=LearnerConfig(hidden=4), max_passes=3,
                              eval_points=6, schedule="cosine", lr_grid=[0.002, 0.05],
                              methods=["base", "GB", "SGB"])
    data = synthetic_regression(n=600, d=5, seed=0)
    results = run_comparison(config, tmp_path, progress=False, dataset=data)
    assert results["gb_epochs_per_stage"] == 3
    methods = results["methods"]
    for name, method in methods.items():
        tried = method["lr_candidates"]
        assert [t["lr"] for t in tried] == [0.002, 0.05]
        best = min(tried, key=lambda t: t["val_loss"])
        assert method["lr"] == best["lr"] and method["val_loss"] == best["val_loss"]
        assert method["final"]["mse"] == best["test"]
        assert tried[0]["test"] != tried[1]["test"]
        if name == "GB":
            assert [s["epochs"] for s in method["stages"]] == [3, 3, 3]
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


def test_prepare_data_standardises_every_input_with_the_training_rows_statistics():
    """Tabular rows per feature, images per channel, with the training rows' mean and standard
    deviation; validation and test rows with the same statistics."""
    tabular = synthetic_regression(n=300, d=4, seed=1)
    tabular.x_train.mul_(torch.tensor([1.0, 10.0, 100.0, 0.1])).add_(5.0)
    config = ExperimentConfig(name="t", dataset="synthetic")
    prepared = prepare_data(config, tabular)
    assert prepared.x_train.mean(0) == pytest.approx(torch.zeros(4), abs=1e-5)
    assert prepared.x_train.std(0) == pytest.approx(torch.ones(4), abs=1e-5)
    rows = len(tabular.x_train)
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(0))
    train = tabular.x_train[order[round(0.1 * rows):]]
    expected = (tabular.x_test - train.mean(0)) / train.std(0)
    assert torch.allclose(prepared.x_test, expected, atol=1e-5)
    gen = torch.Generator().manual_seed(0)
    images = Dataset("img", torch.rand(40, 2, 5, 5, generator=gen) * torch.tensor([1.0, 9.0])
                     .view(1, 2, 1, 1), torch.randint(0, 3, (40,), generator=gen),
                     torch.rand(8, 2, 5, 5, generator=gen), torch.randint(0, 3, (8,)),
                     "multiclass", 3)
    x = prepare_data(ExperimentConfig(name="i", dataset="mnist", loss="softmax", n_outputs=3),
                     images).x_train
    per_channel = x.transpose(0, 1).reshape(2, -1)
    assert per_channel.mean(1) == pytest.approx(torch.zeros(2), abs=1e-5)
    assert per_channel.std(1) == pytest.approx(torch.ones(2), abs=1e-5)


@pytest.mark.parametrize(("best", "extensions", "tried", "chosen", "at_edge"), [
    (1e-4, 2, [1e-3, 1e-2, 1e-1, 1.0, 10.0], 1e-3, True),  # below: two steps down, capped
    (1e-2, 2, [1e-3, 1e-2, 1e-1, 1.0, 10.0], 1e-2, False),  # a step beyond shows the optimum
    (50.0, 2, [1e-1, 1.0, 10.0, 100.0, 1e3], 100.0, False),  # above: inside after two steps
    (5e3, 2, [1e-1, 1.0, 10.0, 100.0, 1e3], 1e3, True),      # above: capped at the edge
    (50.0, 0, [1e-1, 1.0, 10.0], 10.0, True),                # no extension: at the edge
    (1.0, 2, [1e-1, 1.0, 10.0], 1.0, False),           # inside the grid: nothing added
])
def test_rate_grid_is_extended_beyond_an_edge_until_the_choice_is_inside(best, extensions,
                                                                         tried, chosen,
                                                                         at_edge):
    """The validation loss (log lr − log best)² over the grid 0.1, 1, 10 (ratio 10): the driver
    adds rates beyond the chosen edge, at most ``grid_extensions`` per edge, then runs the
    chosen rate from the further seeds and reports their mean and sample deviation."""
    calls = []

    def attempt(lr, seed):
        calls.append((lr, seed))
        return {"val_loss": (math.log10(lr) - math.log10(best)) ** 2, "passes": 1,
                "final": {"mse": lr + seed}}

    config = ExperimentConfig(name="g", lr_grid=[1.0, 0.1, 10.0], grid_extensions=extensions,
                              seeds=3, seed=4)
    out = choose_rate(attempt, config)
    assert out["lr_grid"] == pytest.approx(tried) and out["lr"] == pytest.approx(chosen)
    assert out["lr_at_edge"] is at_edge
    assert [seed for _, seed in calls] == [4] * len(tried) + [5, 6]
    assert out["seed_metrics"] == pytest.approx([chosen + 4, chosen + 5, chosen + 6])
    assert out["mean"] == pytest.approx(chosen + 5) and out["std"] == pytest.approx(1.0)


def test_one_pass_regime_reads_every_training_row_once(tmp_path):
    """``one_pass``: the streaming methods run one pass; GB's 3 stages train one epoch each on
    the three consecutive chunks of 144 of the 432 rows (units 144·(3 + 4 + 5)); from two seeds
    the runs differ and the spread is reported."""
    config = ExperimentConfig(name="one", dataset="synthetic", n_learners=3, lr=0.02,
                              batch_size=48, learner=LearnerConfig(hidden=4), eval_points=4,
                              one_pass=True, seeds=2, methods=["base", "deep", "GB", "SGB"],
                              optimizer="schedule_free")
    results = run_comparison(config, tmp_path, progress=False,
                             dataset=synthetic_regression(n=600, d=5, seed=0))
    methods = results["methods"]
    gb = methods["GB"]
    assert [s["epochs"] for s in gb["stages"]] == [1, 1, 1]
    assert gb["units"] == 144 * (3 + 4 + 5) and gb["final"]["samples"] == 432
    for name in ("base", "deep", "SGB"):
        assert methods[name]["passes"] == 1 and methods[name]["final"]["samples"] == 432
    for method in methods.values():
        first, second = method["seed_metrics"]
        assert first != second and method["std"] == pytest.approx(abs(first - second) / 2 ** .5)
    boosters = make_boosters(config, prepare_data(config, synthetic_regression(n=600, d=5)))
    assert all(type(opt).__name__ == "AdamWScheduleFree"
               for b in boosters.values() for opt in b.learners.optimizers)


@pytest.mark.parametrize(("kind", "hidden", "n", "shape", "m"),
                         [("two_layer", 10, 16, (13,), 1), ("two_layer", 1, 16, (10,), 1),
                          ("conv", 5, 8, (1, 28, 28), 10)])
def test_deep_network_has_the_ensembles_parameter_count(kind, hidden, n, shape, m):
    x = torch.zeros(6, *shape)
    data = Dataset("d", x, torch.zeros(6, dtype=torch.long), x[:2],
                   torch.zeros(2, dtype=torch.long), "multiclass", m) if m > 1 else \
        Dataset("d", x, torch.zeros(6), x[:2], torch.zeros(2), "regression", None)
    learner = LearnerConfig(kind, hidden)
    deep = learner.deep_factory(data, m, n, depth=3)()
    wide = learner.widened(n).factory(data, m)()
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert abs(count(deep) - count(wide)) / count(wide) < 0.05
    assert len(deep.blocks) == 2 and deep(x).shape == (6, m)
    with pytest.raises(ValueError, match="no deep counterpart"):
        LearnerConfig("linear").deep_factory(data, m, n, depth=3)


def test_comparison_settings_are_checked():
    with pytest.raises(ValueError, match="needs no schedule"):
        ExperimentConfig(optimizer="schedule_free", schedule="cosine")
    with pytest.raises(ValueError, match="optimizer must be one of"):
        ExperimentConfig(optimizer="sgd")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="grid_extensions"):
            ExperimentConfig(grid_extensions=bad)
    with pytest.raises(ValueError, match="seeds"):
        ExperimentConfig(seeds=0)


def test_fixed_budget_at_a_constant_rate_gives_every_method_the_cosine_runs_budget(tmp_path):
    """``fixed_budget`` without a cosine: the streaming methods run exactly ``max_passes``
    passes, GB the 3 epochs per stage that reach their units (as under a cosine), no unit
    stop and no budget taken from GB."""
    config = ExperimentConfig(name="fixed", dataset="synthetic", n_learners=3, lr=0.02,
                              batch_size=48, learner=LearnerConfig(hidden=4), max_passes=3,
                              eval_points=4, fixed_budget=True, methods=["base", "GB", "SGB"])
    results = run_comparison(config, tmp_path, progress=False,
                             dataset=synthetic_regression(n=600, d=5, seed=0))
    methods = results["methods"]
    assert [s["epochs"] for s in methods["GB"]["stages"]] == [3, 3, 3]
    assert results["budget_units"] is None and results["gb_epochs_per_stage"] == 3
    for name in ("base", "SGB"):
        assert (methods[name]["passes"], methods[name]["stop_reason"]) == (3, "max_passes")
