"""Appendix F of Liautaud et al.: regret of the chaining tree (Alg. 1) and LocAdaBoost (Alg. 2).

Setting: ``y_t = f(x_t) + ε_t``, ``f(x) = sin(10x) + cos(5x) + 5`` on ``X = [0, 1]`` (``L = 15``),
``ε_t ~ N(0, 0.5²)``, ``x_t ~ U(X)``; the regret is against ``f`` itself,
``Reg_T = Σ ℓ(f̂_t(x_t), y_t) − ℓ(f(x_t), y_t)``, with the paper's losses ``(ŷ − y)²`` and
``|ŷ − y|`` (the learners minimise torchboost's ``½(ŷ − y)²``, whose gradient is half as large).

* Fig. 4: regret vs ``T ∈ {10^2, 10^2.5, ..., 10^5}`` for both losses, mean over seeds, with the
  fitted log-log slopes next to the theory (CT ≈ 1/2; LocAdaBoost ≈ 1/3 square, ≈ 1/2 absolute).
* Fig. 5: regret vs ``L = 15 l`` at ``T = 2000`` for ``f_l(x) = f(lx)``, 20 equally spaced
  ``l ∈ [2^−6, 2^5]``, with log-log slopes fitted for ``1 ≤ l`` and ``L√T < BT`` (CT ∝ L;
  LocAdaBoost ∝ L^{2/3} square, L^{1/2} absolute; all saturate at ``≈ BT``).
* ``d = 2, 3``: chaining tree, square loss, ``f_d(x) = mean_j(sin(10x_j) + cos(5x_j)) + 5``; the
  slope is compared with ``1 − 1/d`` (Theorem 1, ``α = 1``).
* Throughput on CPU of models built for ``T = 10^5``.

The seeds of one configuration run in lockstep as independent streams of one model
(:mod:`torchboost.chaining.rounds`): one batch = one round of every seed, which is exactly the
paper's protocol per seed. Run ``python experiments/chaining_regret.py`` (full, < 15 min on two
cores) or with ``--quick`` (smoke run, about a minute). PNG figures and a JSON of every plotted
number go to ``experiments/results/chaining_regret/`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import Tensor

from torchboost.chaining import ChainingTree, KTCoinBetting, LocAdaBoost

BOUND = 8.0          # B: f ∈ [3, 7]; LocAdaBoost clips its experts to [−B, B]
NOISE = 0.5          # σ
LIPSCHITZ = 15.0     # sup |f'|
#: G per loss: the gradient of ½(ŷ − y)² is clipped at 4 (8σ; the always-valid 2B = 16 is four
#: times too conservative and slows coin betting down), the absolute loss is 1-Lipschitz.
GRADIENT_BOUND = {"squared": 4.0, "absolute": 1.0}
INITIAL_WEALTH = BOUND  # ε₀ at a root, in the units of θ
METHODS = ("chaining_tree", "loc_adaboost")
THEORY_T = {("chaining_tree", "squared"): 0.5, ("chaining_tree", "absolute"): 0.5,
            ("loc_adaboost", "squared"): 1 / 3, ("loc_adaboost", "absolute"): 0.5}
THEORY_L = {("chaining_tree", "squared"): 1.0, ("chaining_tree", "absolute"): 1.0,
            ("loc_adaboost", "squared"): 2 / 3, ("loc_adaboost", "absolute"): 0.5}


@dataclass
class Plan:
    """What one run computes."""

    horizons: list[int]
    seeds: int
    seeds_large: int       # seeds for T ≥ large_from (lockstep streams are cheap, not free)
    large_from: int
    l_values: list[float]
    l_horizon: int
    l_seeds: int
    dim_horizons: list[int]
    dim_seeds: int
    throughput_rounds: int


FULL = Plan(horizons=[round(10 ** (k / 2)) for k in range(4, 11)], seeds=10, seeds_large=4,
            large_from=10_000, l_values=np.linspace(2**-6, 2**5, 20).tolist(), l_horizon=2000,
            l_seeds=5, dim_horizons=[round(10 ** (k / 2)) for k in range(4, 10)], dim_seeds=5,
            throughput_rounds=3000)
QUICK = Plan(horizons=[100, 316, 1000, 3162], seeds=3, seeds_large=3, large_from=10**9,
             l_values=np.linspace(2**-6, 2**5, 8).tolist(), l_horizon=1000, l_seeds=2,
             dim_horizons=[100, 316, 1000, 3162], dim_seeds=2, throughput_rounds=300)


def target(x: Tensor, scale: Tensor | float = 1.0) -> Tensor:
    """``f_l(x) = mean_j(sin(10 l x_j) + cos(5 l x_j)) + 5``, ``(B, 1)``."""
    z = x * scale
    return (torch.sin(10 * z) + torch.cos(5 * z)).mean(-1, keepdim=True) + 5


def paper_loss(loss: str, prediction: Tensor, y: Tensor) -> Tensor:
    return (prediction - y).square() if loss == "squared" else (prediction - y).abs()


def build(method: str, loss: str, horizon: int, dim: int, n_streams: int
          ) -> ChainingTree | LocAdaBoost:
    """The model with the settings above (KT coin betting, FTL roots for LocAdaBoost)."""
    grad_step = KTCoinBetting(GRADIENT_BOUND[loss], initial_wealth=INITIAL_WEALTH)
    cls = ChainingTree if method == "chaining_tree" else LocAdaBoost
    return cls(([0.0] * dim, [1.0] * dim), horizon, loss=loss, bound=BOUND, grad_step=grad_step,
               n_streams=n_streams)


def run_streams(method: str, loss: str, horizon: int, dim: int, seeds: int,
                scales: Tensor | None = None, seed: int = 0) -> tuple[Tensor, float]:
    """Regret after ``horizon`` rounds of every stream (``seeds`` per target scale) and the
    wall time; all streams run in lockstep."""
    scales = torch.ones(1, dtype=torch.float64) if scales is None else scales
    n_streams = seeds * scales.numel()
    scale = scales.repeat_interleave(seeds)[:, None]
    model = build(method, loss, horizon, dim, n_streams)
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(horizon, n_streams, dim, generator=generator, dtype=torch.float64)
    noise = NOISE * torch.randn(horizon, n_streams, 1, generator=generator, dtype=torch.float64)
    streams = torch.arange(n_streams)
    regret = torch.zeros(n_streams, dtype=torch.float64)
    start = time.perf_counter()
    for t in range(horizon):
        clean = target(x[t], scale)
        y = clean + noise[t]
        prediction = model.learn(x[t], y, streams)
        regret += (paper_loss(loss, prediction, y) - paper_loss(loss, clean, y))[:, 0]
    return regret, time.perf_counter() - start


def fit_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (positive ``y`` only)."""
    pairs = [(math.log(a), math.log(b)) for a, b in zip(xs, ys, strict=True) if b > 0]
    if len(pairs) < 2:
        return math.nan
    return float(np.polyfit(*zip(*pairs, strict=True), 1)[0])


