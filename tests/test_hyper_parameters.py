"""Every hyper-parameter is checked at construction: a ValueError naming it, its value and what
is allowed; no silent coercion (issue 24)."""

from __future__ import annotations

import math

import pytest

from torchboost import SGB, TwoLayerNet

BAD = [
    ("stall_window", math.nan, "stall_window must be an integer >= 1, got nan"),
    ("stall_window", math.inf, "stall_window must be an integer >= 1, got inf"),
    ("stall_window", "2000", "stall_window must be an integer >= 1, got '2000'"),
    ("stall_window", 2.5, "stall_window must be an integer >= 1, got 2.5"),
    ("stall_window", True, "stall_window must be an integer >= 1, got True"),
    ("n_learners", 1.5, "n_learners must be an integer >= 1, got 1.5"),
    ("n_learners", True, "n_learners must be an integer >= 1, got True"),
    ("n_outputs", 0, "n_outputs must be an integer >= 1, got 0"),
    ("step", True, "step must be a finite number > 0, got True"),
    ("hessian_floor", True, "hessian_floor must be a finite number > 0, got True"),
    ("lr_output_scale", -1.0, "lr_output_scale must be a finite number > 0, got -1.0"),
    ("standardize", "yes", "standardize must be True or False, got 'yes'"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD, ids=[f"{n}={v!r}" for n, v, _ in BAD])
def test_a_bad_hyper_parameter_is_refused_by_name(name, value, message):
    options = {"n_learners": 2, name: value}
    with pytest.raises(ValueError, match=f"^{message.replace('.', '[.]')}$"):
        SGB(lambda: TwoLayerNet(3, 4), **options)


def test_good_values_of_other_numeric_types_are_taken_as_they_are():
    import numpy as np

    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=np.int64(3), step=np.float32(0.5),
                  stall_window=np.int32(100))
    assert (booster.n_learners, booster.step, booster.stall.window) == (3, 0.5, 100)
