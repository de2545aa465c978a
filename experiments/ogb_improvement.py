"""Relative improvement in squared loss of OGB (Alg. 1) and ConvexHullOGB (Alg. 2) over their
base learner — the analogue of the OGB paper's results table (Beygelzimer et al. 2015, Sec. 5).

    python experiments/ogb_improvement.py          # the four regression streams of the data folder
    python experiments/ogb_improvement.py --rows 4000   # a smoke run
    python experiments/ogb_improvement.py --kinds stumps   # rerun one kind, merge into the JSON

Protocol of the paper: progressive validation (predict, then train) in one pass; the learning
rate (and N for the boosters) is tuned on the first half of each stream, and the progressive
squared loss on the second half is reported. Base learners: linear (SGD-like, here Adam),
regression stumps (:class:`~torchboost.StumpRegressor`: one regressor per feature, each trained
on its own loss, the best non-zero feature predicts) and two-layer nets with 10 sigmoid hidden
units; the boosters wrap them with ``D·tanh`` so outputs are bounded by ``D = 1`` (the stumps
bound each feature's output themselves, so that every feature's gradient is exact) and labels are
scaled into ``[−1, 1]`` (from the first half). The learners are shown the linear losses of the
analysis (``objective="linear"``; the boosters' default is Sec. 4.1's greedy fitting, see
``experiments/ogb_defaults.py``).
The learners train with plain Adam (the stored results); ``--optimizer default`` runs the same
protocol with the library's default optimizer (schedule-free AdamW at the default rule, no rate
to tune) instead. Writes ``ogb_improvement.json`` and ``ogb_improvement.png`` (``_default`` in
the names for the default optimizer) to ``experiments/results/ogb_improvement/``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from torchboost import OGB, Booster, ConvexHullOGB, SingleLearner, StumpRegressor, TwoLayerNet
from torchboost.data import DataStream, load_csv_regression
from torchboost.data.folder import add_data_dir_option, dataset_path
from torchboost.harness.plotting import save_figure

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "ogb_improvement"
STREAMS = ("pol", "kin40k", "protein", "keggundirected")
KINDS = ("linear", "stumps", "net")
METHODS = ("OGB", "ConvexHullOGB")


def progressive_loss(booster: Booster, x: Tensor, y: Tensor, batch: int = 32) -> float:
    total = 0.0
    for xb, yb in DataStream(x, y, batch_size=batch, shuffle=False, standardize=None):
        total += float(booster.loss.value(booster.learn(xb, yb), yb.view(-1, 1)).sum())
    return total / len(x)


def learners(kind: str, d: int, boosted: bool) -> Callable[[], nn.Module]:
    """The base learner; stumps need their learner loss's curvature: 1 for the base learner's
    ``½(y − h)²``, 0 for OGB's linear losses (inside a booster they are bounded by ``D = 1``)."""
    if kind == "linear":
        return lambda: nn.Linear(d, 1)
    if kind == "stumps":
        return lambda: StumpRegressor(d, curvature=0.0 if boosted else 1.0,
                                      bound=1.0 if boosted else None)
    return lambda: TwoLayerNet(d, 10, 1, "sigmoid")


#: ``--optimizer``: the learning rates tuned for each optimizer; ``adam`` is the paper's (plain
#: Adam, the stored ``ogb_improvement.json``), ``default`` the library's (schedule-free at the
#: default rule, no rate to tune: ``ogb_improvement_default.json``)
RATES: dict[str, tuple[float | None, ...]] = {"adam": (1e-3, 1e-2), "default": (None,)}


def build(method: str, kind: str, d: int, lr: float | None, n: int) -> Booster:
    """``method`` over ``kind`` learners, labels scaled by hand (``standardize=False``): plain
    Adam at ``lr``, or the library's default optimizer when ``lr`` is None."""
    torch.manual_seed(0)
    options: dict = {"standardize": False} if lr is None else {
        "optimizer": torch.optim.Adam, "optimizer_kwargs": {"lr": lr}, "standardize": False}
    if method == "base":
        return SingleLearner(learners(kind, d, boosted=False), **options)
    cls = OGB if method == "OGB" else ConvexHullOGB
    return cls(learners(kind, d, boosted=True), n_learners=n, bound_outputs=kind != "stumps",
               objective="linear", **options)


