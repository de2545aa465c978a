"""ChainingTree: eq. 7, chaining parametrisation (eqs. 15–17), cells, laziness, batches, state."""

from __future__ import annotations

import copy
import io
import math
from collections import defaultdict

import pytest
import torch

from torchboost.chaining import ChainingTree, DyadicPartition, KTCoinBetting, ProjectedOGD


def target(x: torch.Tensor) -> torch.Tensor:
    """Appendix F's f(x) = sin(10x) + cos(5x) + 5 (L = 15 in sup-norm), averaged over axes."""
    return (torch.sin(10 * x) + torch.cos(5 * x)).mean(-1, keepdim=True) + 5


def test_only_the_path_moves_eq7() -> None:
    """One round at x = 0.3 sends g = ℓ'(f̂(x)) to the 3 nodes of its path and nowhere else; the
    KT bets are then g/G/2 × ε₀ with ε₀ = 2^{-(depth-1)}. A second round reuses the root."""
    tree = ChainingTree((0.0, 1.0), depth=3, grad_step=KTCoinBetting(2.0, initial_wealth=1.0))
    assert tree.path(torch.tensor([[0.3]])).tolist() == [[0, 1, 4]]
    prediction = tree.learn(torch.tensor([[0.3]]), torch.tensor([1.0]))
    assert prediction.item() == 0.0  # ½(0 − 1)²: ℓ' = −1, coin c = 1/2 on the path only
    assert sorted(tree.grad_step.keys().tolist()) == [0, 1, 4]
    theta = tree.grad_step.theta(torch.arange(7)).tolist()
    assert theta == [0.25, 0.125, 0.0, 0.0, 0.0625, 0.0, 0.0]
    assert tree.predict(torch.tensor([[0.3], [0.7]])).flatten().tolist() == [0.4375, 0.25]
    # x = 0.9: path (0, 2, 6), prediction 0.25, ℓ' = 0.25, coin −1/8.
    tree.learn(torch.tensor([[0.9]]), torch.tensor([0.0]))
    wealth = 1.0 * (1 - 0.125 * 0.25)
    expected = [0.375 / 3 * wealth, 0.125, -0.125 / 2 * 0.5, 0.0, 0.0625, 0.0, -0.125 / 2 * 0.25]
    assert tree.grad_step.theta(torch.arange(7)).tolist() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("dim", [1, 2])
def test_chaining_parametrisation_eqs_15_to_17(dim: int) -> None:
    """Warm-started with eq. 16's coefficients, the tree predicts f at the centre of the leaf of x,
    and |θ_n| ≤ L |X|^α 2^{−α depth(n)} below the root (eq. 17, α = 1, L = 15)."""
    tree = ChainingTree(([0.0] * dim, [1.0] * dim), depth=6 if dim == 1 else 4)
    tree.warm_start(target)
    x = torch.rand(200, dim, dtype=torch.float64)
    leaf = tree.path(x)[:, -1]
    centres = tree.partition.center(leaf)
    assert torch.allclose(tree.predict(x), target(centres), atol=1e-12)
    ids = torch.arange(tree.partition.n_nodes)
    theta = tree.grad_step.theta(ids)
    depth = tree.partition.level(ids) + 1
    bound = 15.0 * 1.0 * torch.exp2(-depth.double())
    assert theta[0] == pytest.approx(float(target(tree.partition.center(ids[:1]))[0, 0]))
    assert bool((theta[1:].abs() <= bound[1:] + 1e-12).all())


def test_half_open_cells() -> None:
    """[a, a + h) per coordinate; the upper boundary of X goes to the last cell."""
    part = DyadicPartition((0.0, 1.0), depth=3)
    x = torch.tensor([[0.0], [0.25], [0.5], [0.75 - 1e-12], [1.0]], dtype=torch.float64)
    cells = part.path(x) - torch.tensor(part.offsets[:3])
    assert cells.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 1, 2], [0, 1, 3]]
    square = DyadicPartition(([0.0, -1.0], [2.0, 1.0]), depth=2)
    corners = torch.tensor([[0.0, -1.0], [2.0, 1.0], [1.0, -1.0], [0.0, 0.0]])
    # level 1: cell (c1, c2) has id 1 + c1 + 2 c2
    assert square.path(corners)[:, 1].tolist() == [1, 4, 2, 3]


def test_memory_grows_with_visited_nodes_only() -> None:
    tree = ChainingTree((0.0, 1.0), depth=40, bound=4.0)  # 2^40 - 1 nodes
    x = torch.rand(64, 1)
    visited: set[int] = set()
    for i in range(0, 64, 8):
        tree.learn(x[i:i + 8], torch.randn(8))
        visited.update(tree.path(x[i:i + 8]).flatten().tolist())
        assert tree.n_allocated <= len(visited)
    buffers = sum(b.numel() for b in tree.buffers())
    assert buffers < 64 * len(visited)


