"""Experiment configurations: which data, which weak learners, which loss and booster settings.

A configuration is a plain dataclass that round-trips through YAML, so ``torchboost run
config.yaml`` and the scripts in ``experiments/`` share one description. The defaults per data
set follow the SGB paper's Sec. 6.2 (two-layer nets; 1 hidden unit for ABALONE/A9A, 10 for
YEAR/SLICE with leaky ReLU on SLICE, a 5×5 stride-2 convolution with 5 channels for MNIST;
sigmoid elsewhere; Adam).

Examples:
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
from torchboost.data.folder import LAYOUT, dataset_path
from torchboost.harness.methods import METHODS
from torchboost.learners import ConvNet, ResidualNet, TwoLayerNet
from torchboost.learners.chained import chainable
from torchboost.params import flag, integer, positive_float, positive_int
from torchboost.registries import add

__all__ = ["DATASETS", "OPTIMIZERS", "SCHEDULES", "DatasetSpec", "ExperimentConfig",
           "LearnerConfig", "load_dataset", "register_dataset", "with_data_dir"]


@dataclass
class LearnerConfig:
    """A weak learner: ``"two_layer"`` (:class:`TwoLayerNet`), ``"conv"`` (:class:`ConvNet`)
    or ``"linear"``. ``chained``: the boosters chain their learners
    (:mod:`~torchboost.learners.chained`), and the wide and deep baselines get the chained
    ensemble's parameter count (:meth:`wide_factory`)."""

    kind: str = "two_layer"
    hidden: int = 10
    activation: str = "sigmoid"
    chained: bool = False

    def __post_init__(self) -> None:
        flag("chained", self.chained)

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

    def widened(self, n: int) -> LearnerConfig:
        """One module with the parameter count of ``n`` of these learners: the "wide" baseline
        trained end-to-end instead of boosted.

        * ``two_layer``: ``hidden × n`` hidden units, i.e. ``TwoLayerNet(d, n·h, m)``;
        * ``conv``: ``channels × n`` convolution channels;
        * ``linear``: the same linear model — a sum of ``n`` linear learners is itself one linear
          model, so no wider linear model exists (its parameter count stays that of one learner).

        The wide two-layer and conv nets have exactly ``n ×`` the weak learner's parameters except
        for the output bias, which the ``n`` learners hold ``n`` times and the wide net once:
        ``params(wide) = n · params(weak) − (n − 1) · m`` for ``m`` outputs.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if self.kind == "linear":
            return dataclasses.replace(self)
        if self.kind not in ("two_layer", "conv"):
            raise ValueError(f"unknown learner kind {self.kind!r} (two_layer, conv, linear)")
        return dataclasses.replace(self, hidden=self.hidden * n)

    def wide_factory(self, dataset: data.Dataset, out_features: int,
                     n: int) -> Callable[[], nn.Module]:
        """A zero-argument constructor of the "wide" baseline: :meth:`widened` ``(n)``, or for
        chained learners the width of this learner (hidden units, channels) whose parameter
        count is the closest to the chained ensemble's (``n`` learners, each with its
        ``carry_in`` projection, less ``n − 1`` output biases)."""
        if not self.chained or self.kind == "linear":
            return self.widened(n).factory(dataset, out_features)
        learner = chainable(self.factory(dataset, out_features)())
        target = n * sum(p.numel() for p in learner.parameters()) - (n - 1) * out_features

        def count(width: int) -> int:
            wide = dataclasses.replace(self, hidden=width, chained=False)
            return sum(p.numel() for p in wide.factory(dataset, out_features)().parameters())

        # the count grows linearly with the width: two probes give it
        slope = count(2) - count(1)
        width = max(1, round((target - count(1)) / slope) + 1)
        return dataclasses.replace(self, hidden=width, chained=False).factory(dataset,
                                                                            out_features)

    def deep_factory(self, dataset: data.Dataset, out_features: int, n: int,
                     depth: int) -> Callable[[], nn.Module]:
        """A zero-argument constructor of the "deep" baseline: a :class:`ResidualNet` of
        ``depth`` hidden layers whose width is chosen so that its parameter count is the closest
        to the wide network's (:meth:`wide_factory`: ``n`` learners' parameters less ``n − 1``
        output biases). A conv learner's convolution (its channels, kernel and stride) is the
        deep network's stem; a linear learner has no deep counterpart (``ValueError``)."""
        if self.kind == "linear":
            raise ValueError("a linear learner has no deep counterpart: a sum of linear "
                             "learners is one linear model")
        target = sum(p.numel() for p in self.wide_factory(dataset, out_features, n)()
                     .parameters())
        if self.kind == "conv":
            probe = self.factory(dataset, out_features)()
            conv, activation = probe[0], self.activation

            def stem() -> nn.Module:
                return nn.Sequential(nn.Conv2d(conv.in_channels, conv.out_channels,
                                               conv.kernel_size, stride=conv.stride),
                                     type(probe[1])(), nn.Flatten())
            features = probe[3].in_features
        else:
            activation, features = self.activation, dataset.n_features

            def stem() -> nn.Module:
                return nn.Flatten()

        stem_params = sum(p.numel() for p in stem().parameters())

        def count(width: int) -> int:
            return stem_params + (features + 1) * width \
                + (depth - 1) * (width + 1) * width + (width + 1) * out_features

        width = min(range(1, max(2, target)), key=lambda w: (abs(count(w) - target), w))
        return lambda: ResidualNet(features, width, out_features, depth, activation, stem())

    def wide_prediction_units(self, n: int) -> int:
        """Weak-learner predictions one prediction of :meth:`widened` ``(n)`` costs: ``n``, or 1
        for a linear learner (the wide model is the weak learner itself)."""
        return 1 if self.kind == "linear" else n


