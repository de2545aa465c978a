"""The ``torchboost`` command: ``torchboost demo`` and ``torchboost run CONFIG.yaml``."""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

from torchboost.configs import ExperimentConfig

__all__ = ["format_summary", "main"]


def format_summary(results: dict[str, Any]) -> str:
    """A plain-text table of final test losses, compute and wall time per method."""
    config = results["config"]
    key = next(k for k in ("error", "mse", "loss") if k in results["SGB"]["final"])
    metric = {"error": "error rate", "mse": "MSE"}.get(key, "loss")

    def value(final: dict[str, float]) -> float:
        return final[key]

    lines = [f"{config['name']}: N = {config['n_learners']} learners, loss = {config['loss']}",
             f"{'method':<8}{'test ' + metric:>16}{'compute units':>16}{'wall s':>9}"]
    for name in ("base", "GB", "SGB"):
        final = results[name]["final"]
        lines.append(f"{name:<8}{value(final):>16.4f}{final['units']:>16,.0f}"
                     f"{results[name]['wall_seconds']:>9.1f}")
    reach = results["units_to_reach_gb_final"]
    lines.append(f"SGB reaches GB's final {metric} after "
                 + (f"{reach:,.0f} units" if reach is not None else "— (not within its budget)"))
    return "\n".join(lines)


def _quiet_lightning() -> None:
    """Keep the output to progress bars and results: no Lightning banners (accelerators, tips,
    why a fit stopped) and none of the warnings that do not concern a streaming run (a
    ``validation_step`` without validation data, a deprecation inside Lightning)."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="You defined a `validation_step` but have no")
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")


def _run(config: ExperimentConfig, out: Path) -> None:
    from torchboost.experiment import run_comparison

    _quiet_lightning()
    results = run_comparison(config, out)
    print()
    print(format_summary(results))
    print(f"\nfigure:      {results['figure']}")
    print(f"numbers:     {out / 'results.json'}")
    print(f"tensorboard: tensorboard --logdir {out / 'tensorboard'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchboost", description="Deep online boosting.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="SGB vs stagewise GB on the bundled ABALONE stream")
    demo.add_argument("--out", type=Path, default=Path("runs/demo"))
    demo.add_argument("--passes", type=int, default=20,
                      help="passes over the 3,759 training rows (a resampled stream)")
    run = commands.add_parser("run", help="run an experiment configuration (YAML)")
    run.add_argument("config", type=Path)
    run.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    if args.command == "demo":
        config = ExperimentConfig.for_dataset("abalone", passes=args.passes)
        _run(config, args.out)
    else:
        if not args.config.is_file():
            parser.error(f"no such configuration file: {args.config}")
        config = ExperimentConfig.from_yaml(args.config)
        _run(config, args.out or Path("runs") / config.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
