"""One registry entry per comparison method: a new method is one register_method call, and the
driver runs it, records it and compares it as its kind says."""

from __future__ import annotations

import math

import pytest
import torch

from torchboost import SGB
from torchboost.data import synthetic_regression
from torchboost.harness import (
    METHODS,
    ExperimentConfig,
    LearnerConfig,
    MethodSpec,
    register_method,
    run_comparison,
)
from torchboost.harness.methods import streaming_variants


def test_the_registry_lists_every_method_once_in_the_tables_order():
    assert list(METHODS) == ["base", "wide", "deep", "GB", "GB_newton", "SGB", "SGB_newton",
                             "SGB_learned", "OGB", "ConvexHullOGB"]
    assert streaming_variants() == ("SGB", "SGB_newton", "SGB_learned")  # never OGB
    assert [m for m, spec in METHODS.items() if spec.kind == "online"] == ["OGB",
                                                                           "ConvexHullOGB"]
    assert [m for m, spec in METHODS.items() if not spec.chains] == ["OGB", "ConvexHullOGB"]
    assert [METHODS[m].kind for m in ("base", "wide", "deep", "GB", "GB_newton")] == [
        "single", "single", "single", "stagewise", "stagewise"]
    assert [m for m, spec in METHODS.items() if spec.newton] == ["GB_newton", "SGB_newton"]
    assert [m for m, spec in METHODS.items() if spec.classification] == ["GB_newton"]
    with pytest.raises(ValueError, match="registered already"):
        register_method(METHODS["SGB"])
    with pytest.raises(ValueError, match="unknown or no methods"):
        ExperimentConfig(methods=["SGB_nope"])


def test_a_registered_method_runs_in_the_driver(tmp_path):
    def small_step(inputs):  # SGB at a tenth of the default step
        return SGB(inputs.factory, inputs.config.loss, n_learners=inputs.config.n_learners,
                   step=0.025, lr_scheduler=inputs.schedule, **inputs.common)

    register_method(MethodSpec("SGB_small_step", "streaming", small_step))
    try:
        config = ExperimentConfig(name="tiny", dataset="synthetic", n_learners=3, lr=0.02,
                                  batch_size=48, learner=LearnerConfig(hidden=4),
                                  methods=["SGB", "SGB_small_step"], max_passes=2,
                                  min_passes=1, max_units=20_000, eval_points=4)
        data = synthetic_regression(n=600, d=5, seed=0)
        results = run_comparison(config, tmp_path, progress=False, dataset=data)
        method = results["methods"]["SGB_small_step"]
        assert len(method["anytime"]) == 4 and len(method["edges"]) == 3  # a streaming kind
        assert results["best_SGB"] in ("SGB", "SGB_small_step")
        assert method["final"]["mse"] != results["methods"]["SGB"]["final"]["mse"]
    finally:
        del METHODS["SGB_small_step"]


@pytest.mark.parametrize(("loss", "n", "config_step", "steps"), [
    ("squared", 64, None, {"SGB": 0.25, "SGB_newton": 0.5, "GB": 0.25}),
    ("squared", 16, None, {"SGB": 0.25, "SGB_newton": 0.5, "GB": 0.25}),
    ("logistic", 64, None, {"SGB": 1.0, "SGB_newton": 0.5, "GB": 1.0}),
    ("squared", 64, 0.1, {"SGB": 0.1, "SGB_newton": 0.1, "GB": 0.1})])
def test_the_sgb_variants_run_at_the_papers_step_for_every_n(loss, n, config_step, steps):
    """The comparison's variants are defined by their step (SGB: the paper's ¼ on squared loss;
    SGB_newton: ½): the library's default, capped for many learners (6/N at N = 64), is not
    theirs, so the published tables reproduce; the configuration's step overrides both (not a
    learned step's start)."""
    from torchboost.harness.methods import MethodInputs

    config = ExperimentConfig(name="steps", dataset="synthetic", loss=loss, n_learners=n,
                              step=config_step, learner=LearnerConfig(hidden=4))
    inputs = MethodInputs(config, lambda: torch.nn.Linear(3, 1), lambda: torch.nn.Linear(3, 1),
                          None, 1, {}, None, True)
    assert {name: METHODS[name].build(inputs).step for name in steps} == steps
    learned = METHODS["SGB_learned"].build(inputs)  # learned steps start at the paper's ½
    assert float(learned.steps(n)[0]) == pytest.approx(0.5)


