"""The experiments that reproduce a paper's setting train on plain Adam, as their stored
results were run, and on the library's default optimizer only when asked (issue 30: "it keeps
reporting plain Adam as the paper used, next to the default")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from torchboost.learners import TwoLayerNet
from torchboost.learners.averaging import is_schedule_free

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def experiments(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    yield
    for name in ("ogb_improvement", "multiclass_uci", "regret_vs_n", "newton_targets",
                 "newton_defaults", "defaults"):
        sys.modules.pop(name, None)


def optimizer_of(booster):
    return booster.learners.optimizers[0]


def test_ogb_improvement_runs_plain_adam_on_its_own_scaling_and_the_default_on_request(
        experiments):
    import ogb_improvement

    for method in ("base", "OGB", "ConvexHullOGB"):
        adam = ogb_improvement.build(method, "linear", 3, 1e-2, 2)
        assert type(optimizer_of(adam)) is torch.optim.Adam, method
        assert optimizer_of(adam).defaults["lr"] == 1e-2 and adam.standardizer is None, method
        default = ogb_improvement.build(method, "linear", 3, None, 2)
        assert is_schedule_free(optimizer_of(default)) and default.standardizer is None, method
    assert ogb_improvement.RATES == {"adam": (1e-3, 1e-2), "default": (None,)}


def test_multiclass_uci_runs_plain_adam_on_raw_features_and_the_default_on_request(experiments):
    import multiclass_uci

    config = multiclass_uci.DATASETS[0]
    for method in ("OLB", "AdaOLM", "MB .1"):
        adam = multiclass_uci.make_booster(method, lambda: TwoLayerNet(4, 3, 3), 3, config, 0)
        assert type(optimizer_of(adam)) is torch.optim.Adam, method
        assert optimizer_of(adam).defaults["lr"] == config.lr and adam.standardizer is None
    assert multiclass_uci.optimizer_options(None) == {}


def test_multiclass_uci_best_of_n_learners_train_with_either_optimizer(experiments):
    """The best-of-N baseline (DT) trains its learners itself: on plain Adam as before, and on
    schedule-free learners inside their learning point (without it they refuse to step)."""
    from dataclasses import replace

    import multiclass_uci

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(20, 4, generator=g), torch.randint(0, 3, (20,), generator=g)
    config = replace(multiclass_uci.DATASETS[0], n_learners=3)
    for lr in (config.lr, None):
        torch.manual_seed(0)
        hits = multiclass_uci.run_independent(lambda: TwoLayerNet(4, 3, 3), 3,
                                              replace(config, lr=lr), x, y)
        assert hits.shape == (3, 20) and set(hits.flatten().tolist()) <= {0, 1}


def test_regret_vs_n_and_the_newton_studies_name_adam(experiments):
    import newton_defaults
    import newton_targets
    import regret_vs_n

    assert regret_vs_n.OPTIMIZERS["adam"] == {"optimizer": torch.optim.Adam,
                                              "optimizer_kwargs": {"lr": 3e-3}}
    assert regret_vs_n.OPTIMIZERS["default"] == {}
    for name, build in newton_targets.methods("linear").items():
        booster = build()
        assert type(optimizer_of(booster)) is torch.optim.Adam, name
        assert optimizer_of(booster).defaults["lr"] == 1e-3 and booster.standardizer is None, name
    single = newton_defaults.build("single", "linear", 4, 3)
    boosted = newton_defaults.build("default", "linear", 4, 3)
    assert type(optimizer_of(single)) is type(optimizer_of(boosted)) is torch.optim.Adam
    assert single.standardizer is None and boosted.step == 0.5


def test_the_defaults_study_names_adam_in_its_sweep_and_candidates(experiments):
    import defaults

    assert defaults.CANDIDATES["default"] == {"optimizer": torch.optim.Adam}
    assert defaults.CANDIDATES["fan_in_3e-2"]["optimizer"] is torch.optim.Adam
