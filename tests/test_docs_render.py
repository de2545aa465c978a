"""Issue 34: the documentation site renders its docstrings: no raw Sphinx role
(``:class:`...```), no role's "title <target>" form and no reST double-backtick code span is
left in the text of any generated page (inside code blocks they are code, and allowed)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: what a docstring's markup looks like when it was not rendered
RAW = {
    "a Sphinx role": re.compile(r":(?:class|meth|func|mod|data|attr|exc|obj):`"),
    "a role's title <target>": re.compile(r"&lt;~?torchboost\.[\w.]+&gt;"),
    "a double-backtick code span": re.compile(r"``"),
}


def _text(html: str, inline_code: bool = False) -> str:
    """The page's text outside preformatted blocks, scripts and styles, and outside inline code
    unless ``inline_code`` (a role's "title <target>" shows up inside the code it became)."""
    for tag in ("pre", "script", "style") + (() if inline_code else ("code",)):
        html = re.sub(rf"<{tag}\b.*?</{tag}>", " ", html, flags=re.DOTALL)
    return html


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="mkdocs is not installed (pip install '.[docs]')")
def test_the_built_site_shows_no_raw_markup(tmp_path):
    site = tmp_path / "site"
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    result = subprocess.run([mkdocs, "build", "--quiet", "-d", str(site)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, check=False,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    found = []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        for what, pattern in RAW.items():
            text = _text(html, inline_code=what.startswith("a role's"))
            for match in pattern.finditer(text):
                context = re.sub(r"<[^>]+>", "", text[max(0, match.start() - 80):match.end() + 60])
                found.append(f"{page.relative_to(site)}: {what}: …{' '.join(context.split())}…")
    assert not found, f"{len(found)} raw markup left:\n" + "\n".join(found[:30])
