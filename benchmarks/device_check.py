"""The GPU checks of the issue "Every cycle goes to learning", as one prepared run for a session
lent a device (``device`` tool: 15 minutes in all, a machine start included, so nothing can be
tried twice).

Here, first (downloads the ``schedulefree`` wheel the device's image lacks into ``.whl/`` and
copies the MNIST files into ``build/device_data/mnist/``, then prints the call)::

    python benchmarks/device_check.py --prepare

There, as one ``run`` call (``carry=[".whl", "build/device_data"]``, ``timeout_s=600``)::

    python3 benchmarks/device_check.py --budget 540

The steps run in order of importance, each in its own process with its own time limit, cut to
what is left of ``--budget``; a step that fails or runs out of time is reported and the next
one runs:

1. ``cuda_tests``: every test marked ``cuda`` (``pytest -m cuda`` on the files that have one);
2. ``round_cost``: ``round_cost.py --device cuda --n 8 64 256`` (eager, the defaults: ops,
   syncs and time against the same-size network);
3. ``mnist_one_pass``: ``mnist_one_pass.py --device cuda``, full MNIST one pass end to end;
4. ``round_cost_compiled``: ``round_cost.py --device cuda --compiled --n 64`` (compiling
   takes most of it).

Everything lands in ``$OUT`` (else ``build/device_check``): ``device_check.json`` (each step's
command, exit status, seconds and last lines), ``device_check.log`` (every step's whole
output) and the three benchmarks' JSON files, ``round_cost_cuda.json``,
``mnist_one_pass_cuda.json`` and ``round_cost_cuda_compiled.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
#: the wheels the device's image lacks (KINDS.md's package list), at the versions used here
WHEELS = ("schedulefree==1.4.1",)
#: where --prepare puts the data the device reads (ignored by git, carried by the call)
DATA = Path("build/device_data")
#: where the carried wheels are installed on the device
SITE = Path("/tmp/site")
#: the steps, in the order they run (:func:`steps`)
STEPS = ("cuda_tests", "round_cost", "mnist_one_pass", "round_cost_compiled")


def steps(out: Path, device: str = "cuda", quick: bool = False
          ) -> list[tuple[str, list[str], int]]:
    """``(name, command, its own time limit in seconds)`` in order of importance; ``quick``:
    tiny windows, the small shape and 20 MNIST batches (a check that the steps run, not a
    timing)."""
    python, bench = sys.executable, "benchmarks"
    cuda_files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                        if "pytest.mark.cuda" in p.read_text())
    windows = ["--seconds", "0.05", "--repeats", "1", "--shapes", "small"] if quick else [
        "--seconds", "1", "--repeats", "3"]
    data = ["--root", str(DATA / "mnist")] if (ROOT / DATA / "mnist").is_dir() else []
    return [
        ("cuda_tests", [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "cuda",
                        *cuda_files], 150),
        ("round_cost", [python, f"{bench}/round_cost.py", "--device", device,
                        "--n", "8", "64", "256", *windows,
                        "--out", str(out / f"round_cost_{device}.json")], 240),
        ("mnist_one_pass", [python, f"{bench}/mnist_one_pass.py", "--device", device, *data,
                            *(["--limit", "20"] if quick else []),
                            "--out", str(out / f"mnist_one_pass_{device}.json")], 120),
        ("round_cost_compiled", [python, f"{bench}/round_cost.py", "--device", device,
                                 "--compiled", "--n", "64", *windows,
                                 "--out", str(out / f"round_cost_{device}_compiled.json")], 240),
    ]


def prepare(data_root: str | None) -> None:
    """Here: the wheels into ``.whl/``, the MNIST files into :data:`DATA`, and the call."""
    wheels = ROOT / ".whl"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "-d", str(wheels), *WHEELS], check=True)
    sys.path.insert(0, str(ROOT))
    from torchboost.data.folder import dataset_path

    source = Path(data_root) / "mnist" if data_root else dataset_path("mnist")
    target = ROOT / DATA / "mnist"
    target.mkdir(parents=True, exist_ok=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        found = [source / f"{name}{suffix}" for suffix in (".gz", "")
                 if (source / f"{name}{suffix}").is_file()]
        if not found:
            raise SystemExit(f"{name}[.gz] is not in {source}: put MNIST there or pass --data")
        shutil.copyfile(found[0], target / found[0].name)
    print("ready; call the device tool's run with\n"
          '  command="python3 benchmarks/device_check.py --budget 540", '
          'carry=[".whl", "build/device_data"], timeout_s=600')


def install_wheels() -> dict[str, str]:
    """On the device: the carried wheels of packages not installed, into :data:`SITE`; the
    environment the steps run in (the repository and the wheels on ``PYTHONPATH``, output
    unbuffered)."""
    paths = [str(ROOT)]
    wheels = sorted(str(p) for p in (ROOT / ".whl").glob("*.whl")
                    if importlib.util.find_spec(p.name.split("-")[0]) is None)
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(SITE),
                        *wheels], check=True)
        paths.append(str(SITE))
    old = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths + ([old] if old else [])),
            "PYTHONUNBUFFERED": "1"}


def run_step(command: list[str], env: dict[str, str], seconds: float) -> tuple[int | str, str, str]:
    """``command``'s exit status (``"timeout"`` past ``seconds``, when it and every process it
    started are killed: inductor's compile workers too), stdout and stderr (undecodable bytes
    replaced, and whatever it printed before a timeout)."""
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=seconds)
        rc: int | str = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        rc = "timeout"
    return rc, stdout.decode(errors="replace"), stderr.decode(errors="replace")


def run_steps(out: Path, budget: float, only: list[str] | None = None, device: str = "cuda",
              quick: bool = False) -> list[dict]:
    """Every step (or those named ``only``) within ``budget`` seconds; their reports, written
    to ``device_check.json`` after each step (a call cut short keeps those that ran)."""
    out.mkdir(parents=True, exist_ok=True)
    env, start, reports = install_wheels(), time.perf_counter(), []
    with (out / "device_check.log").open("w") as log:
        for name, command, limit in steps(out, device, quick):
            if only and name not in only:
                continue
            left = budget - (time.perf_counter() - start)
            reports.append(
                {"step": name, "skipped": f"{left:.0f} s of the budget left"} if left < 20
                else _run_logged(name, command, env, min(limit, left), log))
            (out / "device_check.json").write_text(json.dumps(reports, indent=2) + "\n")
    return reports


def _run_logged(name: str, command: list[str], env: dict[str, str], seconds: float,
                log: TextIO) -> dict:
    """One step through :func:`run_step`, its whole output appended to ``log``; its report."""
    log.write(f"\n=== {name}: {' '.join(command)}\n")
    log.flush()
    began = time.perf_counter()
    try:
        rc, stdout, stderr = run_step(command, env, seconds)
    except Exception as error:  # this step could not run: the next ones still do
        rc, stdout, stderr = "error", "", f"{type(error).__name__}: {error}"
    log.write(stdout + stderr)
    log.flush()
    took = round(time.perf_counter() - began, 1)
    print(f"{name}: rc={rc} in {took} s", flush=True)
    # the results' lines; where it failed, the error's too
    tail = (stdout if rc == 0 else stdout + stderr).splitlines()[-15:]
    return {"step": name, "command": command, "rc": rc, "seconds": took, "tail": tail}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--prepare", action="store_true",
                        help="here, before the call: fetch the wheels, copy the data")
    parser.add_argument("--data", help="with --prepare: the data folder holding mnist/ "
                                       "(default: torchboost.data.folder's)")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for all the steps together")
    parser.add_argument("--only", nargs="+", choices=STEPS, help="run only these steps")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true",
                        help="tiny windows and 20 MNIST batches: that the steps run")
    parser.add_argument("--out", type=Path,
                        default=Path(os.environ.get("OUT") or ROOT / "build" / "device_check"))
    args = parser.parse_args()
    if args.prepare:
        prepare(args.data)
        return
    for report in run_steps(args.out, args.budget, args.only, args.device, args.quick):
        for line in report.get("tail", [report.get("skipped", "")])[-6:]:
            print(f"  {report['step']}: {line}")


if __name__ == "__main__":
    main()
