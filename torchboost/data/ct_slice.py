"""UCI "Relative location of CT slices on axial axis" (SLICE), Hu et al. 2017, Sec. 6.

The file ``slice_localization_data.csv`` (53,500 rows) has the header
``patientId,value0,...,value383,reference``: 384 image-descriptor features (bone and air
histograms) and the target ``reference``, the slice's relative position on the body's axis
(0–100).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torchboost.data._files import open_text, reading, resolve_file
from torchboost.data._parse import read_numeric_csv
from torchboost.data.dataset import Dataset
from torchboost.data.folder import dataset_path

__all__ = ["SLICE_FILE", "load_slice"]

SLICE_FILE = "slice_localization_data.csv"
"""The file name in UCI's archive (a ``.gz`` copy is accepted too)."""

_HINT = (
    "download it from https://archive.ics.uci.edu/dataset/206/"
    "relative+location+of+ct+slices+on+axial+axis, unzip and place it there"
)


def load_slice(path_or_root: str | Path | None = None, test_fraction: float = 0.1) -> Dataset:
    """SLICE as a regression data set, split by patient.

    ``path_or_root`` is the CSV itself or the directory holding ``slice_localization_data.csv``
    (or ``.csv.gz``); ``None``: the data folder's ``slice/`` (:mod:`torchboost.data.folder`).
    Features are the 384 ``value*`` columns; the target is ``reference``;
    ``patientId`` is used only for the split and dropped.

    Split (deterministic, no seed): the patient ids are sorted and the last
    ``round(test_fraction * n_patients)`` of them (at least one, and at least one patient is left
    for training) are held out, so every test slice comes from a patient never seen in training.
    With UCI's 97 patients (ids 0–96) and the default 0.1, patients 87–96 are the test set.
    Rows keep the file order within each split.
    """
    if path_or_root is None:
        path_or_root = dataset_path("slice")
    path = resolve_file(path_or_root, "SLICE", [SLICE_FILE], _HINT)
    with reading(path), open_text(path) as f:
        header = [name.strip().strip('"') for name in f.readline().strip().split(",")]
    if "patientId" not in header or "reference" not in header:
        raise ValueError(
            f"{path}: expected a header with 'patientId' and 'reference', got {header[:3]}"
        )
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    table = read_numeric_csv(path, skiprows=1)
    if table.shape[1] != len(header):
        raise ValueError(f"{path}: header has {len(header)} columns, data rows {table.shape[1]}")
    patient = table[:, header.index("patientId")]
    patients = np.unique(patient)
    if len(patients) < 2:
        raise ValueError(
            f"{path}: a patient split needs at least 2 patients, found {len(patients)}"
        )
    n_test_patients = min(len(patients) - 1, max(1, round(test_fraction * len(patients))))
    is_test = np.isin(patient, patients[len(patients) - n_test_patients :])
    features = [j for j, name in enumerate(header) if name not in ("patientId", "reference")]
    return Dataset.from_arrays(
        "slice",
        table[:, features],
        table[:, header.index("reference")],
        train=np.flatnonzero(~is_test),
        test=np.flatnonzero(is_test),
        task="regression",
    )
