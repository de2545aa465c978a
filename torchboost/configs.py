"""Experiment configurations: which data, which weak learners, which loss and booster settings.

A configuration is a plain dataclass that round-trips through YAML, so ``torchboost run
config.yaml`` and the scripts in ``experiments/`` share one description. The defaults per data
set follow the SGB paper's Sec. 6.2 (two-layer nets; 1 hidden unit for ABALONE/A9A, 10 for
YEAR/SLICE with leaky ReLU on SLICE, a 5×5 stride-2 convolution with 5 channels for MNIST;
sigmoid elsewhere; Adam).

Example:
    >>> cfg = ExperimentConfig.for_dataset("abalone")
    >>> cfg.loss, cfg.learner.hidden, cfg.n_learners
    ('squared', 1, 16)
    >>> ExperimentConfig.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from torch import nn

from torchboost import data
from torchboost.learners import ConvNet, TwoLayerNet

__all__ = ["DATASETS", "ExperimentConfig", "LearnerConfig", "load_dataset"]


@dataclass
class LearnerConfig:
    """A weak learner: ``"two_layer"`` (:class:`TwoLayerNet`), ``"conv"`` (:class:`ConvNet`)
    or ``"linear"``."""

    kind: str = "two_layer"
    hidden: int = 10
    activation: str = "sigmoid"

    def factory(self, dataset: data.Dataset, out_features: int) -> Callable[[], nn.Module]:
        """A zero-argument constructor of one weak learner for ``dataset``."""
        shape = dataset.input_shape
        if self.kind == "conv":
            if len(shape) != 3:
                raise ValueError(f"conv learners need image inputs (C, H, W), got {shape}")
            return lambda: ConvNet(shape[0], shape[1], out_features,
                                   channels=self.hidden, activation=self.activation)
        if self.kind == "two_layer":
            return lambda: TwoLayerNet(dataset.n_features, self.hidden, out_features,
                                       self.activation)
        if self.kind == "linear":
            return lambda: nn.Sequential(nn.Flatten(), nn.Linear(dataset.n_features, out_features))
        raise ValueError(f"unknown learner kind {self.kind!r} (two_layer, conv, linear)")


@dataclass
class ExperimentConfig:
    """One SGB-vs-GB run. ``path`` is the data file or folder (``None``: the bundled ABALONE).

    ``passes > 1`` streams the training set that many times in fresh random orders, i.e.
    i.i.d.-style resampling for data sets smaller than the stream the algorithm needs.
    """

    name: str = "abalone"
    dataset: str = "abalone"
    path: str | None = None
    loss: str = "squared"
    n_outputs: int = 1
    n_learners: int = 16
    step: float | None = None
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    lr: float = 1e-3
    batch_size: int = 32
    passes: int = 1
    max_train: int | None = None
    eval_points: int = 40
    gb_max_epochs: int = 10
    gb_patience: int = 2
    seed: int = 0

    @classmethod
    def for_dataset(cls, dataset: str, path: str | None = None,
                    **overrides: Any) -> ExperimentConfig:
        """The paper's setting for a known data set, with ``overrides`` applied."""
        if dataset not in DATASETS:
            raise ValueError(f"unknown data set {dataset!r}; known: {sorted(DATASETS)}")
        base = dict(DATASETS[dataset])
        learner = LearnerConfig(**base.pop("learner"))
        merged = {"name": dataset, "dataset": dataset, "path": path, "learner": learner,
                  **base, **overrides}
        if isinstance(merged["learner"], dict):
            merged["learner"] = LearnerConfig(**merged["learner"])
        return cls(**merged)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ExperimentConfig:
        values = dict(values)
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown configuration keys: {sorted(unknown)}")
        if isinstance(values.get("learner"), dict):
            values["learner"] = LearnerConfig(**values["learner"])
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path) -> ExperimentConfig:
        return cls.from_dict(yaml.safe_load(Path(path).read_text()))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)



#: The paper's per-data-set settings (Hu et al. 2017, Sec. 6.2 and footnote 4).
DATASETS: dict[str, dict[str, Any]] = {
    "abalone": {"loss": "squared", "n_learners": 16, "lr": 1e-2, "passes": 5,
                "learner": {"kind": "two_layer", "hidden": 1, "activation": "sigmoid"}},
    "adult": {"loss": "logistic", "n_learners": 8, "lr": 1e-2,
              "learner": {"kind": "two_layer", "hidden": 1, "activation": "sigmoid"}},
    "a9a": {"loss": "logistic", "n_learners": 8, "lr": 1e-2,
            "learner": {"kind": "two_layer", "hidden": 1, "activation": "sigmoid"}},
    "mnist": {"loss": "softmax", "n_learners": 16, "n_outputs": 10, "lr": 1e-2,
              "learner": {"kind": "conv", "hidden": 5, "activation": "sigmoid"}},
    "slice": {"loss": "squared", "n_learners": 16, "lr": 1e-3,
              "learner": {"kind": "two_layer", "hidden": 10, "activation": "leaky_relu"}},
    "year": {"loss": "squared", "n_learners": 16, "lr": 1e-3,
             "learner": {"kind": "two_layer", "hidden": 10, "activation": "sigmoid"}},
    "csv": {"loss": "squared", "n_learners": 16, "lr": 1e-3,
            "learner": {"kind": "two_layer", "hidden": 10, "activation": "leaky_relu"}},
}


def load_dataset(config: ExperimentConfig) -> data.Dataset:
    """Load the configuration's data set from local files (never downloads)."""
    loaders: dict[str, Callable[[Any], data.Dataset]] = {
        "abalone": data.load_abalone,
        "adult": data.load_adult,
        "a9a": data.load_a9a,
        "mnist": data.load_mnist,
        "slice": data.load_slice,
        "year": data.load_year,
        "csv": data.load_csv_regression,
    }
    if config.dataset not in loaders:
        raise ValueError(f"unknown data set {config.dataset!r}; known: {sorted(loaders)}")
    if config.path is None and config.dataset != "abalone":
        raise ValueError(f"data set {config.dataset!r} needs path= (a local file or folder)")
    return loaders[config.dataset](config.path)
