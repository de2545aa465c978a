"""One registry entry per comparison method: a new method is one register_method call, and the
driver runs it, records it and compares it as its kind says."""

from __future__ import annotations

import pytest

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
                             "SGB_learned"]
    assert streaming_variants() == ("SGB", "SGB_newton", "SGB_learned")
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
