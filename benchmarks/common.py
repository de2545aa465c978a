"""What the benchmarks share: the SLICE shape they time, and timing in alternating windows."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

#: The SLICE shape of the SGB paper (Hu et al. 2017, Sec. 6): 384 inputs, two-layer learners
#: with 10 hidden units, batch 256.
IN_FEATURES, HIDDEN, BATCH = 384, 10, 256


def seconds_per_call(step: Callable[[], None], device: str, min_seconds: float,
                     warmup: int = 3) -> float:
    """Mean seconds per call over one window of at least ``min_seconds`` (and 5 calls), after
    ``warmup`` calls; CUDA work is waited for."""
    for _ in range(warmup):
        step()
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds or calls < 5:
        step()
        calls += 1
    sync()
    return (time.perf_counter() - start) / calls


def interleaved(steps: dict[str, Callable[[], None]], device: str, min_seconds: float,
                repeats: int) -> dict[str, float]:
    """Median seconds per call of each step over ``repeats`` alternating windows (``min_seconds``
    in all per step), so that load from other processes hits every step alike."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            times[name].append(seconds_per_call(step, device, min_seconds / repeats))
    return {name: sorted(values)[len(values) // 2] for name, values in times.items()}
