"""Public entry points either succeed or change nothing (issue 24)."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from torchboost import SGB, TwoLayerNet


def _trained(hidden: int, rounds: int, **options) -> SGB:
    torch.manual_seed(hidden)
    booster = SGB(lambda: TwoLayerNet(3, hidden), n_learners=2, **options)
    g = torch.Generator().manual_seed(rounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(rounds):
            booster.learn(torch.randn(16, 3, generator=g), torch.randn(16, generator=g))
    return booster


def _same(a, b) -> bool:
    """Bitwise the same tensors and the same plain values, nested (optimizer states)."""
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_loading_another_architecture_names_it_and_loads_nothing():
    saved = _trained(10, 3).state_dict()
    booster = _trained(20, 1)
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match=r"(?s)other shapes, so its learners have another "
                                         r"architecture.*size mismatch"):
        booster.load_state_dict(saved)
    assert _same(before, booster.state_dict()) and booster.rounds == 1
    booster.learn(torch.randn(16, 3), torch.randn(16))  # and it trains on
    assert booster.rounds == 2


def test_a_refused_configuration_leaves_the_mode_and_the_window_alone():
    saved = _trained(10, 3, mode="loop", stall_window=500).state_dict()
    booster = _trained(10, 1, step=0.3)  # stacked, window 2000, another step
    before = copy.deepcopy(booster.state_dict())
    with pytest.raises(ValueError, match="configured differently"):
        booster.load_state_dict(saved)
    assert booster.learners.mode == "stacked" and booster.stall.window == 2000
    assert _same(before, booster.state_dict())


class _Touch:
    """Unpickling this runs code: it creates ``path`` (stands in for a malicious checkpoint)."""

    def __init__(self, path) -> None:
        self.path = path

    def __reduce__(self):
        import pathlib
        return pathlib.Path.touch, (pathlib.Path(self.path),)


def test_a_zero_filled_checkpoint_is_named_and_skipped(tmp_path):
    import os

    from torchboost.lightning import (
        AtomicCheckpointIO,
        CorruptCheckpointError,
        atomic_save,
        check_checkpoint,
        latest_checkpoint,
    )

    good = atomic_save({"state_dict": {"w": torch.randn(100)}}, tmp_path / "good.ckpt")
    zeros = tmp_path / "zeros.ckpt"
    zeros.write_bytes(bytes(good.stat().st_size))  # what a power loss leaves behind
    stamp = good.stat().st_mtime_ns + 10**9
    os.utime(zeros, ns=(stamp, stamp))
    with pytest.raises(CorruptCheckpointError, match=r"zeros\.ckpt.*bytes are zero"):
        check_checkpoint(zeros)
    with pytest.raises(CorruptCheckpointError, match=r"zeros\.ckpt.*latest_checkpoint"):
        AtomicCheckpointIO().load_checkpoint(zeros)
    with pytest.warns(UserWarning, match=r"zeros\.ckpt"):
        assert latest_checkpoint(tmp_path) == good


def test_checking_a_legacy_checkpoint_never_runs_its_code(tmp_path):
    from torchboost.lightning import CorruptCheckpointError, check_checkpoint

    marker = tmp_path / "the-code-ran"
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "x": _Touch(marker)}, evil, _use_new_zipfile_serialization=False)
    with pytest.raises(CorruptCheckpointError, match=r"evil\.ckpt.*never runs it"):
        check_checkpoint(evil)
    assert not marker.exists()
    plain = tmp_path / "plain.ckpt"  # a legacy file of tensors and containers is fine
    torch.save({"state_dict": {"w": torch.ones(3)}, "epoch": 2}, plain,
               _use_new_zipfile_serialization=False)
    check_checkpoint(plain)
