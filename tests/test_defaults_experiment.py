"""experiments/defaults.py --seeded: the per-stream ratios to Adam's best rate, by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def test_seeded_comparison_divides_seed_means_by_the_best_adam_rate(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import defaults

    def row(lr, value, seed, optimizer=None):
        return {"stream": "s", "lr": lr, "optimizer": optimizer, "seed": seed, "pass1": value,
                "pass3": value / 2}

    results = [row(1e-2, 2.0, 0), row(1e-2, 4.0, 1),  # mean 3
               row(3e-2, 1.0, 0), row(3e-2, 3.0, 1),  # mean 2: the best rate
               row(None, 2.0, 0, "prodigy"), row(None, 2.2, 1, "prodigy")]  # mean 2.1
    table = defaults.seeded_comparison(results, {"s": 9.0})["s"]
    assert table["adam_best"] == "adam_0.03" and table["mean"]["adam_0.03"] == 2.0
    assert table["ratio_to_adam_best"] == pytest.approx(
        {"adam_0.01": 1.5, "adam_0.03": 1.0, "prodigy": 1.05})
    assert table["within_10pct"] == {"adam_0.01": False, "adam_0.03": True, "prodigy": True}
    assert table["ratio_to_adam_best_pass3"] == table["ratio_to_adam_best"]
    assert table["mean_pass3"]["prodigy"] == pytest.approx(1.05)
    design = defaults.seeded_design(seeds=2)
    assert len(design) == 2 * (len(defaults.SWEEPS["lr"]) + 1 + len(defaults.CANDIDATES))
    assert {d["seed"] for d in design} == {0, 1} and all(d["standardize"] for d in design)
