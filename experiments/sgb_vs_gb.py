"""SGB and its variants, OGB and ConvexHullOGB against stagewise GB, the base learner, a wide and
a deep network, in a comparison a sceptic accepts: the SGB paper's Table 1 with honest baselines.

    python experiments/sgb_vs_gb.py                      # every data set available here
    python experiments/sgb_vs_gb.py --datasets abalone adult --quick   # smoke run, into quick/
    python experiments/sgb_vs_gb.py --table              # rebuild table + figure from results
    python experiments/sgb_vs_gb.py --data-dir DIR       # the data folder (docs/guide/data.md)

Every method gets the same chances (:func:`torchboost.harness.driver.run_comparison`):

* **the same inputs**: features standardised with the training rows' statistics (per channel for
  images), regression targets too, for every method alike; the same ``y0`` (the mean);
* **two regimes**: *one pass* (every method reads each training row once; GB trains its ``N``
  stages on ``N`` consecutive chunks of the pass) and *the budget* (``--passes`` passes for the
  streaming methods, GB as many epochs per stage as give it the same compute units);
* **two optimizers**, each over its own rate grid: the library's default, schedule-free AdamW
  at a constant rate (``--sf-grid``), and Adam under a cosine that knows the end
  (``--adam-grid``); both with the fan-in rule (``lr_fan_in`` 64) so that wide layers get
  proportionally smaller rates. A grid is extended by its own ratio while a method's chosen
  rate lies at its edge, at most ``--extensions`` times per edge (a rate still at an edge is
  listed in the row's ``lr_at_edge``);
* **chosen on validation**: each method's rate, then its optimizer, and the best SGB variant,
  by the final loss on a validation split of the training rows (never by the test set);
* **seeds**: the chosen setting runs from ``--seeds`` seeds (initialisation and pass order);
  the table gives the mean and the standard deviation of the final test metric;
* **baselines**: ``base`` (one weak learner), ``wide`` (one hidden layer with the ensemble's
  parameters), ``deep`` (a residual network of 3 hidden layers with the ensemble's
  parameters), ``GB`` (gradient targets) and, on classification rows, ``GB_newton`` (the Newton
  targets of SGB_newton and SGB_learned);
* **online gradient boosting**: ``OGB`` and ``ConvexHullOGB`` (Beygelzimer et al. 2015) with
  their default objective, steps and bound and the same learners, compared on their own (never
  the "best SGB variant").

``--chained`` runs the same comparison with chained learners (a streaming GrowNet,
:mod:`torchboost.learners.chained`: SGB's variants and GB chain their learners, the wide and
deep networks get the chained ensemble's parameter count; OGB and ConvexHullOGB, whose learners
do not chain, are skipped) into ``results/sgb_vs_gb_chained``.

Fitting the budget of a few hours on 2 cores (run two data sets at a time, one thread each):
every stream is capped at ``--max-train`` training rows (the row's ``train_rows``).

Writes ``experiments/results/sgb_vs_gb/<name>/<regime>-<optimizer>/`` (each run's
``results.json``, ``compute.png``, ``wall.png``, TensorBoard logs) and overall ``table.json``
(one row per stream, see :func:`table_row`), ``table.md`` and ``summary.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from torchboost.data.folder import LAYOUT, add_data_dir_option, data_dir
from torchboost.harness import DATASETS, METHODS, ExperimentConfig
from torchboost.harness.cli import format_summary
from torchboost.harness.driver import run_comparison
from torchboost.harness.methods import methods_of_kind, streaming_variants
from torchboost.lightning.module import quiet_streaming_notices

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "sgb_vs_gb"
#: where ``--chained`` writes: the same comparison with chained learners
CHAINED = ROOT / "experiments" / "results" / "sgb_vs_gb_chained"

#: The regimes: the streaming one (one pass) and the multi-pass budget.
REGIMES = ("one_pass", "budget")
#: The optimizer settings: (optimizer, schedule).
SETTINGS = {"schedule_free": ("schedule_free", "constant"), "adam": ("adam", "cosine")}


def configs(args: argparse.Namespace) -> list[tuple[str, str, ExperimentConfig]]:
    """``(regime, setting, config)`` for every data set found (the data folder, ``--data-dir``,
    and the bundled ABALONE) and ``--datasets``, each with its spec's
    ``comparison`` settings; ``--quick`` shrinks every run."""
    out = []
    for spec in DATASETS.values():
        place = data_dir() / LAYOUT[spec.name][0] if spec.name in LAYOUT else None
        path = str(place) if place is not None and place.exists() else None
        if path is None and not spec.bundled:
            continue  # not on this machine (a9a, any CSV)
        if args.datasets and spec.name not in args.datasets:
            continue
        for regime in args.regimes:
            for setting in args.settings:
                optimizer, schedule = SETTINGS[setting]
                grid = args.sf_grid if optimizer == "schedule_free" else args.adam_grid
                settings: dict[str, Any] = {
                    **spec.comparison, "max_train": args.max_train, "max_passes": args.passes,
                    "one_pass": regime == "one_pass", "fixed_budget": True,
                    "optimizer": optimizer,
                    "schedule": schedule, "lr_grid": list(grid), "lr_fan_in": 64.0,
                    "grid_extensions": args.extensions, "seeds": args.seeds,
                    "eval_points": args.eval_points}
                if args.quick:
                    settings.update(max_train=1500, max_passes=2, seeds=2, eval_points=5,
                                    grid_extensions=1)
                if args.methods:
                    settings["methods"] = list(args.methods)
                config = ExperimentConfig.for_dataset(spec.name, path, **settings)
                config.learner = dataclasses.replace(config.learner, chained=args.chained)
                out.append((regime, setting, config))
    return out


def _choose(runs: dict[str, dict], method: str) -> tuple[str, dict] | None:
    """The optimizer setting of ``method`` with the lowest validation loss (mean over seeds)."""
    found = [(setting, r["methods"][method]) for setting, r in runs.items()
             if method in r["methods"]]
    return min(found, key=lambda f: f[1]["val_loss_mean"]) if found else None


def table_row(name: str, results: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """One stream's row from its runs ``results[regime][setting]``: for every method ``m`` and
    regime (suffix ``""`` for the budget, ``"_one_pass"`` for one pass) the final test metric
    ``m`` (mean over seeds), ``std_m``, ``seeds_m``, ``lr_m``, ``lr_grid_m``, ``optimizer_m``,
    ``schedule_m``, ``units_m`` and ``params_m`` of the setting chosen on validation
    (``val_m``); ``best_SGB`` (on validation), ``GB_like_best_SGB`` (GB with the best variant's
    targets), ``winner`` (the lowest mean), ``lr_at_edge`` (methods whose rate stayed at an
    edge of its extended grid), ``train_rows``, ``passes``, ``seeds`` and the paper's Table 1."""
    first = next(iter(results["budget"].values()))
    config = first["config"]
    row: dict[str, Any] = {"data": name, "metric": {"error": "error rate", "mse": "MSE"}.get(
        first["metric"], "loss"), "standardized": True, "best_SGB_by": "validation",
        "train_rows": first["train_rows"], "passes": config["max_passes"], "seeds": config["seeds"],
        "lr_at_edge": []}
    for regime in REGIMES:
        suffix = "" if regime == "budget" else "_one_pass"
        runs = results[regime]
        chosen = {}
        for m in METHODS:
            pick = _choose(runs, m)
            if pick is None:
                row.update({f"{k}{m}{suffix}": None for k in (
                    "", "std_", "seeds_", "lr_", "lr_grid_", "optimizer_", "schedule_", "units_",
                    "params_", "val_")})
                continue
            setting, method = pick
            chosen[m] = method
            optimizer, schedule = SETTINGS[setting]
            row.update({f"{m}{suffix}": method["mean"], f"std_{m}{suffix}": method["std"],
                        f"seeds_{m}{suffix}": method["seed_metrics"],
                        f"lr_{m}{suffix}": method["lr"], f"lr_grid_{m}{suffix}": method["lr_grid"],
                        f"optimizer_{m}{suffix}": optimizer, f"schedule_{m}{suffix}": schedule,
                        f"units_{m}{suffix}": method["units"],
                        f"params_{m}{suffix}": method["params"],
                        f"val_{m}{suffix}": method["val_loss_mean"]})
            if method["lr_at_edge"]:
                row["lr_at_edge"].append(f"{m}{suffix}")
        variants = [m for m in streaming_variants() if m in chosen]
        best = min(variants, key=lambda m: chosen[m]["val_loss_mean"]) if variants else None
        row[f"best_SGB{suffix}"] = best
        newton = best in ("SGB_newton", "SGB_learned") and "GB_newton" in chosen
        row[f"GB_like_best_SGB{suffix}"] = "GB_newton" if newton else "GB"
        row[f"winner{suffix}"] = min(chosen, key=lambda m: chosen[m]["mean"])
    spec = DATASETS.get(config["dataset"])
    paper = spec.paper if spec is not None else None
    row.update({"paper_base": paper[0] if paper else None,
                "paper_GB": paper[1] if paper else None,
                "paper_SGB": paper[2] if paper else None})
    return row


