"""Data-parallel streaming: replicas learning on the shards of each global batch end with the
booster of one process learning on the global batches, and count compute units once.

Three levels: replicas in threads with an in-process :class:`Synchronizer` (every booster kind,
3 ranks, fast; and a screened stream skipping bad rows, 2 ranks); the Lightning module's
distributed path with a one-rank synchronizer; and the real thing,
``Trainer(strategy="ddp", devices=2)`` on 2 CPU processes with gloo (:mod:`ddp_fit`, run as one
subprocess): whole passes, passes resumed from mid-stream checkpoints, a screened pass.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from ddp_fit import (
    ALL_KINDS,
    BAD_FEATURE_ROWS,
    BAD_LABEL_ROWS,
    KINDS,
    N_FEATURES,
    SAVE_STEP,
    STOP_STEP,
    build_booster,
    make_screened_stream,
    make_stream,
)
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from torchboost import SGB, OzaBoost, StagewiseGB, StumpRegressor, TwoLayerNet
from torchboost.boosters import Booster
from torchboost.data import DataStream, ScreenedStream
from torchboost.distributed import ProcessGroupSync, Synchronizer
from torchboost.lightning import StreamingBoosterModule

SCRIPT = Path(__file__).with_name("ddp_fit.py")


class ThreadGroup:
    """``world_size`` replicas in threads that sum tensors through shared slots: every rank adds
    the slots in rank order, so all get the same bits (as from a real all-reduce)."""

    def __init__(self, world_size: int) -> None:
        self.slots: list[Tensor | None] = [None] * world_size
        self.barrier = threading.Barrier(world_size, timeout=60)
        #: ``(dtype, numel)`` of every collective call, in order
        self.calls: list[tuple[torch.dtype, int]] = []


class ThreadSync(Synchronizer):
    def __init__(self, group: ThreadGroup, rank: int) -> None:
        super().__init__(rank, len(group.slots))
        self.group = group

    def all_reduce_(self, tensor: Tensor) -> None:
        group = self.group
        group.slots[self.rank] = tensor.clone()
        group.barrier.wait()
        total = group.slots[0].clone()
        for part in group.slots[1:]:
            total += part
        if self.rank == 0:
            group.calls.append((tensor.dtype, tensor.numel()))
        group.barrier.wait()
        tensor.copy_(total)


def _learn_all(booster: Booster, stream: Iterable[tuple[Tensor, Tensor]]) -> None:
    for x, y in stream:
        booster.learn(x, y)


def _replicas(kind: str, world_size: int, make: Callable[[Booster], Any] | None = None
              ) -> tuple[list[Booster], ThreadGroup, list[Any]]:
    """Each rank's booster after one pass over its shards, the ranks running in threads, and
    each rank's stream: ``make(booster)`` (default :func:`make_stream`), sharded."""
    group = ThreadGroup(world_size)
    boosters = [build_booster(kind) for _ in range(world_size)]
    streams = [make_stream(kind) if make is None else make(booster) for booster in boosters]
    errors: list[BaseException] = []

    def run(rank: int) -> None:
        try:
            boosters[rank].distribute(ThreadSync(group, rank))
            streams[rank].shard(rank, world_size)
            _learn_all(boosters[rank], streams[rank])
        except BaseException as error:  # re-raised in the test thread
            errors.append(error)
            group.barrier.abort()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return boosters, group, streams


