"""Checkpoint/resume mid-stream gives exactly the booster of an uninterrupted pass.

The stream position travels in the checkpoint (DataStream is a sized, stateful iterable; see
StreamingBoosterModule's docstring), the booster's complete state — learner optimizer states
included — in the module's state_dict, the progressive sums and the callback's schedule and
history in their own checkpoint entries.
"""

from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch
from crash import CrashAt
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader, TensorDataset

from torchboost.data import BatchGroups, DataStream
from torchboost.lightning import StreamingBoosterModule, StreamingCallback

pytestmark = [
    # Lightning 2.6 warns on every step-based save under manual optimisation that the checkpoint
    # holds the state after the step; that is the state matching the saved stream position.
    pytest.mark.filterwarnings("ignore:Using ModelCheckpoint with manual optimization"),
    # The resumed trainers deliberately leave out the ModelCheckpoint that wrote the file.
    pytest.mark.filterwarnings("ignore:Be aware that when using `ckpt_path`, callbacks used"),
]

EVAL_EVERY_UNITS = 3000.0


def _run(data, make_booster, make_stream, trainer_kwargs, kind, callbacks=(), ckpt_path=None,
         group=1, **overrides):
    """One fit of a fresh module, stream (in BatchGroups of ``group`` batches when
    ``group > 1``) and StreamingCallback; returns (module, callback, trainer)."""
    module = StreamingBoosterModule(make_booster(kind))
    stream = make_stream(data)
    tracker = StreamingCallback(data.x_test, data.y_test, EVAL_EVERY_UNITS,
                                transform=stream.transform)
    trainer = pl.Trainer(**{**trainer_kwargs, **overrides, "callbacks": [tracker, *callbacks]})
    trainer.fit(module, train_dataloaders=BatchGroups(stream, group) if group > 1 else stream,
                ckpt_path=ckpt_path)
    return module, tracker, trainer


def _assert_same_run(reference, resumed, data, assert_identical):
    (ref_module, ref_tracker), (module, tracker) = reference, resumed
    assert_identical(ref_module.booster.state_dict(), module.booster.state_dict())
    assert torch.equal(ref_module.booster.predict(data.x_test), module.booster.predict(data.x_test))
    assert ref_module.progressive_scores() == module.progressive_scores()
    assert ref_tracker.history == tracker.history
    assert ref_tracker.anytime == tracker.anytime


@pytest.mark.parametrize("kind", ["sgb", "ogb_logistic", "sgb_scheduled", "sgb_chained"])
def test_lightning_resume_after_crash_is_exact(kind, regression, classification, tmp_path,
                                              make_booster, make_stream, trainer_kwargs,
                                              assert_identical):
    data = classification if kind == "ogb_logistic" else regression
    reference = _run(data, make_booster, make_stream, trainer_kwargs, kind)[:2]

    saver = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=7, save_top_k=-1,
                            save_last=True)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(data, make_booster, make_stream, trainer_kwargs, kind,
             callbacks=[saver, CrashAt(17)], enable_checkpointing=True)
    last = tmp_path / "last.ckpt"
    checkpoint = torch.load(last, weights_only=False)
    assert checkpoint["global_step"] == 14
    # the learners' optimizer states travel inside the booster's state_dict: the steps taken
    # (Adam's per-parameter count, or schedule-free's per-group k)
    optimizers = checkpoint["state_dict"]["booster.learners._extra_state"]["optimizers"]
    assert all(int(opt["state"][0]["step"] if "step" in opt["state"][0] else
                   opt["param_groups"][0]["k"]) == 14 for opt in optimizers)
    assert checkpoint["state_dict"]["booster._extra_state"]["rounds"] == 14
    schedulers = checkpoint["state_dict"]["booster.learners._extra_state"].get("schedulers")
    if kind == "sgb_scheduled":  # mid-schedule: 14 of the 40 rounds' steps, in the cosine part
        assert [s["last_epoch"] for s in schedulers] == [14]
        rate = optimizers[0]["param_groups"][0]["lr"]
        assert rate == pytest.approx(0.05 * 0.5 * (1 + math.cos(math.pi * 9 / 35)))
    else:
        assert schedulers is None

    module, tracker, trainer = _run(data, make_booster, make_stream, trainer_kwargs, kind,
                                    ckpt_path=last)
    assert trainer.global_step == 40
    _assert_same_run(reference, (module, tracker), data, assert_identical)


def test_lightning_resume_in_batch_groups_is_exact(regression, tmp_path, make_booster,
                                                   make_stream, trainer_kwargs, assert_identical):
    """Groups of 3 batches (14 steps over the 40 batches): a checkpoint falls on a group's end,
    and the resumed fit is the uninterrupted grouped one, whose booster is the ungrouped one."""
    ungrouped = _run(regression, make_booster, make_stream, trainer_kwargs, "sgb")[0]
    reference = _run(regression, make_booster, make_stream, trainer_kwargs, "sgb", group=3)[:2]

    saver = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=4, save_top_k=-1,
                            save_last=True)
    with pytest.raises(RuntimeError, match="simulated crash"):
        _run(regression, make_booster, make_stream, trainer_kwargs, "sgb", group=3,
             callbacks=[saver, CrashAt(10)], enable_checkpointing=True)
    checkpoint = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == 8
    assert checkpoint["state_dict"]["booster._extra_state"]["rounds"] == 24

    module, tracker, trainer = _run(regression, make_booster, make_stream, trainer_kwargs, "sgb",
                                    group=3, ckpt_path=tmp_path / "last.ckpt")
    assert trainer.global_step == 14 and module.booster.rounds == 40
    _assert_same_run(reference, (module, tracker), regression, assert_identical)
    assert_identical(ungrouped.booster.state_dict(), module.booster.state_dict())
    assert ungrouped.progressive_scores() == module.progressive_scores()

    with pytest.raises(ValueError, match="groups of 3 batches, this one in groups of 2"):
        _run(regression, make_booster, make_stream, trainer_kwargs, "sgb", group=2,
             ckpt_path=tmp_path / "last.ckpt")


