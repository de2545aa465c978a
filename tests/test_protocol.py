"""The streaming-model protocol (torchboost.protocol): every registered booster and the chaining
adapter provide it, the Lightning module asks for nothing more, and names what is missing."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from torchboost.boosters.registry import BOOSTERS
from torchboost.losses import get_loss
from torchboost.protocol import StreamingModel, missing_members
from torchboost.testing import example_booster


@pytest.mark.parametrize("name", sorted(BOOSTERS))
def test_every_registered_booster_is_a_streaming_model(name: str) -> None:
    booster = example_booster(BOOSTERS[name])
    assert missing_members(booster) == [] and isinstance(booster, StreamingModel)


def test_the_chaining_adapter_is_a_streaming_model() -> None:
    from torchboost.chaining import ChainingBooster, ChainingTree

    model = ChainingBooster(ChainingTree((0.0, 1.0), depth=3))
    assert missing_members(model) == [] and isinstance(model, StreamingModel)


class RunningMean(nn.Module):
    """The smallest streaming model: predicts the running mean of the labels seen so far."""

    supports_distributed = False

    def __init__(self) -> None:
        super().__init__()
        self.loss, self.out_dim, self.sync = get_loss("squared"), 1, None
        self.samples_seen = self.rounds = self.compute_units = 0
        self.register_buffer("mean", torch.zeros(1, dtype=torch.float64))
        self._labels: Tensor | None = None

    def learn(self, x: Tensor, y: Tensor) -> Tensor:
        z = self.loss.encode_target(y, 1).double()
        prediction = self.predict(x)
        self.mean += (z.sum(0) - z.shape[0] * self.mean) / (self.samples_seen + z.shape[0])
        self.samples_seen += z.shape[0]
        self.rounds += 1
        self.compute_units += z.shape[0]
        self._labels = z
        return prediction

    def predict(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        return self.mean.expand(x.shape[0], 1).float()

    def predict_label(self, x: Tensor, n_learners: int | None = None) -> Tensor:
        raise ValueError("a regression model")

    def score(self, prediction: Tensor, y: Tensor) -> dict[str, float]:
        z = self.loss.encode_target(y, 1).to(prediction.dtype)
        return {k: float(v) for k, v in self.loss.scores(prediction, z).items()}

    def round_scores(self, prediction: Tensor) -> dict[str, Tensor]:
        assert self._labels is not None
        return self.loss.scores(prediction, self._labels.to(prediction.dtype))

    def evaluate(self, x: Tensor, y: Tensor, n_learners: int | None = None) -> dict[str, float]:
        return self.score(self.predict(x), y)

    def diagnostics(self) -> dict[str, Tensor]:
        return {}

    def distribute(self, sync: object) -> None:
        if sync is not None:
            raise ValueError("not data-parallel")


def test_a_model_of_ones_own_with_the_protocol_trains_under_the_lightning_module() -> None:
    import lightning.pytorch as pl

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 2, generator=g), 3.0 + torch.randn(96, generator=g)
    model = RunningMean()
    module = StreamingBoosterModule(model)
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu")
    trainer.fit(module, DataStream(x, y, batch_size=16, seed=0, standardize=None))
    assert model.rounds == 6 and model.samples_seen == 96
    assert model.mean.item() == pytest.approx(y.double().mean().item(), rel=1e-12)
    assert module.progressive_scores()["loss"] > 0


def test_the_lightning_module_names_what_a_model_lacks() -> None:
    from torchboost.lightning import StreamingBoosterModule

    class Half(nn.Module):
        def learn(self, x: Tensor, y: Tensor) -> Tensor:
            return x

    with pytest.raises(TypeError, match=r"Half lacks \['compute_units', 'diagnostics'"):
        StreamingBoosterModule(Half())
    plain = RunningMean()
    with pytest.raises(TypeError, match=r"Plain is not an nn\.Module"):
        StreamingBoosterModule(type("Plain", (), {k: getattr(plain, k) for k in dir(plain)
                                                  if not k.startswith("__")})())


def test_the_lightning_module_takes_two_validation_loaders_and_names_bad_batches() -> None:
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, TensorDataset

    from torchboost import SGB, TwoLayerNet
    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 3, generator=g), torch.randn(64, generator=g)
    held_out = DataLoader(TensorDataset(x[:16], y[:16]), batch_size=8)

    def trainer() -> pl.Trainer:
        return pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False,
                          accelerator="cpu")

    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    run = trainer()
    run.fit(StreamingBoosterModule(booster), DataStream(x, y, batch_size=16, seed=0),
            val_dataloaders=[held_out, held_out])
    assert booster.rounds == 4
    assert {"val/loss/dataloader_idx_0", "val/loss/dataloader_idx_1"} <= set(run.logged_metrics)
    class Triples:  # a stream yielding (x, y, weight)
        def __iter__(self):  # type: ignore[no-untyped-def]
            yield x[:8], y[:8], y[:8]

    with pytest.raises(ValueError, match=r"a batch must be a pair .* got a tuple of 3"):
        trainer().fit(StreamingBoosterModule(booster), Triples())
    assert booster.rounds == 4


def test_batch_groups_over_a_stream_without_length_are_refused_before_training() -> None:
    import lightning.pytorch as pl

    from torchboost import SGB, TwoLayerNet
    from torchboost.data import BatchGroups
    from torchboost.lightning import StreamingBoosterModule

    x, y = torch.randn(128, 3), torch.randn(128)

    class Unsized:
        def __iter__(self):  # type: ignore[no-untyped-def]
            return ((x[i:i + 32], y[i:i + 32]) for i in range(0, 128, 32))

    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu")
    with pytest.raises(ValueError, match=r"BatchGroups over a Unsized without len\(\)"):
        trainer.fit(StreamingBoosterModule(booster), BatchGroups(Unsized(), 2))
    assert booster.rounds == 0
