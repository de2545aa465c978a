"""experiments/chained_probes.py: GrowNet's corrective step as the probe runs it (a joint step of
every learner on the ensemble's loss, its compute counted) and the probes' table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from boost_helpers import regression_stream

from torchboost import SGB, TwoLayerNet

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture
def probes(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import chained_probes
    yield chained_probes
    sys.modules.pop("chained_probes", None)


def test_the_corrective_step_is_one_sgd_step_on_the_ensemble_loss(probes):
    x, y = regression_stream(16, d=3)
    options = {"n_learners": 2, "step": 0.5, "y0": 0.0, "standardize": False, "chained": True,
               "optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.1},
               "stall_window": None}
    torch.manual_seed(0)
    corrective = probes.CorrectiveSGB(lambda: TwoLayerNet(3, 4), "squared", every=1, **options)
    torch.manual_seed(0)
    plain = SGB(lambda: TwoLayerNet(3, 4), "squared", **options)
    corrective.learn(x, y)
    plain.learn(x, y)
    assert corrective.compute_units == 2 * plain.compute_units == 2 * 16 * 2 * 3
    # after the boosting step, one SGD step on ℓ(y^2) = ½‖y0 − η(h1 + h2) − y‖² / B per example
    with torch.enable_grad():
        learners = [plain.learners.learner(i) for i in range(2)]
        params = [p for m in learners for p in m.parameters()]
        out1, carry = learners[0](x)
        out2, _ = learners[1](x, carry.detach())
        loss = 0.5 * ((-0.5 * (out1 + out2))[:, 0] - y).square().mean()
        grads = torch.autograd.grad(loss, params, allow_unused=True)  # learner 1 has no carry
    expected = [p.detach() - 0.1 * g if g is not None else p.detach()
                for p, g in zip(params, grads, strict=True)]
    got = [p.detach() for i in range(2) for p in corrective.learners.learner(i).parameters()]
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)


def test_the_probes_table_has_a_cell_per_variant(probes):
    results = {"pol": {"SGB": {"mean": 168.66, "std": 19.0, "params_per_learner": 281},
                       "chained": {"mean": 70.656, "std": 6.7, "params_per_learner": 381}}}
    assert probes.markdown(results).splitlines() == [
        "| data | SGB | chained |", "|---|---|---|",
        "| pol | 168.7 ± 19 (281) | 70.66 ± 6.7 (381) |"]
