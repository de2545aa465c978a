"""The Lightning path's overhead over the plain training loop, on an ABALONE-sized SGB.

SGB with N = 16 learners ``TwoLayerNet(d, 1, 1)`` (one sigmoid hidden unit; Hu et al. 2017,
footnote 4) on ABALONE's training rows (3759 × 10, standardised), batch 32, ``passes`` seeded
passes (one :class:`~torchboost.data.MultiPassStream`), trained twice from identical
initialisations:

* *Lightning*: ``pl.Trainer(...)`` and ``trainer.fit(StreamingBoosterModule(booster), stream)``
  (quiet trainer: no logger, checkpointing, model summary or progress bar);
* *raw*: ``for x, y in stream: booster.learn(x, y)``.

Both are timed whole (the Lightning time includes building the trainer), alternating Lightning
and raw runs so that load from other processes hits both alike, and the medians over
``repeats`` are compared. With ``--floor`` a third run joins the alternation: the same quiet
trainer fitting a module whose training step only calls ``booster.learn`` (no optimizer step,
no scoring, no logging; torch's plain CUDA check as in the raw loop) — what Lightning's own
per-batch loop costs, which no work in :class:`StreamingBoosterModule` can go below while one
Lightning step is one round. ``identical`` says whether both give bit-identical boosters (every
tensor of the ``state_dict``). Without ABALONE a synthetic regression of the same shape
(4177 × 8, 90% training) stands in, and ``data`` says so.

    python benchmarks/lightning_overhead.py                   # CPU
    python benchmarks/lightning_overhead.py --device cuda --passes 5 --repeats 7
    python benchmarks/lightning_overhead.py --repeats 7 --floor    # + Lightning's own floor
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from torchboost import SGB, TwoLayerNet
from torchboost.data import (
    BatchGroups,
    DataStream,
    MultiPassStream,
    load_abalone,
    synthetic_regression,
)
from torchboost.lightning import StreamingBoosterModule
from torchboost.lightning.cuda_check import plain_cuda_check

#: ABALONE's settings in :data:`torchboost.harness.configs.DATASETS` (Hu et al. 2017, Sec. 6.2).
N_LEARNERS, HIDDEN, BATCH, LR = 16, 1, 32, 1e-2


def load_features(abalone: str | Path | None = None) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Standardised training features and labels of ABALONE (``abalone``: a CSV or a directory
    holding ``abalone.csv``; ``None``: the copy bundled with torchboost), or of a synthetic
    regression of the same shape when ABALONE cannot be read; and which one it is."""
    try:
        data, name = load_abalone(abalone), "abalone"
    except (OSError, ValueError) as err:
        data = synthetic_regression(n=4177, d=8, seed=0, test_fraction=0.1)
        name = f"synthetic 4177x8 (ABALONE not found: {err})"
    x = data.x_train
    x = (x - x.mean(0)) / x.std(0).clamp_min(1e-12)
    return x, data.y_train, name


def _stream(x: torch.Tensor, y: torch.Tensor, passes: int) -> MultiPassStream:
    return MultiPassStream(lambda p: DataStream(x, y, batch_size=BATCH, seed=p,
                                                standardize=None), passes)


def _booster(n_features: int, device: str) -> SGB:
    torch.manual_seed(0)
    return SGB(partial(TwoLayerNet, n_features, HIDDEN, 1), "squared", n_learners=N_LEARNERS,
               optimizer_kwargs={"lr": LR}).to(device)


def _quiet_trainer(device: str) -> pl.Trainer:
    """A one-epoch trainer with no logger, checkpointing, model summary or progress bar."""
    return pl.Trainer(max_epochs=1, accelerator="gpu" if device.startswith("cuda") else "cpu",
                      devices=1, logger=False, enable_checkpointing=False,
                      enable_model_summary=False, enable_progress_bar=False)


def lightning_run(booster: SGB, stream: MultiPassStream, device: str, group: int = 1) -> None:
    """The Lightning path: a quiet one-epoch trainer fitting the module on the stream, in
    :class:`~torchboost.data.BatchGroups` of ``group`` batches (rounds per step) when
    ``group > 1``."""
    trainer = _quiet_trainer(device)
    trainer.fit(StreamingBoosterModule(booster),
                train_dataloaders=BatchGroups(stream, group) if group > 1 else stream)


class LearnOnly(pl.LightningModule):
    """Lightning's floor: a manual-optimisation step that only runs the round. Without an
    optimizer ``global_step`` stays 0 (so ``max_steps`` or step-based checkpoints would not
    work), and nothing is scored or logged."""

    def __init__(self, booster: SGB) -> None:
        super().__init__()
        self.booster = booster
        self.automatic_optimization = False

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.booster.learn(*batch)

    def configure_optimizers(self) -> None:
        return None


def floor_run(booster: SGB, stream: MultiPassStream, device: str) -> None:
    """:func:`lightning_run` with :class:`LearnOnly` in place of the module, under torch's
    plain CUDA check (the module switches to it when its fit starts)."""
    trainer = _quiet_trainer(device)
    with plain_cuda_check():
        trainer.fit(LearnOnly(booster), train_dataloaders=stream)