def regret_vs_horizon(plan: Plan, log: Callable[[str], None]) -> dict:
    out: dict = {}
    for loss in ("squared", "absolute"):
        for method in METHODS:
            rows = []
            for horizon in plan.horizons:
                seeds = plan.seeds_large if horizon >= plan.large_from else plan.seeds
                regret, seconds = run_streams(method, loss, horizon, 1, seeds, seed=horizon)
                rows.append({"T": horizon, "seeds": seeds, "mean": float(regret.mean()),
                             "std": float(regret.std()) if seeds > 1 else 0.0,
                             "per_seed": regret.tolist(), "seconds": seconds,
                             "points_per_second": seeds * horizon / seconds})
                log(f"  {loss:8s} {method:13s} T={horizon:6d} seeds={seeds:2d} "
                    f"regret={rows[-1]['mean']:9.1f} ({seconds:5.1f}s)")
            slope = fit_slope([r["T"] for r in rows], [r["mean"] for r in rows])
            tail = fit_slope([r["T"] for r in rows[-3:]], [r["mean"] for r in rows[-3:]])
            out[f"{method}/{loss}"] = {"rows": rows, "slope": slope, "slope_last_3_T": tail,
                                       "theory": THEORY_T[(method, loss)]}
            log(f"  -> {method}/{loss}: slope {slope:.3f}, over the 3 largest T {tail:.3f} "
                f"(theory {THEORY_T[(method, loss)]:.3f})")
    return out


