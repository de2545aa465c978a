"""What the benchmarks share: the SLICE shape they time, a steady allocator, timing in alternating
windows, and the command line and JSON of a timing benchmark."""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

#: The SLICE shape of the SGB paper (Hu et al. 2017, Sec. 6): 384 inputs, two-layer learners
#: with 10 hidden units, batch 256.
IN_FEATURES, HIDDEN, BATCH = 384, 10, 256


#: glibc's ``mallopt`` parameters (``malloc.h``) and the values :func:`steady_allocator` sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_STEADY = {_M_MMAP_THRESHOLD: 32 << 20, _M_TRIM_THRESHOLD: 1 << 30}


def steady_allocator() -> str:
    """Keep freed memory mapped, so that no timed call pays the kernel for fresh pages: glibc's
    malloc then serves blocks up to 32 MiB from its heap (``M_MMAP_THRESHOLD``) and keeps the
    heap's top (``M_TRIM_THRESHOLD``), as ``MALLOC_MMAP_THRESHOLD_`` and
    ``MALLOC_TRIM_THRESHOLD_`` would before a process starts. By default it maps a large block
    afresh and unmaps it once freed, and on this project's virtual machine each page's first
    touch costs a fault of varying price: from one run to the next an MNIST booster round took
    9.0-11.7 ms and the 8×-channel network's step 5.3-8.9 ms (ratios from 1.17 to 1.85); steadied,
    7.7-8.2 and 5.2-5.8 ms (1.45-1.54), with no page faults in the timed rounds. Every side of
    a comparison runs under it. Returns what was set, for the JSON: ``"steady (glibc)"``, or
    ``"default"`` where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return "default"
    if not all(mallopt(param, value) == 1 for param, value in _STEADY.items()):
        return "default"
    return "steady (glibc)"


def allocator_option(parser: argparse.ArgumentParser) -> None:
    """``--default-malloc``: leave glibc's malloc as it is (see :func:`chosen_allocator`)."""
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's malloc as it is (default: steady_allocator)")


def chosen_allocator(args: argparse.Namespace) -> str:
    """:func:`steady_allocator` unless ``--default-malloc``; what was set, for the JSON."""
    return "default" if args.default_malloc else steady_allocator()


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


def windows(steps: dict[str, Callable[[], None]], device: str, seconds: float,
            count: int) -> dict[str, list[float]]:
    """Seconds per call of every step in each of ``count`` windows (:func:`seconds_per_call`,
    ``seconds`` each); window ``w`` starts with the ``w``-th step, in rotation, so that load
    from other processes hits every step alike and none is always timed straight after the
    same other."""
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    for window in range(count):
        shift = window % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(seconds_per_call(steps[name], device, seconds))
    return times


def interleaved(steps: dict[str, Callable[[], None]], device: str, min_seconds: float,
                repeats: int) -> dict[str, float]:
    """Median seconds per call of each step over ``repeats`` alternating :func:`windows`
    (``min_seconds`` in all per step)."""
    times = windows(steps, device, min_seconds / repeats, repeats)
    return {name: sorted(values)[len(values) // 2] for name, values in times.items()}


def two_forms_row(setting: dict[str, Any], times: dict[str, float], label: str) -> dict[str, Any]:
    """A row timing two forms of one computation: ``setting`` and, for the forms ``base`` and
    ``other`` (``times``' two keys, in order), ``<form>_us`` and ``<other>_over_<base>``; printed
    after ``label``."""
    base, other = times
    row = {**setting, f"{base}_us": times[base] * 1e6, f"{other}_us": times[other] * 1e6,
           f"{other}_over_{base}": times[other] / times[base]}
    print(f"{label}  {base} {row[f'{base}_us']:8.0f} us  {other} {row[f'{other}_us']:8.0f} us"
          f"  ratio {row[f'{other}_over_{base}']:.2f}")
    return row


def timing_arguments(description: str, out: Path, seconds: float,
                     extra: Callable[[argparse.ArgumentParser], Any] | None = None
                     ) -> argparse.Namespace:
    """``--device``, ``--seconds`` (per variant and shape, default ``seconds``), ``--repeats``,
    ``--out`` (default ``out``) and ``--default-malloc`` of a timing benchmark;
    ``extra(parser)`` adds its own. Sets :func:`steady_allocator` unless told not to (what was
    set: ``args.allocator``)."""
    parser = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(parser)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seconds", type=float, default=seconds, help="per variant and shape")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=out)
    allocator_option(parser)
    args = parser.parse_args()
    args.allocator = chosen_allocator(args)
    return args


def write_timings(out: Path, device: str, rows: list[dict], **extra: Any) -> None:
    """``rows`` with the device, threads, torch version and machine (and ``extra``) as JSON."""
    result = {"device": device, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "machine": platform.processor() or platform.machine(), **extra, "rows": rows}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


def run_timing(doc: str, script: str, seconds: float,
               measure: Callable[[str, float, int], list[dict]], **extra: Any) -> None:
    """A timing benchmark's ``main``: its :func:`timing_arguments` (described by the first line
    of ``doc``, writing ``<script's name>.json`` beside it by default), ``measure(device,
    seconds, repeats)``'s rows written by :func:`write_timings` with ``extra``."""
    args = timing_arguments(doc.splitlines()[0], Path(script).with_suffix(".json"), seconds)
    write_timings(args.out, args.device, measure(args.device, args.seconds, args.repeats),
                  allocator=args.allocator, **extra)
