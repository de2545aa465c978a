"""torch and torchvision datasets as streams: torchvision's MNIST from local files, map-style
datasets read into a DataStream, and the lazy LoaderStream (map-style, iterable, DataLoader),
down to a StreamingBoosterModule fit."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset
from torchvision.datasets import MNIST
from torchvision.transforms import ToTensor

from torchboost import SGB, ConvNet
from torchboost.data import (
    DataStream,
    ExhaustedStreamWarning,
    LoaderStream,
    load_mnist,
    mnist_dataset,
)
from torchboost.lightning import StreamingBoosterModule

N_TRAIN, N_TEST = 48, 8


def idx_file(path: Path, array: np.ndarray, gz: bool) -> None:
    data = struct.pack(">I", 0x0800 + array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    data += array.astype(np.uint8).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)


@pytest.fixture(scope="module")
def mnist_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the four MNIST files, gzipped (as in ../shared/data/mnist)."""
    root = tmp_path_factory.mktemp("mnist")
    rng = np.random.default_rng(0)
    for split, n in (("train", N_TRAIN), ("t10k", N_TEST)):
        idx_file(root / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)), gz=True)
        idx_file(root / f"{split}-labels-idx1-ubyte", rng.integers(0, 10, n), gz=True)
    return root


def test_mnist_dataset_is_torchvisions_in_either_layout(mnist_root: Path, tmp_path: Path) -> None:
    flat = mnist_dataset(mnist_root, train=True, transform=ToTensor())
    assert isinstance(flat, MNIST) and len(flat) == N_TRAIN
    image, label = flat[3]
    assert image.shape == (1, 28, 28) and isinstance(label, int)
    ds = load_mnist(mnist_root)
    assert torch.equal(image, ds.x_train[3]) and label == int(ds.y_train[3])
    # torchvision's own layout with plain files is used in place
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        raw = gzip.decompress((mnist_root / f"{name}.gz").read_bytes())
        (tmp_path / "MNIST" / "raw").mkdir(parents=True, exist_ok=True)
        (tmp_path / "MNIST" / "raw" / name).write_bytes(raw)
    native = mnist_dataset(tmp_path, train=False)
    assert torch.equal(native.data, mnist_dataset(mnist_root, train=False).data)
    assert torch.equal(load_mnist(tmp_path).x_test, ds.x_test)
    with pytest.raises(FileNotFoundError, match="place them there"):
        mnist_dataset(tmp_path / "nowhere")


def test_from_dataset_reads_a_map_style_dataset_like_the_tensors(mnist_root: Path) -> None:
    ds = load_mnist(mnist_root)
    from_torchvision = DataStream.from_dataset(
        mnist_dataset(mnist_root, transform=ToTensor()), batch_size=10, seed=4)
    from_tensors = DataStream(ds.x_train, ds.y_train, batch_size=10, seed=4)
    assert len(from_torchvision) == len(from_tensors) == 5
    for (xa, ya), (xb, yb) in zip(from_torchvision, from_tensors, strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb) and ya.dtype == torch.int64
    with pytest.raises(TypeError, match="map-style"):
        DataStream.from_dataset(Counting(5))


def test_loader_stream_map_style_order_and_exact_resume(mnist_root: Path) -> None:
    data = mnist_dataset(mnist_root, transform=ToTensor())
    ds = load_mnist(mnist_root)
    stream = LoaderStream(data, batch_size=10, seed=4)
    reference = DataStream(ds.x_train, ds.y_train, batch_size=10, seed=4)
    batches = []
    for (x, y), (xr, yr) in zip(stream, reference, strict=True):
        assert torch.equal(x, xr) and torch.equal(y, yr)
        batches.append(y)
    with pytest.warns(ExhaustedStreamWarning, match="LoaderStream's pass is over"):
        assert len(stream) == 5 and list(stream) == []  # exhausted until reset
    stream.reset()
    it = iter(stream)
    next(it), next(it)
    state = stream.state_dict()
    resumed = LoaderStream(data, batch_size=10, seed=4)
    resumed.load_state_dict(state)
    assert [y.tolist() for _, y in resumed] == [y.tolist() for y in batches[2:]]
    with pytest.raises(ValueError, match="seed"):
        LoaderStream(data, batch_size=10, seed=5).load_state_dict(state)


class Counting(IterableDataset):
    """Rows ``i`` with label ``i % 3``, in a fixed order and with no length."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield torch.full((2,), float(i)), i % 3


def test_loader_stream_iterable_dataset_and_dataloader() -> None:
    stream = LoaderStream(Counting(25), batch_size=10)
    with pytest.raises(TypeError):
        len(stream)
    it = iter(stream)
    first = next(it)[1].tolist()
    assert first == [i % 3 for i in range(10)]
    resumed = LoaderStream(Counting(25), batch_size=10, start_batch=1)
    assert [x[:, 0].tolist() for x, _ in resumed] == [
        [float(i) for i in range(10, 20)], [float(i) for i in range(20, 25)]]
    loader = DataLoader(TensorDataset(torch.arange(12.0).reshape(6, 2), torch.arange(6)),
                        batch_size=4)
    from_loader = LoaderStream(loader)
    assert len(from_loader) == 2 and [y.tolist() for _, y in from_loader] == [[0, 1, 2, 3], [4, 5]]


@pytest.mark.parametrize("lazy", [False, True])
def test_torchvision_mnist_streams_through_the_lightning_module(mnist_root: Path,
                                                                lazy: bool) -> None:
    data = mnist_dataset(mnist_root, transform=ToTensor())
    stream = (LoaderStream(data, batch_size=16, seed=0) if lazy
              else DataStream.from_dataset(data, batch_size=16, seed=0))
    booster = SGB(lambda: ConvNet(), n_learners=2, loss="softmax", n_outputs=10)
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_model_summary=False, enable_progress_bar=False)
    trainer.fit(StreamingBoosterModule(booster), train_dataloaders=stream)
    assert trainer.global_step == 3 and booster.samples_seen == N_TRAIN
    assert booster.input_shape == (1, 28, 28)


def test_loader_stream_resumes_a_lightning_fit_exactly(mnist_root: Path, tmp_path: Path) -> None:
    data = mnist_dataset(mnist_root, transform=ToTensor())

    def fit(ckpt_path: Path | None = None, **trainer_kwargs) -> tuple[pl.Trainer, SGB]:
        torch.manual_seed(0)
        booster = SGB(lambda: ConvNet(), n_learners=2, loss="softmax", n_outputs=10)
        trainer = pl.Trainer(**{"max_epochs": 1, **trainer_kwargs}, accelerator="cpu",
                             logger=False, enable_checkpointing=False,
                             enable_model_summary=False, enable_progress_bar=False)
        trainer.fit(StreamingBoosterModule(booster), ckpt_path=ckpt_path,
                    train_dataloaders=LoaderStream(data, batch_size=8, seed=1))
        return trainer, booster

    _, reference = fit()
    stopped, _ = fit(max_steps=2)
    stopped.save_checkpoint(tmp_path / "two.ckpt")
    # the stopped run's epoch counts as finished: the resumed trainer must allow another one
    resumed_trainer, resumed = fit(ckpt_path=tmp_path / "two.ckpt", max_epochs=None,
                                   max_steps=N_TRAIN // 8)
    assert resumed_trainer.global_step == N_TRAIN // 8
    assert resumed.samples_seen == reference.samples_seen == N_TRAIN
    for key, value in reference.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, resumed.state_dict()[key]), key
