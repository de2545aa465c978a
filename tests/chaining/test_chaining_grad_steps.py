"""Per-node grad-steps (Assumption 1): KT coin betting and projected OGD, and their lazy rows."""

from __future__ import annotations

import math

import pytest
import torch

from torchboost.chaining import KTCoinBetting, LazyTable, ProjectedOGD


def run(step, grads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed grads (T, n) to n nodes; return θ played (T, n) and the wealth after each round."""
    n = grads.shape[1]
    keys, one = torch.arange(n), torch.ones(n, dtype=torch.float64)
    played, wealth = [], []
    for g in grads:
        played.append(step.theta(keys))
        step.step(keys, g, initial=0 * one, volume=one, diameter=one)
        if isinstance(step, KTCoinBetting):
            wealth.append(step.column("wealth")[step.find(keys)].clone())
    return torch.stack(played), torch.stack(wealth) if wealth else torch.empty(0)


def test_kt_wealth_never_negative_even_against_an_adversary() -> None:
    """W ← W(1 + cβ) with |c| ≤ 1 and |β| ≤ τ/(τ + 1): the wealth stays ≥ 0 (Orabona & Pál 2016)
    for random, extreme, out-of-bound and adversarial (always against the bet) gradients."""
    G, rounds = 2.0, 3000
    kt = KTCoinBetting(G, initial_wealth=1.0)
    keys, one = torch.arange(4), torch.ones(4, dtype=torch.float64)
    for t in range(rounds):
        bet = kt.theta(keys)
        adversarial = G * torch.where(bet >= 0, 1.0, -1.0)  # coin −sign(β): lose every bet
        periodic = torch.tensor((-1.0) ** (t // 7) * G)
        grads = torch.stack([adversarial[0], G * torch.randn(()).sign(),
                             10 * G * torch.randn(()), periodic]).double()
        kt.step(keys, grads, initial=0 * one, volume=one, diameter=one)
        assert bool((kt.column("wealth") >= 0).all())
    assert float(kt.column("count").min()) == rounds


def test_kt_regret_is_parameter_free() -> None:
    """Against any comparator u, Σ g_t(θ_t − u) ≤ G(ε₀ + |u|√(τ ln(1 + 4|u|τ²/ε₀))) + slack:
    the KT bound (Orabona & Pál 2016, Cor. 5) — Assumption 1 with logarithmic C₁."""
    G, rounds = 1.0, 2000
    noise = torch.randn(rounds, 3, dtype=torch.float64)
    grads = torch.stack([0.3 + 0.1 * noise[:, 0], -0.5 + 0.3 * noise[:, 1],
                         0.8 * noise[:, 2].sign()], 1).clamp(-G, G)
    played, _ = run(KTCoinBetting(G, initial_wealth=1.0), grads)
    for u in (-10.0, -3.0, 0.0, 0.5, 2.0, 10.0):
        regret = (grads * (played - u)).sum(0)
        bound = G * (1.0 + abs(u) * math.sqrt(rounds * math.log(1 + 4 * abs(u) * rounds**2)))
        assert bool((regret <= bound).all()), (u, regret)


def test_zero_gradients_are_not_rounds() -> None:
    """T_n = {t : g_{n,t} ≠ 0}: a zero gradient neither creates a row nor counts a round."""
    kt = KTCoinBetting(1.0)
    one = torch.ones(3, dtype=torch.float64)
    kt.step(torch.tensor([5, 6, 7]), torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64),
            initial=0 * one, volume=one, diameter=one)
    assert kt.keys().tolist() == [5]
    kt.step(torch.tensor([5, 5]), torch.tensor([0.25, -0.25], dtype=torch.float64),
            initial=one[:2], volume=one[:2], diameter=one[:2])
    assert kt.column("count").tolist() == [1.0]


def test_initial_wealth_and_centre_follow_the_node() -> None:
    kt = KTCoinBetting(1.0, initial_wealth=2.0)
    initial = torch.tensor([3.0, 0.0], dtype=torch.float64)
    volume = torch.tensor([1.0, 0.25], dtype=torch.float64)
    kt.step(torch.tensor([0, 9]), torch.tensor([-1.0, -1.0], dtype=torch.float64), initial,
            volume, torch.ones(2, dtype=torch.float64))
    assert kt.column("wealth").tolist() == [2.0, 0.5]
    assert kt.theta(torch.tensor([0, 9, 4]), initial=-1.0).tolist() == [3.0 + 1.0, 0.25, -1.0]


def test_projected_ogd_step_sizes_and_radii() -> None:
    """η_τ = D/(G√τ); D = B at a root and L(|X_n|/2)^α below; projection on θ₁ ± D."""
    ogd = ProjectedOGD(gradient_bound=2.0, lipschitz=4.0, root_radius=1.0, smoothness=0.5)
    keys = torch.tensor([0, 1])
    initial = torch.zeros(2, dtype=torch.float64)
    volume = torch.tensor([1.0, 0.5], dtype=torch.float64)
    diameter = torch.tensor([1.0, 0.5], dtype=torch.float64)
    grads = torch.tensor([-1.0, 1.0], dtype=torch.float64)
    ogd.step(keys, grads, initial, volume, diameter)
    assert ogd.column("radius").tolist() == [1.0, 2.0]
    assert ogd.theta(keys).tolist() == [0.5, -1.0]
    for _ in range(20):
        ogd.step(keys, grads, initial, volume, diameter)
    assert ogd.theta(keys).tolist() == [1.0, -2.0]


def test_bad_constructor_arguments() -> None:
    for make in (lambda: KTCoinBetting(0.0), lambda: KTCoinBetting(1.0, initial_wealth=0.0),
                 lambda: KTCoinBetting(math.inf), lambda: ProjectedOGD(1.0, 0.0, 1.0),
                 lambda: ProjectedOGD(1.0, 1.0, 1.0, smoothness=1.5)):
        with pytest.raises(ValueError):
            make()


def test_lazy_table_hashing_growth_and_state() -> None:
    table = LazyTable(["a", "b"])
    keys = torch.randperm(10**6)[:5000] * 7919 + 10**15  # sparse keys, many collisions per slot
    rows = table.insert(keys[:3000])
    assert rows.tolist() == list(range(3000))
    table.column("a")[rows] = keys[:3000].double()
    rows, new = table.find_or_insert(keys)
    assert int(new.sum()) == 2000 and len(table) == 5000
    assert torch.equal(table.keys()[rows], keys)
    assert table.find(torch.tensor([-5 + 10**15, 3])).tolist() == [-1, -1]
    assert table.hash_keys.numel() <= 16 * len(table)
    fresh = LazyTable(["a", "b"])
    fresh.load_state_dict(table.state_dict())
    assert torch.equal(fresh.find(keys), table.find(keys))
    assert torch.equal(fresh.column("a"), table.column("a"))