def markdown(rows: list[dict]) -> str:
    """The tables: at a glance (the best SGB variant, GB with its targets, the base learner and
    the networks; the online boosters, :func:`online_glance`), then mean ± sd of the final test
    metric of every method, one pass and the budget, and every method's chosen optimizer and
    rate."""
    out = ["At a glance: the best SGB variant (chosen on validation) against GB with its targets "
           "and the networks it replaces, mean ± sd over seeds (bold: lowest mean of the five)\n",
           "| data | regime | base learner | wide net | deep net | GB, same targets | "
           "best SGB variant |", "|---|---|---|---|---|---|---|"]
    out.extend(_glance_rows(rows, lambda r, suffix: [
        ("base", False), ("wide", False), ("deep", False),
        (r[f"GB_like_best_SGB{suffix}"], True), (r[f"best_SGB{suffix}"], True)]))
    out.extend(online_glance(rows))
    for suffix, title in (("_one_pass", "One pass (every row read once)"),
                          ("", "The multi-pass budget")):
        out.append(f"\n{title}: final test metric, mean ± sd over seeds (bold: lowest mean)\n")
        out.append("| data | metric | " + " | ".join(METHODS) + " | best SGB (validation) |")
        out.append("|---" * (len(METHODS) + 3) + "|")
        out.extend(f"| {r['data']} | {r['metric']} | "
                   + " | ".join(_glance(r, m, suffix, r[f"winner{suffix}"] == m) for m in METHODS)
                   + f" | {r[f'best_SGB{suffix}']} |" for r in rows)
    out.append("\nChosen optimizer and rate (sf: schedule-free AdamW, constant; adam: Adam + "
               "cosine), one pass / budget:\n")
    out.append("| data | " + " | ".join(METHODS) + " |")
    out.append("|---" * (len(METHODS) + 1) + "|")
    short = {"schedule_free": "sf", "adam": "adam", None: "—"}
    out.extend(f"| {r['data']} | " + " | ".join(
        " / ".join(f"{short[r[f'optimizer_{m}{s}']]} {r[f'lr_{m}{s}']:.3g}"
                   if r[f"lr_{m}{s}"] is not None else "—" for s in ("_one_pass", ""))
        for m in METHODS) + " |" for r in rows)
    edges = [f"{r['data']}: {', '.join(r['lr_at_edge'])}" for r in rows if r["lr_at_edge"]]
    out.append("\nRates still at an edge of the extended grid: "
               + ("; ".join(edges) if edges else "none") + ".\n")
    return "\n".join(out)


