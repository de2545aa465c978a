"""The documentation's code examples run as written (docs/write-your-own-booster.md, the
guarantees and custom learners pages)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from torchboost.boosters.registry import BOOSTERS

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_write_your_own_booster_page_runs(capsys):
    text = (DOCS / "write-your-own-booster.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 4
    namespace: dict = {}
    try:
        for block in blocks:  # one session, as a reader would run them
            exec(compile(block, "write-your-own-booster.md", "exec"), namespace)
    finally:
        BOOSTERS.pop("l2boost", None)  # the page registers its booster
    out = capsys.readouterr().out
    first, last = map(float, re.search(r"first 15 batches ([\d.]+), last 15 ([\d.]+)",
                                       out).groups())
    claimed = re.search(r"# ([\d.]+) and ([\d.]+) on a 2-core CPU", text).groups()
    assert (first, last) == pytest.approx(tuple(map(float, claimed)), abs=0.01)  # as printed
    assert "refused:" in out and "NaN" in out
    assert "L2Boost conforms" in out
    booster = namespace["booster"]
    assert booster.rounds == 375 and float(booster.residual_mean.min()) > 0


def test_guarantees_page_example_runs():
    text = (DOCS / "guide" / "guarantees.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    namespace: dict = {}
    exec(compile(block, "guarantees.md", "exec"), namespace)
    booster = namespace["booster"]
    assert booster.rounds == 64 and booster.compute_units == 64 * 32 * 16 * 3


def test_custom_learners_page_example_builds_a_booster_that_learns():
    """The page's first example (the SGB paper's MNIST learner, sizes given) builds and learns
    a batch of 28 × 28 images; a lazy layer in its place is refused, naming it."""
    text = (DOCS / "guide" / "custom-learners.md").read_text()
    block = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    namespace: dict = {}
    exec(compile(block, "custom-learners.md", "exec"), namespace)
    booster = namespace["booster"]
    scores = booster.learn(torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,)))
    assert scores.shape == (4, 10) and booster.rounds == 1
    lazy = block.replace("nn.Linear(5 * 12 * 12, 10)", "nn.LazyLinear(10)")
    with pytest.raises(ValueError, match=r"learner 0 has parameters of a lazy module.*3\.weight"):
        exec(compile(lazy, "custom-learners.md", "exec"), {})
