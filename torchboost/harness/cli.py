"""The ``torchboost`` command: ``torchboost demo`` and ``torchboost run CONFIG.yaml``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from torchboost.boosters.default_lr import DEFAULT_LR, DEFAULT_LR_FAN_IN
from torchboost.harness.configs import ExperimentConfig, with_data_dir
from torchboost.lightning.module import quiet_streaming_notices

__all__ = ["DEMO", "DEMO_DIFFERS", "format_summary", "main", "verdict"]

#: ``torchboost demo``'s settings on ABALONE (3,383 training rows after the validation split),
#: about 40 seconds on 2 CPU cores: GB stages of at most 8 epochs, at most 20 passes per
#: streaming method, every learner trained by the library's default optimizer at its default
#: rule's rate (schedule-free AdamW, 1e-1, the fan-in rule).
DEMO: dict[str, Any] = {"gb_max_epochs": 8, "max_passes": 20, "eval_points": 30,
                        "optimizer": "schedule_free", "lr": DEFAULT_LR,
                        "lr_fan_in": DEFAULT_LR_FAN_IN}


def format_summary(results: dict[str, Any]) -> str:
    """A plain-text table per method: final test metric, compute units, training wall time,
    passes (GB: epochs over all stages), why it stopped and its parameter count."""
    config, key = results["config"], results["metric"]
    metric = {"error": "error rate", "mse": "MSE"}.get(key, "loss")
    seeds = config.get("seeds", 1)
    lines = [f"{config['name']}: N = {config['n_learners']} learners, loss = {config['loss']}"
             + (f", mean ± sd over {seeds} seeds" if seeds > 1 else ""),
             f"{'method':<14}{'test ' + metric:>14}{'± sd' if seeds > 1 else '':>9}"
             f"{'compute units':>16}{'wall s':>9}{'passes':>8}  {'stopped by':<11}{'params':>9}"]
    for name, method in results["methods"].items():
        spread = f"{method['std']:>9.4f}" if seeds > 1 else f"{'':>9}"
        lines.append(f"{name:<14}{method['mean']:>14.4f}{spread}{method['units']:>16,.0f}"
                     f"{method['wall_seconds']:>9.1f}{method['passes']:>8.4g}  "
                     f"{method['stop_reason']:<11}{method['params']:>9,}")
    for name, why in results.get("skipped", {}).items():
        lines.append(f"{name:<14}skipped: {why}")
    best, reach = results["best_SGB"], results["units_SGB_to_GB_final"]
    if best is not None and "GB" in results["methods"]:
        lines.append(f"{best} (best SGB variant) reaches GB's final {metric} after "
                     + (f"{reach:,.0f} units" if reach is not None else
                        "— (not within its run)"))
    return "\n".join(lines)


def verdict(results: dict[str, Any]) -> str:
    """The run in one line: the best SGB variant (chosen on validation) against batch GB and
    the best of the base learner and the networks, by final test metric, lowest first."""
    methods, key = results["methods"], results["metric"]
    best = results["best_SGB"]
    rivals = [name for name in ("GB", "base", "wide", "deep") if name in methods]
    if best is None or not rivals:
        return ""
    ranked = sorted([best, *rivals], key=lambda name: methods[name]["mean"])
    order = " < ".join(f"{name} {methods[name]['mean']:.4g}" for name in ranked)
    where = "best" if ranked[0] == best else f"{ranked.index(best) + 1}. of {len(ranked)}"
    return (f"Verdict: streaming boosting ({best}, the SGB variant chosen on validation) ranks "
            f"{where} on test {key}: {order} (one seed; the README's table has three)")


def _quiet_lightning() -> None:
    """Keep the output to progress bars and results: no Lightning banners (accelerators, tips,
    why a fit stopped) and none of the warnings that do not concern a streaming run (a
    ``validation_step`` without validation data, a deprecation inside Lightning)."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    quiet_streaming_notices()


#: What ``torchboost demo`` prints about how its settings differ from the README's table.
DEMO_DIFFERS = ("Not the README's table: this demo runs one seed of the library's default "
                "optimizer and rate (schedule-free AdamW, 1e-1) until a validation plateau; the "
                "table (experiments/sgb_vs_gb.py) chooses every method's optimizer and rate on "
                "validation, runs 3 seeds, one pass and a 5-pass budget.")


def _run(config: ExperimentConfig, out: Path, note: str | None = None) -> None:
    from torchboost.harness.driver import run_comparison

    _quiet_lightning()
    results = run_comparison(config, out)
    print()
    print(format_summary(results))
    if note is not None:
        print(f"\n{note}")
    print(f"\nfigure:      {results['figure']}")
    print(f"numbers:     {out / 'results.json'}")
    print(f"tensorboard: tensorboard --logdir {out / 'tensorboard'}")
    line = verdict(results)
    if line:
        print(f"\n{line}")


def _positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchboost", description="Deep online boosting.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="SGB and its variants, OGB and ConvexHullOGB vs stagewise GB, the base "
                     "learner, a wide and a deep net on the bundled ABALONE data, each run to "
                     "convergence")
    demo.add_argument("--out", type=Path, default=Path("runs/demo"))
    demo.add_argument("--max-passes", type=_positive, default=DEMO["max_passes"],
                      help="at most this many passes over the training rows per streaming "
                           "method (they also stop on a validation plateau or at GB's compute)")
    run = commands.add_parser("run", help="run an experiment configuration (YAML)")
    run.add_argument("config", type=Path)
    run.add_argument("--out", type=Path, default=None)
    run.add_argument("--data-dir", type=Path, default=None,
                     help="the data folder (default: $TORCHBOOST_DATA; docs/guide/data.md), "
                          "read for a configuration without path:")
    args = parser.parse_args(argv)

    if args.command == "demo":
        config = ExperimentConfig.for_dataset("abalone", **{**DEMO,
                                                             "max_passes": args.max_passes})
        _run(config, args.out, DEMO_DIFFERS)
    else:
        if not args.config.is_file():
            parser.error(f"no such configuration file: {args.config}")
        try:
            config = with_data_dir(ExperimentConfig.from_yaml(args.config), args.data_dir)
        except (ValueError, FileNotFoundError) as error:
            parser.error(str(error))
        _run(config, args.out or Path("runs") / config.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
