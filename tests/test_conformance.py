"""Every contract check of torchboost.testing on every registered booster: no test file keeps
its own list of boosters."""

from __future__ import annotations

import pytest

from torchboost.boosters.registry import BOOSTERS
from torchboost.testing import CHECKS


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("name", list(BOOSTERS))
def test_every_booster_conforms(name: str, check) -> None:  # type: ignore[no-untyped-def]
    check(BOOSTERS[name])


def test_the_checks_catch_state_kept_outside_the_state_dict() -> None:
    """A booster whose prediction depends on a plain attribute that a round changes (not a
    buffer) resumes differently from a loaded copy: check_state_dict_resumes_exactly says so,
    and a registry entry of it is refused a second time."""
    import torch

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
