"""A LightningModule that trains any streaming booster in one pass, test-then-train."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.data import sized_len
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from torchboost.boosters import Booster
from torchboost.chaining.streaming import ChainingBooster
from torchboost.data.stream import is_stateful
from torchboost.distributed import ProcessGroupSync, Synchronizer
from torchboost.lightning.round_optimizer import BoostingRound

__all__ = ["StreamingBoosterModule"]

_CHECKPOINT_KEY = "torchboost_progressive"


class StreamingBoosterModule(pl.LightningModule):
    """Lightning wrapper of a :class:`~torchboost.boosters.base.Booster`: one training step is one
    boosting round, ``booster.learn(x, y)``, on the next mini-batch of the stream.

    **Optimisation.** ``automatic_optimization`` is off: the booster's own per-learner optimizers
    (Adam by default) stay in charge. :meth:`configure_optimizers` returns a
    :class:`~torchboost.lightning.BoostingRound`, a stateless proxy whose ``step`` runs the round,
    so that Lightning counts one step per round (``global_step``, ``max_steps``,
    ``ModelCheckpoint(every_n_train_steps=...)`` work as usual) without touching any parameter.

    **Logging.** Every step logs the progressive-validation scores of the batch — the loss (and
    error rate for classifiers) of the prediction made *before* the update, as returned by
    ``learn`` — and their running means over the stream so far (``progressive/loss``,
    ``progressive/loss_mean``, ``progressive/error``, ``progressive/error_mean``), plus
    ``compute_units``: weak-learner predictions of one example, an update counting 2 (Hu et al.
    2017, Sec. 6.2). Loss and units show in the progress bar. These are drawn against Lightning's
    step (batches); :class:`~torchboost.lightning.StreamingCallback` adds curves against units.

    **Held-out evaluation.** :meth:`validation_step` logs ``val/loss`` (and ``val/error``) of
    ``booster.evaluate`` on validation batches, averaged over examples.

    **Checkpoints and exact resumption.** Resuming with ``trainer.fit(module, stream,
    ckpt_path=...)`` on a freshly built, identical stream gives exactly (bit for bit on CPU) the
    booster of an uninterrupted pass, because a checkpoint holds all three parts of the state:

    1. *the booster* — a submodule, so the ``state_dict`` has all of it: learner parameters,
       algorithm buffers (σ, running label statistics, edge sums) and, as ``_extra_state``, the
       learners' optimizer states and the ``compute_units`` / ``samples_seen`` / ``rounds``
       counters;
    2. *the stream position* — a training iterable with ``state_dict()`` / ``load_state_dict()``,
       such as :class:`~torchboost.data.DataStream`, is "stateful" to Lightning, which saves its
       state (batches consumed, standardisation statistics) in every checkpoint and, when it
       restarts inside an epoch, loads it into the new stream before iterating. Because a
       ``DataStream`` has a length, Lightning does not prefetch from it, so a checkpoint written
       at the end of step ``k`` (``ModelCheckpoint`` saves in ``on_train_batch_end``) records
       exactly ``k`` consumed batches — the ``k`` rounds the saved booster has learned — and
       the resumed run continues with batch ``k``. Lightning loads no loader state when the
       checkpoint's epoch counts as finished (a run stopped by ``max_steps``, resumed by an
       epoch-based trainer); :meth:`on_save_checkpoint` therefore stores the stream states
       too, and :meth:`on_train_start` loads them in that case;
    3. *the progressive sums* — stored by :meth:`on_save_checkpoint`.

    Learning is deterministic given the state and the batches, hence the identical result. To
    use a checkpointed booster outside a fit, pass a freshly built one of the same configuration:
    ``StreamingBoosterModule.load_from_checkpoint(path, booster=build())``.
    Limits, enforced or documented:

    * a non-resumable training iterable (a plain ``DataLoader``) would restart from its first
      batch while Lightning skips the count it has already done — a silently different stream —
      so :meth:`on_train_start` raises instead when a fit resumes mid-pass without one;
    * the iterable must have a length, otherwise Lightning prefetches one batch and the saved
      position is one batch ahead of the booster (:meth:`on_train_start` raises too);
    * a run stopped by ``Trainer(max_steps=k)`` counts its epoch as finished, so a resuming
      ``Trainer(max_epochs=1)`` finds nothing left to do: resume with ``max_epochs=-1`` and
      either a larger ``max_steps`` or a :class:`~torchboost.lightning.StreamingCallback`
      (which stops at the end of the stream).

    Lightning 2.6 warns on every ``ModelCheckpoint(every_n_train_steps=...)`` save under manual
    optimisation that the checkpoint holds the state *after* the step: that is the state that
    matches the saved stream position.

    **Several processes** (``Trainer(strategy="ddp", devices=..., num_nodes=...)``; gloo on CPUs,
    NCCL on GPUs). Each Lightning step is one round on a *global* batch of the stream, split
    across the ranks: :meth:`on_fit_start` installs a
    :class:`~torchboost.distributed.ProcessGroupSync` on the booster
    (:meth:`~torchboost.boosters.base.Booster.distribute`), which all-reduces the learners'
    gradients, OGB's σ step, the running statistics and the counters, so every rank holds the
    booster of a single-process run over the same global batches and compute units are counted
    once; it also switches DDP's own gradient averaging off (the booster reduces, weighting
    unequal shards exactly). :meth:`on_train_start` shards every training iterable with its
    ``shard(rank, world_size)`` method (:meth:`torchboost.data.DataStream.shard`, and
    :meth:`torchboost.data.ScreenedStream.shard` for a screened one; the data and seed must be
    the same on every rank): Lightning only shards ``DataLoader`` samplers, and a
    ``DistributedSampler`` would reorder and pad the stream, so any other iterable raises. The
    progressive scores are those of the global batches, and the state a checkpoint holds (booster,
    stream position, sums) is the global one, the same on every rank, so a DDP fit resumes from
    it as above; :meth:`teardown` takes the synchronizer off the booster again.
    """

    def __init__(self, booster: Booster | ChainingBooster) -> None:
        super().__init__()
        if not isinstance(booster, Booster | ChainingBooster):
            raise TypeError(f"booster must be a torchboost Booster (or a ChainingBooster), got "
                            f"{type(booster).__name__}")
        self.booster = booster
        self.automatic_optimization = False
        self._sums = {"loss": 0.0, "error": 0.0}
        self._samples = 0
        self._pending_streams: list[dict[str, Any]] = []

    def forward(self, x: Tensor) -> Tensor:
        """The booster's prediction with all its learners."""
        return self.booster.predict(x)

    def configure_optimizers(self) -> BoostingRound:
        return BoostingRound(self.booster.parameters())

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        prediction = self.optimizers().step(closure=partial(self.booster.learn, x, y))
        scores = self.booster.score(prediction, y)
        size = x.shape[0]
        if self.booster.sync is not None:
            size, scores = _global_scores(self.booster.sync, size, scores)
        self._samples += size
        for key, value in scores.items():
            self._sums[key] += value * size
        if not self._logs_this_step(batch_idx):
            return
        means = self.progressive_scores()
        self.log("progressive/loss", scores["loss"], prog_bar=True, batch_size=size)
        self.log("progressive/loss_mean", means["loss"], batch_size=size)
        if "error" in scores:
            self.log("progressive/error", scores["error"], batch_size=size)
            self.log("progressive/error_mean", means["error"], batch_size=size)
        self.log("compute_units", float(self.booster.compute_units), prog_bar=True,
                 batch_size=size)

    def _logs_this_step(self, batch_idx: int) -> bool:
        """Whether to call ``self.log`` this step: every ``trainer.log_every_n_steps`` batches
        and on the last one (when Lightning writes logs anyway). A ``self.log`` call costs
        about as much as a small boosting round; the running sums are kept every step."""
        done = batch_idx + 1
        return (done % self.trainer.log_every_n_steps == 0
                or done == self.trainer.num_training_batches)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        for key, value in self.booster.evaluate(x, y).items():
            self.log(f"val/{key}", value, batch_size=x.shape[0], sync_dist=True)

    def progressive_scores(self) -> dict[str, float | None]:
        """Running means of the progressive loss and error rate over the examples trained on
        through this module (``None`` before the first batch; no error for regressors)."""
        keys = ("loss", "error") if self.booster.loss.is_classifier else ("loss",)
        return {key: self._sums[key] / self._samples if self._samples else None for key in keys}

    def on_fit_start(self) -> None:
        """With more than one process, makes the booster a synchronised replica and turns DDP's
        gradient averaging off (see "Several processes" above)."""
        if self.trainer.world_size == 1:
            return
        model = self.trainer.model
        if not isinstance(model, DistributedDataParallel):
            raise RuntimeError("StreamingBoosterModule trains on several processes with a DDP "
                               f"strategy only (strategy='ddp'), got {type(model).__name__}")
        # The flag DDP's no_sync() clears: its reducer never averages the gradients, which the
        # booster sums itself with the exact shard weights (Booster.learn).
        model.require_backward_grad_sync = False
        self.booster.distribute(ProcessGroupSync(device=self.device))

    def teardown(self, stage: str) -> None:
        """Takes the synchronizer off the booster: after the fit it learns alone again."""
        self.booster.distribute(None)

    def on_train_start(self) -> None:
        """Shards the training stream across the processes, puts it where the checkpoint left
        it, or refuses to resume."""
        loaders = self._train_iterables()
        sync = self.booster.sync
        if sync is not None:
            for loader in loaders:
                if not callable(getattr(loader, "shard", None)):
                    raise RuntimeError(
                        f"cannot split a {type(loader).__name__} across {sync.world_size} "
                        "processes batch by batch: train on a torchboost.data.DataStream (or an "
                        "iterable with shard(rank, world_size)); Lightning's DistributedSampler "
                        "would reorder and pad the stream")
                loader.shard(sync.rank, sync.world_size)
        pending, self._pending_streams = self._pending_streams, []
        restore_here = bool(pending) and not self.trainer.fit_loop.restarting
        if restore_here:
            # Lightning restored no loader state: the checkpoint's epoch counts as finished
            # (e.g. a run stopped by ``max_steps``) and the trainer starts a new one. Loading
            # here takes effect because a DataStream reads its position when first advanced.
            stateful = [loader for loader in loaders if is_stateful(loader)]
            if len(stateful) != len(pending):
                raise RuntimeError(f"the checkpoint holds the state of {len(pending)} training "
                                   f"stream(s), this fit has {len(stateful)}")
            for loader, state in zip(stateful, pending, strict=True):
                loader.load_state_dict(state)
        done = self.trainer.fit_loop.epoch_loop.batch_progress.current.completed
        if done or restore_here:
            problems = [f"{type(loader).__name__}: {problem}" for loader in loaders
                        if (problem := _resume_problem(loader)) is not None]
            if problems:
                raise RuntimeError(
                    "cannot resume inside the stream exactly: " + "; ".join(problems) + ". Train "
                    "on a torchboost.data.DataStream (or any sized iterable with "
                    "state_dict/load_state_dict) to resume mid-stream.")

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        streams = [loader.state_dict() for loader in self._train_iterables()
                   if is_stateful(loader)]
        checkpoint[_CHECKPOINT_KEY] = {"sums": dict(self._sums), "samples": self._samples,
                                       "streams": streams}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint[_CHECKPOINT_KEY]
        self._sums = dict(state["sums"])
        self._samples = int(state["samples"])
        self._pending_streams = state["streams"]

    def _train_iterables(self) -> list[Any]:
        return train_iterables(self.trainer)


