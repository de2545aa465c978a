"""CUDA runs of the code paths added for scale-out and hardening: numerical guards, regression
stumps, stream sharding and bad-input screening on GPU tensors match their CPU runs. Skipped
without a CUDA device (the CPU behaviour is tested in their own files)."""

from __future__ import annotations

import copy

import pytest
import torch
from boost_helpers import linear_learners, ogb_over_stumps, regression_stream

from torchboost import SGB, ConvNet, DivergenceError, TwoLayerNet
from torchboost.data import BadInputError, DataStream, ScreenedStream

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_guards_on_cuda_name_the_learner_and_change_nothing(mode):
    booster = SGB(linear_learners([[0.5], [0.5], [3.0], [1.0]]), "squared", step=1e38,
                  mode=mode).to("cuda")
    x, y = torch.ones(4, 1, device="cuda"), torch.zeros(4, device="cuda")
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(DivergenceError) as info:
        booster.learn(x, y)
    assert info.value.learner == 2
    after = booster.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if torch.is_tensor(before[k]))


def test_sgb_on_cuda_matches_cpu_with_guards_on():
    xs, ys = regression_stream(200, d=5, seed=1)
    runs = []
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(5, 4), "squared", n_learners=8).to(device)
        for x, y in zip(xs.split(20), ys.split(20), strict=True):
            booster.learn(x.to(device), y.to(device))
        runs.append(booster.predict(xs.to(device)).cpu())
    assert torch.allclose(runs[0], runs[1], atol=1e-4)


def test_convolutional_learners_on_cuda_take_the_direct_path_and_match_cpu():
    """ConvNet learners: one convolution for all of them and the head's own gradients
    (features past TRANSPOSED_FROM, written into their transposed layout by one batched
    product on a GPU), as on a CPU."""
    g = torch.Generator().manual_seed(1)
    xs, ys = torch.rand(96, 1, 28, 28, generator=g), torch.randint(0, 10, (96,), generator=g)
    runs = []
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        booster = SGB(lambda: ConvNet(), "softmax", n_learners=8, n_outputs=10).to(device)
        assert booster.learners.engine.direct
        for x, y in zip(xs.split(32), ys.split(32), strict=True):
            booster.learn(x.to(device), y.to(device))
        runs.append(booster.predict(xs.to(device)).cpu())
    assert torch.allclose(runs[0], runs[1], atol=1e-4)


def test_ogb_over_stumps_on_cuda_matches_cpu():
    """Labels unscaled: standardised by the first batch's own mean, they make the first round's
    bias gradients 0 in exact arithmetic (OGB's linear learner loss), and Adam turns their
    rounding error into a half step, so that two devices end about 0.02 apart (seen on an H200;
    float32 and float64 on the CPU alike: ``tests/test_devices.py``)."""
    assert torch.allclose(ogb_over_stumps("cpu", standardize=False),
                          ogb_over_stumps("cuda", standardize=False), atol=1e-4)


def test_sharded_cuda_stream_reassembles_the_global_batches():
    x, y = torch.randn(51, 3, device="cuda"), torch.randn(51, device="cuda")
    whole = [xb for xb, _ in DataStream(x, y, batch_size=7, seed=3)]
    shards = []
    for rank in range(2):
        stream = DataStream(x, y, batch_size=7, seed=3)
        stream.shard(rank, 2)
        shards.append([xb for xb, _ in stream])
    for k, batch in enumerate(whole):
        assert batch.is_cuda
        assert torch.equal(torch.cat([shards[0][k], shards[1][k]]), batch)


def test_screening_cuda_batches_raises_and_skips():
    booster = SGB(lambda: TwoLayerNet(3, 4), "squared", n_learners=2).to("cuda")
    x, y = torch.randn(8, 3, device="cuda"), torch.randn(8, device="cuda")
    x[5, 1] = float("nan")
    with pytest.raises(BadInputError, match="row 5"):
        list(ScreenedStream([(x, y)], booster))
    screened = ScreenedStream([(x, y)], booster, policy="skip")
    (clean_x, clean_y), = list(screened)
    assert clean_x.is_cuda and clean_x.shape == (7, 3) and sum(screened.skipped.values()) == 1
    assert torch.equal(clean_y, torch.cat([y[:5], y[6:]]))


def test_compiled_rounds_on_cuda_match_eager_ones_with_one_sync():
    from torch.profiler import ProfilerActivity, profile

    xs, ys = regression_stream(200, d=5, seed=1)
    boosters = []
    for compiled in (False, True):
        torch.manual_seed(0)
        boosters.append(SGB(lambda: TwoLayerNet(5, 4), n_learners=8, compile=compiled).to("cuda"))
        for x, y in zip(xs.split(20), ys.split(20), strict=True):
            boosters[-1].learn(x.cuda(), y.cuda())
    assert torch.allclose(boosters[0].predict(xs.cuda()), boosters[1].predict(xs.cuda()),
                          atol=1e-4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        boosters[1].learn(xs[:20].cuda(), ys[:20].cuda())
    syncs = [e for e in prof.events() if e.name == "aten::_local_scalar_dense"]
    assert len(syncs) == 1  # the round's deferred checks, read once; none for the scalars


def test_the_stacked_schedule_free_step_on_cuda_is_the_packages_with_one_sync(monkeypatch):
    """The default stacked round's own step (torchboost/boosters/stacked_step.py) on a GPU:
    taken, the package's step to rounding, and the round reads the device once."""
    from torch.profiler import ProfilerActivity, profile

    from torchboost.boosters import stacked_step

    xs, ys = regression_stream(200, d=5, seed=1)
    calls = []
    original = stacked_step.foreach_schedule_free_step
    monkeypatch.setattr(stacked_step, "foreach_schedule_free_step",
                        lambda inputs: calls.append(1) or original(inputs))
    boosters = []
    for own in (True, False):
        if not own:  # the package's step, under the guards' hooks
            monkeypatch.setattr(stacked_step, "applies", lambda opt: False)
        torch.manual_seed(0)
        boosters.append(SGB(lambda: TwoLayerNet(5, 4), n_learners=8).to("cuda"))
        for x, y in zip(xs.split(20), ys.split(20), strict=True):
            boosters[-1].learn(x.cuda(), y.cuda())
    assert len(calls) == 9  # every round but the first (the package creates the state)
    assert torch.allclose(boosters[0].predict(xs.cuda()), boosters[1].predict(xs.cuda()),
                          atol=1e-5)
    monkeypatch.undo()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        boosters[0].learn(xs[:20].cuda(), ys[:20].cuda())
    syncs = [e for e in prof.events() if e.name == "aten::_local_scalar_dense"]
    assert len(syncs) == 1  # the round's deferred checks, read once
