"""Scale-free boosting: running standardisation of a booster's features and regression targets.

With ``standardize=True`` (:class:`~torchboost.SGB`) the learners never see the user's units:

* features are centred and divided by their running standard deviation — per feature for
  ``(B, d)`` inputs, per channel (dimension 1) for images and other ``(B, C, ...)`` inputs; a
  feature whose standard deviation is at most ``1e-6`` times its mean's magnitude (a constant,
  up to rounding) is only centred; a feature whose every value so far was 0 or 1 (an indicator,
  a one-hot column) is left as it is: standardising it would blow a rare category up to
  ``(1 − p) / σ ≈ 1 / √p`` (10 for a 1 % category), and on adult's 123 one-hot columns the
  default learners erred 2-4 % more with them standardised (``docs/results/defaults.md``);
* for a regression loss (squared, absolute, Huber) the labels are standardised the same way,
  output by output, the whole booster — ``y^0``, the partial sums, the learners' targets, the
  step ``η`` and the stall monitor — works in these standardised units, and a prediction
  ``y'`` is mapped back as ``μ + σ y'`` (0 before any label was seen). With ``y0=0`` the
  booster therefore starts from the running label mean, the best constant. Classification
  labels are left as they are.

The statistics are running means and variances over everything seen so far (float64, Chan et
al.'s pairwise update of count, mean and sum of squared deviations, with the first batch's mean
as the shift, so that targets of size 1e8 keep their digits). Features are standardised with the
statistics *including* the current batch (no labels involved); the prediction a round returns is
mapped back with the label statistics of the earlier batches only, so progressive validation
stays honest, and the learners' targets use the statistics including the batch. Multiplying
features or targets by any constant, or shifting them, therefore leaves every learner's inputs,
targets and updates unchanged up to rounding: data in units of 1e8 or 1e-3 train exactly like
standardised data.

The statistics are buffers (saved in ``state_dict``; stored only once a round succeeded, so a
failed round leaves them as they were) and, when the booster trains data-parallel, built from
all-reduced sums, so every replica holds the statistics of the global batch.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from torchboost.compiling import CompiledOnce, CompileFailed
from torchboost.deferred_checks import require_finite
from torchboost.distributed import Synchronizer
from torchboost.scalars import scalar
from torchboost.without_grad import without_grad

__all__ = ["CONSTANT_TOLERANCE", "Moments", "Prepared", "RunningMoments", "Standardizer",
           "prepare"]

#: A feature whose running standard deviation is at most this times its mean's magnitude is
#: treated as constant (only centred).
CONSTANT_TOLERANCE = 1e-6


class Moments(NamedTuple):
    """A column statistics' state: count, mean, sum of squared deviations and, when indicators
    are tracked, ``Σ |v (v − 1)|`` over each column's values, 0 exactly when all were 0 or 1
    (else ``None``); ``scale``: :meth:`RunningMoments.scale` of these statistics, where it was
    computed with them (``None``: not yet)."""

    count: Tensor
    mean: Tensor
    sq_dev: Tensor
    off_01: Tensor | None
    scale: Tensor | None = None


class RunningMoments(nn.Module):
    """Running count, mean and sum of squared deviations of the columns of ``(B, k, ...)``
    batches (reduced over every dimension but 1), kept in float64 buffers; with
    ``indicators=True`` also ``Σ |v (v − 1)|`` over each column's values (0 exactly when every
    value was 0 or 1), so that :meth:`shift_and_scale` leaves indicator columns as they are.

    Examples:
        >>> moments = RunningMoments()
        >>> moments.update(torch.tensor([[1.0], [3.0]]))
        >>> moments.update(torch.tensor([[5.0], [7.0]]))
        >>> moments.mean.tolist(), moments.std().tolist()
        ([4.0], [2.23606797749979])
    """

    #: :meth:`scale` of the statistics :meth:`commit` stored, with :meth:`_scale_key` then
    #: (``None``: none kept)
    _scale_memo: tuple[tuple[Tensor, ...], tuple[int, ...], Tensor] | None = None

    def __init__(self, indicators: bool = False) -> None:
        super().__init__()
        # one element, not a 0-dim tensor: torch.compile traces a 0-dim float64 CPU input's
        # value as a symbolic number, which its guards read at every call (a host sync, and a
        # Python guard)
        self.register_buffer("count", torch.zeros(1, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("sq_dev", torch.zeros(0, dtype=torch.float64))
        #: Σ |v (v − 1)| over the values seen so far, per column: 0 for an indicator column
        #: (``None``: not tracked)
        self.off_01: Tensor | None
        self.register_buffer("off_01", torch.zeros(0, dtype=torch.float64) if indicators
                             else None)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_scale_memo": None}  # a copy computes its own

    @without_grad()
    def update(self, values: Tensor, sync: Synchronizer | None = None) -> None:
        """Add a batch ``(B, k, ...)`` (all replicas' shards with ``sync``)."""
        self.commit(self.updated(values, sync))

    @without_grad()
    def updated(self, values: Tensor, sync: Synchronizer | None = None) -> Moments:
        """The statistics after adding a batch, leaving the buffers as they are
        (:meth:`commit` stores them). The batch's deviations from the running mean ``m`` (or,
        for the first batch, from its own global mean) are taken and summed in float64: the
        values convert to float64 exactly, so the deviations keep every digit the values have,
        and their squares do not overflow (in float32, deviations of 1e18 squared overflow for a
        batch of 256 and would leave inf statistics for good). With ``s1``, ``s2`` their sum and
        sum of squares over ``n`` rows, Chan et al.'s update gives the count ``T = c + n``, the
        mean ``m + s1 / T`` and the squared deviations ``M + s2 − s1² / T``."""
        dims = [0, *range(2, values.ndim)]
        size = values.numel() / max(values.shape[1], 1)  # rows (× positions), a float
        off_01 = None
        if self.off_01 is not None:
            # Σ |v (v − 1)| = Σ |v − v²|: 0 exactly when every value is 0 or 1 (a sum of terms
            # ≥ 0, so it is 0 only when each is, in any dtype; 3× cheaper than counting)
            off_01 = torch.addcmul(values, values, values, value=-1).abs_().sum(dims)
            if sync is not None:
                sync.sum_([off_01])
            off_01 = off_01 + self.off_01 if self.started else off_01.double()
        # the batch size as a tensor only to be summed over the replicas
        n = (torch.full((1,), size, dtype=torch.float64, device=values.device)
             if sync is not None else None)
        if not self.started:  # the first batch: its (global) mean is the shift
            total = values.sum(dims, dtype=torch.float64)
            if n is not None:
                total = torch.cat([total, n])
                sync.sum_([total])
                mean = total[:-1] / total[-1]
            else:
                mean = total / size
            count, sq_dev = mean.new_zeros(1), torch.zeros_like(mean)
        else:
            count, mean, sq_dev = self.count, self.mean, self.sq_dev
        deviations = values.double() - (mean if values.ndim == 2
                                        else _per_column(mean, values.ndim))
        s1 = deviations.sum(dims)
        s2 = deviations.mul_(deviations).sum(dims)  # square_() wraps its 2: 3 ops more
        if n is not None:
            sync.sum_([s1, s2, n])
        total = count + (size if n is None else n[0])
        shift = s1 / total
        mean, sq_dev = mean + shift, torch.addcmul(sq_dev + s2, s1, shift, value=-1)
        return Moments(total, mean, sq_dev, off_01, _scale(total, mean, sq_dev))

    @property
    def started(self) -> bool:
        """Whether a batch was added (read from the statistics' size: no device sync)."""
        return self.mean.numel() > 0

    @without_grad()
    def commit(self, stats: Moments) -> None:
        """Store statistics from :meth:`updated` (the first time, sized by them)."""
        if self.mean.shape != stats.mean.shape:
            self.mean, self.sq_dev = torch.zeros_like(stats.mean), torch.zeros_like(stats.sq_dev)
            if self.off_01 is not None:
                self.off_01 = torch.zeros_like(stats.mean)
        self.count.copy_(stats.count), self.mean.copy_(stats.mean)
        self.sq_dev.copy_(stats.sq_dev)
        if self.off_01 is not None and stats.off_01 is not None:
            self.off_01.copy_(stats.off_01)
        key = self._scale_key()
        self._scale_memo = None if stats.scale is None or key is None else (*key, stats.scale)

    def forget(self) -> None:
        """Back to no batch added: count 0, statistics of size 0."""
        self._scale_memo = None
        empty = self.count.new_zeros(0)
        self.count.zero_()
        self.mean, self.sq_dev = empty, empty.clone()
        if self.off_01 is not None:
            self.off_01 = empty.clone()

    def state(self) -> Moments:
        """The stored statistics."""
        return Moments(self.count, self.mean, self.sq_dev, self.off_01)

    def std(self) -> Tensor:
        """The population standard deviation of every column, ``(k,)``."""
        return _std(self.count, self.sq_dev)

    def scale(self) -> Tensor:
        """The divisor of every column: its standard deviation, or 1 for a constant column
        (never write to it: while the statistics are those :meth:`commit` stored, it is the
        one a round computed with them, not computed again)."""
        memo, key = self._scale_memo, self._scale_key()
        if memo is not None and key is not None and memo[1] == key[1] and all(
                map(operator.is_, memo[0], key[0])):
            return memo[2]
        return _scale(self.count, self.mean, self.sq_dev)

    def _scale_key(self) -> tuple[tuple[Tensor, ...], tuple[int, ...]] | None:
        """The stored statistics' tensors and their version counters: any change to them (an
        in-place write, ``load_state_dict``, a new tensor after ``.to()``) changes the key
        (``None`` for tensors made under ``torch.inference_mode()``, which keep no version)."""
        tensors = (self.count, self.mean, self.sq_dev)
        if any(t.is_inference() for t in tensors):
            return None
        return tensors, tuple(t._version for t in tensors)

    def shift_and_scale(self, stats: Moments | None = None) -> tuple[Tensor, Tensor]:
        """What standardising subtracts from and divides every column by, from ``stats`` (the
        stored statistics by default): its mean and :meth:`scale`, or 0 and 1 for a column
        whose values were all 0 or 1 (tracked indicators)."""
        if stats is None:
            stats = self.state()
            scale = self.scale()
        else:
            scale = (stats.scale if stats.scale is not None
                     else _scale(stats.count, stats.mean, stats.sq_dev))
        mean = stats.mean
        if stats.off_01 is None:
            return mean, scale
        indicator = stats.off_01 == 0.0  # where() against cached 0-dim constants: 4 ops fewer
        return (torch.where(indicator, scalar(0.0, mean), mean),
                torch.where(indicator, scalar(1.0, scale), scale))

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any,
                              **kwargs: Any) -> None:
        count = state_dict.get(prefix + "count")
        if count is not None and count.ndim == 0:  # saved before the count had one element
            state_dict[prefix + "count"] = count.reshape(1)
        for name in ("mean", "sq_dev", "off_01"):  # sized by the first batch: the saved size
            saved = state_dict.get(prefix + name)
            current = getattr(self, name)
            if saved is not None and current is not None and saved.shape != current.shape:
                setattr(self, name, torch.zeros_like(saved, device=self.count.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class Standardizer(nn.Module):
    """Running standardisation of a booster's features and, for regression losses, of its
    labels (see the module docstring).

    Args:
        targets: whether to standardise the (encoded) labels too — for regression losses.
        compiled: run a round's update (:meth:`learn`, once the statistics exist, on one
            process) through ``torch.compile``: the booster's ``compile=True``. The same
            arithmetic in a few generated kernels instead of about 40 small operations per
            statistic (``benchmarks/round_cost.py``).
    """

    def __init__(self, targets: bool, compiled: bool = False) -> None:
        super().__init__()
        self.features = RunningMoments(indicators=True)
        self.labels = RunningMoments() if targets else None
        self._pending: list[Moments] = []
        self.compiled = compiled
        self._prepare = _CompiledPrepare()

    def __setstate__(self, state: dict[str, Any]) -> None:  # pickled before compile=True
        super().__setstate__({"compiled": False, "_prepare": _CompiledPrepare()} | state)

    def learn(self, x: Tensor, z: Tensor,
              sync: Synchronizer | None) -> tuple[Tensor, Tensor, Callable[[Tensor], Tensor]]:
        """A training round's standardised features and labels (with the statistics updated by
        the batch, stored by :meth:`commit` once the round succeeded), and the map of its
        standardised predictions to the user's units with the label statistics of the earlier
        batches (0 before any label): the stored ones, so it must run before :meth:`commit`."""
        prepared = None
        if self.compiled and sync is None and self.started and not self._prepare.failed:
            with contextlib.suppress(CompileFailed):  # torch cannot compile here: eagerly
                prepared = self._prepare.compiled()(self, x, z, sync)
        return self.adopt(prepare(self, x, z, sync) if prepared is None else prepared)

    def adopt(self, prepared: Prepared) -> tuple[Tensor, Tensor, Callable[[Tensor], Tensor]]:
        """:meth:`learn`'s result from :func:`prepare`'s (computed here, or in
        ``compile=True``'s round, :mod:`~torchboost.boosters.compiled_round`): the statistics
        kept for :meth:`commit` and their check stated."""
        x, z, self._pending, spread = prepared
        require_finite(spread, self._explain_overflow)
        return x, z, _identity if self.labels is None else self.outputs

    def _explain_overflow(self) -> None:
        """Name the values whose spread float64 cannot hold (squared deviations past 1.8e308:
        values beyond about 1e150), else return."""
        for name, stats in zip(("features", "labels"), self._pending, strict=False):
            if not bool(stats.sq_dev.isfinite().all()):
                raise ValueError(
                    f"the {name} are too large to standardise: their squared deviations "
                    "overflow float64 (values beyond about 1e150). Rescale them (divide by "
                    "a power of ten) or pass standardize=False")

    @property
    def started(self) -> bool:
        """Whether a round's statistics were stored (then :meth:`commit` writes in place)."""
        return self.features.started

    def commit(self) -> None:
        """Store the statistics of the round :meth:`learn` prepared."""
        for moments, stats in zip((self.features, self.labels), self._pending, strict=False):
            moments.commit(stats)
        self._pending = []

    def forget(self) -> None:
        """Back to no statistics (buffers of size 0): undoes the first round's commit, which
        a restored buffer copy cannot (it replaced the buffers by sized ones)."""
        self._pending = []
        for moments in (self.features, self.labels):
            if moments is not None:
                moments.forget()

    def inputs(self, x: Tensor) -> Tensor:
        """Features standardised with the current statistics (as given before any round)."""
        if not self.features.started:
            return x
        return _standardize(x, *self.features.shift_and_scale())

    def targets(self, z: Tensor) -> Tensor:
        """Encoded labels ``(B, m)`` in the units a round's learners and stall monitor see:
        standardised with the current statistics for a regression loss (as given before any
        round, and for classifiers)."""
        if self.labels is None or not self.labels.started:
            return z
        return _standardize(z, *self.labels.shift_and_scale())

    def outputs(self, y: Tensor) -> Tensor:
        """Standardised predictions ``(B, m)`` in the user's units (identity for classifiers;
        0 before any label was seen)."""
        if self.labels is None:
            return y
        if not self.labels.started:
            return torch.zeros_like(y)
        return _unscale(y, self.labels.mean, self.labels.scale())


#: :func:`prepare`'s result: the round's standardised features and labels, their pending
#: statistics and the value stating the statistics did not overflow
Prepared = tuple[Tensor, Tensor, list[Moments], Tensor]


def prepare(standardizer: Standardizer, x: Tensor, z: Tensor,
            sync: Synchronizer | None) -> Prepared:
    """:meth:`Standardizer.learn`'s arithmetic: the statistics with the batch added, the batch
    standardised by them, and a value finite exactly when the statistics' squared deviations
    did not overflow float64, in the features' dtype (the round's other checks' dtype, no
    promotion of their sum): scaled by 2⁻¹⁰²⁰, float64's largest number is about 16, so only an
    overflow is not finite."""
    features = standardizer.features.updated(x, sync)
    pending = [features]
    x = _standardize(x, *standardizer.features.shift_and_scale(features))
    total = features.sq_dev.sum()
    if standardizer.labels is not None:
        labels = standardizer.labels.updated(z, sync)
        pending.append(labels)
        z = _standardize(z, *standardizer.labels.shift_and_scale(labels))
        total = total + labels.sq_dev.sum()
    return x, z, pending, (total * scalar(2.0 ** -1020, total)).to(x.dtype)


class _CompiledPrepare(CompiledOnce):
    """:func:`prepare` compiled, a :class:`Standardizer`'s own (``compiled=True``)."""

    function = staticmethod(prepare)


def _std(count: Tensor, sq_dev: Tensor) -> Tensor:
    return (sq_dev.clamp_min(0.0) / count.clamp_min(1.0)).sqrt()


def _scale(count: Tensor, mean: Tensor, sq_dev: Tensor) -> Tensor:
    std = _std(count, sq_dev)  # ≥ 0, so a standard deviation of 0 is within the tolerance
    return std.masked_fill_(std / CONSTANT_TOLERANCE <= mean.abs(), 1.0)


def _per_column(stat: Tensor, ndim: int) -> Tensor:
    """A column statistic ``(k,)`` shaped to broadcast along dimension 1 of ``ndim``-D values."""
    return stat.view(1, -1, *([1] * (ndim - 2)))


def _standardize(values: Tensor, mean: Tensor, scale: Tensor) -> Tensor:
    """``(values − mean) / scale`` along dimension 1, in the values' dtype (the statistics
    rounded to it: the difference of two nearby numbers is exact, so this keeps every digit
    the values have)."""
    mean, scale = mean.to(values.dtype), scale.to(values.dtype)
    if values.ndim > 2:  # per channel (dimension 1); (B, k) broadcasts against (k,) as it is
        mean, scale = _per_column(mean, values.ndim), _per_column(scale, values.ndim)
    return (values - mean) / scale


def _identity(y: Tensor) -> Tensor:
    return y


def _unscale(y: Tensor, mean: Tensor, scale: Tensor) -> Tensor:
    return (mean + scale * y.double()).to(y.dtype)


#: a batch's column (or its labels) is "far from unit scale" when its root mean square is above
#: the first or, for every column at once, below the second (:func:`off_unit_scale`)
OFF_SCALE = (10.0, 0.01)


def off_unit_scale(x: Tensor, labels: Tensor | None) -> str:
    """What of a batch is far from unit scale, in words for a stall hint ("" if nothing is):
    the features when a column's root mean square (columns flattened past the batch dimension)
    is above 10, or every column's below 0.01; the labels (``None`` for a classifier's) output
    by output the same way. For a round's checked batch (finite, at least one row, features
    at least 2-D); run only when a stall warning is written."""
    parts = []
    for name, values in (("features", x), ("labels", labels)):
        if values is None:
            continue
        rms = values.detach().reshape(len(values), -1).double().square().mean(0).sqrt()
        top = float(rms.max())
        if top > OFF_SCALE[0] or 0.0 < top < OFF_SCALE[1]:
            parts.append(f"{name} of root mean square up to {top:.3g}")
    return " and ".join(parts)
