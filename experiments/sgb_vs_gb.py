"""SGB (and its Newton / learned-step variants) vs stagewise GB, the base learner and a wide
network, each run to convergence: the SGB paper's Fig. 2 and Table 1 with honest baselines.

    python experiments/sgb_vs_gb.py                      # every data set available here
    python experiments/sgb_vs_gb.py --datasets abalone adult --quick   # smoke run, into quick/
    python experiments/sgb_vs_gb.py --slice DIR/slice_localization_data.csv --year DIR/Year...txt

No method runs a fixed number of passes: GB trains each stage to convergence (early stopping on
a validation split of the training rows), and every streaming method (base, wide, SGB,
SGB_newton, SGB_learned) streams passes until its validation curve plateaus (< 1 % better over
the last quarter of its units, after 10 passes), its units reach GB's total units, or 50 passes
(:func:`torchboost.harness.driver.run_comparison`). Only YEAR is subsampled (``max_train``), for
time. Data sets can run in separate processes (``--datasets``): the table is rebuilt from every
``results.json`` in the output folder.

Writes, per data set, ``experiments/results/sgb_vs_gb/<name>/{compute.png,wall.png,
results.json}`` and TensorBoard logs, and overall ``table.json`` + ``table.md``: the final test
metric (MSE for regression, error rate for classification) of base / wide / GB / SGB /
SGB_newton / SGB_learned next to the paper's Table 1, each method's units, training seconds,
passes and why it stopped, and the units at which the best SGB variant first reaches GB's final
metric. SLICE and YEAR are not on this machine; the regression streams of
``../shared/data/regression/`` stand in (keggundirected is closest to SLICE in size).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from torchboost.harness import DATASETS, METHODS, ExperimentConfig
from torchboost.harness.cli import format_summary
from torchboost.harness.driver import run_comparison
from torchboost.harness.driver import table_row as driver_row

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
OUT = ROOT / "experiments" / "results" / "sgb_vs_gb"

def configs(args: argparse.Namespace) -> list[ExperimentConfig]:
    """The runs: every registered data set (:data:`~torchboost.harness.DATASETS`, in its
    order) found under the shared data folder or bundled, plus SLICE/YEAR from ``--slice`` /
    ``--year``, each with its spec's ``comparison`` settings; ``--quick`` shrinks every run
    last. Under ``--schedule cosine`` (the default) every method runs ``--passes`` passes
    (MNIST ``--mnist-passes``) with its rate chosen from ``--lr-grid`` on the validation
    split."""
    scheduled: dict = {"schedule": args.schedule, "eval_points": 20,
                       "lr_fan_in": args.lr_fan_in}
    if args.schedule == "cosine":
        scheduled.update(lr_grid=list(args.lr_grid), max_passes=args.passes)
    given = {"slice": args.slice, "year": args.year}
    runs: list[tuple[str, str | None, dict]] = []
    for spec in DATASETS.values():
        path = given.get(spec.name) or (str(SHARED / spec.shared_path) if spec.shared_path
                                        else None)
        if path is None and not spec.bundled:
            continue  # not on this machine (a9a, any CSV)
        settings = dict(spec.comparison)
        if spec.name == "mnist" and args.schedule == "cosine":
            settings["max_passes"] = args.mnist_passes
        runs.append((spec.name, path, settings))
    quick = {"max_train": 2000, "gb_max_epochs": 2, "max_passes": 3, "eval_points": 10}
    found = [ExperimentConfig.for_dataset(dataset, path, **{**scheduled, **settings,
                                                            **(quick if args.quick else {})})
             for dataset, path, settings in runs]
    chosen = [c for c in found if not args.datasets or c.name in args.datasets]
    for config in chosen:
        if args.methods:
            config.methods = list(args.methods)
        if args.suffix:
            config.name += args.suffix
    return chosen


def table_row(name: str, results: dict) -> dict:
    """The driver's row (final test metric, units, wall seconds, passes, stop reason and
    parameters of every method, ``units_SGB_to_GB_final``) plus the paper's Table 1 (Hu et al.
    2017: base / GB / SGB average test loss, :attr:`DatasetSpec.paper`)."""
    spec = DATASETS.get(results["config"]["dataset"])
    paper = spec.paper if spec is not None else None
    return {**driver_row(name, results), "paper_base": paper[0] if paper else None,
            "paper_GB": paper[1] if paper else None, "paper_SGB": paper[2] if paper else None}


def markdown(rows: list[dict]) -> str:
    def fmt(value: float | None, spec: str = ".4g") -> str:
        return "—" if value is None else format(value, spec)

    head = ("| data | metric | " + " | ".join(METHODS) + " | paper base / GB / SGB | "
            "best SGB's units to GB's final |\n" + "|---" * (len(METHODS) + 4) + "|\n")
    finals = head + "".join(
        f"| {r['data']} | {r['metric']} | " + " | ".join(fmt(r[m]) for m in METHODS)
        + f" | {fmt(r['paper_base'])} / {fmt(r['paper_GB'])} / {fmt(r['paper_SGB'])} | "
        f"{fmt(r['units_SGB_to_GB_final'], ',.0f')} ({r['best_SGB'] or '—'}) |\n" for r in rows)
    cost = ("\nUnits, training seconds, passes (GB: epochs), why each run stopped and its "
            "learning rate:\n\n"
            "| data | " + " | ".join(METHODS) + " |\n" + "|---" * (len(METHODS) + 1) + "|\n")
    cost += "".join(
        f"| {r['data']} | " + " | ".join(
            "—" if r[m] is None else f"{r[f'units_{m}']:,.0f} u, {r[f'wall_s_{m}']:.0f} s, "
            f"{r[f'passes_{m}']:.3g} p, {r[f'stop_{m}']}, lr {r.get(f'lr_{m}') or 0:g}"
            for m in METHODS) + " |\n"
        for r in rows)
    winners = ("\nWho wins: the lowest final test metric, and the lowest at the best SGB variant's "
               "final units and at its training seconds (a method that stopped earlier counts "
               "with its converged metric):\n\n| data | at the end | at the best SGB's units | "
               "at the best SGB's seconds |\n|---|---|---|---|\n")
    winners += "".join(f"| {r['data']} | {r['winner_final']} | {r.get('winner_at_SGB_units', '—')}"
                       f" | {r.get('winner_at_SGB_wall', '—')} |\n" for r in rows)
    return finals + cost + winners


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", help="names to run (default: all available)")
    parser.add_argument("--quick", action="store_true", help="small subsets, for a smoke run")
    parser.add_argument("--slice", help="path to slice_localization_data.csv")
    parser.add_argument("--year", help="path to YearPredictionMSD.txt")
    parser.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                        help="cosine: a fixed budget of passes under a cosine decay, the rate "
                             "chosen per method on validation data; constant: the rate of the "
                             "configuration until the validation curve plateaus")
    parser.add_argument("--lr-grid", type=float, nargs="+", default=[3e-3, 1e-2, 3e-2],
                        help="learning rates tried for every method (cosine)")
    parser.add_argument("--passes", type=int, default=20, help="passes under cosine")
    parser.add_argument("--methods", nargs="*", help="the methods to run (default: all)")
    parser.add_argument("--suffix", default="",
                        help="appended to each run's name (its folder and table row)")
    parser.add_argument("--lr-fan-in", type=float, default=None,
                        help="scale every method's rate for weights wider than this fan-in "
                             "(the library's default rule uses 64; default: one rate)")
    parser.add_argument("--mnist-passes", type=int, default=10, help="MNIST's passes (cosine)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default {OUT}, with --quick its quick/ folder)")
    args = parser.parse_args()
    if args.out is None:
        args.out = OUT / "quick" if args.quick else OUT
    for config in configs(args):
        try:
            results = run_comparison(config, args.out / config.name)
        except FileNotFoundError as missing:
            print(f"skipping {config.name}: {missing}")
            continue
        print(format_summary(results), flush=True)
        write_table(args.out)
    print(markdown(write_table(args.out)))


def write_table(out: Path) -> list[dict]:
    """``table.json`` and ``table.md`` from every ``<out>/<name>/results.json`` there, so that
    runs of different data sets in separate processes (``--datasets``) make one table."""
    order = list(DATASETS)
    found = {path.parent.name: json.loads(path.read_text())
             for path in sorted(out.glob("*/results.json"))}
    names = sorted(found, key=lambda name: (order.index(name) if name in order else len(order),
                                            name))
    rows = [table_row(name, found[name]) for name in names]
    (out / "table.json").write_text(json.dumps(rows, indent=2))
    (out / "table.md").write_text(markdown(rows))
    return rows


if __name__ == "__main__":
    main()
