"""BatchGroups: consecutive batches in groups, read lazily, with the wrapped stream's state."""

from __future__ import annotations

import pytest
import torch

from torchboost.data import BatchGroup, BatchGroups, DataStream, ResumableBatchGroups


def _stream(n: int = 14, batch_size: int = 2) -> DataStream:
    """Rows 0..n-1 in order (label = row index), ``ceil(n / batch_size)`` batches."""
    return DataStream(torch.arange(float(n)).unsqueeze(1), torch.arange(float(n)),
                      batch_size=batch_size, shuffle=False, standardize=None)


def _labels(groups) -> list[list[list[float]]]:
    return [[y.tolist() for _, y in group] for group in groups]


def test_groups_hold_consecutive_batches_and_the_last_one_the_rest():
    groups = BatchGroups(_stream(), 3)  # 7 batches
    assert len(groups) == 3
    assert _labels(groups) == [[[0, 1], [2, 3], [4, 5]], [[6, 7], [8, 9], [10, 11]], [[12, 13]]]
    assert len(BatchGroups(_stream(12), 3)) == 2  # 6 batches: no partial group
    assert _labels(BatchGroups(_stream(4), 1)) == [[[0, 1]], [[2, 3]]]


def test_a_group_reads_its_batches_only_as_they_are_asked_for():
    stream = _stream()
    groups = iter(BatchGroups(stream, 3))
    group = next(groups)
    assert isinstance(group, BatchGroup) and stream.batches_consumed == 1
    rounds = iter(group)
    next(rounds)
    assert stream.batches_consumed == 1 and not group.finished
    next(rounds)
    assert stream.batches_consumed == 2
    next(rounds)
    assert stream.batches_consumed == 3 and group.finished and group.read == 3
    sizes = []
    for later in groups:
        assert later.read == 0  # not iterated yet
        sizes.append(len(list(later)))
        assert later.read == sizes[-1]
    assert sizes == [3, 1] and stream.batches_consumed == 7


def test_a_group_is_read_once_and_to_its_end():
    groups = iter(BatchGroups(_stream(), 3))
    group = next(groups)
    rounds = iter(group)
    next(rounds)
    with pytest.raises(RuntimeError, match="iterated to its end before the next"):
        next(groups)
    with pytest.raises(RuntimeError, match="only once"):
        next(iter(group))


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "2"])
def test_a_bad_group_size_is_refused(size):
    with pytest.raises(ValueError, match="batches per group"):
        BatchGroups(_stream(), size)


def test_groups_are_resumable_exactly_when_the_stream_is():
    batches = [(torch.zeros(2, 1), torch.zeros(2))] * 5
    plain = BatchGroups(batches, 2)
    assert type(plain) is BatchGroups and not hasattr(plain, "state_dict")
    assert len(plain) == 3
    with pytest.raises(TypeError):
        len(BatchGroups(iter(batches), 2))
    assert isinstance(BatchGroups(_stream(), 2), ResumableBatchGroups)


def test_the_state_is_the_streams_and_resumes_at_the_next_group():
    groups = BatchGroups(_stream(), 3)
    read = iter(groups)
    assert _labels([next(read)]) == [[[0, 1], [2, 3], [4, 5]]]
    state = groups.state_dict()
    assert state["size"] == 3 and state["stream"]["batches_consumed"] == 3

    resumed = BatchGroups(_stream(), 3)
    resumed.load_state_dict(state)
    assert _labels(resumed) == [[[6, 7], [8, 9], [10, 11]], [[12, 13]]]
    with pytest.raises(ValueError, match="groups of 3 batches, this one in groups of 2"):
        BatchGroups(_stream(), 2).load_state_dict(state)


def test_shard_shards_the_wrapped_stream():
    stream = _stream()
    groups = BatchGroups(stream, 3)
    groups.shard(1, 2)
    assert (stream.rank, stream.world_size) == (1, 2)
    assert _labels(groups)[0] == [[1], [3], [5]]
    with pytest.raises(RuntimeError, match="list across 2 processes"):
        BatchGroups([(torch.zeros(2, 1), torch.zeros(2))], 1).shard(0, 2)
