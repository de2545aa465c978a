"""``experiments/streams.py`` on a short stream: its prequential protocol and its table."""

from __future__ import annotations

import pytest
from boost_helpers import imported_experiment

pytest.importorskip("river")


def test_the_streams_experiment_scores_prequentially_and_tabulates(monkeypatch) -> None:
    with imported_experiment(monkeypatch, "streams") as streams:
        rows = streams.stream("SEA", 0, 12000)
        assert len(rows) == 12000 and rows[0][0].keys() == {0, 1, 2}
        runs = [streams.run(("SEA", name, 0, 600)) for name in ("SGB", "linear")]
        for run in runs:  # the change at 10,000 lies beyond 600 examples: no "after"
            assert run["after"] == [] and 0.0 <= run["whole"] <= 1.0 and run["curve"]
        table = streams.table(runs)
        best = min(runs, key=lambda r: r["whole"])
        row = next(line for line in table.splitlines() if line.startswith("| SEA |"))
        assert f"**{best['whole']:.3g}**" in row and row.count("—") == len(streams.MODELS) - 2
