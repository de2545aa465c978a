"""Per-round cost of OnlineMBBM's potentials (Jung et al. 2017, Alg. 1) for k = 10, N = 100:
exact (eq. (16), memoised) against Monte Carlo (the paper's App. E estimator).

A round needs, for every learner i, the weight ``w^i(t)`` (Alg. 1 line 11; plain-argmax
learners) or the whole cost matrix (5) (cost-sensitive learners, k² potentials per learner and
learner by learner). How many *new* reduced states a round meets depends on how the learners
vote, so three vote streams are timed (labels uniform, a learner right with probability
``acc`` and otherwise uniform on the wrong labels):

* ``trained``: acc = 0.8, like learners after a burn-in;
* ``weak``: acc = 0.5;
* ``theorem4``: votes from ``u_{2γ}^y`` with γ = 0.1 (acc = 0.28), the paper's lower-bound
  construction and the worst case for caching.

"cold" is the mean over the first rounds of a fresh estimator, "warm" over rounds after a
warm-up. The last rows time whole ``OnlineMBBM.learn`` calls (B = 1, 100 two-layer nets on a
synthetic 10-class stream) and the potentials' share of them. Runs single-threaded.

    python benchmarks/mbbm_potentials.py                  # ~3 minutes on one core
    python benchmarks/mbbm_potentials.py --warmup 500 --rounds 100 --out results.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from torchboost.learners import TwoLayerNet
from torchboost.multiclass import ExactPotentials, MonteCarloPotentials, OnlineMBBM, Potentials

K, N, GAMMA = 10, 100, 0.1
STREAMS = {"trained": 0.8, "weak": 0.5, "theorem4": (1 - 2 * GAMMA) / K + 2 * GAMMA}


def vote_rounds(accuracy: float, rounds: int, seed: int) -> list[tuple[np.ndarray, int]]:
    """``(s^0..s^{N−1}, y)`` per round: the votes before each learner."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        y = int(rng.integers(K))
        probs = np.full(K, (1 - accuracy) / (K - 1))
        probs[y] = accuracy
        votes = rng.choice(K, size=N, p=probs)
        before = np.zeros((N, K), dtype=np.int64)
        before[1:] = np.cumsum(np.eye(K, dtype=np.int64)[votes[:-1]], axis=0)
        out.append((before, y))
    return out


def weights_round(phi: Potentials, before: np.ndarray, y: int) -> None:
    """Alg. 1 line 11 for all N learners of one round (one vectorised call)."""
    phi.weight(N - 1 - np.arange(N), before, np.full(N, y))


def cost_round(phi: Potentials, before: np.ndarray, y: int) -> None:
    """Cost matrices (5) learner by learner, as cost-sensitive learners need them."""
    rows = np.arange(K)
    for i in range(N):
        phi.shifted(np.full(K, N - 1 - i), np.repeat(before[i:i + 1], K, axis=0), rows)


Step = Callable[[Potentials, np.ndarray, int], None]


def time_rounds(step: Step, phi: Potentials, rounds: list[tuple[np.ndarray, int]]) -> float:
    start = time.perf_counter()
    for before, y in rounds:
        step(phi, before, y)
    return (time.perf_counter() - start) / len(rounds) * 1e3


def estimators() -> dict[str, Callable[[], Potentials]]:
    return {
        "exact": lambda: ExactPotentials(K, GAMMA),
        "monte_carlo_100": lambda: MonteCarloPotentials(K, GAMMA, n_samples=100),
        "monte_carlo_1000": lambda: MonteCarloPotentials(K, GAMMA, n_samples=1000),
    }


def potential_rows(warmup: int, measured: int, cost_rounds: int) -> list[dict]:
    rows = []
    for stream, accuracy in STREAMS.items():
        data = vote_rounds(accuracy, warmup + measured, seed=0)
        for name, make in estimators().items():
            phi = make()
            cold = time_rounds(weights_round, phi, data[:measured])
            time_rounds(weights_round, phi, data[measured:warmup])
            warm = time_rounds(weights_round, phi, data[warmup:])
            cost = time_rounds(cost_round, phi, data[warmup:warmup + cost_rounds])
            rows.append({"stream": stream, "learner_accuracy": round(accuracy, 3),
                         "potentials": name, "weights_cold_ms": cold, "weights_warm_ms": warm,
                         "cost_matrices_warm_ms": cost, "cached_states": len(phi)})
            print(f"  {stream:9s} {name:17s} cold {cold:8.2f}  warm {warm:7.2f}  "
                  f"cost-sensitive {cost:7.2f} ms/round  ({len(phi)} states)", flush=True)
    return rows