def run_stream(name: str, rows: int, kinds: Sequence[str], rates: Sequence[float | None]
               ) -> dict:
    ds = load_csv_regression(dataset_path(name), test_fraction=0.0001, seed=0)
    order = torch.randperm(len(ds.x_train), generator=torch.Generator().manual_seed(0))
    x, y = ds.x_train[order], ds.y_train[order]
    x, y = x[:rows], y[:rows]
    half = len(x) // 2
    mean, std = x[:half].mean(0), x[:half].std(0).clamp_min(1e-8)
    x = (x - mean) / std
    centre = y[:half].mean()
    y = (y - centre) / (y[:half] - centre).abs().max()  # labels in [-1, 1] on the first half
    out: dict = {"rows": len(x)}
    for kind in kinds:
        out[kind] = {}
        for method in ("base", "OGB", "ConvexHullOGB"):
            grid = itertools.product(rates, (1,) if method == "base" else (8, 32))
            tuned = min(grid, key=lambda p, m=method: progressive_loss(
                build(m, kind, x.shape[1], *p), x[:half], y[:half]))
            loss = progressive_loss(build(method, kind, x.shape[1], *tuned), x[half:], y[half:])
            out[kind][method] = {"lr": tuned[0], "n_learners": tuned[1], "loss": loss}
        base = out[kind]["base"]["loss"]
        for method in METHODS:
            out[kind][method]["relative_improvement"] = 1.0 - out[kind][method]["loss"] / base
        print(name, kind, {m: round(v["loss"], 5) for m, v in out[kind].items()}, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--rows", type=int, default=16000,
                        help="rows per stream (first half tunes, second half reports)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="base learners to run; the others are kept from the existing JSON")
    parser.add_argument("--optimizer", choices=list(RATES), default="adam",
                        help="the learners' optimizer: plain Adam as in the paper (rate tuned), "
                             "or the library's default (no rate); writes ogb_improvement_default.*")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    stem = "ogb_improvement" + ("" if args.optimizer == "adam" else f"_{args.optimizer}")
    results = {name: run_stream(name, args.rows, args.kinds, RATES[args.optimizer])
               for name in STREAMS}
    results = merged(results, args.out / f"{stem}.json", args.kinds)
    kinds = [k for k in KINDS if all(k in results[s] for s in STREAMS)]
    summary = {}
    for kind in kinds:
        for method in METHODS:
            gains = torch.tensor([results[s][kind][method]["relative_improvement"]
                                  for s in STREAMS])
            summary[f"{kind}/{method}"] = {"average": float(gains.mean()),
                                           "median": float(gains.quantile(0.5))}
    results["summary"] = summary
    results["paper"] = {"SGD/Alg1": {"average": 0.0165, "median": 0.0003},
                        "SGD/Alg2": {"average": 0.0133, "median": 0.0029},
                        "nets/Alg1": {"average": 0.0788, "median": 0.0072},
                        "nets/Alg2": {"average": 0.0072, "median": 0.0033},
                        "stumps/Alg1": {"average": 0.2022, "median": 0.1045},
                        "stumps/Alg2": {"average": 0.159, "median": 0.1369}}
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 4.0))
    ax = fig.subplots()
    labels = [f"{s}\n{k}" for s in STREAMS for k in kinds]
    for offset, method in zip((-0.2, 0.2), METHODS, strict=True):
        values = [100 * results[s][k][method]["relative_improvement"]
                  for s in STREAMS for k in kinds]
        ax.bar([i + offset for i in range(len(labels))], values, width=0.4, label=method)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=6.5)
    ax.set_ylabel("improvement over base learner (%)")
    ax.set_title("OGB: progressive squared loss, second half of each stream"
                 + ("" if args.optimizer == "adam" else ", default optimizer"))
    ax.legend()
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    save_figure(fig, args.out / f"{stem}.png")
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(summary, indent=2))


def merged(results: dict, path: Path, kinds: Sequence[str]) -> dict:
    """``results`` for ``kinds`` on top of the other kinds' results saved at ``path`` (same
    number of rows only); everything else is dropped."""
    if set(kinds) == set(KINDS) or not path.exists():
        return results
    saved = json.loads(path.read_text())
    for name in STREAMS:
        if saved.get(name, {}).get("rows") != results[name]["rows"]:
            raise SystemExit(f"{path} holds {name} with {saved.get(name, {}).get('rows')} rows, "
                             f"this run has {results[name]['rows']}: rerun every kind")
        fresh = results[name]
        results[name] = {"rows": fresh["rows"], **{
            k: (fresh if k in kinds else saved[name])[k] for k in KINDS
            if k in kinds or k in saved[name]}}
    return results


if __name__ == "__main__":
    main()
