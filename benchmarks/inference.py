"""Inference speed on CPU: ``booster.predict`` against the exported module, eager, compiled, ONNX.

The exported module is :func:`torchboost.export.export_booster`'s, run eagerly, through
``torch.compile`` and in ONNX Runtime.

One trained SGB in the SLICE shape of ``throughput.py`` (384 inputs, ``TwoLayerNet(384, 10)``,
leaky ReLU, ``standardize`` on) for N ∈ {1, 8, 64} learners, predicting batches of 256 rows;
samples per second, medians of alternating windows (``common.interleaved``).

    python benchmarks/inference.py                      # ~2 min; writes benchmarks/inference.json
    python benchmarks/inference.py --n 8 --seconds 1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import torch
from common import BATCH, HIDDEN, IN_FEATURES, interleaved

from torchboost import SGB, TwoLayerNet

OUT = Path(__file__).with_name("inference.json")


def measure(n: int, seconds: float, repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(IN_FEATURES, HIDDEN, activation="leaky_relu"),
                  n_learners=n, stall_window=None)
    x = torch.randn(BATCH, IN_FEATURES)
    for _ in range(20):
        booster.learn(x, torch.randn(BATCH))
    module = booster.export()
    compiled = torch.compile(module, fullgraph=True, dynamic=False)
    steps = {"predict": lambda: booster.predict(x), "exported": lambda: module(x),
             "compiled": lambda: compiled(x)}
    with torch.no_grad():
        compiled(x)  # compile outside the timing
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = str(Path(tmp) / "sgb.onnx")
            torch.onnx.export(module, (x,), path, dynamo=True, input_names=["x"])
            options = ort.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feed = {"x": x.numpy()}
        steps["onnxruntime"] = lambda: session.run(None, feed)
    with torch.no_grad():
        per_call = interleaved(steps, "cpu", seconds, repeats)
    return {name: BATCH / t for name, t in per_call.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=3.0, help="per method and N")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {"threads": args.threads, "batch": BATCH, "samples_per_second": {}}
    for n in args.n:
        rates = measure(n, args.seconds, args.repeats)
        results["samples_per_second"][str(n)] = rates
        print(f"N={n:3d} " + "  ".join(f"{k} {v:,.0f}/s ({v / rates['predict']:.2f}×)"
                                         for k, v in rates.items()), flush=True)
    OUT.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