def train_iterables(trainer: pl.Trainer) -> list[Any]:
    """The training iterables of ``trainer``'s running fit: one, or the items of a list, tuple or
    mapping of them (none outside a fit)."""
    loaders = trainer.train_dataloader
    if loaders is None:
        return []
    if isinstance(loaders, Mapping):
        return list(loaders.values())
    return list(loaders) if isinstance(loaders, list | tuple) else [loaders]


def _global_scores(sync: Synchronizer, size: int,
                   scores: dict[str, float]) -> tuple[int, dict[str, float]]:
    """Size and mean scores of the global batch from this rank's shard (one all-reduce)."""
    totals = torch.tensor([size, *(value * size for value in scores.values())],
                          dtype=torch.float64, device=sync.device)
    sync.sum_([totals])
    size = int(totals[0])
    return size, {key: float(total) / size
                  for key, total in zip(scores, totals[1:].tolist(), strict=True)}


def _resume_problem(loader: Any) -> str | None:
    """Why ``loader`` cannot continue exactly from a checkpoint's position, if it cannot."""
    if not is_stateful(loader):
        return "it has no state_dict/load_state_dict, so it would replay the stream from its start"
    if sized_len(loader) is None:
        return ("it has no length, so Lightning prefetched from it and its saved position is a "
                "batch ahead of the booster")
    return None