def online_glance(rows: list[dict]) -> list[str]:
    """The glance table of the online boosters (OGB, ConvexHullOGB) against the base learner,
    the networks and the best SGB variant, per stream and regime (bold: the lowest mean of the
    row); no lines where none of them ran."""
    online = methods_of_kind("online")
    if not any(r.get(f"{m}{suffix}") is not None for r in rows for m in online
               for suffix in ("", "_one_pass")):
        return []
    return ["\nOnline gradient boosting (its default algorithm; optimizer and rate chosen on "
            "validation) against the same baselines and the best SGB variant (bold: lowest "
            "mean of the row)\n",
            "| data | regime | base learner | wide net | deep net | best SGB variant | "
            + " | ".join(online) + " |", "|---" * (len(online) + 6) + "|",
            *_glance_rows(rows, lambda r, suffix: [
                ("base", False), ("wide", False), ("deep", False),
                (r[f"best_SGB{suffix}"], True), *((m, False) for m in online)])]


def _glance_rows(rows: list[dict],
                 columns: Callable[[dict, str], list[tuple[str, bool]]]) -> list[str]:
    """One table line per stream and regime: the mean ± sd of each method of
    ``columns(row, suffix)`` (``(method, named)``: a named cell says which method it is), the
    lowest mean in bold."""
    out = []
    for r in rows:
        for suffix, regime in (("_one_pass", "1 pass"), ("", f"{r['passes']} passes")):
            shown = columns(r, suffix)
            low = min((m for m, _ in shown if r.get(f"{m}{suffix}") is not None),
                      key=lambda m: r[f"{m}{suffix}"])
            cells = [_glance(r, m, suffix, m == low) + (f" ({m})" if named else "")
                     for m, named in shown]
            out.append(f"| {r['data']} | {regime} | " + " | ".join(cells) + " |")
    return out


def _glance(r: dict, m: str, suffix: str, bold: bool) -> str:
    if r.get(f"{m}{suffix}") is None:
        return "—"
    text = f"{r[f'{m}{suffix}']:.4g} ± {r[f'std_{m}{suffix}']:.2g}"
    return f"**{text}**" if bold else text


