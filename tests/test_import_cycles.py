"""Issue 34: the package has no import circles (imports inside functions and under
TYPE_CHECKING count), checked by the workplace's ``shared/tools/import_cycles.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT.parent / "shared" / "tools" / "import_cycles.py"


@pytest.mark.skipif(not TOOL.exists(), reason="shared/tools/import_cycles.py is not beside the "
                                              "checkout")
def test_the_package_has_no_import_cycles():
    result = subprocess.run([sys.executable, str(TOOL), "torchboost"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert "no import cycles" in result.stdout, result.stdout + result.stderr