#: The learning-rate schedules of a comparison (see :class:`ExperimentConfig`).
SCHEDULES = ("constant", "cosine")

#: The learners' optimizers of a comparison (see :class:`ExperimentConfig`).
OPTIMIZERS = ("adam", "schedule_free")


@dataclass
class ExperimentConfig:
    """One comparison run. ``path`` is the data file or folder (``None``: the bundled ABALONE).

    ``methods`` (default all of :data:`METHODS`): ``base`` (one weak learner), ``wide`` (one
    module with the ensemble's parameter count, :meth:`LearnerConfig.widened`), ``GB``
    (stagewise), ``SGB`` (the paper: gradient targets, fixed step), ``SGB_newton`` (Newton
    targets), ``SGB_learned`` (Newton targets where the loss has a Hessian, and learned steps),
    ``OGB`` and ``ConvexHullOGB`` (online gradient boosting with its default objective, steps
    and bound).

    Stopping: ``val_fraction`` of the (``max_train``-subsampled) training rows are held out as a
    validation split, never trained on, for every stopping decision. GB trains each stage until
    its validation score has not improved for ``gb_patience`` epochs (at most
    ``gb_max_epochs``); the streaming methods stream seeded passes over the training rows until
    their validation curve plateaus (``plateau_tol`` relative improvement over the last quarter
    of their units, after ``min_passes`` passes or all ``max_passes``), their units reach
    ``max_units`` (default: GB's total units) or ``max_passes`` passes are done — see
    :class:`~torchboost.harness.StoppingRule`.

    ``schedule``: ``"constant"`` (the learning rate ``lr`` throughout, with the stopping above)
    or ``"cosine"``: every method runs a stated budget under a cosine decay of its rate to 0
    (:func:`~torchboost.cosine_schedule`) — the streaming methods exactly ``max_passes`` passes
    (no plateau or unit stop: a cosine ends where it was told to), GB each stage for the same
    number of epochs, chosen so that GB's total units equal the ensembles' (``3N ×
    max_passes`` per example), each stage under its own cosine (kept: the stage's best epoch
    on the validation split).

    ``lr_grid``: learning rates to try for every method (``None``: only ``lr``); each method
    reports the run whose final validation loss is lowest, and every candidate's final
    validation loss and test metric. ``lr_fan_in``: every method's weights wider than this
    fan-in get the rate times ``lr_fan_in / fan_in`` (the library's default rule,
    :class:`~torchboost.learners.OptimizerSpec`; ``None``: one rate for every parameter).

    ``optimizer``: every learner's optimizer, ``"adam"`` (the SGB paper's) or
    ``"schedule_free"`` (the library's default, :data:`~torchboost.learners.DEFAULT_OPTIMIZER`:
    horizon-free, so only with ``schedule="constant"``). ``grid_extensions``: while a method's
    chosen rate lies at an edge of the rates tried, the driver tries the next rate beyond that
    edge (the grid's own ratio), at most this many times per edge; a rate still at an edge is
    reported (``lr_at_edge``). ``seeds``: after the rate is chosen (on seed ``seed``), every
    method runs again at that rate from ``seeds − 1`` further seeds (initialisation and pass
    order; the data split stays that of ``seed``), and reports the mean and standard deviation.
    ``fixed_budget``: under a constant rate too, every method runs the stated budget of a
    cosine run (``max_passes`` passes; GB the epochs per stage that give it the same units),
    without the plateau or unit stops. ``one_pass``: the streaming regime: every method reads
    each training row once — the streaming methods one pass, GB its ``N`` stages one after
    another on ``N`` consecutive chunks of one pass (one epoch each). ``deep_depth``: hidden
    layers of the ``deep`` baseline (:meth:`LearnerConfig.deep_factory`).

    ``rounds_per_step``: the streaming methods learn this many rounds (batches) per Lightning
    step, through :class:`~torchboost.data.BatchGroups`. GB trains in a plain loop, so with one
    round per step Lightning's own cost per step (about 0.2 ms, 20–30 % of a small CPU round)
    counts in the streaming methods' wall time only. Their boosters are unchanged; the
    evaluation points, pass ends and stops are then checked at group ends (a stop up to
    ``rounds_per_step − 1`` rounds after the rule fires).
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
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    max_train: int | None = None
    val_fraction: float = 0.1
    plateau_tol: float = 0.01
    min_passes: int = 10
    max_passes: int = 50
    max_units: float | None = None
    eval_points: int = 40
    gb_max_epochs: int = 20
    gb_patience: int = 2
    rounds_per_step: int = 1
    schedule: str = "constant"
    lr_grid: list[float] | None = None
    lr_fan_in: float | None = None
    optimizer: str = "adam"
    grid_extensions: int = 0
    seeds: int = 1
    one_pass: bool = False
    fixed_budget: bool = False
    deep_depth: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_learners", "n_outputs", "batch_size", "eval_points", "gb_max_epochs",
                     "gb_patience", "min_passes", "max_passes"):  # (min_passes is capped at
            positive_int(name, getattr(self, name))              # max_passes by the driver)
        positive_float("lr", self.lr)
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"unknown or no methods {unknown}; known: {list(METHODS)}")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must lie in (0, 1), got {self.val_fraction}")
        if isinstance(self.rounds_per_step, bool) or not isinstance(self.rounds_per_step, int) \
                or self.rounds_per_step < 1:
            raise ValueError(f"rounds_per_step must be an integer >= 1, got "
                             f"{self.rounds_per_step!r}")
        positive_int("seeds", self.seeds)
        positive_int("deep_depth", self.deep_depth)
        integer("seed", self.seed, 0)
        if self.max_train is not None:
            positive_int("max_train", self.max_train)
        flag("one_pass", self.one_pass)
        flag("fixed_budget", self.fixed_budget)
        if isinstance(self.grid_extensions, bool) or not isinstance(self.grid_extensions, int) \
                or self.grid_extensions < 0:
            raise ValueError(f"grid_extensions must be an integer >= 0, got "
                             f"{self.grid_extensions!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.optimizer == "schedule_free" and self.schedule != "constant":
            raise ValueError("the schedule-free optimizer needs no schedule: use "
                             "schedule='constant' with optimizer='schedule_free'")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.lr_grid is not None and (not self.lr_grid or not all(
                isinstance(lr, int | float) and lr > 0 for lr in self.lr_grid)):
            raise ValueError(f"lr_grid must be a non-empty list of rates > 0, got "
                             f"{self.lr_grid!r}")

    @classmethod
    def for_dataset(cls, dataset: str, path: str | None = None,
                    **overrides: Any) -> ExperimentConfig:
        """The paper's setting for a known data set, with ``overrides`` applied."""
        if dataset not in DATASETS:
            raise ValueError(f"unknown data set {dataset!r}; known: {sorted(DATASETS)}")
        base = DATASETS[dataset].settings()
        learner = LearnerConfig(**base.pop("learner"))
        merged = {"name": dataset, "dataset": dataset, "path": path, "learner": learner,
                  **base, **overrides}
        if isinstance(merged["learner"], dict):
            merged["learner"] = LearnerConfig(**merged["learner"])
        return cls(**merged)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ExperimentConfig:
        if not isinstance(values, dict):
            raise ValueError(f"a configuration is a mapping of keys to values, got "
                             f"{type(values).__name__}")
        values = dict(values)
        unknown = set(values) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown configuration keys: {sorted(unknown)}")
        learner = values.get("learner")
        if isinstance(learner, dict):
            fields = {f.name for f in dataclasses.fields(LearnerConfig)}
            if set(learner) - fields:
                raise ValueError(f"unknown learner keys: {sorted(set(learner) - fields)}; "
                                 f"known: {sorted(fields)}")
            values["learner"] = LearnerConfig(**learner)
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path) -> ExperimentConfig:
        """The configuration in the YAML file ``path``; ``ValueError`` naming the file for a
        file that is not YAML, not a mapping, or holds an unknown or invalid setting."""
        try:
            return cls.from_dict(yaml.safe_load(Path(path).read_text()))
        except (ValueError, TypeError, yaml.YAMLError) as error:
            raise ValueError(f"{path}: {error}") from error

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class DatasetSpec:
    """One data set of the comparisons: how to load it, the settings of its runs, its metric.

    ``load`` reads local files (``path``: a file or folder; never downloads); ``bundled`` data
    sets load without one. ``loss``, ``n_learners``, ``n_outputs``, ``lr`` and ``learner`` are
    :class:`ExperimentConfig`'s defaults for it; ``paper`` the SGB paper's Table 1 (base, GB,
    SGB average test loss) where it has a row (a data set without ``path`` is read from the data
    folder, :mod:`torchboost.data.folder`, where it has a place there); ``comparison`` the settings
    ``experiments/sgb_vs_gb.py`` adds for its runs. Adding a data set is its loader and one
    :func:`register_dataset` call.
    """

    name: str
    load: Callable[[Any], data.Dataset]
    loss: str
    n_learners: int
    lr: float
    learner: dict[str, Any]
    n_outputs: int = 1
    bundled: bool = False
    paper: tuple[float, float, float] | None = None
    comparison: dict[str, Any] = field(default_factory=dict)

    @property
    def metric(self) -> str:
        """The comparison's test metric: ``"MSE"`` for squared loss, else the error rate."""
        return "MSE" if self.loss == "squared" else "error"

    def settings(self) -> dict[str, Any]:
        """:class:`ExperimentConfig`'s fields for this data set."""
        return {"loss": self.loss, "n_learners": self.n_learners, "n_outputs": self.n_outputs,
                "lr": self.lr, "learner": dict(self.learner)}