@pytest.mark.parametrize(("loss", "standardized", "bound"), [
    ("squared", True, 3.0), ("absolute", True, 3.0), ("huber", False, 1.0),
    ("logistic", False, 1.0)])
def test_ogb_methods_run_at_their_defaults_with_the_bound_of_standardised_labels(
        loss, standardized, bound):
    """OGB and ConvexHullOGB as a user gets them (greedy fitting, OGB's paper step and radius),
    on the driver's standardised labels the bound their own standardisation would choose
    (STANDARDIZED_BOUND = 3 standard deviations); on labels it left alone (huber loss, a
    classifier) the papers' 1."""
    from torchboost import OGB, ConvexHullOGB
    from torchboost.boosters.ogb import ogb_radius
    from torchboost.harness.methods import MethodInputs

    config = ExperimentConfig(name="ogb", dataset="synthetic", loss=loss, n_learners=8,
                              learner=LearnerConfig(hidden=4))
    inputs = MethodInputs(config, lambda: torch.nn.Linear(3, 1), lambda: torch.nn.Linear(3, 1),
                          None, 1, {"standardize": False}, None, True, standardized)
    ogb, hull = METHODS["OGB"].build(inputs), METHODS["ConvexHullOGB"].build(inputs)
    assert (type(ogb), type(hull)) == (OGB, ConvexHullOGB)
    assert ogb.bound == hull.bound == bound and ogb.objective == hull.objective == "greedy"
    assert ogb.step == pytest.approx(math.log(8) / 8)
    assert ogb.radius == pytest.approx(ogb_radius(ogb.loss, ogb.step, 8, bound))
    assert ogb.standardized_labels is hull.standardized_labels is standardized


@pytest.mark.parametrize(("loss", "standardized", "bound"), [("squared", True, 3.0),
                                                             ("huber", False, 1.0)])
def test_the_driver_tells_ogb_whether_it_standardised_the_labels(loss, standardized, bound):
    """From the data to the booster: the driver standardises regression labels under squared
    (and absolute) loss only, and the OGB it builds knows it."""
    from torchboost.harness.driver import make_boosters, prepare_data

    config = ExperimentConfig(name="ogb", dataset="synthetic", loss=loss, n_learners=3,
                              learner=LearnerConfig(hidden=4), methods=["OGB", "ConvexHullOGB"])
    data = prepare_data(config, synthetic_regression(n=200, d=3, seed=0))
    assert data.labels_standardized is standardized
    boosters = make_boosters(config, data)
    assert [b.bound for b in boosters.values()] == [bound, bound]
    assert all(b.standardized_labels is standardized for b in boosters.values())


def test_online_methods_are_compared_on_their_own_and_skipped_where_learners_chain(tmp_path):
    """An online method is recorded like a streaming variant (anytime curve, edges) but never
    picked as the best SGB variant; a chained comparison skips it, saying why."""
    config = ExperimentConfig(name="tiny", dataset="synthetic", n_learners=3, lr=0.02,
                              batch_size=48, learner=LearnerConfig(hidden=4),
                              methods=["SGB", "OGB"], max_passes=1, min_passes=1,
                              eval_points=4)
    data = synthetic_regression(n=600, d=5, seed=0)
    results = run_comparison(config, tmp_path / "plain", progress=False, dataset=data)
    ogb = results["methods"]["OGB"]
    assert len(ogb["anytime"]) == 4 and len(ogb["edges"]) == 3
    assert ogb["final"]["mse"] < ogb["curve"][0]["mse"]
    assert results["best_SGB"] == "SGB"
    config.learner = LearnerConfig(hidden=4, chained=True)
    chained = run_comparison(config, tmp_path / "chained", progress=False, dataset=data)
    assert list(chained["methods"]) == ["SGB"]
    assert chained["skipped"] == {"OGB": "OGB does not chain its learners"}
    config.methods = ["OGB"]  # nothing left to run: said, not a StopIteration
    with pytest.raises(ValueError, match="no method of \\['OGB'\\] applies here: OGB: OGB "
                                         "does not chain its learners"):
        run_comparison(config, tmp_path / "none", progress=False, dataset=data)
