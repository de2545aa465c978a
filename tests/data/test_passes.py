"""MultiPassStream: P seeded DataStream passes as one sized, resumable stream."""

from __future__ import annotations

import pytest
import torch

from torchboost.data import DataStream, ExhaustedStreamWarning, MultiPassStream

X = torch.arange(46.0).reshape(23, 2)
Y = torch.arange(23.0)


def _pass(p: int, seed: int = 5) -> DataStream:
    return DataStream(X, Y, batch_size=4, seed=seed + p, standardize=None)


def _batches(stream) -> list[list[float]]:
    return [y.tolist() for _, y in stream]


def test_passes_chain_the_seeded_passes_in_order():
    stream = MultiPassStream(_pass, passes=3)
    expected = [batch for p in range(3) for batch in _batches(_pass(p))]
    assert len(stream) == 3 * 6 == len(expected)
    assert _batches(stream) == expected
    # every pass visits each row once, each in its own order
    for p in range(3):
        rows = expected[6 * p: 6 * (p + 1)]
        assert sorted(v for batch in rows for v in batch) == Y.tolist()
    assert expected[:6] != expected[6:12]
    with pytest.warns(ExhaustedStreamWarning, match="pass is over"):
        assert stream.batches_consumed == 18 and _batches(stream) == []
    stream.reset()
    assert stream.batches_consumed == 0 and _batches(stream) == expected


@pytest.mark.parametrize("stop", [3, 6, 7, 17])
def test_passes_resume_from_state_dict_exactly(stop):
    reference = _batches(MultiPassStream(_pass, passes=3))
    first = MultiPassStream(_pass, passes=3)
    iterator = iter(first)
    seen = [next(iterator)[1].tolist() for _ in range(stop)]
    state = first.state_dict()
    assert first.batches_consumed == stop
    assert state["pass"] == (stop - 1) // 6  # a finished pass is left only when the next starts

    resumed = MultiPassStream(_pass, passes=3)
    _batches(resumed)  # exhausted: loading must rewind the later passes too
    resumed.load_state_dict(state)
    assert resumed.batches_consumed == stop
    assert seen + _batches(resumed) == reference


def test_passes_refuse_a_foreign_state():
    state = MultiPassStream(_pass, passes=3).state_dict()
    with pytest.raises(ValueError, match="3 passes, this stream 2"):
        MultiPassStream(_pass, passes=2).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        MultiPassStream(lambda p: _pass(p, seed=9), passes=3).load_state_dict(state)
    with pytest.raises(ValueError, match="passes must be an integer >= 1"):
        MultiPassStream(_pass, passes=0)
