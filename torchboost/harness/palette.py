"""One colour and marker per method, in every figure: a palette keyed by the method's name.

The methods a comparison is about are drawn strong (streaming boosting, batch GB, and the
networks it replaces); the rest — variants, OGB, the base learner — thinner and faint, so nine
lines do not read as nine equal claims. A name not listed gets a colour from its hash, the
same in every figure.
"""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["STRONG", "method_style"]

#: colour (colour-blind-safe Okabe-Ito and Tableau tones) and marker of each known method
_STYLES: dict[str, tuple[str, str]] = {
    "SGB": ("#0072B2", "o"),
    "SGB_newton": ("#56B4E9", "s"),
    "SGB_learned": ("#1f9bd1", "D"),
    "best_SGB": ("#0072B2", "o"),
    "GB": ("#D55E00", "^"),
    "GB_newton": ("#E69F00", "v"),
    "wide": ("#009E73", "P"),
    "deep": ("#CC79A7", "X"),
    "base": ("#555555", "."),
    "OGB": ("#8c564b", "<"),
    "ConvexHullOGB": ("#bcbd22", ">"),
}

#: the methods drawn strong
STRONG = frozenset({"SGB", "SGB_newton", "best_SGB", "GB", "GB_newton", "wide", "deep"})

_SPARE = ("#17becf", "#9467bd", "#7f7f7f", "#e377c2", "#2ca02c", "#ff7f0e")


def method_style(name: str) -> dict[str, Any]:
    """``plot`` keyword arguments for the method ``name`` (a suffix after ``": "`` or ``" ("``,
    such as ``"GB: next learner"``, keeps the method's colour)."""
    base = name.split(": ")[0].split(" (")[0]
    colour, marker = _STYLES.get(base, (_SPARE[zlib.crc32(base.encode()) % len(_SPARE)], "*"))
    strong = base in STRONG
    return {"color": colour, "marker": marker, "linewidth": 2.0 if strong else 1.0,
            "alpha": 1.0 if strong else 0.55, "zorder": 3 if strong else 2, "markersize": 4}
