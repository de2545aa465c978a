"""Every contract check of torchboost.testing on every registered booster: no test file keeps
its own list of boosters."""

from __future__ import annotations

import pytest
import torch

from torchboost import SGB
from torchboost.boosters.registry import BOOSTERS, BoosterSpec, register_booster
from torchboost.testing import CHECKS


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("name", list(BOOSTERS))
def test_every_booster_conforms(name: str, check) -> None:  # type: ignore[no-untyped-def]
    check(BOOSTERS[name])


def test_the_checks_catch_state_kept_outside_the_state_dict() -> None:
    """A booster whose prediction depends on a plain attribute that a round changes (not a
    buffer) resumes differently from a loaded copy: check_state_dict_resumes_exactly says so,
    and a registry entry of it is refused a second time."""

    from torchboost.boosters.registry import BoosterSpec, register_booster
    from torchboost.boosters.sgb import SGB
    from torchboost.testing import check_booster, check_state_dict_resumes_exactly

    class DriftingSGB(SGB):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)
            self.offset = 0.0  # plain attribute: not saved, not restored

        def partial_sums(self, h: torch.Tensor, y0: torch.Tensor) -> torch.Tensor:
            return super().partial_sums(h, y0) + self.offset

        def after_step(self, h, partials, z) -> None:  # type: ignore[no-untyped-def]
            self.offset += 0.01

    spec = register_booster(BoosterSpec("drifting_sgb_test", DriftingSGB))
    try:
        with pytest.raises(AssertionError, match="drifting_sgb_test: loaded prediction"):
            check_state_dict_resumes_exactly(spec)
        with pytest.raises(AssertionError):
            check_booster(spec)
        with pytest.raises(ValueError, match="registered already"):
            register_booster(spec)
    finally:
        del BOOSTERS["drifting_sgb_test"]


def _register(name: str, cls):  # type: ignore[no-untyped-def]
    from torchboost.boosters.registry import BoosterSpec, register_booster

    return register_booster(BoosterSpec(name, cls))


def test_the_checks_catch_what_a_newcomer_got_wrong() -> None:
    """Four mistakes a newcomer made writing a booster from the docs page, each named by the
    check it breaks: a counter updated before the step in a plain attribute (not restored by a
    failed round), a diagnostic kept in a plain tensor (lost by state_dict), a counter named
    ``rounds`` (the base class's own), and constructor options without ``config_keys``."""
    import torch
    from torch import Tensor

    from torchboost.boosters.base import Booster
    from torchboost.boosters.sgb import SGB
    from torchboost.testing import (
        check_failed_round_restores_everything,
        check_learn_returns_scores,
        check_options_are_recorded,
        check_state_dict_resumes_exactly,
    )

    class CountsBeforeTheStep(SGB):
        def learner_objective(self, h, partials, z):  # type: ignore[no-untyped-def]
            self.seen = getattr(self, "seen", 0) + 1  # plain: a failed round keeps it
            return super().learner_objective(h, partials, z)

    class PlainDiagnostic(SGB):
        def after_step(self, h: Tensor, partials: Tensor, z: Tensor) -> None:
            self.ema = getattr(self, "ema", torch.zeros(())) * 0.9 + h.square().mean()

        def diagnostics(self) -> dict[str, Tensor]:
            return {**super().diagnostics(), "ema": getattr(self, "ema", torch.zeros(()))}

    class OwnRounds(SGB):
        def after_step(self, h: Tensor, partials: Tensor, z: Tensor) -> None:
            self.rounds += 1  # the base class's counter, counted twice

    class Unrecorded(Booster):
        def __init__(self, learners, *, shrinkage: float = 0.3, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(learners, "squared", **kwargs)
            self.shrinkage = shrinkage

        def partial_sums(self, h: Tensor, y0: Tensor) -> Tensor:
            return torch.cat([y0[None], y0[None] + self.shrinkage * h.cumsum(0)])

        def learner_targets(self, h: Tensor, partials: Tensor, z: Tensor) -> Tensor:
            return z[None] - partials[:-1]

    cases = [(CountsBeforeTheStep, check_failed_round_restores_everything,
              "plain attribute 'seen' was changed by a rejected round"),
             (PlainDiagnostic, check_state_dict_resumes_exactly,
              "diagnostics of a round after loading .state in a plain attribute"),
             (OwnRounds, check_learn_returns_scores,
              r"counters read rounds, samples_seen = \(2, 16\).*assign one of these names"),
             (Unrecorded, check_options_are_recorded,
              r"constructor takes \['shrinkage'\] but the class declares no config_keys")]
    for cls, check, message in cases:
        spec = _register(f"newcomer_{cls.__name__}", cls)
        try:
            with pytest.raises(AssertionError, match=message):
                check(spec)
        finally:
            del BOOSTERS[spec.name]


def test_single_learner_records_its_prediction_units_and_loads_older_states() -> None:
    import torch
    from torch import nn

    from torchboost import SingleLearner

    def build(units: int) -> SingleLearner:
        torch.manual_seed(0)
        return SingleLearner(lambda: nn.Linear(3, 1), prediction_units=units)

    wide = build(8)
    wide.learn(torch.randn(4, 3), torch.randn(4))
    with pytest.raises(ValueError, match="prediction_units: saved 8, this booster 1"):
        build(1).load_state_dict(wide.state_dict())
    old = wide.state_dict()
    del old["_extra_state"]["config"]["prediction_units"]  # as written by earlier versions
    again = build(8)
    again.load_state_dict(old)
    assert again.compute_units == wide.compute_units == 4 * 24


@pytest.mark.parametrize("spec", [
    lambda: BoosterSpec("not_a_class", 42), lambda: BoosterSpec("", SGB),
    lambda: BoosterSpec("task", SGB, task="ranking"),
    lambda: BoosterSpec("build", SGB, build="SGB"),
])
def test_a_spec_that_cannot_build_a_booster_is_refused_when_made(spec):
    """Issue 31: BoosterSpec(name, 42) was accepted, and later calls failed with raw errors."""
    with pytest.raises(ValueError):
        spec()


def test_the_estimators_offer_a_booster_registered_after_their_import():
    from torchboost.sklearn import BOOSTERS as OFFERED
    from torchboost.sklearn import SGBRegressor

    spec = register_booster(BoosterSpec("late_sgb_test", SGB, estimator=True))
    try:
        assert "late_sgb_test" in OFFERED
        X, y = torch.randn(64, 3).numpy(), torch.randn(64).numpy()
        model = SGBRegressor(booster="late_sgb_test", n_learners=2, max_passes=1).fit(X, y)
        assert type(model.booster_) is SGB
    finally:
        del BOOSTERS[spec.name]
    assert "late_sgb_test" not in OFFERED


def test_the_checks_catch_a_combine_without_its_anytime_predictions() -> None:
    """A booster predicting the average of its partial sums (as ResidualSGB does) that keeps
    the default anytime predictions would have the stall monitor judge predictions it never
    makes: check_anytime_predictions_match_combine names it."""
    from torchboost.testing import check_anytime_predictions_match_combine

    class AveragingSGB(SGB):
        def combine(self, partials: torch.Tensor) -> torch.Tensor:
            return partials.mean(0)

    spec = _register("averaging_sgb_test", AveragingSGB)
    try:
        with pytest.raises(AssertionError, match="must override anytime_predictions"):
            check_anytime_predictions_match_combine(spec)
    finally:
        del BOOSTERS["averaging_sgb_test"]
