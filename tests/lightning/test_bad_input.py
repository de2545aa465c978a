"""Bad input end to end through Lightning: a stream with NaN rows, wrong widths, ragged rows,
out-of-range and NaN labels and empty batches, screened by ScreenedStream.

* the default policy stops the fit with a BadInputError naming batch and row, before the booster
  learns anything of that batch;
* ``policy="skip"`` ends in exactly (``torch.equal``) the booster trained on the clean rows;
* BadInputLogger's TensorBoard scalars, read back from the event file, are the counts;
* checkpoint/resume through the screen gives the uninterrupted run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import partial
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from crash import CrashAt
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import Tensor

from torchboost import SGB, Booster, TwoLayerNet
from torchboost.data import (
    REASONS,
    BadInputError,
    BatchGroups,
    Dataset,
    DataStream,
    ScreenedStream,
    synthetic_classification,
)
from torchboost.lightning import BadInputLogger, StreamingBoosterModule

pytestmark = [
    pytest.mark.filterwarnings("ignore:Using ModelCheckpoint with manual optimization"),
    pytest.mark.filterwarnings("ignore:Be aware that when using `ckpt_path`, callbacks used"),
]

D = 5  # features, as the conftest's data sets
K = 3  # classes of the softmax problem
NAN, INF = math.nan, math.inf
Batch = tuple[Any, Any]


class Batches:
    """A sized iterable over a fixed list of batches (a list itself would be read by Lightning
    as a list of data loaders)."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[Batch]:
        return iter(self.batches)


@pytest.fixture(scope="module")
def three_classes() -> Dataset:
    return synthetic_classification(n=1250, d=D, n_classes=K, seed=0)


def build(kind: str) -> Booster:
    torch.manual_seed(0)
    if kind == "softmax":
        return SGB(partial(TwoLayerNet, D, 4, K), "softmax", n_learners=3, n_outputs=K,
                   optimizer_kwargs={"lr": 0.05})
    return SGB(partial(TwoLayerNet, D, 4), "squared", n_learners=3,
               optimizer_kwargs={"lr": 0.05})


def _insert(x: Tensor, y: Tensor, at: int, bad_x: Tensor, bad_y: Tensor) -> tuple[Tensor, Tensor]:
    return torch.cat([x[:at], bad_x, x[at:]]), torch.cat([y[:at], bad_y, y[at:]])


def dirty_batches(clean: list[tuple[Tensor, Tensor]],
                  kind: str) -> tuple[list[Batch], list[int], dict[str, int]]:
    """The clean batches with bad rows and batches injected, the bad rows of each batch and the
    rows injected per reason.

    Batch ``k % 4 == 1``: a tensor batch with a NaN row, an inf row and a bad label row
    (out of range for softmax, NaN for squared loss); ``k % 4 == 2``: Python lists of rows with
    a short, a long and an unreadable row; an empty batch before batch 3; a wrong-width tensor
    batch before batch 6 and one after the last batch.
    """
    bad_label = torch.tensor([K]) if kind == "softmax" else torch.tensor([NAN])
    label_reason = "label_invalid" if kind == "softmax" else "label_not_finite"
    counts = dict.fromkeys(REASONS, 0)
    x0, y0 = clean[0]
    wide = (torch.randn(7, D + 2), y0[:7])
    out: list[Batch] = []
    bad: list[int] = []
    for k, (x, y) in enumerate(clean):
        if k == 3:
            out.append((x0[:0], y0[:0]))
            bad.append(0)
        if k == 6:
            out.append(wide)
            bad.append(7)
            counts["features_shape"] += 7
        if k % 4 == 1:
            first = x[:1]
            x, y = _insert(x, y, 0, torch.full((1, D), NAN), y[:1])
            x, y = _insert(x, y, 10, torch.tensor([[0.0, INF, 0.0, 0.0, 0.0]]), y[:1])
            x, y = _insert(x, y, len(x), first, bad_label)
            counts["features_not_finite"] += 2
            counts[label_reason] += 1
        elif k % 4 == 2:
            rows, labels = x.tolist(), y.tolist()
            rows[3:3] = [[1.0, 2.0], [1.0] * (D + 1), ["n/a"] * D]
            labels[3:3] = labels[:3]
            x, y = rows, labels
            counts["features_shape"] += 3
        out.append((x, y))
        bad.append(3 if k % 4 in (1, 2) else 0)
    out.append(wide)
    bad.append(7)
    counts["features_shape"] += 7
    return out, bad, counts


