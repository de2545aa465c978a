"""The one home of the feature rules every model applies to a batch before it learns or
predicts (the boosters, the chaining models): a floating ``(B, ...)`` tensor with at least one
row, of the shape per example the model was trained on, on its device, finite in the dtype it
computes in. Each broken rule is a ``ValueError`` naming it; the caller's tensor is never
changed (a copy is cast, detached)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchboost.deferred_checks import require_finite

__all__ = ["check_dense", "check_features"]


def check_features(x: Tensor, dtype: torch.dtype | None = None,
                   shape: tuple[int, ...] | None = None,
                   device: torch.device | None = None, what: str = "features",
                   owner: str = "booster") -> Tensor:
    """``x`` detached and cast to ``dtype`` (if given) after the checks: a tensor, ``(B, ...)`` with
    ``B >= 1``, floating point, ``shape`` per example if given, on ``device`` if given, finite
    — finite values that overflow ``dtype`` are named as such, not as NaN or inf. Finiteness
    is read at once, or once a learning round settles its checks
    (:mod:`~torchboost.deferred_checks`)."""
    if not torch.is_tensor(x):
        raise ValueError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    check_dense(x, what)
    if x.ndim < 2:
        raise ValueError(f"{what} must have shape (B, ...{what}), got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"empty batch: {what} have 0 rows")
    if not x.is_floating_point():
        raise ValueError(f"{what} must be floating point, got dtype {x.dtype}")
    if x.requires_grad:
        x = x.detach()
    given, dtype = x, dtype or x.dtype
    if x.dtype != dtype:
        x = x.to(dtype)
    if shape is not None and tuple(x.shape[1:]) != shape:
        raise ValueError(f"{what} have shape {tuple(x.shape[1:])} per example, but this "
                         f"{owner} was trained on {shape}")
    if device is not None and x.device != device:
        raise ValueError(f"{what} are on {x.device} but the {owner} is on {device}")
    require_finite(x.sum(), lambda: _explain_not_finite(x, given, what, owner))
    return x


def check_dense(t: Tensor, what: str) -> None:
    """A ``ValueError`` naming ``what`` unless the tensor ``t`` is dense and holds values:
    sparse, nested and meta tensors are refused with the fix."""
    if t.layout != torch.strided or t.is_nested:
        raise ValueError(f"{what} must be a dense tensor, got layout {t.layout}"
                         f"{' (nested)' if t.is_nested else ''}: pass .to_dense() (a nested "
                         "batch: one padded tensor)")
    if t.device.type == "meta":
        raise ValueError(f"{what} are on the meta device (shapes only, no values)")


def _explain_not_finite(x: Tensor, given: Tensor, what: str, owner: str) -> None:
    """Raise the ``ValueError`` for features ``x`` (cast from ``given``) that hold NaN or inf;
    nothing if every entry is finite (only their sum overflowed)."""
    if bool(torch.isfinite(x).all()):
        return
    bad = (~torch.isfinite(x.reshape(x.shape[0], -1))).any(1).nonzero().flatten()
    if given is not x and bool(torch.isfinite(given[bad]).all()):
        top = given[bad].abs().max().item()
        raise ValueError(
            f"{what} of rows {bad[:10].tolist()} are finite in {given.dtype} but overflow "
            f"the {owner}'s {x.dtype} (largest magnitude {top:.3g}, {x.dtype} holds up to "
            f"{torch.finfo(x.dtype).max:.3g}): scale the {what} down or compute in a wider "
            "dtype")
    raise ValueError(f"{what} contain NaN or inf (rows {bad[:10].tolist()})")
