"""ResidualSGB with more learners: the test error, and whether the stall monitor warns.

    OMP_NUM_THREADS=1 python experiments/residual_sgb_learners.py      # ~4 min on 2 cores

SGB's Alg. 2 (:class:`~torchboost.ResidualSGB`, L1 loss, every default: steps ``η_i = 1/i``, no
domain, standardisation on) on the repository's regression streams (the loader, rows, seeds,
orders and learners of ``horizon_free.py``; batch 32) with N = 8, 16, 32 and 64 learners, three
passes, three seeds: the test mean absolute error after one and three passes, and the
``BoostingStallWarning`` messages each run raised (the monitor judges ResidualSGB's averaged
anytime predictions). Learner ``i``'s target carries the residuals of every learner before it
(Alg. 2 lines 12-14), so with many learners an imperfect stream of learners can carry them
away. Writes ``experiments/results/residual_sgb_learners/results.json`` (every run) and
``summary.json`` (per stream and N: the mean error over seeds and the runs that warned).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults import load
from horizon_free import stream_passes

from torchboost import ResidualSGB
from torchboost.boosters.stall import BoostingStallWarning

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "residual_sgb_learners"
STREAMS = ("abalone", "keggundirected", "kin40k", "pol", "protein")
NS = (8, 16, 32, 64)
PASSES = (1, 3)


def run(stream: str, n: int, seed: int, max_train: int = 8000) -> dict[str, Any]:
    """One default ResidualSGB of ``n`` learners: the test MAE after each of :data:`PASSES`
    and the stall warnings it raised."""
    torch.set_num_threads(1)
    ds, _, learner, _ = load(stream, max_train)
    torch.manual_seed(seed)
    booster = ResidualSGB(learner.factory(ds, 1), "absolute", n_learners=n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", BoostingStallWarning)
        row = stream_passes(booster, ds, max(PASSES), list(PASSES), 32, seed, power=1)
    return {"stream": stream, "n": n, "seed": seed, **row,
            "warnings": [str(w.message) for w in caught
                         if issubclass(w.category, BoostingStallWarning)]}


def _job(args: tuple[str, int, int]) -> dict[str, Any]:
    return run(*args)


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per ``stream/N``: the mean MAE after each pass and how many runs warned."""
    out: dict[str, Any] = {}
    for stream in sorted({r["stream"] for r in results}):
        for n in sorted({r["n"] for r in results}):
            rows = [r for r in results if r["stream"] == stream and r["n"] == n]
            if rows:
                out[f"{stream}/{n}"] = {
                    **{f"pass{p}": statistics.fmean(r[f"pass{p}"] for r in rows)
                       for p in PASSES},
                    "runs": len(rows), "warned": sum(bool(r["warnings"]) for r in rows)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = sorted(((s, n, seed) for s in STREAMS for n in NS for seed in range(args.seeds)),
                  key=lambda job: -job[1])
    with multiprocessing.Pool(args.workers) as pool:
        results = pool.map(_job, jobs)
    summary = summarize(results)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    for key, cell in summary.items():
        print(f"{key:20s} MAE " + " / ".join(f"{cell[f'pass{p}']:.4g}" for p in PASSES)
              + f"  warned {cell['warned']}/{cell['runs']}")


if __name__ == "__main__":
    main()