def regret_vs_lipschitz(plan: Plan, log: Callable[[str], None]) -> dict:
    out: dict = {}
    scales = torch.tensor(plan.l_values, dtype=torch.float64)
    lipschitz = (LIPSCHITZ * scales).tolist()
    for loss in ("squared", "absolute"):
        for method in METHODS:
            regret, seconds = run_streams(method, loss, plan.l_horizon, 1, plan.l_seeds, scales,
                                          seed=7)
            mean = regret.reshape(len(lipschitz), plan.l_seeds).mean(1).tolist()
            # Fit where the rates apply: from l = 1 (below, the L-free cost of learning the
            # level 5 dominates) to saturation (L √T reaches B T).
            fitted = [i for i, value in enumerate(lipschitz) if value >= LIPSCHITZ
                      and value * math.sqrt(plan.l_horizon) < BOUND * plan.l_horizon]
            slope = fit_slope([lipschitz[i] for i in fitted], [mean[i] for i in fitted])
            fit_range = [lipschitz[fitted[0]], lipschitz[fitted[-1]]] if fitted else []
            out[f"{method}/{loss}"] = {"L": lipschitz, "mean": mean, "slope": slope,
                                       "slope_fit_L_range": fit_range,
                                       "theory": THEORY_L[(method, loss)], "seconds": seconds}
            log(f"  {loss:8s} {method:13s} regret vs L: slope {slope:.3f} (theory "
                f"{THEORY_L[(method, loss)]:.3f}, {seconds:.1f}s)")
    return out


def regret_vs_dimension(plan: Plan, curve_d1: dict, log: Callable[[str], None]) -> dict:
    out = {"1": {"T": [r["T"] for r in curve_d1["rows"]], "mean": [r["mean"] for r in
                                                                   curve_d1["rows"]],
                 "slope": curve_d1["slope"], "theory": 0.5}}
    for dim in (2, 3):
        means, seconds = [], 0.0
        for horizon in plan.dim_horizons:
            regret, took = run_streams("chaining_tree", "squared", horizon, dim, plan.dim_seeds,
                                       seed=horizon + dim)
            means.append(float(regret.mean()))
            seconds += took
        slope = fit_slope(plan.dim_horizons, means)
        out[str(dim)] = {"T": plan.dim_horizons, "mean": means, "slope": slope,
                         "theory": 1 - 1 / dim, "seeds": plan.dim_seeds, "seconds": seconds}
        log(f"  d={dim}: slope {slope:.3f} (theory 1 - 1/d = {1 - 1 / dim:.3f}, {seconds:.1f}s)")
    return out


def throughput(plan: Plan, log: Callable[[str], None]) -> dict:
    """Points per second on CPU for models built for T = 10^5 (squared loss, d = 1)."""
    out = {}
    generator = torch.Generator().manual_seed(3)
    for method in METHODS:
        model = build(method, "squared", 10**5, 1, 1)
        x = torch.rand(plan.throughput_rounds, 1, 1, generator=generator, dtype=torch.float64)
        y = target(x[:, 0])[:, :, None] + NOISE * torch.randn(x.shape, generator=generator,
                                                              dtype=torch.float64)
        start = time.perf_counter()
        for t in range(plan.throughput_rounds):
            model.learn(x[t], y[t])
        sequential = plan.throughput_rounds / (time.perf_counter() - start)
        batch = build(method, "squared", 10**5, 1, 1)
        points = torch.rand(10**5 if plan is FULL else 10**4, 1, generator=generator,
                            dtype=torch.float64)
        labels = target(points)[:, 0]
        start = time.perf_counter()
        for chunk in range(0, points.shape[0], 1000):
            batch.learn(points[chunk:chunk + 1000], labels[chunk:chunk + 1000])
        batched = points.shape[0] / (time.perf_counter() - start)
        out[method] = {"sequential_rounds_per_second": sequential,
                       "batch_of_1000_points_per_second": batched}
        log(f"  {method}: {sequential:7.0f} rounds/s one point per round, {batched:9.0f} "
            "points/s with one round per batch of 1000")
    return out