def learn_rows(rounds: int) -> list[dict]:
    """Whole OnlineMBBM.learn rounds with neural learners, potentials time included."""
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(K, 20, generator=g) * 1.5
    y = torch.randint(0, K, (rounds,), generator=g)
    x = centres[y] + torch.randn(rounds, 20, generator=g)
    rows = []
    for name, potentials in (("exact", "exact"), ("monte_carlo_100", "monte_carlo")):
        torch.manual_seed(0)
        booster = OnlineMBBM(lambda: TwoLayerNet(20, 8, K, activation="tanh"), K, GAMMA,
                             n_learners=N, potentials=potentials, mc_samples=100,
                             optimizer_kwargs={"lr": 0.01})
        phi = booster.potentials
        spent = [0.0]
        weight = phi.weight

        def timed(*args, _weight=weight, _spent=spent):
            start = time.perf_counter()
            out = _weight(*args)
            _spent[0] += time.perf_counter() - start
            return out

        phi.weight = timed
        times, hits = [], []
        for t in range(rounds):
            start = time.perf_counter()
            hits.append(int(booster.learn(x[t:t + 1], y[t:t + 1]).argmax(-1) == y[t]))
            times.append(time.perf_counter() - start)
            if t == rounds // 2:
                spent[0] = 0.0
        tail = times[rounds // 2 + 1:]
        rows.append({"potentials": name, "learn_ms_per_round": 1e3 * float(np.mean(tail)),
                     "potentials_ms_per_round": 1e3 * spent[0] / len(tail),
                     "prequential_accuracy_second_half": float(np.mean(hits[rounds // 2:]))})
        print(f"  learn     {name:17s} {rows[-1]['learn_ms_per_round']:.2f} ms/round, "
              f"potentials {rows[-1]['potentials_ms_per_round']:.2f} ms "
              f"(accuracy {rows[-1]['prequential_accuracy_second_half']:.3f})", flush=True)
    return rows


def table(rows: list[dict], learn: list[dict]) -> str:
    lines = ["| stream (acc) | potentials | weights, cold | weights, warm | cost matrices, warm "
             "| states |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['stream']} ({r['learner_accuracy']}) | {r['potentials']} | "
                     f"{r['weights_cold_ms']:.2f} ms | {r['weights_warm_ms']:.2f} ms | "
                     f"{r['cost_matrices_warm_ms']:.2f} ms | {r['cached_states']} |")
    lines += ["", "| OnlineMBBM.learn (B = 1) | ms / round | of which potentials |",
              "|---|---|---|"]
    for r in learn:
        lines.append(f"| {r['potentials']} | {r['learn_ms_per_round']:.2f} | "
                     f"{r['potentials_ms_per_round']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--warmup", type=int, default=2000, help="rounds before 'warm' timing")
    parser.add_argument("--rounds", type=int, default=200, help="rounds timed (cold and warm)")
    parser.add_argument("--cost-rounds", type=int, default=20,
                        help="warm rounds timed for cost-sensitive learners")
    parser.add_argument("--learn-rounds", type=int, default=2000)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).with_name("mbbm_potentials.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"OnlineMBBM potentials, k={K}, N={N}, gamma={GAMMA}, CPU single thread")
    rows = potential_rows(args.warmup, args.rounds, args.cost_rounds)
    learn = learn_rows(args.learn_rounds)
    print()
    print(table(rows, learn))
    result = {"k": K, "n_learners": N, "gamma": GAMMA, "warmup_rounds": args.warmup,
              "timed_rounds": args.rounds, "machine": platform.processor() or platform.machine(),
              "torch": torch.__version__, "potentials": rows, "learn": learn}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