def _assert_close(actual: Any, expected: Any, where: str = "state") -> None:
    """Nested state: tensors and floats to float tolerance, everything else (counters, shapes,
    modes) exactly."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), where
        for key in expected:
            _assert_close(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list | tuple):
        assert len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _assert_close(a, e, f"{where}[{i}]")
    elif torch.is_tensor(expected) or isinstance(expected, float):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, msg=where)
    else:
        assert actual == expected, where


def _single_process(kind: str) -> tuple[Booster, dict[str, float]]:
    """The reference: one booster over the global batches, and its progressive scores."""
    booster = build_booster(kind)
    sums: dict[str, float] = {}
    for x, y in make_stream(kind):
        for key, value in booster.score(booster.learn(x, y), y).items():
            sums[key] = sums.get(key, 0.0) + value * x.shape[0]
    return booster, {key: value / booster.samples_seen for key, value in sums.items()}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_replicas_on_shards_equal_one_process_on_global_batches(kind):
    reference, _ = _single_process(kind)
    (first, *others), group, _ = _replicas(kind, world_size=3)
    # 10 global batches of 25 = 9 + 8 + 8 rows (the last: 15 = 5 + 5 + 5) across 3 ranks
    assert (first.rounds, first.samples_seen) == (10, 240)
    assert first.compute_units == reference.compute_units == 240 * 3 * first.n_learners
    _assert_close(first.state_dict(), reference.state_dict())
    torch.testing.assert_close(first.diagnostics(), reference.diagnostics(), rtol=1e-5, atol=1e-6)
    for other in others:  # the replicas hold the same bits
        for key, value in first.state_dict().items():
            assert not torch.is_tensor(value) or torch.equal(value, other.state_dict()[key]), key
    # the learners' gradients travel in one buffer per round
    n_params = sum(p.numel() for p in first.parameters())
    assert group.calls.count((torch.float32, n_params)) == 10
    assert group.calls.count((torch.int64, 2)) == 10  # global batch size, rejected shards
    if kind == "ogb":
        assert 0.1 < float(reference.sigma.max()) < 0.9  # σ moved and is not clipped
    if kind == "sgb_newton_learned":  # the learned steps moved (from η = ½), on every replica
        steps = reference.diagnostics()["step"]
        assert (steps - 0.5).abs().min() > 1e-3
        torch.testing.assert_close(first.diagnostics()["step"], steps)


def _screened_single_process() -> tuple[Booster, ScreenedStream]:
    """The reference of a screened run: one booster through the screen of the global stream."""
    booster = build_booster("sgb")
    stream = make_screened_stream(booster)
    _learn_all(booster, stream)
    return booster, stream


def _assert_screened_counts(counts: dict[str, int], reference: ScreenedStream) -> None:
    """The counts of the global screen: every bad row once, none of the batches dropped."""
    assert counts == reference.counts()
    assert counts["skipped_rows/features_not_finite"] == len(BAD_FEATURE_ROWS) == 5
    assert counts["skipped_rows/label_invalid"] == len(BAD_LABEL_ROWS) == 2
    assert counts["skipped_rows"] == 7 and counts["dropped_batches"] == 0


def test_screened_replicas_equal_one_process_on_the_clean_rows():
    reference, whole = _screened_single_process()
    assert (reference.rounds, reference.samples_seen) == (10, 240 - 7)
    boosters, _, streams = _replicas("sgb", 2, make_screened_stream)
    # each rank learned on its part of the clean rows: 117 + 116, one round per global batch
    assert [stream.stream.batches_consumed for stream in streams] == [10, 10]
    for booster, stream in zip(boosters, streams, strict=True):
        assert (booster.rounds, booster.samples_seen) == (10, 233)
        _assert_close(booster.state_dict(), reference.state_dict())
        _assert_screened_counts(stream.counts(), whole)


def test_shards_partition_the_global_batches_and_the_state_stays_global():
    x, y = torch.randn(103, 3) * 5 + 2, torch.arange(103.0)
    build = lambda: DataStream(x, y, batch_size=10, seed=3, standardize="running")  # noqa: E731
    whole, shards = build(), [build() for _ in range(3)]
    for rank, shard in enumerate(shards):
        shard.shard(rank, 3)
    assert [len(s) for s in shards] == [len(whole)] * 3 == [11] * 3
    for k, (xb, yb) in enumerate(whole):
        parts = [next(iter(shard)) for shard in shards]
        sizes = [part[1].shape[0] for part in parts]
        assert sizes == ([4, 3, 3] if k < 10 else [1, 1, 1])
        assert torch.equal(torch.cat([part[1] for part in parts]), yb)
        assert torch.equal(torch.cat([part[0] for part in parts]), xb)  # global statistics
        for shard in shards:
            _assert_close(shard.state_dict(), whole.state_dict())
    shards[1].shard(0, 1)  # undone: the rows of an unsharded stream
    shards[1].reset()
    assert next(iter(shards[1]))[1].shape == (10,)


def test_shard_refuses_an_empty_part():
    stream = DataStream(torch.randn(21, 2), torch.zeros(21), batch_size=10)  # last batch: 1 row
    with pytest.raises(ValueError, match="a batch of 1 rows cannot be split over 2"):
        stream.shard(1, 2)
    with pytest.raises(ValueError, match=r"rank must lie in \[0, 2\)"):
        stream.shard(2, 2)
    DataStream(torch.randn(21, 2), torch.zeros(21), batch_size=10, drop_last=True).shard(1, 2)


def test_distribute_refuses_boosters_it_cannot_keep_consistent():
    sync = ThreadSync(ThreadGroup(1), 0)
    with pytest.raises(ValueError, match="StagewiseGB runs its own round"):
        StagewiseGB(lambda: TwoLayerNet(3, 2), n_learners=2).distribute(sync)
    with pytest.raises(ValueError, match="OzaBoost runs its own round"):
        OzaBoost(lambda: nn.Linear(3, 3), n_classes=3, n_learners=2).distribute(sync)
    norm = build_booster("sgb")
    norm.learners = type(norm.learners)(lambda: nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3),
                                                              nn.Linear(3, 1)), 2)
    with pytest.raises(ValueError, match="BatchNorm running statistics"):
        norm.distribute(sync)
    stumps = SGB(lambda: StumpRegressor(3, curvature=2.0), n_learners=2)
    with pytest.raises(ValueError, match=r"per-round state cannot be synchronised.*StumpRegressor"):
        stumps.distribute(sync)


def test_a_shard_failing_its_checks_stops_every_replica_with_nothing_changed():
    # rank 1's shard has a NaN row: it raises its own error, rank 0 learns that a replica
    # rejected the batch from the same all-reduce that sums the shard sizes, so neither waits
    # alone in a later collective, and both states stay as they were
    group = ThreadGroup(2)
    boosters = [build_booster("sgb") for _ in range(2)]
    before = [{k: v.clone() for k, v in b.state_dict().items() if torch.is_tensor(v)}
              for b in boosters]
    x, y = torch.randn(2, 13, N_FEATURES), torch.randint(0, 2, (2, 13)).float()  # logistic
    x[1, 4, 0] = float("nan")
    errors: list[str] = ["", ""]

    def run(rank: int) -> None:
        boosters[rank].distribute(ThreadSync(group, rank))
        try:
            boosters[rank].learn(x[rank], y[rank])
        except ValueError as error:
            errors[rank] = str(error)

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "1 other replica(s) rejected their shard" in errors[0]
    assert "features contain NaN or inf (rows [4])" in errors[1]
    for booster, state in zip(boosters, before, strict=True):
        assert booster.rounds == 0 and booster.compute_units == 0
        assert all(torch.equal(booster.state_dict()[k], v) for k, v in state.items())


def test_process_group_sync_needs_an_initialised_process_group():
    with pytest.raises(RuntimeError, match="is not initialised"):
        ProcessGroupSync()


def _fit(booster: Booster, data: Any) -> StreamingBoosterModule:
    module = StreamingBoosterModule(booster)
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_model_summary=False,
                         enable_progress_bar=False)
    trainer.fit(module, train_dataloaders=data)
    return module


def test_module_reduces_progressive_scores_and_refuses_unshardable_streams():
    reference, progressive = _single_process("sgb")
    booster = build_booster("sgb")
    group = ThreadGroup(1)
    booster.distribute(ThreadSync(group, 0))
    module = _fit(booster, make_stream("sgb"))
    _assert_close(booster.state_dict(), reference.state_dict())
    _assert_close(module.progressive_scores(), progressive)
    # the global batch's size and score sums (loss, error): one call per round
    assert group.calls.count((torch.float64, 3)) == 10
    assert booster.sync is None  # teardown takes the synchronizer off

    booster.distribute(ThreadSync(ThreadGroup(1), 0))
    x, y = next(iter(make_stream("sgb")))
    with pytest.raises(RuntimeError, match="cannot split a DataLoader across 1 processes"):
        _fit(booster, DataLoader(TensorDataset(x, y), batch_size=5))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of :mod:`ddp_fit`'s results, from one 2-process run for the tests below."""
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port())}
    for name in ("LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _rank_results(out: Path, name: str) -> list[dict[str, Any]]:
    """The two ranks' results of one run; they hold the same bits."""
    ranks = [torch.load(out / f"{name}_rank{r}.pt", weights_only=False) for r in (0, 1)]
    for key, value in ranks[0]["state"].items():
        assert not torch.is_tensor(value) or torch.equal(value, ranks[1]["state"][key]), key
    return ranks


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("run", ["whole", "mid_epoch", "stopped"])
def test_ddp_on_two_processes_equals_one_process(ddp_out, kind, run):
    """An uninterrupted pass, and passes resumed by fresh 2-process fits from a checkpoint that
    ``ModelCheckpoint`` wrote mid-epoch (Lightning restores the stream) or that a run stopped by
    ``max_steps`` saved (its epoch is finished: the module restores the stream)."""
    reference, progressive = _single_process(kind)
    start = {"whole": 0, "mid_epoch": SAVE_STEP, "stopped": STOP_STEP}[run]
    for result in _rank_results(ddp_out, f"{kind}_{run}"):
        assert result["steps"] == reference.rounds == 10
        assert result["batches"] == 10 - start  # a resumed fit learns the rest of the stream
        # units counted once for the global stream, not once per process
        assert result["counters"] == (reference.compute_units, 240, 10) == (2160, 240, 10)
        _assert_close(result["state"], reference.state_dict())
        _assert_close(result["progressive"], progressive)
        if kind == "ogb":
            assert 0.1 < float(result["state"]["sigma"].max()) < 0.9
    if run == "whole":
        return
    name, step = (f"step={SAVE_STEP}", SAVE_STEP) if run == "mid_epoch" else ("stopped", STOP_STEP)
    checkpoint = torch.load(ddp_out / f"{kind}_ckpt" / f"{name}.ckpt", weights_only=False)
    assert checkpoint["global_step"] == step
    assert checkpoint["state_dict"]["booster._extra_state"]["samples_seen"] == 25 * step
    # the global stream's position, the same on every rank, where the booster stopped
    assert checkpoint["torchboost_progressive"]["streams"][0]["batches_consumed"] == step
    assert not list((ddp_out / f"{kind}_ckpt").glob(".*.tmp"))  # AtomicCheckpointIO's


def test_ddp_in_batch_groups_equals_one_process(ddp_out):
    """Groups of 3 global batches: 4 steps learn the 10 rounds of one process."""
    reference, progressive = _single_process("sgb")
    for result in _rank_results(ddp_out, "sgb_grouped"):
        assert (result["steps"], result["batches"]) == (4, 4)
        assert result["counters"] == (reference.compute_units, 240, 10)
        _assert_close(result["state"], reference.state_dict())
        _assert_close(result["progressive"], progressive)


def test_ddp_on_two_processes_skips_bad_rows_like_one_process(ddp_out):
    reference, whole = _screened_single_process()
    for result in _rank_results(ddp_out, "sgb_screened"):
        assert result["counters"] == (reference.compute_units, 233, 10)
        _assert_close(result["state"], reference.state_dict())
        _assert_screened_counts(result["counts"], whole)
