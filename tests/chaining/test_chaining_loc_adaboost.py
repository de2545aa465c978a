"""LocAdaBoost (Alg. 2): bounded output, grid/FTL roots, streams, bad input, state, behaviour."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from torchboost.chaining import ChainingTree, KTCoinBetting, LocAdaBoost


@pytest.fixture(autouse=True)
def _one_thread():  # type: ignore[no-untyped-def]
    """A round is a few hundred tiny tensor ops: waking a thread pool for each costs more than the
    op (badly so on a shared machine), so these tests run single-threaded."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def target(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(10 * x) + torch.cos(5 * x) + 5


@pytest.mark.parametrize("roots", ["ftl", "grid"])
@pytest.mark.parametrize("loss", ["squared", "absolute"])
def test_prediction_is_within_the_bound(roots: str, loss: str) -> None:
    """|f̂_t| ≤ B (a convex combination of clipped experts), even for labels far outside."""
    model = LocAdaBoost((0.0, 1.0), horizon=64, bound=2.0, roots=roots, loss=loss)
    for t in range(60):
        x = torch.rand(2, 1)
        y = 50.0 * (-1) ** t * torch.ones(2)
        assert bool((model.learn(x, y).abs() <= 2.0).all())
    assert bool((model.predict(torch.rand(100, 1)).abs() <= 2.0).all())


def test_grid_roots_start_at_gamma_k() -> None:
    """Γ = {−B + (k−1)ε}, K = ⌈2B/ε⌉ with ε = T^{−1/2}; expert (n, k) starts at γ_k 1{x ∈ X_n},
    so with uniform weights the first prediction is the mean of Γ."""
    model = LocAdaBoost((0.0, 1.0), horizon=16, bound=1.0, roots="grid", core_depth=2)
    assert model.n_roots == math.ceil(2 * 1.0 / 16**-0.5) == 8
    assert model.grid.tolist() == pytest.approx([-1 + k / 4 for k in range(8)])
    assert model.n_experts == 8 * 3
    first = model.predict(torch.tensor([[0.2]]))
    assert float(first) == pytest.approx(float(model.grid.mean()))


def test_only_awake_experts_and_their_path_nodes_get_state() -> None:
    model = LocAdaBoost((0.0, 1.0), depth=4, bound=8.0)
    model.learn(torch.tensor([[0.1]]), torch.tensor([3.0]))
    model.learn(torch.tensor([[0.12]]), torch.tensor([5.0]))
    awake = {0, 1, 3, 7}  # core path of x = 0.1 and 0.12 (same cell of width 1/8)
    assert set(model.aggregator.keys().tolist()) <= awake
    assert set(model.leaders.keys().tolist()) == awake
    # expert at core level a owns nodes at levels a+1..3 on the path: 3 + 2 + 1 + 0 = 6 nodes
    assert model.grad_step.n_rows == 6


def test_streams_equal_separate_models() -> None:
    joint = LocAdaBoost((0.0, 1.0), depth=6, bound=8.0, n_streams=2)
    alone = [LocAdaBoost((0.0, 1.0), depth=6, bound=8.0) for _ in range(2)]
    streams = torch.arange(2)
    for _ in range(30):
        x = torch.rand(2, 1)
        y = target(x)[:, 0] + 0.5 * torch.randn(2)
        together = joint.learn(x, y, streams)
        for s, model in enumerate(alone):
            assert torch.equal(together[s], model.learn(x[s:s + 1], y[s:s + 1])[0])


def test_two_points_of_one_stream_are_one_round() -> None:
    """Both points are predicted with the state of the round (all zero), then the round's
    update sees both: the Follow-the-Leader root becomes their mean label."""
    model = LocAdaBoost((0.0, 1.0), depth=5, bound=8.0)
    x, y = torch.tensor([[0.1], [0.8]]), torch.tensor([4.0, 6.0])
    assert torch.equal(model.learn(x, y), torch.zeros(2, 1))
    first = model.predict(x)
    assert bool((first > 0).all())
    assert model.leaders.path_values(model.partition.path(x)[:, :1])[:, 0].tolist() == [5.0, 5.0]


