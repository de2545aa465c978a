"""What the library's registries (boosters, data sets, methods) share: a dict by name, to which
a spec is added once."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["add"]

Spec = TypeVar("Spec")


def add(registry: dict[str, Any], spec: Spec, kind: str) -> Spec:
    """Add ``spec`` (it has a ``name``) to ``registry``; a name registered twice is a
    ``ValueError`` saying which ``kind`` of entry it is."""
    name = spec.name  # type: ignore[attr-defined]
    if name in registry:
        raise ValueError(f"{kind} {name!r} is registered already")
    registry[name] = spec
    return spec
