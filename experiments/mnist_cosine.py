"""SGB with Newton targets over the SGB paper's conv learner on all of MNIST: the test error
after every pass, at the defaults (no horizon) or with Adam under a cosine decay that knows the
end.

    OMP_NUM_THREADS=1 python experiments/mnist_cosine.py --defaults     # ~3 min on one core
    OMP_NUM_THREADS=1 python experiments/mnist_cosine.py                # Adam + cosine
    OMP_NUM_THREADS=1 python experiments/mnist_cosine.py --defaults --seed 1 --decay 300

N = 8 learners ``ConvNet(channels=5, sigmoid)``, ``standardize`` on, η = ½, batch 64. With
``--defaults`` everything else is the library's default (schedule-free learners at the default
rate rule, no schedule, no horizon: a stream may stop after any pass); without it, Adam at its
rule with ``lr_scheduler=cosine_schedule(passes)``, the horizon given by hand. ``--lr``
overrides the rate (keeping the fan-in rule); ``--decay τ`` adds the open-ended
``decay_schedule(τ)`` (a variant of the default rule measured in the docs, not adopted);
``--beta1`` sets schedule-free's interpolation (another variant); ``--seed`` changes the
learners' initialisation and the order. Writes
``experiments/results/mnist_cosine/results.json`` (``defaults.json`` with ``--defaults``;
``_decay<τ>``, ``_beta<β>`` and ``_seed<s>`` added to the name when given).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

from torchboost import SGB, ConvNet, cosine_schedule, decay_schedule
from torchboost.boosters.default_lr import ADAM_LR, DEFAULT_LR, DEFAULT_LR_FAN_IN
from torchboost.data import load_mnist
from torchboost.data.folder import add_data_dir_option

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "results" / "mnist_cosine"


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    add_data_dir_option(parser)
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--defaults", action="store_true",
                        help="the library's defaults: schedule-free learners, no schedule")
    parser.add_argument("--lr", type=float, default=None, help="the rate (fan-in rule kept)")
    parser.add_argument("--decay", type=float, default=None, metavar="TIMESCALE",
                        help="add decay_schedule(TIMESCALE), the open-ended decay")
    parser.add_argument("--beta1", type=float, default=None,
                        help="schedule-free's beta1 (the rule's: 0.92); sets the rate too")
    parser.add_argument("--seed", type=int, default=0,
                        help="the learners' initialisation and the order (0: the table's run)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ds = load_mnist()
    torch.manual_seed(args.seed)
    rounds = args.passes * math.ceil(len(ds.y_train) / 64)
    options: dict = ({} if args.defaults else
                     {"optimizer": torch.optim.Adam, "lr_scheduler": cosine_schedule(rounds)})
    if args.decay is not None:
        options["lr_scheduler"] = decay_schedule(args.decay)
    if args.lr is not None or args.beta1 is not None:
        default_lr = DEFAULT_LR if args.defaults else ADAM_LR
        kwargs = {"lr": args.lr if args.lr is not None else default_lr}
        if args.beta1 is not None:
            kwargs["betas"] = (args.beta1, 0.999)
        options.update(optimizer_kwargs=kwargs, lr_fan_in=DEFAULT_LR_FAN_IN)
    booster = SGB(lambda: ConvNet(1, 28, 10, channels=5, activation="sigmoid"), "softmax",
                  n_outputs=10, n_learners=8, targets="newton", **options)
    order = torch.Generator().manual_seed(1 + 1000 * args.seed)
    errors = []
    start = time.perf_counter()
    for p in range(args.passes):
        for rows in torch.randperm(len(ds.y_train), generator=order).split(64):
            booster.learn(ds.x_train[rows], ds.y_train[rows])
        errors.append(booster.evaluate(ds.x_test, ds.y_test)["error"])
        print(f"pass {p + 1}: test error {errors[-1]:.4f}", flush=True)
    name = ("defaults" if args.defaults else "results") + (
        f"_decay{args.decay:g}" if args.decay is not None else "") + (
        f"_beta{args.beta1:g}" if args.beta1 is not None else "") + (
        f"_seed{args.seed}" if args.seed else "")
    out = args.out or OUT / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(
        {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
         "test_error": errors,
         "seconds": time.perf_counter() - start}, indent=1))


if __name__ == "__main__":
    main()
