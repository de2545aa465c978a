"""One folder for the real data sets: where the loaders, the experiments and ``torchboost run``
look when not given a path.

The folder is, first found: the path given (a loader's ``root``, an experiment's or the CLI's
``--data-dir``), the environment variable ``TORCHBOOST_DATA``, ``../shared/data`` beside a
source checkout (where this project's machines keep them), else ``~/torchboost-data``. Inside
it, each data set has its place (:data:`LAYOUT`), in the files' own formats (nothing is
converted; gzip or plain):

============================  ===========================================================
``mnist/``                    ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``
``adult/``                    ``adult.data[.gz]``, ``adult.test[.gz]`` (UCI)
``slice/``                    ``slice_localization_data.csv[.gz]`` (UCI CT slice)
``year/``                     ``YearPredictionMSD.txt[.gz]`` (UCI)
``regression/``               ``keggundirected.csv.gz``, ``protein``, ``kin40k``, ``pol``
``multiclass/``               ``balance-scale_onehot.csv``, ``mushroom_keel.csv.gz``
============================  ===========================================================

Abalone needs none of it: a copy ships with the library.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["DATA_ENV", "LAYOUT", "add_data_dir_option", "data_dir", "dataset_path", "missing"]

#: the environment variable naming the data folder
DATA_ENV = "TORCHBOOST_DATA"

#: where each data set lies inside the folder, and the files it needs there
LAYOUT: dict[str, tuple[str, str]] = {
    "mnist": ("mnist", "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
              "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz"),
    "adult": ("adult", "adult.data.gz and adult.test.gz (or unzipped)"),
    "slice": ("slice", "slice_localization_data.csv (or .csv.gz)"),
    "year": ("year", "YearPredictionMSD.txt (or .txt.gz)"),
    "keggundirected": ("regression/keggundirected.csv.gz", "the CSV (target last)"),
    "protein": ("regression/protein.csv.gz", "the CSV (target last)"),
    "kin40k": ("regression/kin40k.csv.gz", "the CSV (target last)"),
    "pol": ("regression/pol.csv.gz", "the CSV (target last)"),
    "balance": ("multiclass/balance-scale_onehot.csv", "the CSV"),
    "mushroom": ("multiclass/mushroom_keel.csv.gz", "the CSV"),
}

#: the folder beside a source checkout where this project's machines keep the data
_CHECKOUT = Path(__file__).resolve().parents[3] / "shared" / "data"


def data_dir(given: str | Path | None = None) -> Path:
    """The data folder: ``given``, else ``$TORCHBOOST_DATA``, else ``../shared/data`` beside a
    source checkout when it exists, else ``~/torchboost-data`` (module docstring)."""
    if given is not None and str(given) != "":
        return Path(given).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    if _CHECKOUT.is_dir():
        return _CHECKOUT
    return Path.home() / "torchboost-data"


def dataset_path(name: str, given: str | Path | None = None) -> Path:
    """Where the data set ``name`` (a key of :data:`LAYOUT`) lies in the data folder; a
    ``FileNotFoundError`` saying what to put where when it is not there."""
    if name not in LAYOUT:
        raise ValueError(f"no place in the data folder for {name!r}; known: {sorted(LAYOUT)}")
    path = data_dir(given) / LAYOUT[name][0]
    if not path.exists():
        raise FileNotFoundError(missing(name, path))
    return path


def missing(name: str, path: Path) -> str:
    """How to fill the data folder for ``name``, whose place ``path`` is empty."""
    place, files = LAYOUT[name]
    put = f"Put {files} there" if Path(place).suffix else f"Put {files} under it"
    return (f"{name}: {path} not found. {put} (the data folder's layout: docs/guide/data.md), "
            f"or point {DATA_ENV}=... or --data-dir at a folder that has {place}")


class _DataDirAction(argparse.Action):
    """``--data-dir DIR``: the data folder of this run, for every loader and experiment in the
    process (it sets ``TORCHBOOST_DATA``, which :func:`data_dir` reads)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 value: Any, option_string: str | None = None) -> None:
        os.environ[DATA_ENV] = str(Path(value).expanduser())
        setattr(namespace, self.dest, Path(value).expanduser())


def add_data_dir_option(parser: argparse.ArgumentParser) -> None:
    """Give a script's ``parser`` the option ``--data-dir DIR`` (see :func:`data_dir`)."""
    parser.add_argument("--data-dir", action=_DataDirAction, default=None, metavar="DIR",
                        help=f"the data folder (default: ${DATA_ENV}, else ../shared/data "
                             "beside a checkout, else ~/torchboost-data; layout: "
                             "docs/guide/data.md)")
