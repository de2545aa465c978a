"""A griffe extension for the API pages: the docstrings' Sphinx roles (``:class:`~a.B```,
``:meth:`learn```, ...), which mkdocstrings would show raw, become inline code (``B``,
``learn()``), as Sphinx renders them. Listed under ``extensions`` in ``mkdocs.yml``."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(class|meth|func|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    role, short, target = match.groups()
    name = target.rsplit(".", 1)[-1] if short else target
    return f"`{name}()`" if role in ("meth", "func") else f"`{name}`"


class SphinxRoles(griffe.Extension):
    """Rewrites every loaded docstring's Sphinx roles as inline code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
