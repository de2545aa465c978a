"""The documentation's code examples run as written (docs/write-your-own-booster.md)."""

from __future__ import annotations

import re
from pathlib import Path

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
    assert "progressive MSE" in out and "refused:" in out and "NaN" in out
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
