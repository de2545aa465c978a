"""The Theorem-4 construction (Jung et al. 2017, Sec. 3.2): labels uniform, weak learner ``i``
votes independently from ``u_{2γ}^y``. Scripted learners read their pre-drawn vote from the
input, so the boosters' bookkeeping is tested against exact expectations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torchboost.multiclass import AdaboostOLM, ExactPotentials, OnlineMBBM, OzaBoost


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Tiny tensors: intra-op threads only contend (10× slower on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class VoteReader(nn.Module):
    """Weak learner ``column``: logits favouring the vote stored in ``x[:, column]``."""

    def __init__(self, column: int, n_classes: int) -> None:
        super().__init__()
        self.register_buffer("column", torch.tensor(column))
        self.n_classes = n_classes
        self.scale = nn.Parameter(torch.tensor(5.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        votes = x.index_select(1, self.column.view(1)).squeeze(1).long()
        return self.scale * F.one_hot(votes, self.n_classes).to(x.dtype)


def readers(n: int, k: int) -> list[nn.Module]:
    return [VoteReader(i, k) for i in range(n)]


#: frozen readers of the raw input columns (standardised columns would be other votes)
FROZEN = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.0}, "standardize": False}


def theorem_four_stream(n_examples: int, n_learners: int, k: int, edges: list[float],
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Votes ``(T, N)`` (learner ``i`` draws from ``u_{edges[i]}^y``) and labels ``(T,)``."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, k, (n_examples,), generator=g)
    edge = torch.tensor(edges).view(1, -1, 1)
    probs = (1 - edge) / k + edge * F.one_hot(y, k).view(n_examples, 1, k)
    votes = torch.multinomial(probs.reshape(-1, k), 1, generator=g).view(n_examples, n_learners)
    return votes.float(), y


def majority_error(n: int, k: int, edge: float) -> float:
    """Exact error of the majority of n votes from u_edge^0 with ties broken at random (k = 3:
    enumerate the vote counts)."""
    p, q = (1 - edge) / k + edge, (1 - edge) / k
    error = 0.0
    for a in range(n + 1):
        for b in range(n - a + 1):
            c = n - a - b
            prob = math.comb(n, a) * math.comb(n - a, b) * p**a * q**(b + c)
            best = max(a, b, c)
            error += prob * (1 - (a == best) / [a, b, c].count(best))
    return error


def test_mbbm_error_on_the_theorem_four_stream() -> None:
    """Majority of N learners voting from u_{2γ}: the mistake rate matches the exact majority
    error, stays below φ_N(0) with edge 2γ (ties counted as errors) and with edge γ (Theorem
    2's rate), and falls with N."""
    k, gamma, n_examples = 3, 0.1, 3000
    errors = []
    for n in (5, 15, 45):
        x, y = theorem_four_stream(n_examples, n, k, [2 * gamma] * n, seed=n)
        booster = OnlineMBBM(readers(n, k), k, gamma, mode="loop", **FROZEN)
        error = float((booster.learn(x, y).argmax(-1) != y).double().mean())
        expected = majority_error(n, k, 2 * gamma)
        ties_lose = ExactPotentials(k, 2 * gamma)([n], [[0] * k], [0])[0]
        bound = ExactPotentials(k, gamma)([n], [[0] * k], [0])[0]
        assert abs(error - expected) < 4 * math.sqrt(expected * (1 - expected) / n_examples)
        assert expected <= ties_lose < bound <= (k - 1) * math.exp(-gamma**2 * n / 2)
        weights = booster.diagnostics()["weight"]
        assert ((weights >= 0) & (weights <= 1)).all()
        errors.append(error)
    assert errors[0] > errors[1] > errors[2]


def test_mbbm_monte_carlo_potentials_give_the_same_votes() -> None:
    k, n = 4, 10
    x, y = theorem_four_stream(500, n, k, [0.2] * n)
    exact = OnlineMBBM(readers(n, k), k, 0.1, mode="loop", **FROZEN)
    mc = OnlineMBBM(readers(n, k), k, 0.1, mode="loop", potentials="monte_carlo",
                    mc_samples=2000, **FROZEN)
    assert torch.equal(exact.learn(x, y), mc.learn(x, y))  # same majority, same ties
    torch.testing.assert_close(mc.diagnostics()["weight"], exact.diagnostics()["weight"],
                               atol=0.03, rtol=0)


def test_olm_first_round_by_hand() -> None:
    """Alg. 2 at t = 1: all α = 0, every cost row is σ(0) = ½ off the diagonal, so learner 1's
    weight is −C(y,y)/(k−1) = ½; a right vote gets α = Π(0 + η_1 (k−1)/2) = √2 and a wrong one
    α = −η_1/2 = −√2/(k−1)."""
    k = 4
    booster = AdaboostOLM(readers(2, k), k, mode="loop", **FROZEN)
    x = torch.tensor([[2.0, 1.0]])  # learner 1 votes 2 (right), learner 2 votes 1 (wrong)
    booster.learn(x, torch.tensor([2]))
    torch.testing.assert_close(booster.alpha, torch.tensor([math.sqrt(2), -math.sqrt(2) / 3],
                                                           dtype=torch.float64))
    assert float(booster.diagnostics()["weight"][0]) == 0.5
    torch.testing.assert_close(booster.empirical_edges(), torch.tensor([1.0, -1 / 3],
                                                                       dtype=torch.float64))


@pytest.mark.parametrize("loss", ["logistic", "exponential", "squared_hinge"])
def test_olm_adapts_to_learners_of_mixed_strength(loss: str) -> None:
    """Useful learners get positive α, useless ones little; α stays in F; Hedge moves towards
    the experts that include the useful learners."""
    k, n = 3, 8
    edges = [0.0, 0.5, 0.0, 0.5, 0.0, 0.5, 0.0, 0.5]
    x, y = theorem_four_stream(1500, n, k, edges)
    booster = AdaboostOLM(readers(n, k), k, loss=loss, mode="loop", **FROZEN)
    hits = (booster.learn(x, y).argmax(-1) == y).double()
    alpha = booster.alpha
    bound = booster.loss_fn.alpha_bound(n)
    assert alpha.abs().max() <= bound + 1e-12
    good, useless = alpha[1::2], alpha[0::2]
    if loss != "exponential":  # e^{−i} steps leave late learners' α near 0 (App. D)
        assert good.min() > 0.3 * bound and useless.abs().max() < 0.5 * good.min()
    assert float(booster.hedge.probabilities()[2:].sum()) > 0.9
    assert hits[-500:].mean() > 0.7
    edges_hat = booster.empirical_edges()
    assert (edges_hat[1::2] > edges_hat[0::2] + 0.2).all()
    assert torch.allclose(booster.edges()[1::2], torch.full((4,), 0.5, dtype=torch.float64),
                          atol=0.06)


def test_olm_hedge_concentrates_on_large_experts() -> None:
    """With N equal learners from u_{2γ}, later experts (more votes) are better."""
    k, n = 3, 12
    x, y = theorem_four_stream(1000, n, k, [0.3] * n, seed=3)
    for hedge in ("random", "top"):
        booster = AdaboostOLM(readers(n, k), k, hedge=hedge, mode="loop", **FROZEN)
        booster.learn(x, y)
        assert (booster.alpha > 0).all()
        assert float(booster.hedge.probabilities()[n // 2:].sum()) > 0.9


def test_oza_lambda_recursion_by_hand() -> None:
    """Oza & Russell, Fig. 2: λ = 1 reaches learner 1; right → λ^sc += 1, ε = 0, λ ← ½;
    learner 2 wrong → λ^sw += ½, ε = 1. Vote weights log((1−ε)/ε), floored at 0."""
    booster = OzaBoost(readers(2, 3), 3, mode="loop", **FROZEN)
    booster.learn(torch.tensor([[1.0, 0.0]]), torch.tensor([1]))
    torch.testing.assert_close(booster.lambda_correct, torch.tensor([1.0, 0.0],
                                                                    dtype=torch.float64))
    torch.testing.assert_close(booster.lambda_wrong, torch.tensor([0.0, 0.5],
                                                                  dtype=torch.float64))
    torch.testing.assert_close(booster.vote_weights(2),
                               torch.tensor([math.log((1 - 1e-6) / 1e-6), 0.0],
                                            dtype=torch.float64))
    rates = booster.poisson_rates(torch.tensor([[1], [0]]), torch.tensor([1]))
    torch.testing.assert_close(rates, torch.tensor([[1.0], [0.5 / (2 * 0.5 / 1.0)]],
                                                   dtype=torch.float64))


def test_oza_poisson_weights_have_mean_lambda() -> None:
    booster = OzaBoost(readers(3, 3), 3, mode="loop", **FROZEN)
    x = torch.zeros(4000, 3)  # every learner votes 0
    z = torch.zeros(4000, dtype=torch.long)
    h = booster.learners(x).detach()
    counts = booster.importance_weights(h, booster.partial_sums(h, torch.zeros(4000, 3)), z)
    rates = booster.poisson_rates(h.argmax(-1), z)
    torch.testing.assert_close(counts.double().mean(1), rates.mean(1), atol=0.05, rtol=0)
