"""Every registered booster computes the same, up to rounding, wherever it runs: in float64 as in
float32 on the CPU, and on a CUDA device as on the CPU (skipped without one), learning and
predicting, its exported module included.

The float64 comparison is the CPU's stand-in for a GPU, whose kernels round differently: a
booster that amplifies rounding (Adam stepping on a gradient that is 0 in exact arithmetic, a
decision on a tie) fails both. The first GPU run of the CUDA tests (an H200) found such a
comparison and a device mismatch (OnlineMBBM's vote weights built on the CPU).
"""

from __future__ import annotations

import pytest
import torch
from boost_helpers import ogb_over_stumps

from torchboost.boosters.registry import BOOSTERS
from torchboost.testing import example_batch, example_booster

#: every registered booster, and SGB with chained learners
CASES = [(name, {}) for name in sorted(BOOSTERS)] + [("sgb", {"chained": True})]
IDS = [name + ("_chained" if options else "") for name, options in CASES]
#: float32 against float64 measured at most 1.2e-6 (OzaBoost), most boosters ~1e-7
TOLERANCE = 1e-5


def run(name: str, options: dict, device: str, dtype: torch.dtype) -> torch.Tensor:
    """Six rounds' returned scores and a held-out prediction, flattened, in float64 on the CPU."""
    spec = BOOSTERS[name]
    booster = example_booster(spec, **options).to(device)
    if dtype != torch.float32:  # (casting to float32 would cast the float64 statistics too)
        booster = booster.to(dtype)
    outputs = []
    for seed in range(6):
        x, y = example_batch(spec, seed)
        y = y.to(dtype) if y.is_floating_point() else y
        outputs.append(booster.learn(x.to(device, dtype), y.to(device)))
    x, _ = example_batch(spec, 99)
    outputs.append(booster.predict(x.to(device, dtype)))
    return torch.cat([o.flatten() for o in outputs]).double().cpu()


def assert_agree(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    gap = float((a - b).abs().max())
    assert gap <= TOLERANCE * max(1.0, float(a.abs().max())), f"{what}: differ by {gap:.3g}"


@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_float64_agrees_with_float32(name: str, options: dict) -> None:
    assert_agree(run(name, options, "cpu", torch.float32),
                 run(name, options, "cpu", torch.float64), f"{name} in float32 and float64")


def test_a_booster_that_amplifies_rounding_fails_the_comparison() -> None:
    """The comparison can fail: OGB over stumps (a linear learner loss) on labels standardised
    by the first batch's own mean has bias gradients that are 0 up to rounding in the first
    round, and Adam turns rounding into a half step (what the H200 run of a CUDA test showed);
    on unscaled labels it passes."""
    with pytest.raises(AssertionError, match="differ by"):
        assert_agree(ogb_over_stumps(), ogb_over_stumps(dtype=torch.float64), "OGB")
    assert_agree(ogb_over_stumps(standardize=False),
                 ogb_over_stumps(dtype=torch.float64, standardize=False), "OGB, unscaled")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_cuda_agrees_with_cpu(name: str, options: dict) -> None:
    assert_agree(run(name, options, "cpu", torch.float32),
                 run(name, options, "cuda", torch.float32), f"{name} on the CPU and on CUDA")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_export_on_cuda_equals_predict(name: str, options: dict) -> None:
    spec = BOOSTERS[name]
    booster = example_booster(spec, **options).to("cuda")
    for seed in range(3):
        x, y = example_batch(spec, seed)
        booster.learn(x.cuda(), y.cuda())
    if booster.combination_weights(booster.prediction_learners) is None:
        pytest.skip(f"{name} does not export (no combination weights)")
    x = example_batch(spec, 7)[0].cuda()
    with torch.no_grad():
        exported = booster.export()(x)
        assert exported.is_cuda
        assert_agree(booster.predict(x).double().cpu(), exported.double().cpu(),
                     f"{name}'s export and predict on CUDA")