@pytest.mark.parametrize("resume", ["max_steps", "max_epochs=-1"])
def test_lightning_resume_after_max_steps_is_exact(resume, regression, tmp_path, make_booster,
                                                   make_stream, trainer_kwargs,
                                                   assert_identical):
    reference = _run(regression, make_booster, make_stream, trainer_kwargs, "sgb")[0]
    first, _, trainer = _run(regression, make_booster, make_stream, trainer_kwargs, "sgb",
                             max_steps=13)
    assert first.booster.rounds == 13
    trainer.save_checkpoint(tmp_path / "stopped.ckpt")

    # the stopped run's epoch counts as finished: the resumed trainer must allow another one
    limits = {"max_steps": 40, "max_epochs": None} if resume == "max_steps" else {
        "max_epochs": -1}
    module = _run(regression, make_booster, make_stream, trainer_kwargs, "sgb",
                  ckpt_path=tmp_path / "stopped.ckpt", **limits)[0]
    assert module.booster.rounds == 40
    assert_identical(reference.booster.state_dict(), module.booster.state_dict())
    assert reference.progressive_scores() == module.progressive_scores()


class Unsized:
    """A stateful stream without a length (Lightning prefetches one batch from it)."""

    def __init__(self, stream: DataStream) -> None:
        self.stream = stream

    def __iter__(self):
        return iter(self.stream)

    def state_dict(self) -> dict:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.stream.load_state_dict(state)


@pytest.mark.filterwarnings("ignore:You're resuming from a checkpoint that ended before the epoch")
@pytest.mark.parametrize(("loader", "reason"), [("dataloader", "replay the stream"),
                                                ("unsized", "a batch ahead")])
def test_lightning_resume_refuses_an_inexact_stream(loader, reason, regression, tmp_path,
                                                    make_booster, make_stream, trainer_kwargs):
    def fit(callbacks=(), ckpt_path=None, **overrides):
        if loader == "dataloader":
            data = DataLoader(TensorDataset(regression.x_train, regression.y_train), batch_size=50)
        else:
            data = Unsized(make_stream(regression))
        trainer = pl.Trainer(**{**trainer_kwargs, **overrides, "callbacks": list(callbacks)})
        trainer.fit(StreamingBoosterModule(make_booster("sgb")), data, ckpt_path=ckpt_path)

    saver = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=5, save_last=True)
    with pytest.raises(RuntimeError, match="simulated crash"):
        fit([saver, CrashAt(8)], enable_checkpointing=True)
    with pytest.raises(RuntimeError, match=reason):
        fit(ckpt_path=tmp_path / "last.ckpt")


def test_a_checkpoint_that_does_not_fit_changes_nothing():
    """The module loads its booster all or nothing: a checkpoint of learners of another width
    (refused only by torch's copy, after the booster's configuration check passed) raises and
    leaves the booster exactly as it was; a fitting one loads bit for bit, with torch's version
    metadata, and an entry that is not the booster's is refused."""
    from torchboost import SGB, TwoLayerNet
    from torchboost.testing import assert_same

    def module(width):
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(3, width), n_learners=3)
        booster.learn(torch.randn(16, 3), torch.randn(16))
        return StreamingBoosterModule(booster)

    target, wider, same = module(4), module(8), module(4)
    same.booster.learn(torch.randn(16, 3), torch.randn(16))
    before = target.state_dict()
    with pytest.raises(ValueError, match="nothing was loaded"):
        target.load_state_dict(wider.state_dict())
    assert_same(target.state_dict(), before)
    target.load_state_dict(same.state_dict())
    assert_same(target.state_dict(), same.state_dict())
    with pytest.raises(RuntimeError, match="unexpected key"):
        target.load_state_dict({**same.state_dict(), "head.weight": torch.ones(1)})


class _FailLearning(pl.Callback):
    """Raises after the stream handed over batch ``step``, before the booster learns it."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx == self.step:
            raise ValueError("a failing round")


@pytest.mark.filterwarnings("ignore:You're resuming from a checkpoint that ended before the epoch")
def test_a_checkpoint_written_with_a_batch_read_and_not_learnt_is_refused(
        regression, tmp_path, make_booster, make_stream, trainer_kwargs):
    """A red-team finding: OnExceptionCheckpoint saved a stream one batch past the booster, and
    the resumed fit skipped that batch without a word."""
    from lightning.pytorch.callbacks import OnExceptionCheckpoint

    def fit(callbacks=(), ckpt_path=None):
        trainer = pl.Trainer(**{**trainer_kwargs, "callbacks": list(callbacks),
                                "enable_checkpointing": bool(callbacks)})
        module = StreamingBoosterModule(make_booster("sgb"))
        trainer.fit(module, make_stream(regression), ckpt_path=ckpt_path)
        return module

    with pytest.raises(ValueError, match="a failing round"):
        fit([OnExceptionCheckpoint(tmp_path, filename="crash"), _FailLearning(5)])
    saved = torch.load(tmp_path / "crash.ckpt", weights_only=False)
    assert saved["state_dict"]["booster._extra_state"]["rounds"] == 5
    with pytest.raises(RuntimeError, match="skip the batch"):
        fit(ckpt_path=tmp_path / "crash.ckpt")
