"""The quick start of the README and of the getting-started page runs as written (bundled data,
nothing else), and trains: its 16 learners beat the label variance on the held-out rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def quick_start(path: Path) -> str:
    """The first Python block after the page's "Quick start" heading."""
    text = path.read_text()
    after = text[text.index("## Quick start"):]
    return re.search(r"```python\n(.*?)```", after, re.DOTALL).group(1)


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_quick_start_runs_as_written(page):
    namespace: dict = {}
    exec(compile(quick_start(ROOT / page), page, "exec"), namespace)
    booster, x_test, y_test = namespace["booster"], namespace["x_test"], namespace["y_test"]
    mse = float((booster.predict(x_test).flatten() - y_test).square().mean())
    assert mse < 0.6 * float(y_test.var())  # ABALONE: 16 learners after one pass
    assert booster.compute_units > 0 and set(booster.diagnostics()) >= {"fit_error", "edge"}
    assert namespace["prediction"].shape[0] == len(namespace["y"])  # the last batch's rows
    if page == "README.md":  # the deploy page's warning, measured: the stream's scaling is not
        raw = namespace["ds"].x_test  # in the export, so raw features predict far worse
        served = booster.export()
        raw_mse = float((served(raw).flatten() - y_test).square().mean())
        assert float((served(x_test).flatten() - y_test).square().mean()) == pytest.approx(mse)
        assert raw_mse > 1.5 * mse  # about 8.5 against 4.8 (docs/guide/deploy.md)


def test_the_getting_started_config_is_a_valid_experiment():
    """The YAML of the getting-started page builds the comparison it describes."""
    import yaml

    from torchboost.harness import ExperimentConfig

    text = (ROOT / "docs/getting-started.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.DOTALL).group(1)
    config = ExperimentConfig.from_dict(yaml.safe_load(block))
    assert (config.name, config.dataset, config.n_learners, config.seeds) == (
        "abalone-quick", "abalone", 8, 2)
    assert config.methods == ["base", "wide", "GB", "SGB_newton"] and config.one_pass