def reference_round(state: dict[int, list[float]], part: DyadicPartition, x: torch.Tensor,
                    grads: list[float], gradient_bound: float, initial_wealth: float) -> None:
    """Plain-Python Alg. 1 + KT for one round made of a batch: node gradient = mean over the batch
    of the per-point gradients of the points in the node (eq. 7 for the batch-mean loss)."""
    node_grad: dict[int, float] = defaultdict(float)
    for path, g in zip(part.path(x).tolist(), grads, strict=True):
        for node in path:
            node_grad[node] += max(-gradient_bound, min(gradient_bound, g)) / len(grads)
    for node, g in node_grad.items():
        if abs(g) <= 1e-12 * gradient_bound:  # cancelling contributions: not a round of T_n
            continue
        level = int(part.level(torch.tensor(node)))
        wealth, coins, count = state.get(node, [initial_wealth * 2.0 ** (-part.dim * level), 0, 0])
        coin = -g / gradient_bound
        wealth *= 1 + coin * coins / (count + 1)
        state[node] = [wealth, coins + coin, count + 1]


def reference_predict(state: dict[int, list[float]], part: DyadicPartition,
                      x: torch.Tensor) -> list[float]:
    out = []
    for path in part.path(x).tolist():
        out.append(sum(w * s / (c + 1) for w, s, c in (state.get(n, [0, 0, 0]) for n in path)))
    return out


@pytest.mark.parametrize("loss", ["squared", "absolute"])
def test_batch_is_one_round_of_the_batch_mean_loss(loss: str) -> None:
    tree = ChainingTree(([0.0, 0.0], [1.0, 1.0]), depth=4, loss=loss, bound=2.0,
                        grad_step=KTCoinBetting(3.0, initial_wealth=0.5))
    state: dict[int, list[float]] = {}
    for _ in range(6):
        x = torch.rand(5, 2, dtype=torch.float64)
        y = 4 * torch.rand(5, dtype=torch.float64) - 2
        expected = reference_predict(state, tree.partition, x)
        prediction = tree.learn(x, y)
        assert prediction.flatten().tolist() == pytest.approx(expected, abs=1e-12)
        grads = tree.loss.gradient(prediction, y[:, None]).flatten().tolist()
        reference_round(state, tree.partition, x, grads, 3.0, 0.5)
    x = torch.rand(50, 2, dtype=torch.float64)
    assert tree.predict(x).flatten().tolist() == pytest.approx(
        reference_predict(state, tree.partition, x), abs=1e-12)


def test_streams_equal_separate_trees_fed_point_by_point() -> None:
    """A batch with one point per stream is one paper round of each of S independent trees."""
    n_streams, rounds = 3, 40
    joint = ChainingTree((0.0, 1.0), depth=6, bound=8.0, n_streams=n_streams)
    alone = [ChainingTree((0.0, 1.0), depth=6, bound=8.0) for _ in range(n_streams)]
    x = torch.rand(rounds, n_streams, 1)
    y = target(x) + 0.5 * torch.randn(rounds, n_streams, 1)
    streams = torch.arange(n_streams)
    for t in range(rounds):
        together = joint.learn(x[t], y[t], streams)
        for s, tree in enumerate(alone):
            assert torch.equal(together[s], tree.learn(x[t, s:s + 1], y[t, s])[0])
    probe = torch.rand(20, 1)
    for s, tree in enumerate(alone):
        assert torch.equal(joint.predict(probe, torch.full((20,), s)), tree.predict(probe))
    assert joint.n_allocated == sum(tree.n_allocated for tree in alone)


def test_update_is_the_weak_learner_interface() -> None:
    """learn(x, y) = predict, then update(x, ℓ'(prediction))."""
    a = ChainingTree((0.0, 1.0), depth=5, bound=2.0)
    b = copy.deepcopy(a)
    x, y = torch.rand(4, 1), torch.randn(4)
    prediction = a.learn(x, y)
    b.update(x, b.predict(x) - y[:, None])
    assert torch.equal(a.predict(x), b.predict(x)) and torch.equal(prediction, torch.zeros(4, 1))