def raw_run(booster: SGB, stream: MultiPassStream, device: str) -> None:
    """The plain loop, as in a process that never imported Lightning: with torch's plain CUDA
    check (importing Lightning switches on an NVML-based one that costs every Adam step)."""
    with plain_cuda_check():
        for x, y in stream:
            booster.learn(x, y)


def _timed(run: Callable[[SGB, MultiPassStream, str], None], x: torch.Tensor, y: torch.Tensor,
           passes: int, device: str) -> tuple[float, float, SGB]:
    """Wall-clock and process CPU seconds of one run from a fresh booster and stream."""
    booster, stream = _booster(x.shape[1], device), _stream(x, y, passes)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    start, cpu_start = time.perf_counter(), time.process_time()
    run(booster, stream, device)
    sync()
    return time.perf_counter() - start, time.process_time() - cpu_start, booster


def identical(a: Any, b: Any) -> bool:
    """Exact equality of nested states (tensors by dtype and ``torch.equal``)."""
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            identical(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return (type(a) is type(b) and len(a) == len(b)
                and all(identical(u, v) for u, v in zip(a, b, strict=True)))
    return bool(a == b)


def _alternate(passes: int, repeats: int, device: str, abalone: str | Path | None,
               floor: bool = False, group: int = 1,
               ) -> tuple[dict[str, list[float]], bool, str, int]:
    """Wall and CPU seconds of each timed run (keys ``lightning``, ``raw``, ``lightning_cpu``,
    ``raw_cpu``, and ``floor``, ``floor_cpu`` with ``floor``), whether every round of runs gave
    identical boosters, the data's name and the number of steps (rounds) per run."""
    x, y, name = load_features(abalone)
    x, y = x.to(device), y.to(device)
    runs = {"lightning": partial(lightning_run, group=group), "raw": raw_run}
    if floor:
        runs["floor"] = floor_run
    times: dict[str, list[float]] = {f"{key}{kind}": [] for key in runs for kind in ("", "_cpu")}
    same = True
    for i in range(repeats + 1):
        order = tuple(runs) if i % 2 == 0 else tuple(reversed(runs))
        boosters = {}
        for key in order:
            seconds, cpu_seconds, boosters[key] = _timed(runs[key], x, y, passes, device)
            if i > 0:  # the first pair warms up
                times[key].append(seconds)
                times[f"{key}_cpu"].append(cpu_seconds)
        same = same and all(identical(boosters[key].state_dict(), boosters["raw"].state_dict())
                            for key in runs)
    return times, same, name, len(_stream(x, y, passes))


def measure(passes: int = 5, repeats: int = 5, device: str = "cpu",
            abalone: str | Path | None = None, threads: int | None = 1,
            floor: bool = False, group: int = 1) -> dict[str, Any]:
    """Median seconds of the Lightning run and of the raw loop over ``repeats`` alternating
    pairs (after one untimed warm-up pair), their ratio (also per pair, and of the process CPU
    seconds, which load from other processes disturbs less), and whether both give identical
    boosters. ``threads`` fixes ``torch.set_num_threads`` during the measurement (restored
    afterwards; ``None`` leaves it). ``floor`` adds the learn-only Lightning run to each pair
    (``floor_seconds``, ``floor_over_raw``, ``floor_over_raw_cpu``). ``group`` is the
    Lightning run's rounds per step (:class:`~torchboost.data.BatchGroups`; 1: none)."""
    previous = torch.get_num_threads()
    quiet = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [log.level for log in quiet]
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        for log in quiet:  # no "GPU available" banners between the timings
            log.setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            times, same, name, steps = _alternate(passes, repeats, device, abalone, floor,
                                                  group)
    finally:
        torch.set_num_threads(previous)
        for log, level in zip(quiet, levels, strict=True):
            log.setLevel(level)
    median = {key: statistics.median(values) for key, values in times.items()}
    ratios = [a / b for a, b in zip(times["lightning"], times["raw"], strict=True)]
    floors = {"floor_seconds": median["floor"],
              "floor_over_raw": median["floor"] / median["raw"],
              "floor_over_raw_cpu": median["floor_cpu"] / median["raw_cpu"]} if floor else {}
    return {"lightning_seconds": median["lightning"], "raw_seconds": median["raw"],
            "lightning_over_raw": median["lightning"] / median["raw"],
            "pair_ratios": ratios,
            "lightning_cpu_seconds": median["lightning_cpu"], "raw_cpu_seconds": median["raw_cpu"],
            "lightning_over_raw_cpu": median["lightning_cpu"] / median["raw_cpu"],
            **floors, "identical": same, "data": name, "device": device,
            "passes": passes, "repeats": repeats, "steps": steps, "group": group,
            "n_learners": N_LEARNERS, "batch": BATCH,
            "threads": threads if threads is not None else previous}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:<i>")
    parser.add_argument("--abalone", type=Path, default=None,
                        help="abalone.csv or its directory (default: the bundled copy)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: leave as is)")
    parser.add_argument("--floor", action="store_true",
                        help="also time a Lightning step that only calls learn")
    parser.add_argument("--group", type=int, default=1,
                        help="rounds per Lightning step (BatchGroups; default 1: none)")
    args = parser.parse_args()
    print(json.dumps(measure(args.passes, args.repeats, args.device, args.abalone,
                             args.threads or None, args.floor, args.group), indent=2))


if __name__ == "__main__":
    main()
