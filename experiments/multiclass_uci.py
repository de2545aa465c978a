"""Online multiclass boosting with neural weak learners on UCI Balance, UCI Mushroom and an
MNIST subset: the protocol of Jung, Goetz & Tewari (2017), Sec. 5 and Tables 3–5.

Every method makes one predict-then-train pass over a random reordering of the whole data set
(train and test files together); accuracy is the mean of ``learn(x, y) == y`` over the final 20%
of the stream ("plateau", Table 3) and over the full stream ("burn-in", Table 4), averaged over
reorderings; Table 5 is the run time. Methods, all with N copies of the same two-layer net
(k logits) instead of the paper's VFDTs:

* ``DT``: the best of N independent learners, each trained on every example, chosen in hindsight
  separately for each metric (the paper's "best of 100 VFDTs"); its time is that of training
  all N together (one stacked pass);
* ``OLB``: :class:`~torchboost.multiclass.OzaBoost` (Oza & Russell's online boosting);
* ``AdaOLM``: :class:`~torchboost.multiclass.AdaboostOLM` (logistic loss, randomised Hedge);
* ``MB γ``: :class:`~torchboost.multiclass.OnlineMBBM` with exact potentials, γ ∈ {.3, .1,
  .05, .01, .001} (the paper used Monte-Carlo potentials).

Learners predict by plain argmax and train on importance-weighted cross-entropy, one example
per round (B = 1, the paper's protocol), plain Adam with the learning rate below, features
as they are (``standardize=False``), single-threaded; ``--optimizer default`` runs the same
protocol with the library's default optimizer (schedule-free AdamW at the default rule, no
rate) and writes to the ``default/`` subfolder.

    python experiments/multiclass_uci.py            # full run (see DATASETS for the sizes)
    python experiments/multiclass_uci.py --quick    # smoke run, ~1 minute

Outputs (``--quick`` writes to the ``quick/`` subfolder): ``results.json`` (configuration, every
run, means, all plotted numbers, the paper's numbers), ``tables.md`` and three figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import torch

from torchboost.data import Dataset, load_balance, load_mnist, load_mushroom
from torchboost.data.folder import add_data_dir_option, data_dir
from torchboost.learners import TwoLayerNet, WeakLearners
from torchboost.multiclass import (
    AdaboostOLM,
    MulticlassBooster,
    OnlineMBBM,
    OzaBoost,
    cross_entropy_gradient,
    importance_targets,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "multiclass_uci"
GAMMAS = (0.3, 0.1, 0.05, 0.01, 0.001)
METHODS = ("DT", "OLB", "AdaOLM", *(f"MB {g:g}".replace("0.", ".") for g in GAMMAS))
CURVE_POINTS = 50

#: Jung et al. (2017), Tables 3, 4 and 5 (100 VFDTs; accuracy on the final 20%, on the full
#: stream, total run time in seconds), for the data sets this script shares with the paper.
PAPER = {
    "balance": {
        "final": dict(zip(METHODS, (0.768, 0.772, 0.754, 0.788, 0.821, 0.819, 0.805, 0.752),
                          strict=True)),
        "full": dict(zip(METHODS, (0.734, 0.747, 0.698, 0.751, 0.769, 0.759, 0.736, 0.677),
                         strict=True)),
        "seconds": dict(zip(METHODS, (8, 19, 20, 26, 42, 47, 50, 51), strict=True)),
    },
    "mushroom": {
        "final": dict(zip(METHODS, (0.999, 1.000, 1.000, 0.997, 1.000, 1.000, 0.999, 0.998),
                          strict=True)),
        "full": dict(zip(METHODS, (0.996, 0.997, 0.995, 0.991, 0.995, 0.994, 0.993, 0.992),
                         strict=True)),
        "seconds": dict(zip(METHODS, (241, 169, 355, 318, 325, 326, 324, 321), strict=True)),
    },
}


@dataclass(frozen=True)
class Config:
    """One data set's run: stream size, learners and how many reorderings."""

    name: str
    n_learners: int
    hidden: int
    lr: float | None  # None: the library's default optimizer and rate
    reorderings: int
    limit: int | None = None  # examples used (a seeded random subset); None = all
    note: str = ""