def test_projected_ogd_alternative_stays_in_its_radius() -> None:
    ogd = ProjectedOGD(gradient_bound=16.0, lipschitz=15.0, root_radius=8.0)
    tree = ChainingTree((0.0, 1.0), depth=5, bound=8.0, grad_step=ogd)
    for _ in range(200):
        x = torch.rand(1, 1)
        tree.learn(x, target(x))
    ids = tree.grad_step.keys()
    theta = tree.grad_step.theta(ids)
    level = tree.partition.level(ids)
    radius = torch.where(level == 0, 8.0, 15.0 * torch.exp2(-(level + 1).double()))
    assert bool((theta.abs() <= radius + 1e-12).all())
    assert abs(float(tree.predict(torch.tensor([[0.5]]))) - float(target(torch.tensor(0.5)))) < 1


def bad_calls(tree: ChainingTree) -> dict[str, tuple]:
    x, y = torch.rand(4, 1), torch.randn(4)
    nan = x.clone()
    nan[2, 0] = float("nan")
    return {
        "NaN input": ((nan, y), r"NaN or inf \(rows \[2\]\)"),
        "outside the domain": ((x + 1.5, y), "outside the domain"),
        "wrong shape": ((torch.rand(4, 2), y), r"shape \(B, 1\)"),
        "not a batch": ((torch.rand(4), y), "shape"),
        "integer input": ((torch.ones(4, 1, dtype=torch.long), y), "floating point"),
        "empty batch": ((torch.rand(0, 1), y[:0]), "empty"),
        "label count": ((x, y[:3]), "3 labels for 4"),
        "NaN label": ((x, torch.full((4,), float("nan"))), "NaN or inf"),
        "stream range": ((x, y, torch.tensor([0, 1, 2, 3])), r"\[0, 2\)"),
        "stream shape": ((x, y, torch.tensor([0, 1])), "shape"),
    }


@pytest.mark.parametrize("case", list(bad_calls(ChainingTree((0.0, 1.0), depth=3))))
def test_bad_input_raises_and_leaves_state_unchanged(case: str) -> None:
    tree = ChainingTree((0.0, 1.0), depth=5, bound=2.0, n_streams=2)
    tree.learn(torch.rand(8, 1), torch.randn(8))
    before = copy.deepcopy(tree.state_dict())
    args, message = bad_calls(tree)[case]
    with pytest.raises(ValueError, match=message):
        tree.learn(*args)
    after = tree.state_dict()
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert torch.equal(value, after[key]) if torch.is_tensor(value) else value == after[key]