def plot(rows: list[dict], path: Path) -> Path:
    """One panel per stream: every method's mean ± sd, one pass and the budget, relative to
    the budget's best method (1 = the best)."""
    fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3.6), squeeze=False)
    for ax, r in zip(axes[0], rows, strict=True):
        best = min(r[m] for m in METHODS if r.get(m) is not None)
        names = [m for m in METHODS if r.get(m) is not None]
        for offset, suffix, label in ((-0.18, "_one_pass", "one pass"), (0.18, "", "budget")):
            xs = [i + offset for i, m in enumerate(names) if r.get(f"{m}{suffix}") is not None]
            ys = [r[f"{m}{suffix}"] / best for m in names if r.get(f"{m}{suffix}") is not None]
            es = [r[f"std_{m}{suffix}"] / best for m in names
                  if r.get(f"{m}{suffix}") is not None]
            ax.errorbar(xs, ys, yerr=es, fmt="o", capsize=3, label=label)
        _label_panel(ax, names, f"{r['data']} ({r['metric']})")
    return _save_panels(fig, axes, "final test metric / budget's best", path)


def _label_panel(ax: Any, names: list[str], title: str) -> None:
    ax.set_xticks(range(len(names)), names, rotation=60, fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.axhline(1.0, color="grey", lw=0.5)


def _save_panels(fig: Any, axes: Any, ylabel: str, path: Path) -> Path:
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: the versus table's columns: (key, source table, method key in it, header)
VERSUS = (("base", "plain", "base", "base learner"),
          ("SGB", "plain", "best", "best SGB variant"),
          ("SGB_chained", "chained", "best", "chained: best SGB variant"),
          ("GB_chained", "chained", "gb", "chained GB, same targets"),
          ("wide", "plain", "wide", "wide net, SGB's parameters"),
          ("deep", "plain", "deep", "deep net, SGB's parameters"),
          ("wide_chained", "chained", "wide", "wide net, chained parameters"),
          ("deep_chained", "chained", "deep", "deep net, chained parameters"))


def versus_rows(plain: list[dict], chained: list[dict]) -> list[dict]:
    """Per stream and regime, chained SGB (its best variant on validation) and chained GB with
    its targets against plain SGB (best variant) and the wide and deep networks with either
    ensemble's parameter count: ``{key: mean, std_key: sd, params_key: parameters}`` for every
    column of :data:`VERSUS`, and ``winner`` (the lowest mean)."""
    by_name = {r["data"]: r for r in plain}
    out = []
    for c in chained:
        p = by_name.get(c["data"])
        if p is None:
            continue
        for suffix, regime in (("_one_pass", "1 pass"), ("", f"{c['passes']} passes")):
            row: dict[str, Any] = {"data": c["data"], "metric": c["metric"], "regime": regime}
            tables = {"plain": p, "chained": c}
            for key, source, method, _ in VERSUS:
                r = tables[source]
                m = {"best": r[f"best_SGB{suffix}"], "gb": r[f"GB_like_best_SGB{suffix}"]}.get(
                    method, method)
                row[key], row[f"std_{key}"] = r.get(f"{m}{suffix}"), r.get(f"std_{m}{suffix}")
                row[f"params_{key}"], row[f"method_{key}"] = r.get(f"params_{m}{suffix}"), m
            row["winner"] = min((k for k, *_ in VERSUS if row[k] is not None),
                                key=lambda k: row[k])
            out.append(row)
    return out


def versus_markdown(rows: list[dict]) -> str:
    """:func:`versus_rows` as a Markdown table (bold: the lowest mean of the row)."""
    lines = ["| data | regime | " + " | ".join(h for *_, h in VERSUS) + " |",
             "|---|---|" + "---|" * len(VERSUS)]
    for r in rows:
        cells = [_glance(r, key, "", r["winner"] == key) for key, *_ in VERSUS]
        lines.append(f"| {r['data']} | {r['regime']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_versus(out: Path, chained: list[dict]) -> list[dict]:
    """``versus.json``, ``versus.md`` and ``versus.png`` of the chained comparison in ``out``
    against the plain one (:data:`OUT`) in the settings both ran (the chained one may run the
    schedule-free setting alone: the plain methods are then chosen among its rates too)."""
    settings = {path.parent.name.split("-", 1)[1] for path in out.glob("*/*-*/results.json")}
    plain = _read_runs(OUT, settings)
    rows = versus_rows([table_row(name, plain[name]) for name in plain
                        if set(plain[name]) == set(REGIMES)], chained)
    if not rows:
        return []
    (out / "versus.json").write_text(json.dumps(rows, indent=2))
    (out / "versus.md").write_text(versus_markdown(rows))
    names = sorted({r["data"] for r in rows}, key=[r["data"] for r in rows].index)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.6), squeeze=False)
    keys = [key for key, *_ in VERSUS]
    for ax, name in zip(axes[0], names, strict=True):
        mine = [r for r in rows if r["data"] == name]
        best = min(r[k] for r in mine for k in keys if r[k] is not None)
        for offset, r in zip((-0.18, 0.18), mine, strict=False):
            shown = [(i, k) for i, k in enumerate(keys) if r[k] is not None]
            ax.errorbar([i + offset for i, _ in shown], [r[k] / best for _, k in shown],
                        yerr=[r[f"std_{k}"] / best for _, k in shown], fmt="o", capsize=3,
                        label=r["regime"])
        _label_panel(ax, keys, f"{name} ({mine[0]['metric']})")
    _save_panels(fig, axes, "final test metric / best of the stream", out / "versus.png")
    return rows


