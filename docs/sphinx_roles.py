"""A griffe extension for the API pages: the docstrings' Sphinx roles (``:class:`~a.B```,
``:meth:`learn```, ``:meth:`title <a.B.c>```, ...), which mkdocstrings would show raw, become
inline code (``B``, ``learn()``, ``title``), as Sphinx renders them; reST's double-backtick
code spans become Markdown's single-backtick ones, joined where a docstring breaks one across
lines (Markdown ends a span at the line's end). Listed under ``extensions`` in
``mkdocs.yml``; ``tests/test_docs_render.py`` checks the built pages for raw markup."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(class|meth|func|mod|data|attr|exc|obj):`(~?)([^`]+)`")
_SPAN = re.compile(r"``(.+?)``", re.DOTALL)
_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.DOTALL)


def _code(match: re.Match[str]) -> str:
    role, short, target = match.groups()
    titled = _TITLED.match(target)
    if titled:  # "title <target>": Sphinx shows the title
        return f"`{' '.join(titled.group(1).split())}`"
    name = target.rsplit(".", 1)[-1] if short else target
    return f"`{name}()`" if role in ("meth", "func") else f"`{name}`"


def _span(match: re.Match[str]) -> str:
    inner = " ".join(match.group(1).split())
    return f"`` {inner} ``" if "`" in inner else f"`{inner}`"


class SphinxRoles(griffe.Extension):
    """Rewrites every loaded docstring's Sphinx roles as inline code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _SPAN.sub(_span, _ROLE.sub(_code, obj.docstring.value))