#: Every data set :meth:`ExperimentConfig.for_dataset` knows, in the comparison table's order
#: (:func:`register_dataset` adds one).
DATASETS: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Add ``spec`` to :data:`DATASETS` (a name registered twice is an error)."""
    return add(DATASETS, spec, "data set")


# The paper's per-data-set settings (Hu et al. 2017, Sec. 6.2 and footnote 4). Not from the
# paper: MNIST uses N = 8 learners (16 reached the same error at twice the compute), and the
# generic regression streams (``csv``) Adam's rate 1e-2 (at 1e-3 no method had converged after
# 50 passes of kin40k).
_ONE_SIGMOID = {"kind": "two_layer", "hidden": 1, "activation": "sigmoid"}
_CSV = {"loss": "squared", "n_learners": 16, "lr": 1e-2,
        "learner": {"kind": "two_layer", "hidden": 10, "activation": "leaky_relu"}}
register_dataset(DatasetSpec("abalone", data.load_abalone, "squared", 16, 1e-2, _ONE_SIGMOID,
                             bundled=True, paper=(8.2848, 2.1411, 2.1532)))
# the paper's A9A, built here from the raw Adult rows
register_dataset(DatasetSpec("adult", data.load_adult, "logistic", 8, 1e-2, _ONE_SIGMOID,
                             paper=(0.1547, 0.1579, 0.1523)))
register_dataset(DatasetSpec(
    "mnist", data.load_mnist, "softmax", 8, 1e-2,
    {"kind": "conv", "hidden": 5, "activation": "sigmoid"}, n_outputs=10,
    paper=(0.163280, 0.019320, 0.016320), comparison={"batch_size": 64, "eval_points": 30}))
for _name in ("keggundirected", "protein", "kin40k", "pol"):
    register_dataset(DatasetSpec(_name, data.load_csv_regression, **_CSV,
                                 comparison={"batch_size": 64}))
register_dataset(DatasetSpec(
    "slice", data.load_slice, "squared", 16, 1e-3,
    {"kind": "two_layer", "hidden": 10, "activation": "leaky_relu"},
    paper=(0.036045, 0.000755, 0.000713), comparison={"batch_size": 64}))
register_dataset(DatasetSpec(
    "year", data.load_year, "squared", 16, 1e-3,
    {"kind": "two_layer", "hidden": 10, "activation": "sigmoid"},
    paper=(4.99e5, 42.8976, 43.0573), comparison={"batch_size": 64, "max_train": 100_000}))
register_dataset(DatasetSpec("a9a", data.load_a9a, "logistic", 8, 1e-2, _ONE_SIGMOID))
# any regression CSV (``path=``, ``name=``)
register_dataset(DatasetSpec("csv", data.load_csv_regression, **_CSV))


def with_data_dir(config: ExperimentConfig, given: str | Path | None = None
                  ) -> ExperimentConfig:
    """The configuration with its data set's place in the data folder (``given``, else
    ``TORCHBOOST_DATA``: :func:`torchboost.data.data_dir`) as its ``path``, when it has none and
    the data set has a place there (MNIST, Adult, SLICE, YEAR, the regression streams); a
    ``FileNotFoundError`` saying what to put where if it is missing. Else as it is."""
    spec = DATASETS.get(config.dataset)
    if config.path is not None or spec is None or spec.bundled or config.dataset not in LAYOUT:
        return config
    return dataclasses.replace(config, path=str(dataset_path(config.dataset, given)))


def load_dataset(config: ExperimentConfig) -> data.Dataset:
    """Load the configuration's data set from local files (never downloads): its ``path``, else
    its place in the data folder (:func:`with_data_dir`)."""
    spec = DATASETS.get(config.dataset)
    if spec is None:
        raise ValueError(f"unknown data set {config.dataset!r}; known: {sorted(DATASETS)}")
    config = with_data_dir(config)
    if config.path is None and not spec.bundled:
        raise ValueError(f"data set {config.dataset!r} needs path= (a local file or folder)")
    return spec.load(config.path)