def _read_runs(out: Path, settings: set[str] | None = None) -> dict[str, dict[str, dict]]:
    """Every ``<out>/<name>/<regime>-<setting>/results.json`` (of ``settings`` only, if given),
    as ``runs[name][regime][setting]``."""
    found: dict[str, dict[str, dict[str, dict]]] = {}
    for path in sorted(out.glob("*/*-*/results.json")):
        regime, setting = path.parent.name.split("-", 1)
        if settings is None or setting in settings:
            found.setdefault(path.parent.parent.name, {}).setdefault(regime, {})[setting] = \
                json.loads(path.read_text())
    return found


def write_table(out: Path) -> list[dict]:
    """``table.json``, ``table.md`` and ``summary.png`` from every
    ``<out>/<name>/<regime>-<setting>/results.json`` (data sets run in separate processes make
    one table); a stream with a regime missing is left out."""
    found = _read_runs(out)
    order = list(DATASETS)
    names = sorted((n for n, r in found.items() if set(r) == set(REGIMES)),
                   key=lambda n: (order.index(n) if n in order else len(order), n))
    rows = [table_row(name, found[name]) for name in names]
    (out / "table.json").write_text(json.dumps(rows, indent=2))
    (out / "table.md").write_text(markdown(rows))
    if rows:
        plot(rows, out / "summary.png")
    if out.resolve() == CHAINED.resolve():
        write_versus(out, rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--datasets", nargs="*", help="names to run (default: all available)")
    parser.add_argument("--quick", action="store_true",
                        help="small subsets, for a smoke run (MNIST: about 6 minutes per regime "
                             "and setting on 2 cores, four of them)")
    parser.add_argument("--table", action="store_true",
                        help="only rebuild the table and figure from the results there")
    parser.add_argument("--max-train", type=int, default=8000,
                        help="training rows of every stream (before the validation split)")
    parser.add_argument("--passes", type=int, default=5, help="the budget's passes")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--extensions", type=int, default=2,
                        help="rates added beyond a grid edge at most, per edge")
    parser.add_argument("--sf-grid", type=float, nargs="+", default=[3e-2, 1e-1, 3e-1])
    parser.add_argument("--adam-grid", type=float, nargs="+", default=[3e-3, 1e-2, 3e-2])
    parser.add_argument("--eval-points", type=int, default=10)
    parser.add_argument("--methods", nargs="*", help="the methods to run (default: all)")
    parser.add_argument("--regimes", nargs="+", choices=REGIMES, default=list(REGIMES),
                        help="run these regimes only (runs in separate processes make one "
                             "table)")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS),
                        default=list(SETTINGS), help="run these optimizer settings only")
    parser.add_argument("--chained", action="store_true",
                        help="chain the boosters' learners (the wide and deep baselines get "
                             f"the chained ensemble's parameters; default output {CHAINED})")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default {OUT}, with --quick its quick/ folder)")
    args = parser.parse_args()
    if args.out is None:
        base = CHAINED if args.chained else OUT
        args.out = base / "quick" if args.quick else base
    if not args.table:
        torch.set_num_threads(int(os.environ.get("TORCHBOOST_THREADS", "1")))
        logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
        quiet_streaming_notices()
        for regime, setting, config in configs(args):
            try:
                results = run_comparison(config, args.out / config.name / f"{regime}-{setting}",
                                         progress=False)
            except FileNotFoundError as missing:
                print(f"skipping {config.name}: {missing}")
                continue
            print(f"[{regime}, {setting}]\n{format_summary(results)}", flush=True)
    print(markdown(write_table(args.out)))


if __name__ == "__main__":
    main()
