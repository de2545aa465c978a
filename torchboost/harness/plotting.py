"""Figures: test loss against training compute (the SGB paper's Fig. 2) and anytime curves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.figure import Figure

from torchboost.harness.palette import method_style

__all__ = ["plot_compute_curves", "save_figure"]

Curve = Sequence[tuple[float, float]]


def plot_compute_curves(curves: Mapping[str, Curve], *, title: str = "",
                        ylabel: str = "test loss", markers: Mapping[str, Curve] | None = None,
                        baselines: Mapping[str, float] | None = None,
                        log: bool = True,
                        xlabel: str = "training compute (weak-learner predictions; update = 2)",
                        ) -> Figure:
    """Log-log test loss vs compute units, one line per method (Hu et al. 2017, Fig. 2).

    Args:
        curves: method name → ``[(units, loss), ...]``.
        markers: method name → points to highlight (e.g. where stagewise GB adds a learner,
            the paper's blue dots).
        baselines: name → a horizontal reference level (e.g. the base learner's final loss).
        xlabel: the x axis (default compute units; e.g. wall seconds for time curves).
    """
    fig = Figure(figsize=(6.0, 4.2))  # no pyplot: no global state, works headless
    ax = fig.subplots()
    def drawable(points: Curve) -> list[tuple[float, float]]:  # log axes: positive only
        return [(u, v) for u, v in points if u > 0 and (v > 0 or not log)]

    shown = {name: drawable(points) for name, points in curves.items()}
    for name, points in shown.items():
        if points:  # one colour and marker per method in every figure (:mod:`.palette`)
            ax.plot(*zip(*points, strict=True), label=name, **method_style(name))
    for name, points in (markers or {}).items():
        points = drawable(points)
        if points:  # the method's colour, hollow: not a line of its own
            style = method_style(name)
            ax.scatter(*zip(*points, strict=True), s=30, zorder=4, label=name,
                       facecolors="none", edgecolors=style["color"], marker=style["marker"])
    firsts = [points[0][0] for points in shown.values() if points]
    if firsts:  # the axis starts at the first measured point, not at a near-zero clock
        ax.set_xlim(left=min(firsts) * (0.8 if log else 1.0))
    for name, level in (baselines or {}).items():
        ax.axhline(level, linestyle="--", linewidth=1.0, color="grey")
        ax.annotate(name, (0.01, level), xycoords=("axes fraction", "data"),
                    textcoords="offset points", xytext=(2, 3), fontsize=8, color="grey")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as PNG, creating folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    return path
