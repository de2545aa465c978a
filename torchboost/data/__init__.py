"""Data for online boosting: local-file loaders, a seeded mini-batch stream, synthetic sets.

Every loader reads files already on disk (it never downloads) and returns a :class:`Dataset`;
without a path, MNIST, Adult, SLICE and YEAR are read from the data folder
(:mod:`torchboost.data.folder`: ``TORCHBOOST_DATA``, ``--data-dir``);
a missing file raises ``FileNotFoundError`` naming the expected file(s), the directory searched
and where to get them. The data sets and splits follow Hu et al., "Gradient Boosting on
Stochastic Data Streams" (AISTATS 2017), Sec. 6:

==========================  ==============  =================================================
loader                      task            split
==========================  ==============  =================================================
:func:`load_mnist`          10 classes      canonical 60,000 / 10,000
:func:`load_slice`          regression      by patient: last 10% of sorted patient ids test
:func:`load_year`           regression      UCI's: first 463,715 rows train, last 51,630 test
:func:`load_abalone`        regression      seeded random 90% / 10% (bundled copy by default)
:func:`load_a9a`            binary          LIBSVM's a9a / a9a.t
:func:`load_adult`          binary          UCI's adult.data / adult.test, A9A's 123 features
:func:`load_csv_regression` regression      seeded random (default 90% / 10%)
:func:`load_balance`        3 classes       seeded random (default 80% / 20%)
:func:`load_mushroom`       binary          seeded random (default 80% / 20%)
==========================  ==============  =================================================

Examples:
    >>> from torchboost.data import DataStream, load_abalone, make_test_tensors
    >>> ds = load_abalone()
    >>> stream = DataStream.from_dataset(ds, batch_size=64, seed=0)
    >>> x_batch, y_batch = next(iter(stream))
    >>> x_batch.shape, y_batch.shape, len(stream)
    (torch.Size([64, 10]), torch.Size([64]), 59)
    >>> x_test, y_test = make_test_tensors(stream, ds)
    >>> x_test.shape
    torch.Size([418, 10])
"""

from torchboost.data.abalone import load_abalone
from torchboost.data.adult import ADULT_LAYOUT, ADULT_N_FEATURES, load_adult
from torchboost.data.batch_groups import BatchGroup, BatchGroups, ResumableBatchGroups
from torchboost.data.csv_regression import load_csv_regression
from torchboost.data.ct_slice import load_slice
from torchboost.data.dataset import Dataset, Task
from torchboost.data.exhaustion import ExhaustedStreamWarning
from torchboost.data.folder import DATA_ENV, data_dir, dataset_path
from torchboost.data.libsvm import A9A_N_FEATURES, load_a9a, read_libsvm
from torchboost.data.loader import LoaderStream
from torchboost.data.mnist import MNIST_FILES, load_mnist, mnist_dataset, read_idx
from torchboost.data.multiclass import MUSHROOM_CATEGORIES, load_balance, load_mushroom
from torchboost.data.passes import MultiPassStream
from torchboost.data.screening import (
    REASONS,
    BadInputError,
    Policy,
    ResumableScreenedStream,
    ScreenedStream,
)
from torchboost.data.stream import STD_FLOOR, DataStream, Standardize, make_test_tensors
from torchboost.data.synthetic import synthetic_classification, synthetic_regression
from torchboost.data.year import YEAR_N_TRAIN, load_year

__all__ = [
    "A9A_N_FEATURES",
    "ADULT_LAYOUT",
    "ADULT_N_FEATURES",
    "DATA_ENV",
    "MNIST_FILES",
    "MUSHROOM_CATEGORIES",
    "REASONS",
    "STD_FLOOR",
    "YEAR_N_TRAIN",
    "BadInputError",
    "BatchGroup",
    "BatchGroups",
    "DataStream",
    "Dataset",
    "ExhaustedStreamWarning",
    "LoaderStream",
    "MultiPassStream",
    "Policy",
    "ResumableBatchGroups",
    "ResumableScreenedStream",
    "ScreenedStream",
    "Standardize",
    "Task",
    "data_dir",
    "dataset_path",
    "load_a9a",
    "load_abalone",
    "load_adult",
    "load_balance",
    "load_csv_regression",
    "load_mnist",
    "load_mushroom",
    "load_slice",
    "load_year",
    "make_test_tensors",
    "mnist_dataset",
    "read_idx",
    "read_libsvm",
    "synthetic_classification",
    "synthetic_regression",
]
