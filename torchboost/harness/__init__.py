"""The research harness: the comparison driver that runs SGB and its variants, OGB and
ConvexHullOGB against stagewise GB, the base learner, a wide and a deep network at equal
compute; its configurations and data-set registry; stopping rules; stagewise GB on the unit
schedule; figures; the ``torchboost`` command. Built on :mod:`torchboost.lightning`, which is
the Lightning integration only.

* :data:`METHODS`, :func:`register_method` (:mod:`.methods`) — one registry entry per method;
* :func:`run_comparison` (:mod:`.driver`) — every configured method to its budget, evaluated
  every ``K`` compute units; ``results.json``, figures and TensorBoard logs;
* :class:`ExperimentConfig`, :class:`DatasetSpec`, :data:`DATASETS`, :func:`register_dataset`
  (:mod:`.configs`) — one configuration per run, one registry entry per data set;
* :class:`StoppingRule`, :class:`ConvergenceCallback`, :class:`TrainingClock`
  (:mod:`.stopping`) — stream passes until a plateau, a budget or a cap on passes;
* :func:`run_stagewise` (:mod:`.stagewise`) — stagewise GB with validation early stopping on
  the streaming methods' unit schedule;
* :func:`fit_streaming`, :func:`build_seeded` (:mod:`.compare`) — one seeded streaming fit on a
  Lightning ``Trainer``;
* :func:`plot_compute_curves` (:mod:`.plotting`); :func:`~torchboost.harness.cli.main`, the
  ``torchboost`` command (:mod:`.cli`).
"""

from torchboost.harness.compare import build_seeded, fit_streaming
from torchboost.harness.configs import (
    DATASETS,
    DatasetSpec,
    ExperimentConfig,
    LearnerConfig,
    load_dataset,
    register_dataset,
    with_data_dir,
)
from torchboost.harness.driver import run_comparison, table_row
from torchboost.harness.methods import METHODS, MethodSpec, register_method
from torchboost.harness.plotting import plot_compute_curves
from torchboost.harness.stagewise import run_stagewise
from torchboost.harness.stopping import (
    STOP_REASONS,
    ConvergenceCallback,
    StoppingRule,
    TrainingClock,
)

__all__ = [
    "DATASETS",
    "METHODS",
    "STOP_REASONS",
    "ConvergenceCallback",
    "DatasetSpec",
    "ExperimentConfig",
    "LearnerConfig",
    "MethodSpec",
    "StoppingRule",
    "TrainingClock",
    "build_seeded",
    "fit_streaming",
    "load_dataset",
    "plot_compute_curves",
    "register_dataset",
    "register_method",
    "run_comparison",
    "run_stagewise",
    "table_row",
    "with_data_dir",
]
