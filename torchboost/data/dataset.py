"""The :class:`Dataset` container every loader in :mod:`torchboost.data` returns.

Examples:
    >>> import torch
    >>> ds = Dataset(
    ...     name="toy",
    ...     x_train=torch.zeros(8, 3),
    ...     y_train=torch.zeros(8),
    ...     x_test=torch.zeros(2, 3),
    ...     y_test=torch.zeros(2),
    ...     task="regression",
    ...     n_classes=None,
    ... )
    >>> ds
    Dataset(name='toy', task='regression', train=8×3, test=2×3)
    >>> ds.n_features
    3
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch
from torch import Tensor

__all__ = ["Dataset", "Task"]

Task = Literal["regression", "binary", "multiclass"]
"""The three prediction tasks a :class:`Dataset` can hold."""


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test pair of tensors plus what the task is.

    Invariants (checked on construction, so a loader bug fails loudly):

    * ``x_train``/``x_test`` are ``float32`` with the same per-example shape
      (``(n, d)`` for tabular data, ``(n, 1, 28, 28)`` for MNIST);
    * for ``task="regression"`` the targets are ``float32`` of shape ``(n,)`` and
      ``n_classes`` is ``None``;
    * for ``"binary"``/``"multiclass"`` the labels are ``int64`` of shape ``(n,)`` with values
      in ``[0, n_classes)``; binary data sets have ``n_classes == 2``.

    Equality is identity (``eq=False``): comparing tensors element-wise is not a boolean.
    """

    name: str
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    task: Task
    n_classes: int | None

    def __post_init__(self) -> None:
        if self.task not in get_args(Task):
            raise ValueError(
                f"{self.name}: task must be one of {get_args(Task)}, got {self.task!r}"
            )
        for split, x, y in (
            ("train", self.x_train, self.y_train),
            ("test", self.x_test, self.y_test),
        ):
            if x.dtype != torch.float32:
                raise ValueError(f"{self.name}: x_{split} must be float32, got {x.dtype}")
            if x.ndim < 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
                raise ValueError(
                    f"{self.name}: expected x_{split} (n, ...) and y_{split} (n,), got "
                    f"{tuple(x.shape)} and {tuple(y.shape)}"
                )
            self._check_targets(split, y)
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"{self.name}: train and test examples differ in shape: "
                f"{tuple(self.x_train.shape[1:])} vs {tuple(self.x_test.shape[1:])}"
            )

    @classmethod
    def from_arrays(
        cls,
        name: str,
        x: np.ndarray,
        y: np.ndarray,
        train: np.ndarray,
        test: np.ndarray,
        task: Task,
        n_classes: int | None = None,
    ) -> Dataset:
        """Build from whole-file arrays and the row indices of each split.

        ``x`` becomes ``float32``; ``y`` becomes ``float32`` for regression and ``int64``
        otherwise. Rows are taken in the order the index arrays give.
        """
        y_dtype = np.float32 if task == "regression" else np.int64

        def take(rows: np.ndarray) -> tuple[Tensor, Tensor]:
            x_rows = np.ascontiguousarray(x[rows], dtype=np.float32)
            y_rows = np.ascontiguousarray(y[rows], dtype=y_dtype)
            return torch.from_numpy(x_rows), torch.from_numpy(y_rows)

        x_train, y_train = take(train)
        x_test, y_test = take(test)
        return cls(name, x_train, y_train, x_test, y_test, task, n_classes)

    def _check_targets(self, split: str, y: Tensor) -> None:
        if self.task == "regression":
            if self.n_classes is not None:
                raise ValueError(f"{self.name}: regression data must have n_classes=None")
            if y.dtype != torch.float32:
                raise ValueError(
                    f"{self.name}: regression y_{split} must be float32, got {y.dtype}"
                )
            return
        if self.n_classes is None or self.n_classes < 2:
            raise ValueError(f"{self.name}: {self.task} data needs n_classes >= 2")
        if self.task == "binary" and self.n_classes != 2:
            raise ValueError(f"{self.name}: binary data must have n_classes=2")
        if y.dtype != torch.int64:
            raise ValueError(f"{self.name}: class labels y_{split} must be int64, got {y.dtype}")
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= self.n_classes):
            raise ValueError(f"{self.name}: labels in y_{split} must lie in [0, {self.n_classes})")

    @property
    def n_train(self) -> int:
        """Number of training examples."""
        return self.x_train.shape[0]

    @property
    def n_test(self) -> int:
        """Number of test examples."""
        return self.x_test.shape[0]

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one example, e.g. ``(123,)`` for A9A or ``(1, 28, 28)`` for MNIST."""
        return tuple(self.x_train.shape[1:])

    @property
    def n_features(self) -> int:
        """Number of input values per example (the product of :attr:`input_shape`)."""
        return math.prod(self.input_shape)

    def __repr__(self) -> str:
        shape = "×".join(str(s) for s in self.input_shape)
        classes = f", n_classes={self.n_classes}" if self.n_classes is not None else ""
        return (
            f"Dataset(name={self.name!r}, task={self.task!r}{classes}, "
            f"train={self.n_train}×{shape}, test={self.n_test}×{shape})"
        )
