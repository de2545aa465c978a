"""Shared fixtures: deterministic torch for every test; a deterministic hypothesis profile."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import settings

# "ci" (the default) draws the same examples on every run; HYPOTHESIS_PROFILE=explore searches.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=30,
                          print_blob=True)
settings.register_profile("explore", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _deterministic() -> None:
    torch.manual_seed(0)