def fit(booster: Booster, stream: Any, trainer_kwargs: dict[str, Any], ckpt_path: Any = None,
        **overrides: Any) -> StreamingBoosterModule:
    module = StreamingBoosterModule(booster)
    trainer = pl.Trainer(**{**trainer_kwargs, **overrides})
    trainer.fit(module, train_dataloaders=stream, ckpt_path=ckpt_path)
    return module


def _data(kind, regression, three_classes):
    data = three_classes if kind == "softmax" else regression
    return list(DataStream.from_dataset(data, batch_size=50, seed=0))


@pytest.mark.parametrize("kind", ["squared", "softmax"])
def test_bad_input_skip_trains_exactly_the_clean_rows(kind, regression, three_classes,
                                                      trainer_kwargs, assert_identical):
    clean = _data(kind, regression, three_classes)
    dirty, _, injected = dirty_batches(clean, kind)

    reference = fit(build(kind), Batches(clean), trainer_kwargs)
    booster = build(kind)
    screened = ScreenedStream(Batches(dirty), booster, policy="skip")
    module = fit(booster, screened, trainer_kwargs)

    assert module.trainer.global_step == booster.rounds == len(clean)
    assert booster.samples_seen == sum(len(y) for _, y in clean)
    assert_identical(reference.booster.state_dict(), booster.state_dict())
    assert reference.progressive_scores() == module.progressive_scores()
    assert screened.skipped == injected
    assert screened.rows_seen == booster.samples_seen + sum(injected.values())
    assert (screened.batches_seen, screened.empty_batches, screened.dropped_batches) == (
        len(dirty), 1, 3)


def test_bad_input_default_policy_stops_the_fit_naming_batch_and_row(regression,
                                                                     trainer_kwargs):
    clean = _data("squared", regression, None)
    dirty, _, _ = dirty_batches(clean, "squared")
    booster = build("squared")
    with pytest.raises(BadInputError) as caught:
        fit(booster, ScreenedStream(Batches(dirty), booster), trainer_kwargs)
    # dirty batch 1 is clean batch 1 with a NaN row first
    assert (caught.value.batch, caught.value.row, caught.value.stream_row) == (1, 0, 50)
    assert str(caught.value).startswith("batch 1, row 0 (stream row 50): features contain NaN")
    assert booster.rounds == 1 and booster.samples_seen == 50


def _bad_input_scalars(booster: Booster, stream: Any, trainer_kwargs: dict[str, Any],
                       tmp_path: Any) -> dict[str, list[tuple[int, float]]]:
    """Fits ``booster`` on ``stream`` with a BadInputLogger; its scalars from the event file."""
    logger = TensorBoardLogger(save_dir=tmp_path, name="tb", version="bad",
                               default_hp_metric=False)
    fit(booster, stream, trainer_kwargs, logger=logger, callbacks=[BadInputLogger()])
    events = EventAccumulator(logger.log_dir, size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)]
            for tag in events.Tags()["scalars"] if tag.startswith("bad_input/")}


