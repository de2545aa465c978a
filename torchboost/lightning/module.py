"""A LightningModule that trains any streaming booster in one pass, test-then-train."""

from __future__ import annotations

import inspect
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.data import sized_len
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from torchboost.data.batch_groups import BatchGroup, BatchGroups
from torchboost.data.stream import is_stateful
from torchboost.distributed import ProcessGroupSync, Synchronizer
from torchboost.lightning.cuda_check import restore_cuda_check, use_plain_cuda_check
from torchboost.lightning.round_optimizer import BoostingRound
from torchboost.protocol import StreamingModel, missing_members
from torchboost.threads import check_threads, thread_count, threads

__all__ = ["StreamingBoosterModule"]

_CHECKPOINT_KEY = "torchboost_progressive"
#: Most rounds whose scores wait on the device before they are added to the running sums.
_PENDING_LIMIT = 256


def _signature_kept(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with its signature computed once: Lightning inspects ``training_step``'s on
    every batch (does it take ``batch_idx``?), which ``inspect`` answers from
    ``__signature__`` without parsing the function again."""
    function.__signature__ = inspect.signature(function)  # type: ignore[attr-defined]
    return function


def quiet_streaming_notices() -> None:
    """Silence the two notices every streaming run printed that concern none (issue 31):
    Lightning's "validation_step but no val_dataloader" (this module defines
    :meth:`StreamingBoosterModule.validation_step` for the runs that have validation data; a
    stream has none) and torch's deprecation of ``isinstance(treespec, LeafSpec)``, raised
    inside Lightning. Two message filters, added once when a module is built (adding one again
    moves it, no copies); every other warning is untouched."""
    warnings.filterwarnings("ignore", message="You defined a `validation_step` but have no "
                            "`val_dataloader`", category=UserWarning)
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")


class StreamingBoosterModule(pl.LightningModule):
    """Lightning wrapper of a :class:`~torchboost.boosters.base.Booster`: one training step is one
    boosting round, ``booster.learn(x, y)``, on the next mini-batch of the stream.

    **Optimisation.** ``automatic_optimization`` is off: the booster's own per-learner optimizers
    (Adam by default) stay in charge. :meth:`configure_optimizers` returns a
    :class:`~torchboost.lightning.BoostingRound`, a stateless proxy whose ``step`` runs the round,
    so that Lightning counts one step per round (``global_step``, ``max_steps``,
    ``ModelCheckpoint(every_n_train_steps=...)`` work as usual) without touching any parameter.

    **Several rounds per step.** Lightning's own loop costs about 0.2 ms per step, a fifth of a
    small round on a CPU. Fitting on :class:`BatchGroups(stream, k)
    <torchboost.data.BatchGroups>` makes one step learn ``k`` rounds, one per batch of the group
    in order: the booster and its progressive scores are those of the ungrouped fit, bit for bit,
    while ``global_step``, ``max_steps``, logging, validation intervals, step-based checkpoints
    and callbacks' batch ends count groups.

    **Logging.** Every round's progressive-validation scores — the loss (and error rate for
    classifiers) of the prediction made *before* the update, as returned by ``learn``, scored by
    :meth:`~torchboost.boosters.base.Booster.round_scores` on the labels ``learn`` encoded — go
    into running means over the stream (:meth:`progressive_scores`). They stay on the booster's
    device until a step that logs, so a step that does not log reads nothing back from it. A
    step logs when Lightning writes its loggers: every ``Trainer(log_every_n_steps=k)`` steps
    (Lightning's default ``k = 50``), counted over the whole fit as Lightning does, and at the
    last batch of the epoch and at ``max_steps``. It logs the scores of its batch and the running
    means (``progressive/loss``, ``progressive/loss_mean``, ``progressive/error``,
    ``progressive/error_mean``), plus ``compute_units``: weak-learner predictions of one
    example, an update counting 2 (Hu et al. 2017, Sec. 6.2). Loss and units show in the
    progress bar; the logged values are host tensors, so Lightning's reading them back on every
    batch costs no device sync. These are drawn against Lightning's step (batches);
    :class:`~torchboost.lightning.StreamingCallback` adds curves against units.

    **Threads.** ``n_threads`` sets torch's intra-op threads for the fit, from its first round
    until :meth:`teardown` restores them: ``"auto"`` (default) one thread on a CPU for the
    small learners and batches of the papers, where a thread pool costs more than it saves
    (:func:`~torchboost.threads.thread_count`), torch's setting otherwise; an int; ``None``
    leaves torch's setting alone. The training rounds run under this choice, whatever the
    booster's own ``n_threads`` (which its other calls, validation's included, follow).

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
    * a checkpoint written with a batch read and not learnt (by an exception:
      ``OnExceptionCheckpoint``) holds a stream one batch past the booster, so
      :meth:`on_train_start` refuses to resume from it (resume from one written between steps);
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

    def __init__(self, booster: StreamingModel, n_threads: int | str | None = "auto") -> None:
        super().__init__()
        quiet_streaming_notices()
        missing = missing_members(booster)
        if not isinstance(booster, torch.nn.Module) or missing:
            raise TypeError(f"booster must be an nn.Module with the streaming-model protocol "
                            f"(torchboost.protocol.StreamingModel: any Booster, a "
                            f"ChainingBooster); {type(booster).__name__} "
                            + (f"lacks {missing}" if missing else "is not an nn.Module"))
        self.booster = booster
        self.automatic_optimization = False
        self._sums = {"loss": 0.0, "error": 0.0}
        self._samples = 0
        #: (batch size, scores as 0-dim tensors) of the rounds not yet in ``_sums``
        self._pending: list[tuple[int, dict[str, Tensor]]] = []
        self._pending_streams: list[dict[str, Any]] = []
        #: the checkpoint being resumed was written with a batch read and not learnt
        #: (:meth:`_batch_in_flight`; :meth:`on_train_start` refuses it)
        self._resume_mid_step = False
        #: whether :meth:`on_fit_start` switched to torch's plain CUDA check
        self._plain_cuda_check = False
        self.n_threads = check_threads(n_threads)
        #: torch's thread count before the fit's first round set ours (``None``: not set)
        self._threads_before: int | None = None
        self._threads_chosen = False

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets this plain string before and after each of the ~10 hooks it calls per
        # batch; nn.Module.__setattr__'s checks for parameters, buffers and submodules made
        # that a few percent of a small round's time. The attribute lands in __dict__ either way.
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> Any:
        """The checkpoint's ``booster.`` entries through the booster's own ``load_state_dict``,
        which loads all or nothing (a checkpoint that does not fit, of learners of another size
        say, raises and changes nothing, where ``nn.Module``'s would have loaded part of it);
        any other entry is refused under ``strict``, as torch refuses it."""
        prefix = "booster."
        other = [key for key in state_dict if not key.startswith(prefix)]
        if other and strict:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"unexpected key(s) in state_dict: {other}")
        own = OrderedDict((key[len(prefix):], value) for key, value in state_dict.items()
                          if key.startswith(prefix))
        metadata = getattr(state_dict, "_metadata", None)
        if metadata is not None:  # module versions, keyed by module prefix: the booster's own
            own._metadata = {key[len(prefix):] if key.startswith(prefix) else "": value  # type: ignore[attr-defined]
                             for key, value in metadata.items()
                             if key.startswith(prefix) or key == prefix[:-1]}
        return self.booster.load_state_dict(own, strict=strict, assign=assign)

    def forward(self, x: Tensor) -> Tensor:
        """The booster's prediction with all its learners."""
        return self.booster.predict(x)

    def configure_optimizers(self) -> BoostingRound:
        # torch.optim.Optimizer refuses an empty parameter list: a model without parameters
        # (a running statistic, a table) gets an empty placeholder, never stepped
        return BoostingRound(list(self.booster.parameters()) or [torch.zeros(0)])

    def transfer_batch_to_device(self, batch: Any, device: torch.device,
                                 dataloader_idx: int) -> Any:
        """The batch itself when it is a tuple or list of tensors already on ``device`` (a
        stream on the booster's device) or a :class:`~torchboost.data.BatchGroup`, whose
        batches :meth:`training_step` moves one by one; otherwise Lightning's transfer, which
        walks any collection and would only rebuild the tuple here, a few percent of a small
        round."""
        if isinstance(batch, BatchGroup) or (isinstance(batch, tuple | list) and all(
                isinstance(value, Tensor) and value.device == device for value in batch)):
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    @_signature_kept
    def training_step(self, batch: tuple[Tensor, Tensor] | BatchGroup, batch_idx: int) -> None:
        """One round on ``batch``, or one round on each batch of a :class:`BatchGroup` in
        turn (a fit on :class:`~torchboost.data.BatchGroups`), each moved to the device by
        :meth:`transfer_batch_to_device` as Lightning moves a single batch."""
        if isinstance(batch, BatchGroup):
            device, transfer = self.device, self.transfer_batch_to_device
            batches = (transfer(each, device, 0) for each in batch)
        else:
            batches = (batch,)
        size = self.optimizers().step(closure=partial(self._learn, batches))
        if self._logs_this_step(batch_idx):
            self._log_scores(size, self._settle())
        elif len(self._pending) >= _PENDING_LIMIT:
            self._settle()

    def _learn(self, batches: Iterable[tuple[Tensor, Tensor]]) -> int:
        """Learns one round on each batch, keeps its scores pending, and returns the last
        round's batch size (the global one with several processes)."""
        booster = self.booster
        size = 0
        for batch in batches:
            x, y = _pair(batch)
            if not self._threads_chosen:
                self._choose_threads(x)
            with threads(None):  # the fit's threads, not the booster's own n_threads
                scores = booster.round_scores(booster.learn(x, y))
            size = x.shape[0]
            if booster.sync is not None:
                size, scores = _global_scores(booster.sync, size, scores)
            self._pending.append((size, scores))
        return size

    def _choose_threads(self, x: Tensor) -> None:
        """At the fit's first round: torch's intra-op threads for the fit
        (:func:`~torchboost.threads.thread_count` of ``n_threads``, the first batch's rows),
        restored by :meth:`teardown`."""
        self._threads_chosen = True
        count = thread_count(self.n_threads, x.device, self.booster, x.shape[0])
        if count is not None and count != torch.get_num_threads():
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(count)

    def _logs_this_step(self, batch_idx: int) -> bool:
        """Whether to log this step: when Lightning writes its loggers (every
        ``trainer.log_every_n_steps`` steps, counted over the whole fit), at the last batch of
        the epoch and at ``max_steps``."""
        trainer = self.trainer
        step = trainer.global_step
        return (step % trainer.log_every_n_steps == 0 or step == trainer.max_steps
                or batch_idx + 1 == trainer.num_training_batches)

    def _log_scores(self, size: int, scores: dict[str, float]) -> None:
        means = self.progressive_scores()
        self.log("progressive/loss", _host(scores["loss"]), prog_bar=True, batch_size=size)
        self.log("progressive/loss_mean", _host(means["loss"]), batch_size=size)
        if "error" in scores:
            self.log("progressive/error", _host(scores["error"]), batch_size=size)
            self.log("progressive/error_mean", _host(means["error"]), batch_size=size)
        self.log("compute_units", _host(self.booster.compute_units), prog_bar=True,
                 batch_size=size)

    def _settle(self) -> dict[str, float]:
        """Adds the pending rounds' scores to the running sums, in round order and in float64
        as if each had been added when it was made, with one device-to-host copy per score;
        returns the last round's scores."""
        pending, self._pending = self._pending, []
        if not pending:
            return {}
        last: dict[str, float] = {}
        for key in pending[0][1]:
            values = torch.stack([scores[key] for _, scores in pending]).tolist()
            total = self._sums[key]
            for (size, _), value in zip(pending, values, strict=True):
                total += value * size
            self._sums[key], last[key] = total, values[-1]
        self._samples += sum(size for size, _ in pending)
        return last

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int,
                        dataloader_idx: int = 0) -> None:
        """Held-out scores of ``batch`` as ``val/loss`` (and ``val/error``); with several
        validation loaders Lightning suffixes them with ``/dataloader_idx_k``."""
        x, y = _pair(batch)
        # score(predict()), not evaluate(): mid-stream, the stall monitor's held-out
        # judgement of a short stream (Booster.evaluate) would speak too early
        for key, value in self.booster.score(self.booster.predict(x), y).items():
            self.log(f"val/{key}", value, batch_size=x.shape[0], sync_dist=True)

    def progressive_scores(self) -> dict[str, float | None]:
        """Running means of the progressive loss and error rate over the examples trained on
        through this module (``None`` before the first batch; no error for regressors)."""
        self._settle()
        keys = ("loss", "error") if self.booster.loss.is_classifier else ("loss",)
        return {key: self._sums[key] / self._samples if self._samples else None for key in keys}

    def on_fit_start(self) -> None:
        """With more than one process, makes the booster a synchronised replica and turns DDP's
        gradient averaging off (see "Several processes" above). Without CUDA, torch's plain
        CUDA check replaces Lightning's NVML-based one until :meth:`teardown`
        (:mod:`~torchboost.lightning.cuda_check`): it would cost every round about 15 %."""
        restore_cuda_check(self._plain_cuda_check)
        self._plain_cuda_check = use_plain_cuda_check()
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
        restore_cuda_check(self._plain_cuda_check)
        self._plain_cuda_check = False
        if self._threads_before is not None:
            torch.set_num_threads(self._threads_before)
        self._threads_before, self._threads_chosen = None, False

    def on_train_start(self) -> None:
        """Shards the training stream across the processes, puts it where the checkpoint left
        it, or refuses to resume."""
        if self._resume_mid_step:
            self._resume_mid_step = False
            raise RuntimeError(
                "cannot resume from this checkpoint exactly: it was written while a training "
                "step was failing (e.g. by OnExceptionCheckpoint), so it holds the booster as "
                "before that step's batch but a stream that had already read it, and the "
                "resumed fit would skip the batch. Resume from a checkpoint written between "
                "steps (ModelCheckpoint), or take the booster alone: "
                "StreamingBoosterModule.load_from_checkpoint(path, booster=build())")
        loaders = self._train_iterables()
        for loader in loaders:
            if isinstance(loader, BatchGroups) and sized_len(loader) is None:
                raise ValueError(
                    f"BatchGroups over a {type(loader.stream).__name__} without len(): Lightning "
                    "reads the next group before the current one is learnt when it cannot tell "
                    "the last one, which would split a group; give the stream a __len__ (a "
                    "torchboost.data.DataStream has one) or fit on the stream itself")
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
        self._settle()
        streams = [loader.state_dict() for loader in self._train_iterables()
                   if is_stateful(loader)]
        checkpoint[_CHECKPOINT_KEY] = {"sums": dict(self._sums), "samples": self._samples,
                                       "streams": streams, "mid_step": self._batch_in_flight()}

    def _batch_in_flight(self) -> bool:
        """Whether the stream has handed over a batch that the booster has not learnt: a
        checkpoint written now (by an exception, e.g. ``OnExceptionCheckpoint``) holds the
        booster as before that batch and a stream position past it."""
        progress = self.trainer.fit_loop.epoch_loop.batch_progress.current
        return progress.ready > progress.processed

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint[_CHECKPOINT_KEY]
        self._pending = []
        self._sums = dict(state["sums"])
        self._samples = int(state["samples"])
        self._pending_streams = state["streams"]
        self._resume_mid_step = bool(state.get("mid_step", False))  # absent: saved before

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
                   scores: dict[str, Tensor]) -> tuple[int, dict[str, Tensor]]:
    """Size and mean scores of the global batch from this rank's shard (one all-reduce)."""
    totals = torch.stack([torch.tensor(float(size), dtype=torch.float64, device=sync.device),
                          *(value.to(sync.device, torch.float64) * size
                            for value in scores.values())])
    sync.sum_([totals])
    size = int(totals[0])
    return size, dict(zip(scores, totals[1:] / size, strict=True))


def _host(value: float) -> Tensor:
    """A value to log as a tensor in host memory, of the dtype Lightning gives a logged float:
    Lightning reads progress-bar values back on every batch, a device sync per batch for a
    value on a GPU."""
    return torch.tensor(value, dtype=torch.get_default_dtype())


def _resume_problem(loader: Any) -> str | None:
    """Why ``loader`` cannot continue exactly from a checkpoint's position, if it cannot."""
    if not is_stateful(loader):
        return "it has no state_dict/load_state_dict, so it would replay the stream from its start"
    if sized_len(loader) is None:
        return ("it has no length, so Lightning prefetched from it and its saved position is a "
                "batch ahead of the booster")
    return None


def _pair(batch: Any) -> tuple[Tensor, Tensor]:
    """``batch`` as ``(x, y)``, or a ``ValueError`` saying what a batch must be."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return batch[0], batch[1]
    what = (f"a {type(batch).__name__} of {len(batch)}" if isinstance(batch, tuple | list)
            else f"a {type(batch).__name__}")
    raise ValueError(f"a batch must be a pair (x, y) of features and labels, got {what}; "
                     "make the stream or DataLoader yield (x, y) (e.g. a collate_fn that drops "
                     "the other fields)")