def test_bad_update_gradients_and_constructor_arguments() -> None:
    tree = ChainingTree((0.0, 1.0), depth=3)
    with pytest.raises(ValueError, match="shape"):
        tree.update(torch.rand(3, 1), torch.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        tree.update(torch.rand(2, 1), torch.tensor([0.0, float("inf")]))
    assert tree.n_allocated == 0
    with pytest.raises(ValueError, match="horizon"):
        ChainingTree((0.0, 1.0))
    with pytest.raises(ValueError, match="low < high"):
        ChainingTree((1.0, 0.0), depth=3)
    with pytest.raises(ValueError, match="overflow"):
        ChainingTree(([0.0] * 3, [1.0] * 3), depth=22)  # 3·21 = 63 > 62
    with pytest.raises(ValueError, match="n_outputs"):
        ChainingTree((0.0, 1.0), depth=3, loss="softmax")


def test_default_depth_is_log2_horizon_over_d() -> None:
    assert ChainingTree((0.0, 1.0), horizon=10**5).depth == math.ceil(math.log2(10**5))
    assert ChainingTree(([0.0] * 3, [1.0] * 3), horizon=10**5).depth == 6
    assert ChainingTree((0.0, 1.0), horizon=1).depth == 1


def test_state_dict_round_trip_into_a_fresh_tree() -> None:
    tree = ChainingTree((0.0, 1.0), depth=8, bound=8.0)
    for _ in range(30):
        x = torch.rand(3, 1)
        tree.learn(x, target(x)[:, 0])
    buffer = io.BytesIO()
    torch.save(tree.state_dict(), buffer)
    buffer.seek(0)
    fresh = ChainingTree((0.0, 1.0), depth=8, bound=8.0)
    fresh.load_state_dict(torch.load(buffer))
    x = torch.rand(5, 1)
    assert torch.equal(fresh.predict(x), tree.predict(x))
    y = target(x)[:, 0]
    assert torch.equal(fresh.learn(x, y), tree.learn(x, y))
    assert torch.equal(fresh.predict(x), tree.predict(x))


def run_regret(horizon: int, n_streams: int = 4) -> float:
    tree = ChainingTree((0.0, 1.0), horizon=horizon, bound=8.0,
                        grad_step=KTCoinBetting(4.0, initial_wealth=8.0), n_streams=n_streams)
    streams = torch.arange(n_streams)
    regret = 0.0
    for _ in range(horizon):
        x = torch.rand(n_streams, 1)
        y = target(x) + 0.5 * torch.randn(n_streams, 1)
        prediction = tree.learn(x, y, streams)
        regret += float(((prediction - y) ** 2 - (target(x) - y) ** 2).mean())
    return regret


def test_regret_per_round_decreases_with_the_horizon() -> None:
    """Appendix F's target with noise σ = 0.5: Reg_T / T shrinks (Theorem 1: Reg_T = O(√T))."""
    short, long = run_regret(200), run_regret(2000)
    assert long / 2000 < 0.6 * short / 200
    assert long < 2000 * 0.5


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu() -> None:
    cpu = ChainingTree((0.0, 1.0), depth=10, bound=8.0, n_streams=2)
    gpu = copy.deepcopy(cpu).to("cuda")
    streams = torch.tensor([0, 1, 1])
    for _ in range(20):
        x = torch.rand(3, 1, dtype=torch.float64)
        y = target(x)[:, 0]
        a = cpu.learn(x, y, streams)
        b = gpu.learn(x.cuda(), y.cuda(), streams.cuda())
        assert torch.allclose(a, b.cpu(), atol=1e-12)
    x = torch.rand(100, 1, dtype=torch.float64)
    assert torch.allclose(cpu.predict(x), gpu.predict(x.cuda()).cpu(), atol=1e-12)
    assert gpu.grad_step.data.is_cuda


@pytest.mark.parametrize("dim, depth", [(63, 1), (40, 2), (31, 3), (2, 32)])
def test_node_ids_fit_int64_up_to_the_limit(dim: int, depth: int) -> None:
    """The limit is d·(depth − 1) <= 62 (the node count is below 2^{d(depth−1)+1}); a depth-1
    tree over 63 inputs has one node (it was refused by depth·d > 62)."""
    part = DyadicPartition((0.0, 1.0), depth=depth, dim=dim)
    x = torch.rand(64, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ids = part.path(torch.cat([x, torch.ones(1, dim, dtype=torch.float64)]))
    assert int(ids.min()) >= 0 and int(ids.max()) < part.n_nodes < 2**63
    assert torch.equal(part.level(ids), torch.arange(depth).expand_as(ids))
    with pytest.raises(ValueError, match=r"d·\(depth − 1\) = .* > 62"):
        DyadicPartition((0.0, 1.0), depth=depth + 1 + 62 // dim, dim=dim)
    tree = ChainingTree((0.0, 1.0), depth=depth, dim=dim)
    assert torch.isfinite(tree.learn(x, x.mean(1))).all()


def _trained_tree(rounds: int) -> ChainingTree:
    tree = ChainingTree((0.0, 1.0), depth=4, bound=2.0)
    g = torch.Generator().manual_seed(rounds)
    for _ in range(rounds):
        tree.learn(torch.rand(4, 1, dtype=torch.float64, generator=g),
                   torch.rand(4, generator=g))
    return tree


@pytest.mark.parametrize("booster", [False, True])
@pytest.mark.parametrize("fault", ["missing", "width", "rows"])
def test_a_state_that_does_not_fit_loads_nothing(fault: str, booster: bool) -> None:
    """All or nothing (red-team findings): a state with an entry missing had swapped the other
    tree's tables in while the row count stayed; one with tables of another width loaded, and
    the next learn failed."""
    from torchboost.chaining import ChainingBooster

    model, other = _trained_tree(5), _trained_tree(20)
    if booster:
        model, other = ChainingBooster(model), ChainingBooster(other)
    prefix = "model." if booster else ""
    state = copy.deepcopy(other.state_dict())
    if fault == "missing":
        state.pop(prefix + "grad_step._extra_state")
    elif fault == "rows":  # more rows than the saved tables hold
        state[prefix + "grad_step._extra_state"] = {"n_rows": 10 ** 6}
    else:
        state[prefix + "grad_step.data"] = state[prefix + "grad_step.data"][:, :2].clone()
    before = copy.deepcopy(model.state_dict())
    x = torch.linspace(0, 1, 5, dtype=torch.float64)[:, None]
    predicted = model.predict(x.float() if booster else x)
    with pytest.raises(ValueError, match="nothing was loaded"):
        model.load_state_dict(state)
    after = model.state_dict()
    assert before.keys() == after.keys()
    for key, value in before.items():
        assert torch.equal(value, after[key]) if torch.is_tensor(value) else value == after[key]
    assert torch.equal(predicted, model.predict(x.float() if booster else x))