def test_bad_input_logger_writes_the_counts_to_tensorboard(regression, tmp_path,
                                                          trainer_kwargs):
    clean = _data("squared", regression, None)
    dirty, bad, injected = dirty_batches(clean, "squared")
    booster = build("squared")
    screened = ScreenedStream(Batches(dirty), booster, policy="skip")
    scalars = _bad_input_scalars(booster, screened, trainer_kwargs, tmp_path)
    assert set(scalars) == {"bad_input/skipped_rows", "bad_input/empty_batches",
                            "bad_input/dropped_batches",
                            *(f"bad_input/skipped_rows/{reason}" for reason in REASONS)}
    total = sum(injected.values())
    final = {tag: series[-1] for tag, series in scalars.items()}
    assert final["bad_input/skipped_rows"] == (40, total)
    for reason in REASONS:
        assert final[f"bad_input/skipped_rows/{reason}"] == (40, injected[reason])
    assert final["bad_input/dropped_batches"] == (40, 3)
    assert final["bad_input/empty_batches"] == (40, 1)

    # the curve: the counts after each round, logged at the first and whenever a count changed;
    # the wide batch after the last clean one at the end of the epoch
    expected, logged, counts, step = [], None, [0, 0, 0], 0  # skipped rows, empty, dropped
    for (x, _), n_bad in zip(dirty, bad, strict=True):
        counts[0] += n_bad
        counts[1] += len(x) == 0
        counts[2] += n_bad == len(x)
        if n_bad < len(x):  # handed on: one more round
            step += 1
            if counts != logged:
                expected.append((step, counts[0]))
                logged = list(counts)
    assert step == 40 and counts == [total, 1, 3]
    expected.append((40, total))
    assert scalars["bad_input/skipped_rows"] == expected


def test_bad_input_in_batch_groups_trains_the_clean_rows_and_logs_the_counts(
        regression, tmp_path, trainer_kwargs, assert_identical):
    """A screened stream read in BatchGroups of 3: the groups hold the clean batches, so the
    booster is the one trained on the clean rows, and the logger finds the screen inside."""
    clean = _data("squared", regression, None)
    dirty, _, injected = dirty_batches(clean, "squared")
    reference = fit(build("squared"), Batches(clean), trainer_kwargs)
    booster = build("squared")
    screened = ScreenedStream(Batches(dirty), booster, policy="skip")
    scalars = _bad_input_scalars(booster, BatchGroups(screened, 3), trainer_kwargs, tmp_path)

    assert booster.rounds == 40 and reference.trainer.global_step == 40
    assert_identical(reference.booster.state_dict(), booster.state_dict())
    assert scalars["bad_input/skipped_rows"][-1] == (14, sum(injected.values()))  # 14 groups
    assert scalars["bad_input/dropped_batches"][-1] == (14, 3)


def test_bad_input_resume_through_the_screen_is_exact(regression, tmp_path, trainer_kwargs,
                                                      assert_identical):
    n, size = regression.x_train.shape[0], 50
    x, y = regression.x_train.clone(), regression.y_train.clone()
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))  # DataStream's order
    x[order[5 * size : 6 * size]] = NAN  # all of batch 5: dropped before the crash
    x[order[[3, 120, 700, 1500]], 2] = INF
    y[order[[60, 900]]] = NAN

    def run(**overrides):
        booster = build("squared")
        screened = ScreenedStream(DataStream(x, y, batch_size=size, seed=0, standardize=None),
                                  booster, policy="skip")
        return fit(booster, screened, trainer_kwargs, **overrides), screened

    reference, reference_screen = run()
    assert reference_screen.dropped_batches == 1 and reference_screen.skipped_rows == 56
    assert reference.booster.rounds == 39

    saver = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=7, save_top_k=-1,
                            save_last=True)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run(callbacks=[saver, CrashAt(17)], enable_checkpointing=True)
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == 14
    saved = checkpoint["torchboost_progressive"]["streams"][0]
    # 14 rounds learned from 15 batches read: batch 5 was dropped
    assert saved["stream"]["batches_consumed"] == saved["batches_seen"] == 15
    # stream positions 3, 120, 700 (inf) and 60 (NaN label) are among the first 750 rows
    assert saved["skipped"]["features_not_finite"] == 50 + 3
    assert saved["skipped"]["label_not_finite"] == 1

    module, screen = run(ckpt_path=tmp_path / "last.ckpt")
    assert module.booster.rounds == 39
    assert_identical(reference.booster.state_dict(), module.booster.state_dict())
    assert reference.progressive_scores() == module.progressive_scores()
    assert screen.counts() == reference_screen.counts()
