"""The stall monitor on streams shorter than its windows: does ``Booster.evaluate``'s held-out
judgement warn exactly where a default booster ends worse than the best constant?

    OMP_NUM_THREADS=1 python experiments/stall_short_streams.py      # ~1.5 min on one core

Default ``SGB(TwoLayerNet(d, 10), n_learners=16)`` (logistic loss on adult, squared elsewhere;
nothing else set) on the first 350, 1,000, 2,000 and 3,500 examples of abalone (bundled),
pol, kin40k, protein, keggundirected and adult (the data folder, ``--data-dir``), shuffled,
seeds 0 and 1, batch 32, one pass; then ``evaluate`` on at most 2,000 test rows. A run "loses"
when its test metric (½ MSE; adult's error rate) is no better than the best constant's (half
the test labels' variance; the minority class's share). Writes
``experiments/results/stall_short_streams/results.json``: every run, and the counts of warned
and silent runs among those that lose and those that beat the constant.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import torch

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.stall import BoostingStallWarning
from torchboost.data import dataset_path, load_abalone, load_adult, load_csv_regression
from torchboost.data.folder import add_data_dir_option

OUT = Path(__file__).resolve().parents[1] / "experiments" / "results" / "stall_short_streams"
STREAMS = ("abalone", "pol", "kin40k", "protein", "keggundirected", "adult")
ROWS = (350, 1000, 2000, 3500)


def load(name: str):
    if name == "abalone":
        return load_abalone()
    if name == "adult":
        return load_adult()
    return load_csv_regression(dataset_path(name))


def run(ds, name: str, rows: int, seed: int) -> dict:
    classifier = name == "adult"
    torch.manual_seed(seed)
    d = ds.x_train.shape[1]
    booster = SGB(lambda: TwoLayerNet(d, 10), n_learners=16,
                  loss="logistic" if classifier else "squared")
    order = torch.randperm(len(ds.y_train), generator=torch.Generator().manual_seed(seed))
    x_test, y_test = ds.x_test[:2000], ds.y_test[:2000]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for part in order[:rows].split(32):
            booster.learn(ds.x_train[part], ds.y_train[part])
        score = booster.evaluate(x_test, y_test)
    warned = [str(w.message) for w in caught if issubclass(w.category, BoostingStallWarning)]
    if classifier:
        share = float(y_test.float().mean())
        metric, constant = score["error"], min(share, 1 - share)
    else:
        metric, constant = score["loss"], 0.5 * float(y_test.double().var())
    return {"stream": name, "rows": rows, "seed": seed, "metric": metric, "constant": constant,
            "loses": metric >= constant, "warned": bool(warned), "warnings": warned}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.parse_args()
    torch.set_num_threads(1)
    runs = []
    for name in STREAMS:
        ds = load(name)
        for rows in ROWS:
            for seed in (0, 1):
                runs.append(run(ds, name, rows, seed))
                r = runs[-1]
                print(f"{name:15s} {rows:5d} seed {seed}: {r['metric']:.4g} against the "
                      f"constant's {r['constant']:.4g}, warned: {r['warned']}", flush=True)
    counts = {f"{'loses' if lose else 'beats'}, {'warned' if warn else 'silent'}":
              sum(r["loses"] == lose and r["warned"] == warn for r in runs)
              for lose in (True, False) for warn in (True, False)}
    print(counts)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"counts": counts, "runs": runs}, indent=2)
                                      + "\n")


if __name__ == "__main__":
    main()