def bad_calls() -> dict[str, tuple]:
    x, y = torch.rand(4, 1), torch.randn(4)
    return {
        "NaN input": ((torch.full((4, 1), float("nan")), y), "NaN"),
        "outside": ((x - 2, y), "outside the domain"),
        "shape": ((torch.rand(4, 3), y), "shape"),
        "labels": ((x, y[:2]), "2 labels for 4"),
        "stream": ((x, y, torch.tensor([0, 0, 0, 5])), r"\[0, 1\)"),
    }


@pytest.mark.parametrize("case", list(bad_calls()))
def test_bad_input_raises_and_leaves_state_unchanged(case: str) -> None:
    model = LocAdaBoost((0.0, 1.0), depth=5, bound=4.0)
    model.learn(torch.rand(6, 1), torch.randn(6))
    before = copy.deepcopy(model.state_dict())
    args, message = bad_calls()[case]
    with pytest.raises(ValueError, match=message):
        model.learn(*args)
    after = model.state_dict()
    for key, value in before.items():
        assert torch.equal(value, after[key]) if torch.is_tensor(value) else value == after[key]


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="core_depth"):
        LocAdaBoost((0.0, 1.0), depth=4, core_depth=5)
    with pytest.raises(ValueError, match="roots"):
        LocAdaBoost((0.0, 1.0), depth=4, roots="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="horizon"):
        LocAdaBoost((0.0, 1.0), depth=4, roots="grid")
    with pytest.raises(ValueError, match=">= 2"):
        LocAdaBoost((0.0, 1.0), depth=1)


def test_state_dict_round_trip() -> None:
    model = LocAdaBoost((0.0, 1.0), depth=6, bound=8.0, roots="grid", grid_step=0.5)
    for _ in range(20):
        x = torch.rand(3, 1)
        model.learn(x, target(x)[:, 0])
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = LocAdaBoost((0.0, 1.0), depth=6, bound=8.0, roots="grid", grid_step=0.5)
    fresh.load_state_dict(torch.load(buffer))
    x = torch.rand(4, 1)
    assert torch.equal(fresh.predict(x), model.predict(x))
    assert torch.equal(fresh.learn(x, target(x)[:, 0]), model.learn(x, target(x)[:, 0]))


def test_locally_adaptive_beats_the_chaining_tree_on_appendix_f() -> None:
    """Appendix F, squared loss, T = 1500: LocAdaBoost's regret is well below the CT's (Fig. 4a)."""
    horizon, n_streams = 1500, 3
    kt = {"grad_step": KTCoinBetting(4.0, initial_wealth=8.0)}
    models = {"ct": ChainingTree((0.0, 1.0), horizon=horizon, bound=8.0, n_streams=n_streams,
                                 **kt),
              "lab": LocAdaBoost((0.0, 1.0), horizon=horizon, bound=8.0, n_streams=n_streams,
                                 grad_step=KTCoinBetting(4.0, initial_wealth=8.0))}
    regret = dict.fromkeys(models, 0.0)
    streams = torch.arange(n_streams)
    for _ in range(horizon):
        x = torch.rand(n_streams, 1)
        y = target(x) + 0.5 * torch.randn(n_streams, 1)
        for name, model in models.items():
            prediction = model.learn(x, y, streams)
            regret[name] += float(((prediction - y) ** 2 - (target(x) - y) ** 2).mean())
    assert regret["lab"] < 0.6 * regret["ct"]
    assert regret["lab"] < 0.2 * horizon


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu() -> None:
    cpu = LocAdaBoost((0.0, 1.0), depth=8, bound=8.0, n_streams=2)
    gpu = copy.deepcopy(cpu).to("cuda")
    streams = torch.tensor([0, 1, 0])
    for _ in range(15):
        x = torch.rand(3, 1, dtype=torch.float64)
        y = target(x)[:, 0]
        assert torch.allclose(cpu.learn(x, y, streams),
                              gpu.learn(x.cuda(), y.cuda(), streams.cuda()).cpu(), atol=1e-10)
