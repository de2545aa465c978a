"""How a batch maps onto the rounds of Liautaud et al.'s protocol, and the input checks.

The paper plays one point per round. The learners of :mod:`torchboost.chaining` take batches with
these semantics:

* **A batch is one round.** Its loss is the batch mean ``ℓ_t = (1/B) Σ_i ℓ(f̂(x_i), y_i)``, every
  point is predicted with the parameters of round ``t``, and the gradient of a node (eq. 7) becomes
  ``g_{n,t} = (1/B) Σ_{i : x_i ∈ X_n} ℓ'(f̂_t(x_i), y_i)``. With ``B = 1`` this is exactly the
  paper; feed points one at a time to reproduce its rounds.
* **Streams.** A learner built with ``n_streams = S`` is ``S`` independent learners that share the
  partition and run in lockstep (one per seed, per target function, ...). ``stream[i]`` says which
  one point ``i`` belongs to; the points of one stream form one round of that stream and the other
  streams are untouched by them. A batch with one point per stream is therefore exactly one
  paper round of each of ``S`` separate learners, computed in one vectorised pass.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchboost.losses import Loss, get_loss

__all__ = ["check_gradients", "check_labels", "check_n_streams", "check_streams",
           "round_weights", "scalar_loss"]


def scalar_loss(loss: str | Loss) -> Loss:
    """The loss (an instance or a name) of a single-output learner; raises ``ValueError``."""
    loss = get_loss(loss)
    if loss.output_dim(1) != 1:
        raise ValueError(f"these learners predict one output; {loss!r} needs more")
    return loss


def check_n_streams(n_streams: int) -> int:
    """A valid number of lockstep streams (an integer ``≥ 1``); raises ``ValueError``."""
    if not isinstance(n_streams, int) or n_streams < 1:
        raise ValueError(f"n_streams must be an integer >= 1, got {n_streams!r}")
    return n_streams


def check_streams(stream: Tensor | None, batch: int, n_streams: int,
                  device: torch.device) -> Tensor:
    """Stream index of every point, ``(B,)`` int64 (all 0 when ``stream`` is None)."""
    if stream is None:
        return torch.zeros(batch, dtype=torch.long, device=device)
    if not torch.is_tensor(stream) or stream.dtype not in (torch.int32, torch.int64):
        raise ValueError("stream must be an integer tensor of shape (B,)")
    if stream.shape != (batch,):
        raise ValueError(f"stream must have shape ({batch},), got {tuple(stream.shape)}")
    if stream.device != device:
        raise ValueError(f"stream is on {stream.device} but the learner is on {device}")
    if bool(((stream < 0) | (stream >= n_streams)).any()):
        raise ValueError(f"stream indices must lie in [0, {n_streams})")
    return stream.long()


def round_weights(streams: Tensor, n_streams: int) -> tuple[Tensor, bool]:
    """``1 / B_s`` for every point (``B_s`` the number of points of its stream in the batch), and
    whether every stream has at most one point (then no two points share a round)."""
    counts = torch.bincount(streams, minlength=n_streams)
    return 1.0 / counts[streams].to(torch.float64), bool(counts.max() <= 1)


def check_labels(loss: Loss, y: Tensor, batch: int, device: torch.device) -> Tensor:
    """Encoded labels ``(B, 1)`` on ``device``; raises ``ValueError``."""
    z = loss.encode_target(y, 1)
    if z.shape[0] != batch:
        raise ValueError(f"{z.shape[0]} labels for {batch} inputs")
    if z.device != device:
        raise ValueError(f"labels are on {z.device} but the learner is on {device}")
    return z


def check_gradients(grad: Tensor, batch: int, device: torch.device) -> Tensor:
    """Per-point loss gradients ``(B,)`` or ``(B, 1)`` → finite ``(B,)``; raises ``ValueError``."""
    if not torch.is_tensor(grad) or not grad.is_floating_point():
        raise ValueError("gradients must be a floating-point tensor of shape (B,) or (B, 1)")
    if grad.shape not in ((batch,), (batch, 1)):
        raise ValueError(f"gradients must have shape ({batch},) or ({batch}, 1), got "
                         f"{tuple(grad.shape)}")
    if grad.device != device:
        raise ValueError(f"gradients are on {grad.device} but the learner is on {device}")
    if not bool(torch.isfinite(grad).all()):
        raise ValueError("gradients contain NaN or inf")
    return grad.reshape(batch)
