"""``python -m torchboost``: the ``torchboost`` command (``demo`` and ``run``)."""

import sys

from torchboost.harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
