"""``python -m torchboost`` is the ``torchboost`` command."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_torchboost_help_lists_the_commands() -> None:
    done = subprocess.run([sys.executable, "-m", "torchboost", "--help"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage: torchboost" in done.stdout
    assert "demo" in done.stdout and "run" in done.stdout