DATASETS = (
    Config("balance", n_learners=100, hidden=4, lr=0.01, reorderings=5,
           note="625 points, 20 one-hot features, 3 classes (paper: 27 reorderings)"),
    Config("mushroom", n_learners=100, hidden=4, lr=0.01, reorderings=2,
           note="KEEL's version: 5644 points (UCI's 8124 less those with missing values), "
                "125 one-hot features, 2 classes (paper: 8124 points, 27 reorderings)"),
    Config("mnist", n_learners=100, hidden=8, lr=0.01, reorderings=1, limit=3000,
           note="a seeded random subset of 3000 of the 60,000 training images, 784 pixels, "
                "10 classes; not in the paper"),
)


def quick(config: Config) -> Config:
    """The ``--quick`` version: 20 learners, one reordering, short streams."""
    limit = {"balance": None, "mushroom": 800, "mnist": 300}[config.name]
    return replace(config, n_learners=20, reorderings=1, limit=limit)


def load(name: str) -> Dataset:
    multiclass = data_dir() / "multiclass"
    if name == "balance":
        return load_balance(multiclass / "balance-scale_onehot.csv")
    if name == "mushroom":
        return load_mushroom(multiclass / "mushroom_keel.csv.gz")
    return load_mnist()


def whole_stream(ds: Dataset, limit: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Train and test rows together, flattened; a seeded subset of ``limit`` rows."""
    x = torch.cat([ds.x_train, ds.x_test]).flatten(1)
    y = torch.cat([ds.y_train, ds.y_test])
    if limit is not None and limit < len(y):
        keep = torch.randperm(len(y), generator=torch.Generator().manual_seed(1234))[:limit]
        x, y = x[keep], y[keep]
    return x, y


def optimizer_options(lr: float | None) -> dict[str, Any]:
    """Plain Adam at ``lr`` (the stored results), or the library's default optimizer
    (schedule-free AdamW at the default rule) when ``lr`` is None (``--optimizer default``)."""
    return {} if lr is None else {"optimizer": torch.optim.Adam, "optimizer_kwargs": {"lr": lr}}


def make_booster(method: str, factory: Callable[[], torch.nn.Module], k: int, config: Config,
                 seed: int) -> MulticlassBooster:
    kwargs = {"n_learners": config.n_learners, **optimizer_options(config.lr), "seed": seed,
              "standardize": False}
    if method == "OLB":
        return OzaBoost(factory, k, **kwargs)
    if method == "AdaOLM":
        return AdaboostOLM(factory, k, **kwargs)
    return OnlineMBBM(factory, k, float("0" + method.split()[1]), **kwargs)


def run_booster(booster: MulticlassBooster, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    return np.array([int(booster.learn(x[t:t + 1], y[t:t + 1]).argmax(-1)[0] == y[t])
                     for t in range(len(y))])


def run_independent(factory: Callable[[], torch.nn.Module], k: int, config: Config,
                    x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Hits ``(N, T)`` of N learners, each trained on every example (plain cross-entropy)."""
    learners = WeakLearners(factory, config.n_learners, **optimizer_options(config.lr))
    hits = np.zeros((config.n_learners, len(y)), dtype=np.int64)
    ones = torch.ones(config.n_learners, 1)
    for t in range(len(y)):
        # the round's own forward, at the learning point of schedule-free learners (as a
        # booster's learn() predicts); a no-op for Adam
        with learners.learning_point():
            out = learners(x[t:t + 1])
            h = out.detach()
            hits[:, t] = (h.argmax(-1)[:, 0] == y[t]).numpy()
            learners.step_outputs(out, cross_entropy_gradient(h, importance_targets(
                ones, y[t:t + 1], k)))
    return hits


def scores(hits: np.ndarray) -> tuple[float, float]:
    """(accuracy on the final 20%, accuracy on the full stream)."""
    tail = hits[..., -max(1, round(0.2 * hits.shape[-1])):]
    return float(tail.mean(-1).max()), float(hits.mean(-1).max())


def curve(hits: np.ndarray) -> list[float]:
    """Cumulative prequential accuracy at ``CURVE_POINTS`` evenly spaced stream positions."""
    marks = np.linspace(1, hits.size, CURVE_POINTS).round().astype(int)
    return (np.cumsum(hits)[marks - 1] / marks).tolist()


def run_dataset(config: Config) -> dict:
    ds = load(config.name)
    x_all, y_all = whole_stream(ds, config.limit)
    k, d = int(ds.n_classes), x_all.shape[1]

    def factory() -> torch.nn.Module:
        return TwoLayerNet(d, config.hidden, k, activation="tanh")

    runs = {m: [] for m in METHODS}
    for seed in range(config.reorderings):
        order = torch.randperm(len(y_all), generator=torch.Generator().manual_seed(seed))
        x, y = x_all[order], y_all[order]
        for method in METHODS:
            torch.manual_seed(seed)
            start = time.perf_counter()
            if method == "DT":
                hits = run_independent(factory, k, config, x, y)
                final, full = scores(hits)
                best = hits[int(hits.mean(1).argmax())]
            else:
                best = run_booster(make_booster(method, factory, k, config, seed), x, y)
                final, full = scores(best)
            seconds = time.perf_counter() - start
            runs[method].append({"seed": seed, "final": final, "full": full,
                                 "seconds": seconds, "curve": curve(best)})
            print(f"  {config.name:8s} order {seed} {method:7s} final {final:.3f} "
                  f"full {full:.3f} {seconds:7.1f} s", flush=True)
    summary = {m: {key: float(np.mean([r[key] for r in rs])) for key in ("final", "full",
                                                                          "seconds")}
               for m, rs in runs.items()}
    for m, rs in runs.items():
        summary[m]["curve"] = np.mean([r["curve"] for r in rs], axis=0).tolist()
    return {"config": asdict(config), "examples": len(y_all), "classes": k, "features": d,
            "curve_positions": np.linspace(1, len(y_all), CURVE_POINTS).round().astype(int)
            .tolist(), "mean": summary, "runs": runs}


def cell(ours: float, paper: float | None, digits: int, paper_digits: int) -> str:
    text = f"{ours:.{digits}f}"
    return text if paper is None else f"{text} ({paper:.{paper_digits}f})"


def tables(results: dict) -> str:
    header = "| Data | " + " | ".join(METHODS) + " |"
    rule = "|---" * (len(METHODS) + 1) + "|"
    out = []
    for key, title, digits, paper_digits in (
        ("final", "Table 3 layout: accuracy on the final 20% of the stream", 3, 3),
        ("full", "Table 4 layout: accuracy on the full stream", 3, 3),
        ("seconds", "Table 5 layout: run time in seconds (one reordering)", 1, 0),
    ):
        out += [f"**{title}** — ours, (paper) where the data set is the same", "", header, rule]
        for name, res in results.items():
            paper = PAPER.get(name, {}).get(key, {})
            row = [cell(res["mean"][m][key], paper.get(m), digits, paper_digits)
                   for m in METHODS]
            out.append(f"| {name} | " + " | ".join(row) + " |")
        out.append("")
    out += ["Runs: " + "; ".join(
        f"{name}: {res['examples']} examples, N = {res['config']['n_learners']} two-layer nets "
        f"({res['config']['hidden']} tanh units), mean of {res['config']['reorderings']} "
        f"reordering(s); {res['config']['note']}" for name, res in results.items()) + ".", ""]
    return "\n".join(out)


def figures(results: dict, folder: Path) -> dict:
    """Three PNGs; returns every plotted number."""
    plotted: dict = {"accuracy": {}, "learning_curves": {}, "mbbm_gamma": {}}
    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        ours = [results[name]["mean"][m]["final"] for m in METHODS]
        paper = [PAPER.get(name, {}).get("final", {}).get(m) for m in METHODS]
        ax.bar(range(len(METHODS)), ours, color="tab:blue", label="ours (neural learners)")
        if paper[0] is not None:
            ax.scatter(range(len(METHODS)), paper, color="tab:red", marker="D", zorder=3,
                       label="paper (VFDTs)")
        ax.set_xticks(range(len(METHODS)), METHODS, rotation=45, ha="right")
        ax.set_ylim(min([*ours, *(p for p in paper if p is not None)]) - 0.05, 1.0)
        ax.set_title(f"{name}: accuracy on the final 20%")
        ax.legend(loc="lower right", fontsize=8)
        plotted["accuracy"][name] = {"methods": list(METHODS), "ours": ours, "paper": paper}
    fig.tight_layout()
    fig.savefig(folder / "accuracy_final20.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        positions = results[name]["curve_positions"]
        plotted["learning_curves"][name] = {"examples": positions}
        for m in METHODS:
            values = results[name]["mean"][m]["curve"]
            ax.plot(positions, values, label=m, linestyle="-" if m[:2] != "MB" else "--")
            plotted["learning_curves"][name][m] = values
        ax.set_xlabel("examples seen")
        ax.set_ylabel("cumulative prequential accuracy")
        ax.set_title(name)
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(folder / "learning_curves.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in names:
        final = [results[name]["mean"][m]["final"] for m in METHODS[3:]]
        ax.plot(GAMMAS, final, marker="o", label=f"{name} (ours)")
        plotted["mbbm_gamma"][name] = {"gamma": list(GAMMAS), "ours_final": final}
        if name in PAPER:
            paper = [PAPER[name]["final"][m] for m in METHODS[3:]]
            ax.plot(GAMMAS, paper, marker="D", linestyle=":", label=f"{name} (paper)")
            plotted["mbbm_gamma"][name]["paper_final"] = paper
    ax.set_xscale("log")
    ax.set_xlabel("γ of OnlineMBBM")
    ax.set_ylabel("accuracy on the final 20%")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(folder / "mbbm_gamma.png", dpi=120)
    plt.close(fig)
    return plotted


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--quick", action="store_true", help="smoke run (about a minute)")
    parser.add_argument("--datasets", nargs="*", default=[c.name for c in DATASETS],
                        choices=[c.name for c in DATASETS])
    parser.add_argument("--optimizer", choices=("adam", "default"), default="adam",
                        help="the learners' optimizer: plain Adam at each data set's rate, or "
                             "the library's default (no rate); writes to default/")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one example per round: tiny tensors, threads only contend
    folder = OUT / ("default" if args.optimizer == "default" else "")
    folder = folder / "quick" if args.quick else folder
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = {}
    for config in DATASETS:
        if config.name in args.datasets:
            if args.optimizer == "default":
                config = replace(config, lr=None)
            results[config.name] = run_dataset(quick(config) if args.quick else config)
    text = tables(results)
    print("\n" + text)
    plotted = figures(results, folder)
    (folder / "tables.md").write_text(text)
    meta = {"quick": args.quick, "optimizer": args.optimizer,
            "total_seconds": time.perf_counter() - start,
            "machine": platform.processor() or platform.machine(), "threads": 1,
            "torch": torch.__version__, "methods": list(METHODS), "paper": PAPER}
    (folder / "results.json").write_text(json.dumps(
        {"meta": meta, "datasets": results, "plotted": plotted}, indent=1) + "\n")
    print(f"\nwrote {folder} in {meta['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
