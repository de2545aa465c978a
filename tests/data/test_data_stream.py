"""DataStream: seeded order, one-pass coverage, standardisation, resuming, validation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from torchboost.data import (
    DataStream,
    ExhaustedStreamWarning,
    load_abalone,
    make_test_tensors,
    synthetic_regression,
)


def tabular(n: int = 103, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Features with different scales per column; ``y`` is the row index (to recover rows)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator) * torch.arange(1, d + 1) + torch.arange(d) * 10
    return x, torch.arange(n)


def collect(stream: DataStream) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(stream)


def test_same_seed_same_order_and_every_row_once() -> None:
    x, y = tabular()
    first, again = (
        collect(DataStream(x, y, batch_size=10, seed=7)),
        collect(DataStream(x, y, 10, 7)),
    )
    assert len(first) == len(DataStream(x, y, batch_size=10)) == 11
    assert all(
        torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        for a, b in zip(first, again, strict=True)
    )
    rows = torch.cat([yb for _, yb in first])
    assert sorted(rows.tolist()) == list(range(103))  # one pass, every row exactly once
    assert [len(yb) for _, yb in first] == [10] * 10 + [3]
    expected = torch.randperm(103, generator=torch.Generator().manual_seed(7))
    assert torch.equal(rows, expected)  # the documented order
    other = torch.cat([yb for _, yb in DataStream(x, y, batch_size=10, seed=8)])
    assert not torch.equal(rows, other)


def test_no_shuffle_and_drop_last() -> None:
    x, y = tabular(n=25)
    stream = DataStream(x, y, batch_size=10, shuffle=False, standardize=None, drop_last=True)
    batches = collect(stream)
    assert len(stream) == len(batches) == 2
    assert torch.equal(batches[1][0], x[10:20]) and batches[1][1].tolist() == list(range(10, 20))


def test_warmup_statistics_come_from_the_prefix_only() -> None:
    x, y = tabular()
    stream = DataStream(x, y, batch_size=8, seed=3, warmup=20)
    order = torch.randperm(103, generator=torch.Generator().manual_seed(3))
    prefix = x[order[:20]].double().numpy()
    assert stream.standardize == "warmup" and stream.n_seen == 20
    np.testing.assert_allclose(stream.mean.numpy(), prefix.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(stream.std.numpy(), prefix.std(axis=0), rtol=1e-12)
    # rows outside the warm-up prefix do not influence the statistics
    x_changed = x.clone()
    x_changed[order[20:]] = 1e6
    same = DataStream(x_changed, y, batch_size=8, seed=3, warmup=20)
    assert torch.equal(same.mean, stream.mean) and torch.equal(same.std, stream.std)
    # every batch, first and last, is normalised with those fixed statistics
    batches = collect(stream)
    for xb, yb in (batches[0], batches[-1]):
        expected = (x[yb].double().numpy() - prefix.mean(axis=0)) / prefix.std(axis=0)
        np.testing.assert_allclose(xb.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert stream.n_seen == 20


def test_running_statistics_equal_numpy_over_rows_seen() -> None:
    x, y = tabular()
    stream = DataStream(x, y, batch_size=16, seed=1, standardize="running")
    assert stream.n_seen == 0
    seen: list[int] = []
    for xb, yb in stream:
        seen.extend(yb.tolist())
        rows = x[seen].double().numpy()
        assert stream.n_seen == len(seen)
        np.testing.assert_allclose(stream.mean.numpy(), rows.mean(axis=0), rtol=1e-10)
        np.testing.assert_allclose(stream.std.numpy(), rows.std(axis=0), rtol=1e-10)
        # the batch was folded in first, then normalised with the updated statistics
        expected = (x[yb].double().numpy() - rows.mean(axis=0)) / rows.std(axis=0)
        np.testing.assert_allclose(xb.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("standardize", ["warmup", "running", None])
@pytest.mark.parametrize("start", [0, 1, 4, 7])
def test_start_batch_gives_exactly_the_tail(standardize: str | None, start: int) -> None:
    x, y = tabular()
    full = collect(DataStream(x, y, batch_size=15, seed=5, standardize=standardize, warmup=30))
    resumed = DataStream(x, y, batch_size=15, seed=5, standardize=standardize, warmup=30,
                         start_batch=start)  # fmt: skip
    assert resumed.batches_consumed == start and resumed.batches_remaining == len(full) - start
    tail = collect(resumed)
    assert len(tail) == len(full) - start
    for (xa, ya), (xb, yb) in zip(full[start:], tail, strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


def test_state_dict_resume_mid_pass() -> None:
    x, y = tabular()
    kwargs = {"batch_size": 10, "seed": 2, "standardize": "running"}
    reference = collect(DataStream(x, y, **kwargs))
    stream = DataStream(x, y, **kwargs)
    iterator = iter(stream)
    for _ in range(4):
        next(iterator)
    state = stream.state_dict()
    assert state["batches_consumed"] == 4 and state["count"] == 40
    fresh = DataStream(x, y, **kwargs)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.mean, stream.mean)
    for (xa, ya), (xb, yb) in zip(reference[4:], collect(fresh), strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    with pytest.raises(ValueError, match="seed"):
        DataStream(x, y, batch_size=10, seed=3, standardize="running").load_state_dict(state)


def test_reset_and_exhaustion() -> None:
    x, y = tabular(n=30)
    stream = DataStream(x, y, batch_size=8, standardize="running")
    first = collect(stream)
    with pytest.warns(ExhaustedStreamWarning, match="pass is over"):
        assert collect(stream) == []  # one pass only, and a second loop says so
    stream.reset()
    assert stream.n_seen == 0
    for (xa, _), (xb, _) in zip(first, collect(stream), strict=True):
        assert torch.equal(xa, xb)


def test_only_a_loop_after_a_finished_loop_warns() -> None:
    """A stream built or resumed at the end of its pass yields nothing quietly (a finished run
    resumes that way); a second loop after a loop that ran the pass out warns once per loop;
    ``reset`` and ``load_state_dict`` clear it."""
    x, y = tabular(n=30)
    at_end = DataStream(x, y, batch_size=8, start_batch=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert collect(at_end) == []
        stream = DataStream(x, y, batch_size=8)
        state = stream.state_dict()
        assert len(collect(stream)) == 4
    with pytest.warns(ExhaustedStreamWarning, match="DataStream's pass is over.*reset"):
        assert collect(stream) == []
    stream.load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(collect(stream)) == 4


def test_transform_uses_training_statistics_only() -> None:
    ds = synthetic_regression(n=400, d=3, seed=0)
    for mode in ("warmup", "running"):
        stream = DataStream.from_dataset(ds, batch_size=32, standardize=mode, warmup=100)
        for _ in stream:
            pass
        mean, std = stream.mean, stream.std
        x_test, y_test = make_test_tensors(stream, ds)
        assert torch.equal(stream.mean, mean) and torch.equal(stream.std, std)  # not refitted
        expected = (ds.x_test.double() - mean) / std
        torch.testing.assert_close(x_test, expected.float())
        assert torch.equal(y_test, ds.y_test)
        order = torch.randperm(320, generator=torch.Generator().manual_seed(0))
        fitted_on = ds.x_train[order[:100]] if mode == "warmup" else ds.x_train
        torch.testing.assert_close(mean, fitted_on.double().mean(dim=0))


def test_constant_feature_is_only_centred() -> None:
    x = torch.stack([torch.arange(10.0), torch.full((10,), 5.0)], dim=1)
    stream = DataStream(x, torch.zeros(10), batch_size=5, warmup=10)
    assert stream.std[1].item() == 0.0
    batch, _ = next(iter(stream))
    assert torch.all(batch[:, 1] == 0.0)
    assert stream.transform(torch.tensor([[4.5, 7.0]])).tolist() == [[0.0, 2.0]]


def test_images_default_to_no_standardisation() -> None:
    x = torch.rand(12, 1, 2, 2)
    stream = DataStream(x, torch.arange(12), batch_size=5)
    assert stream.standardize is None and stream.mean is None
    xb, yb = next(iter(stream))
    assert torch.equal(xb, x[yb])
    assert stream.transform(x) is x
    per_pixel = DataStream(x, torch.arange(12), batch_size=5, standardize="warmup", warmup=12)
    assert per_pixel.mean.shape == (1, 2, 2)
    torch.testing.assert_close(per_pixel.mean, x.double().mean(dim=0))


def test_validation_and_nan_passthrough() -> None:
    with pytest.raises(ValueError, match="empty stream"):
        DataStream(torch.zeros(0, 3), torch.zeros(0))
    with pytest.raises(ValueError, match="empty stream"):
        DataStream(torch.zeros(3, 2), torch.zeros(3), batch_size=4, drop_last=True)
    with pytest.raises(ValueError, match="rows"):
        DataStream(torch.zeros(5, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="start_batch"):
        DataStream(torch.zeros(5, 2), torch.zeros(5), batch_size=2, start_batch=4)
    with pytest.raises(ValueError, match="standardize"):
        DataStream(torch.zeros(5, 2), torch.zeros(5), standardize="minmax")  # type: ignore[arg-type]
    # integer features stream as floats (issue 47: a TypeError before), standardised as given
    assert DataStream(torch.zeros(5, 2, dtype=torch.int64), torch.zeros(5)).x.is_floating_point()
    x = torch.ones(6, 2)
    x[3, 1] = float("nan")
    batches = collect(DataStream(x, torch.arange(6), batch_size=4, standardize="running"))
    assert sum(len(yb) for _, yb in batches) == 6  # nothing dropped
    assert torch.isnan(torch.cat([xb for xb, _ in batches])).any()


def test_repr_and_from_dataset_on_real_shapes() -> None:
    ds = load_abalone()
    stream = DataStream.from_dataset(ds, batch_size=100)
    assert len(stream) == 38 and stream.n_samples == 3759
    assert "batches=0/38" in repr(stream)


def test_a_state_that_fails_half_way_changes_nothing() -> None:
    x, y = tabular(n=30)
    stream = DataStream(x, y, batch_size=8, standardize="running")
    next(iter(stream))
    state = stream.state_dict()
    del state["m2"]  # read last
    fresh = DataStream(x, y, batch_size=8, standardize="running")
    before = (fresh.batches_consumed, fresh.n_seen)
    with pytest.raises(ValueError, match=r"lacks \['m2'\]"):
        fresh.load_state_dict(state)
    assert (fresh.batches_consumed, fresh.n_seen) == before == (0, 0)