def plot(results: dict, folder: Path) -> None:
    """Figures 4 and 5 of the paper (Fig. 5 with a linear L axis, as there) and the dimension
    study, with dotted theory rates anchored at the smallest horizon (resp. at the first
    Lipschitz constant of the slope fit)."""
    styles = {"chaining_tree": ("tab:blue", "Chaining Tree - Alg. 1"),
              "loc_adaboost": ("tab:red", "LocAdaBoost - Alg. 2")}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, loss in zip(axes, ("squared", "absolute"), strict=True):
        for method, (color, label) in styles.items():
            curve = results["regret_vs_T"][f"{method}/{loss}"]
            horizons = np.array([r["T"] for r in curve["rows"]], dtype=float)
            means = np.array([r["mean"] for r in curve["rows"]])
            ax.loglog(horizons, means, "o-", color=color,
                      label=f"{label} (slope {curve['slope']:.2f})")
            rate = horizons ** curve["theory"]
            ax.loglog(horizons, means[0] * rate / rate[0], ":", color=color,
                      label=f"T^{curve['theory']:.2f} (theory)")
        ax.set(xlabel="Horizon T", ylabel="Reg_T(f)",
               title=f"{'(ŷ − y)²' if loss == 'squared' else '|ŷ − y|'} loss")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "regret_vs_T.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, loss in zip(axes, ("squared", "absolute"), strict=True):
        for method, (color, label) in styles.items():
            curve = results["regret_vs_L"][f"{method}/{loss}"]
            lipschitz, means = np.array(curve["L"]), np.array(curve["mean"])
            ax.semilogy(lipschitz, means, "o-", color=color,
                        label=f"{label} (slope {curve['slope']:.2f})")
            if curve["slope_fit_L_range"]:  # theory anchored where the fit starts
                anchor = int(np.searchsorted(lipschitz, curve["slope_fit_L_range"][0]))
                rate = (lipschitz / lipschitz[anchor]) ** curve["theory"] * means[anchor]
                cap = BOUND * results["settings"]["l_horizon"]
                ax.semilogy(lipschitz[anchor:], np.minimum(rate[anchor:], cap), ":",
                            color=color, label=f"L^{curve['theory']:.2f} ∧ BT (theory)")
        ax.set(xlabel="L = 15 l", ylabel="Reg_T(f)",
               title=f"T = {results['settings']['l_horizon']}, "
                     f"{'(ŷ − y)²' if loss == 'squared' else '|ŷ − y|'} loss")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "regret_vs_L.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for dim, curve in results["dimensions"].items():
        horizons, means = np.array(curve["T"], dtype=float), np.array(curve["mean"])
        line = ax.loglog(horizons, means, "o-", label=f"d = {dim} (slope {curve['slope']:.2f}, "
                                                      f"theory {curve['theory']:.2f})")
        rate = horizons ** curve["theory"]
        ax.loglog(horizons, means[0] * rate / rate[0], ":", color=line[0].get_color())
    ax.set(xlabel="Horizon T", ylabel="Reg_T(f)", title="Chaining tree, (ŷ − y)² loss")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "regret_vs_T_by_dimension.png", dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="small smoke run (about a minute)")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "chaining_regret")
    args = parser.parse_args()
    # Each round is a few hundred small tensor ops: one intra-op thread is the fastest.
    torch.set_num_threads(1)
    plan = QUICK if args.quick else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", flush=True)

    results: dict = {"settings": {
        "mode": "quick" if args.quick else "full", "B": BOUND, "sigma": NOISE,
        "L": LIPSCHITZ, "gradient_bound_G": GRADIENT_BOUND, "initial_wealth": INITIAL_WEALTH,
        "grad_step": "KT coin betting per node", "loc_adaboost_roots": "ftl (Appendix F)",
        "regret_loss": "paper's: (y_hat - y)^2 and |y_hat - y|; learners minimise "
                       "torchboost's 1/2 (y_hat - y)^2 and |y_hat - y|",
        "depth": "ceil(log2(T) / d) for the CT, LocAdaBoost's core tree and its trees' "
                 "absolute depth",
        "seeds": plan.seeds, "seeds_for_T_from": {str(plan.large_from): plan.seeds_large},
        "l_values": plan.l_values, "l_spacing": "linear (equally spaced)",
        "l_horizon": plan.l_horizon, "l_seeds": plan.l_seeds, "dim_seeds": plan.dim_seeds,
        "torch_threads": 1}}
    log("regret vs T (Fig. 4)")
    results["regret_vs_T"] = regret_vs_horizon(plan, log)
    log("regret vs L (Fig. 5)")
    results["regret_vs_L"] = regret_vs_lipschitz(plan, log)
    log("d = 2, 3 (chaining tree, squared loss)")
    results["dimensions"] = regret_vs_dimension(
        plan, results["regret_vs_T"]["chaining_tree/squared"], log)
    log("throughput (models for T = 1e5, CPU)")
    results["throughput"] = throughput(plan, log)
    largest = {key: curve["rows"][-1] for key, curve in results["regret_vs_T"].items()}
    results["throughput"]["lockstep_streams_largest_T"] = {
        key: {"T": row["T"], "streams": row["seeds"], "points_per_second":
              row["points_per_second"]} for key, row in largest.items()}
    results["total_seconds"] = time.perf_counter() - start
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    plot(results, args.out)
    log(f"wrote {args.out}/results.json and 3 figures")


if __name__ == "__main__":
    main()
