"""Lightning's NVML-based CUDA check, switched off where there is no CUDA to protect.

Lightning sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` when it is imported, so that asking whether
CUDA is available does not initialise CUDA in a process that will fork. torch's Adam asks at
every ``step()``, and until CUDA is initialised the answer is not cached: on a machine without
CUDA every optimizer step then tries to load NVML again (about 15 % of a stagewise GB round on
keggundirected, and of a small streaming round; results bit-identical). Without CUDA there is
nothing a fork could inherit, so inside :func:`plain_cuda_check` torch's plain check runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["plain_cuda_check", "restore_cuda_check", "use_plain_cuda_check"]

#: set to ``"1"`` by Lightning on import: ``torch.cuda.is_available()`` then asks NVML
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def use_plain_cuda_check() -> bool:
    """Without CUDA, set ``PYTORCH_NVML_BASED_CUDA_CHECK=0`` where Lightning set it to ``"1"``;
    returns whether it did (then :func:`restore_cuda_check` puts ``"1"`` back)."""
    if os.environ.get(NVML_CHECK) != "1" or torch.cuda.is_available():
        return False
    os.environ[NVML_CHECK] = "0"
    return True


def restore_cuda_check(changed: bool) -> None:
    """Undo :func:`use_plain_cuda_check` if it changed the variable."""
    if changed:
        os.environ[NVML_CHECK] = "1"


@contextmanager
def plain_cuda_check() -> Iterator[None]:
    """:func:`use_plain_cuda_check` inside the block, restored on exit."""
    changed = use_plain_cuda_check()
    try:
        yield
    finally:
        restore_cuda_check(changed)
