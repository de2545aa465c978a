"""The Lightning path against the plain loop: the same booster bit for bit, the same
progressive scores, logging every ``log_every_n_steps`` steps, and the overhead benchmark."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from torchboost.data import BatchGroups
from torchboost.lightning import StreamingBoosterModule

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "lightning_overhead.py"


class _UnitsSeen(pl.Callback):
    """``compute_units`` in ``callback_metrics`` after every batch."""

    def __init__(self) -> None:
        self.units: list[float | None] = []

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        units = trainer.callback_metrics.get("compute_units")
        self.units.append(None if units is None else float(units))


@pytest.mark.parametrize("group", [1, 3])
@pytest.mark.parametrize("kind", ["sgb", "ogb_logistic"])
def test_lightning_fit_equals_the_raw_loop_bit_for_bit(kind, group, regression, classification,
                                                      make_booster, make_stream,
                                                      trainer_kwargs, assert_identical):
    """With ``group > 1`` the stream comes in BatchGroups: one step learns ``group`` rounds,
    the booster and the scores stay those of the raw loop, and steps count groups."""
    data = regression if kind == "sgb" else classification
    raw = make_booster(kind)
    sums: dict[str, float] = {}
    for x, y in make_stream(data):
        for key, value in raw.score(raw.learn(x, y), y).items():
            sums[key] = sums.get(key, 0.0) + value * x.shape[0]

    booster = make_booster(kind)
    module = StreamingBoosterModule(booster)
    seen = _UnitsSeen()
    trainer = pl.Trainer(**{**trainer_kwargs, "log_every_n_steps": 7}, callbacks=[seen])
    stream = make_stream(data)
    trainer.fit(module, train_dataloaders=BatchGroups(stream, group) if group > 1 else stream)

    assert_identical(booster.state_dict(), raw.state_dict())
    # the running sums add each round's score as score() gives it, in round order
    assert module.progressive_scores() == {key: total / 2000 for key, total in sums.items()}
    steps = math.ceil(40 / group)  # 40 batches
    assert trainer.global_step == steps
    # logged at steps 7, 14, ... and at the last one; unchanged in between
    units_per_batch = 50 * 3 * booster.n_learners
    assert seen.units == [None] * 6 + [
        units_per_batch * (min(group * 7 * (step // 7), 40) if step < steps else 40)
        for step in range(7, steps + 1)]
    assert trainer.callback_metrics["compute_units"] == booster.compute_units


def test_round_scores_are_the_score_of_the_last_round(regression, make_booster, make_stream):
    booster = make_booster("sgb")
    with pytest.raises(RuntimeError, match="there was none"):
        booster.round_scores(torch.zeros(3, 1))
    x, y = next(iter(make_stream(regression)))
    prediction = booster.learn(x, y)
    scores = booster.round_scores(prediction)
    assert all(torch.is_tensor(value) and value.ndim == 0 for value in scores.values())
    assert {key: float(value) for key, value in scores.items()} == booster.score(prediction, y)


def test_batches_on_the_device_are_not_transferred_again(make_booster):
    module = StreamingBoosterModule(make_booster("sgb"))
    batch = (torch.zeros(3, 5), torch.zeros(3))
    assert module.transfer_batch_to_device(batch, torch.device("cpu"), 0) is batch
    group = next(iter(BatchGroups([batch], 2)))  # moved batch by batch in the training step
    assert module.transfer_batch_to_device(group, torch.device("cpu"), 0) is group
    mixed = [torch.zeros(3, 5), "label"]  # not only tensors: Lightning's transfer
    moved = module.transfer_batch_to_device(mixed, torch.device("cpu"), 0)
    assert moved is not mixed and moved[0] is mixed[0] and moved[1] == "label"


def test_overhead_benchmark_times_identical_runs():
    spec = importlib.util.spec_from_file_location("lightning_overhead", BENCHMARK)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)  # importing runs nothing
    threads = torch.get_num_threads()
    result = benchmark.measure(passes=1, repeats=1, floor=True)
    assert torch.get_num_threads() == threads
    # the learn-only floor run trains the same booster bit for bit too
    assert result["identical"] and result["data"] == "abalone"
    assert result["steps"] == math.ceil(3759 / 32)
    assert result["lightning_over_raw"] == pytest.approx(
        result["lightning_seconds"] / result["raw_seconds"])
    assert result["floor_over_raw"] == pytest.approx(
        result["floor_seconds"] / result["raw_seconds"])
    grouped = benchmark.measure(passes=1, repeats=1, group=4)  # 4 rounds per Lightning step
    assert "floor_seconds" not in grouped
    assert grouped["identical"] and grouped["group"] == 4 and result["group"] == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="the NVML check stays on where CUDA exists")
def test_fit_runs_torchs_plain_cuda_check_without_cuda(regression, make_booster, make_stream,
                                                       trainer_kwargs, monkeypatch):
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # as Lightning's import sets it
    seen: list[str | None] = []

    class _Check(pl.Callback):
        def on_train_batch_start(self, *args: Any) -> None:
            seen.append(os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"))

    module = StreamingBoosterModule(make_booster("sgb"))
    pl.Trainer(**trainer_kwargs, callbacks=[_Check()]).fit(
        module, train_dataloaders=make_stream(regression))
    assert seen and set(seen) == {"0"}
    assert os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"  # restored after the fit


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batch_groups_of_a_cpu_stream_train_a_cuda_booster(regression, make_booster,
                                                           make_stream, trainer_kwargs):
    """Each batch of a group is moved to the GPU in the training step, as Lightning moves a
    single batch: grouped and ungrouped GPU fits of a CPU stream end in the same booster.
    (Lightning's teardown moves the module back to the CPU after the fit.)"""

    class Devices(pl.Callback):
        def __init__(self) -> None:
            self.seen: set[str] = set()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            self.seen.add(next(module.booster.parameters()).device.type)

    states = []
    for group in (1, 3):
        booster = make_booster("sgb")
        stream = make_stream(regression)
        devices = Devices()
        trainer = pl.Trainer(**{**trainer_kwargs, "accelerator": "gpu", "callbacks": [devices]})
        trainer.fit(StreamingBoosterModule(booster),
                    train_dataloaders=BatchGroups(stream, group) if group > 1 else stream)
        assert booster.rounds == 40 and devices.seen == {"cuda"}
        states.append(booster.state_dict())
    for key, value in states[0].items():
        if torch.is_tensor(value) and value.is_floating_point():
            assert torch.allclose(value, states[1][key], rtol=1e-5, atol=1e-6), key
