"""``compile=True``: the stacked forward and backward through ``torch.compile`` give the eager
results (torchboost/learners/stacked.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from torchboost import SGB, TwoLayerNet, WeakLearners


def _compiles() -> bool:
    try:
        return bool(torch.compile(torch.sin)(torch.zeros(1)) == 0)
    except Exception:  # no dynamo on this platform or no C++ compiler for inductor
        return False


@pytest.mark.skipif(not _compiles(), reason="torch.compile is unavailable here")
def test_compiled_stacked_rounds_equal_eager_ones():
    torch.manual_seed(0)
    kwargs = {"n_learners": 3, "mode": "stacked", "step": 0.5, "optimizer": torch.optim.SGD,
              "optimizer_kwargs": {"lr": 0.1}}
    eager = SGB(lambda: TwoLayerNet(5, 4), **kwargs)
    compiled = SGB(lambda: TwoLayerNet(5, 4), compile=True, **kwargs)
    compiled.load_state_dict(eager.state_dict())
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(16, 5, generator=g), torch.randn(16, generator=g)
        assert torch.allclose(compiled.learn(x, y), eager.learn(x, y), atol=1e-6)
    for a, b in zip(compiled.parameters(), eager.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    assert torch.allclose(compiled.predict(x, 2), eager.predict(x, 2), atol=1e-6)
    clone = copy.deepcopy(compiled)  # the compiled function is not copied; the clone compiles
    assert torch.allclose(clone.predict(x), eager.predict(x), atol=1e-6)


def test_compile_needs_the_stacked_mode():
    with pytest.raises(ValueError, match="compile=True compiles the stacked computation"):
        WeakLearners(lambda: torch.nn.Linear(2, 1), 2, mode="loop", compile=True)
