"""Scale-free SGB (``standardize=True``, :mod:`torchboost.boosters.scaling`): running statistics
by hand, invariance to the units of features and targets, state and data-parallel replicas."""

from __future__ import annotations

import threading

import pytest
import torch
from boost_helpers import linear_learners, regression_stream
from torch import Tensor

from torchboost import SGB, TwoLayerNet
from torchboost.boosters.scaling import RunningMoments
from torchboost.distributed import Synchronizer
from torchboost.testing import assert_same

SGD = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.1}}


def test_running_moments_by_hand():
    moments = RunningMoments()
    moments.update(torch.tensor([[1.0, 5.0], [3.0, 5.0]]))
    moments.update(torch.tensor([[5.0, 5.0], [7.0, 5.0], [9.0, 5.0]]))
    assert moments.count.item() == 5
    assert moments.mean.tolist() == pytest.approx([5.0, 5.0])
    assert moments.std().tolist() == pytest.approx([8**0.5, 0.0])  # var(1,3,5,7,9) = 8
    assert moments.scale().tolist() == pytest.approx([8**0.5, 1.0])  # constant: only centred
    images = RunningMoments()
    images.update(torch.tensor([[[1.0, 3.0], [10.0, 10.0]]]))  # (B=1, C=2, 2): per channel
    assert images.mean.tolist() == [2.0, 10.0] and images.std().tolist() == [1.0, 0.0]


def test_indicator_columns_are_left_as_they_are():
    """A column of 0s and 1s passes through (standardised, a rare category would become
    (1 − p)/σ); once a value other than 0 or 1 appears it is standardised like the others.
    Labels are not tracked."""
    moments = RunningMoments(indicators=True)
    moments.update(torch.tensor([[0.0, 1.0], [1.0, 3.0]]))
    moments.update(torch.tensor([[0.0, 5.0], [0.0, 7.0]]))
    shift, scale = moments.shift_and_scale()
    assert moments.off_01.tolist() == [0.0, 68.0]  # Σ|v(v − 1)|: 0 + 3·2 + 5·4 + 7·6
    assert shift.tolist() == [0.0, 4.0] and scale.tolist() == pytest.approx([1.0, 5**0.5])
    moments.update(torch.tensor([[0.5, 4.0]]))
    shift, scale = moments.shift_and_scale()
    assert moments.off_01.tolist() == [0.25, 80.0]
    assert shift.tolist() == pytest.approx([0.3, 4.0])  # mean(0, 1, 0, 0, .5), mean(1..7, 4)
    assert scale[0].item() == pytest.approx(moments.std()[0].item())
    assert RunningMoments().off_01 is None and RunningMoments().shift_and_scale()[0].numel() == 0


def test_boosters_pass_indicators_through_and_export_agrees():
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    x[:, 0] = (x[:, 0] > 1.0).float()  # a rare category: about 16 %
    y = x @ torch.tensor([2.0, 1.0, -1.0])
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    booster.learn(x[:32], y[:32])
    booster.learn(x[32:], y[32:])
    seen = booster.standardizer.inputs(x)
    assert torch.equal(seen[:, 0], x[:, 0])
    torch.testing.assert_close(seen[:, 1:].mean(0), torch.zeros(2), atol=1e-6, rtol=0)
    torch.testing.assert_close(booster.export()(x), booster.predict(x))


def test_states_saved_before_indicators_standardize_every_column():
    """A state without ``off_01`` (saved before indicators were tracked) keeps standardising
    every column, as the booster that saved it did."""
    torch.manual_seed(0)
    x = torch.randn(32, 3)
    x[:, 0] = (x[:, 0] > 0).float()
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    booster.learn(x, x.sum(1))
    state = booster.state_dict()
    del state["standardizer.features.off_01"]
    with pytest.raises(ValueError, match="does not fit this booster"):  # a damaged new state
        SGB(lambda: TwoLayerNet(3, 4), n_learners=2).load_state_dict(dict(state))
    del state["_extra_state"]["indicators"]  # as written by earlier versions
    restored = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    restored.load_state_dict(state)
    assert restored.standardizer.features.off_01.tolist() == [1.0, 1.0, 1.0]  # none 0/1
    torch.testing.assert_close(restored.standardizer.inputs(x)[:, 0].std(unbiased=False).item(),
                               1.0)


def test_large_offsets_keep_their_digits():
    moments = RunningMoments()
    for shift in (1.0, -1.0, 3.0, -3.0):
        moments.update(torch.tensor([[1e8 + shift]], dtype=torch.float64))
    assert moments.mean.item() == 1e8 and moments.std().item() == pytest.approx(5**0.5)


def test_sgb_standardized_round_by_hand():
    """One learner h(x) = w·x, η = ½, SGD 0.1: the first round predicts 0 (no label seen), the
    learner sees standardised features and fits the standardised gradient target."""
    booster = SGB(linear_learners([[1.0, 0.0]]), "squared", step=0.5, standardize=True, **SGD)
    x = torch.tensor([[1.0, 10.0], [3.0, 30.0]])  # standardised: [[-1, -1], [1, 1]]
    y = torch.tensor([100.0, 300.0])  # standardised: [-1, 1]
    assert booster.learn(x, y).flatten().tolist() == [0.0, 0.0]
    # h = [-1, 1]; y1 = -h/2 = [.5, -.5]; targets g = y0 - z' = [1, -1]; grad of w:
    # mean_b 2 (h - g) x' = ([2·(-2)·(-1), 2·2·1] / 2, same for column 2) = [4, 4]
    assert booster.learners.learner_state(0)["weight"].flatten().tolist() == pytest.approx(
        [1.0 - 0.1 * 4, -0.1 * 4])
    # now h(x') = 0.6·(-1) - 0.4·(-1) = -0.2 and 0.2; y' = [.1, -.1]; y = 200 + 100 y'
    assert booster.predict(x).flatten().tolist() == pytest.approx([210.0, 190.0])
    assert booster.standardize and booster.config()["standardize"] is True


def _standardized_run(x_scale: float, y_scale: float, shift: float = 0.0) -> tuple[Tensor, float]:
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8, 1, "relu"), "squared", n_learners=4,
                  optimizer_kwargs={"lr": 1e-2}, standardize=True)
    x, y = regression_stream(512)
    progressive = 0.0
    for rows in torch.arange(512).split(32):
        xb, yb = x[rows] * x_scale + shift, y[rows] * y_scale
        progressive += float((booster.learn(xb, yb).flatten() - yb).square().sum()) / y_scale**2
    return booster.predict(x * x_scale + shift).flatten() / y_scale, progressive / 512


@pytest.mark.parametrize(("x_scale", "y_scale"), [(1.0, 1e8), (1.0, 1e-3), (1e3, 1.0),
                                                  (1e3, 1e8)])
def test_units_of_features_and_targets_do_not_matter(x_scale, y_scale):
    reference, progressive = _standardized_run(1.0, 1.0)
    prediction, scaled_progressive = _standardized_run(x_scale, y_scale, shift=5.0 * x_scale)
    torch.testing.assert_close(prediction, reference, rtol=1e-4, atol=1e-4)
    assert scaled_progressive == pytest.approx(progressive, rel=1e-4)


def test_without_standardize_targets_of_1e8_do_not_train():
    torch.manual_seed(0)
    x, y = regression_stream(512)
    losses = {}
    for standardize in (False, True):
        booster = SGB(lambda: TwoLayerNet(5, 8, 1, "relu"), "squared", n_learners=4,
                      optimizer=torch.optim.Adam, optimizer_kwargs={"lr": 1e-2},
                      standardize=standardize)
        for _ in range(5):
            for rows in torch.arange(512).split(32):
                booster.learn(x[rows], y[rows] * 1e8)
        losses[standardize] = float((booster.predict(x).flatten() / 1e8 - y).square().mean())
    assert losses[True] < 0.7 * float(y.var())  # measured 1.53 vs a variance of 2.41
    assert losses[False] > float(y.var())  # measured 2.75: worse than the mean


def test_statistics_are_saved_and_loaded():
    booster, _ = _trained(standardize=True)
    state = booster.state_dict()
    assert state["standardizer.labels.count"].item() == 512
    fresh = SGB(lambda: TwoLayerNet(5, 8, 1, "relu"), "squared", n_learners=4,
                optimizer_kwargs={"lr": 1e-2}, standardize=True)
    fresh.load_state_dict(state)
    x = regression_stream(16, seed=3)[0]
    assert torch.equal(fresh.predict(x), booster.predict(x))
    with pytest.raises(ValueError, match="standardize"):
        SGB(lambda: TwoLayerNet(5, 8, 1, "relu"), "squared", n_learners=4,
            optimizer_kwargs={"lr": 1e-2}, standardize=False).load_state_dict(state)


def test_states_saved_with_0_dim_counts_load_and_train_on_alike():
    """The counts had no dimension before they had one element (torch.compile read a 0-dim
    float64 input's value on the host at every call): such a checkpoint loads, and the
    booster learns from it exactly as from its own state."""
    booster, _ = _trained(standardize=True)
    state = booster.state_dict()
    assert state["standardizer.features.count"].shape == (1,)
    old = {k: v.reshape(()) if k.endswith("standardizer.features.count")
           or k.endswith("standardizer.labels.count") else v for k, v in state.items()}
    assert old["standardizer.labels.count"].shape == ()
    replicas = []
    for saved in (state, old):
        torch.manual_seed(1)
        fresh = SGB(lambda: TwoLayerNet(5, 8, 1, "relu"), "squared", n_learners=4,
                    optimizer_kwargs={"lr": 1e-2}, standardize=True)
        fresh.load_state_dict(saved)
        assert fresh.standardizer.labels.count.shape == (1,)
        x, y = regression_stream(64, seed=4)
        fresh.learn(x, y)
        replicas.append(fresh)
    assert replicas[1].standardizer.labels.count.item() == 512 + 64
    assert_same(replicas[0].state_dict(), replicas[1].state_dict())
    x = regression_stream(16, seed=5)[0]
    assert torch.equal(replicas[0].predict(x), replicas[1].predict(x))


def test_classifiers_standardize_features_only():
    booster = SGB(lambda: TwoLayerNet(2, 4, 1), "logistic", n_learners=2, standardize=True)
    booster.learn(torch.randn(8, 2) * 100, torch.tensor([0, 1] * 4))
    assert booster.standardizer.labels is None
    assert booster.standardizer.features.count.item() == 8


def _trained(standardize: bool) -> tuple[SGB, tuple[Tensor, Tensor]]:
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(5, 8, 1, "relu"), "squared", n_learners=4,
                  optimizer_kwargs={"lr": 1e-2}, standardize=standardize)
    x, y = regression_stream(512)
    for rows in torch.arange(512).split(32):
        booster.learn(x[rows], y[rows] * 1e3 + 7)
    return booster, (x, y)


class _Pair(Synchronizer):
    """Two replicas in threads: each all-reduce sums both ranks' tensors."""

    def __init__(self, rank: int, slots: list[Tensor | None], barrier: threading.Barrier):
        super().__init__(rank, 2)
        self.slots, self.barrier = slots, barrier

    def all_reduce_(self, tensor: Tensor) -> None:
        self.slots[self.rank] = tensor.clone()
        self.barrier.wait()
        total = self.slots[0] + self.slots[1]
        self.barrier.wait()
        tensor.copy_(total)


def test_data_parallel_replicas_hold_the_global_statistics():
    x = torch.randn(6, 32, 3) * torch.tensor([1.0, 10.0, 1e3]) + 4.0
    x[:, :, 0] = (x[:, :, 0] > 4.0).float()  # an indicator column
    x[5, 31, 0] = 0.5  # that turns continuous in rank 1's last shard only
    single = RunningMoments(indicators=True)
    for batch in x:
        single.update(batch)
    replicas, slots, barrier = [RunningMoments(indicators=True),
                                RunningMoments(indicators=True)], [None, None], \
        threading.Barrier(2, timeout=30)

    def run(rank: int) -> None:
        sync = _Pair(rank, slots, barrier)
        for batch in x:
            replicas[rank].update(batch[rank::2], sync)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for replica in replicas:
        assert replica.count.item() == single.count.item() == 192
        torch.testing.assert_close(replica.mean, single.mean)
        torch.testing.assert_close(replica.std(), single.std())
        torch.testing.assert_close(replica.off_01, single.off_01)
        assert replica.off_01[0].item() == 0.25 and replica.off_01[1:].min().item() > 0


def test_states_saved_before_the_option_load_as_unstandardized():
    def build(**kwargs):
        torch.manual_seed(0)
        return SGB(lambda: TwoLayerNet(5, 8, 1), "squared", n_learners=2, **kwargs)

    old = build(standardize=False)
    old.learn(*regression_stream(32))
    state = old.state_dict()
    del state["_extra_state"]["config"]["standardize"]  # as written by earlier versions
    restored = build(standardize=False)
    restored.load_state_dict(state)
    x = regression_stream(8, seed=4)[0]
    assert torch.equal(restored.predict(x), old.predict(x))
    with pytest.raises(ValueError, match="standardize: saved False, this booster True"):
        build().load_state_dict(state)


def test_a_loaded_state_replaces_the_label_statistics_of_earlier_rounds():
    """After a loaded state the next round maps its prediction back with the loaded label
    statistics, not those of the rounds before the load."""
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 3, generator=g), 5 * torch.randn(8, generator=g) + 2)
               for _ in range(4)]
    torch.manual_seed(0)
    trained = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    torch.manual_seed(0)
    other = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    for x, y in batches[:2]:
        trained.learn(x, y)
    other.learn(*batches[2])  # keeps the label statistics of its own batch
    other.load_state_dict(trained.state_dict())
    assert torch.equal(other.learn(*batches[3]), trained.learn(*batches[3]))


@pytest.mark.parametrize("where", ["features", "labels"])
def test_one_batch_of_huge_finite_values_leaves_finite_statistics(where):
    """Deviations of 1e19 squared overflow float32 for a batch of 64: the statistics are summed
    in float64, so the booster keeps predicting finite numbers afterwards (it once went inf for
    good)."""
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    booster = SGB(lambda: TwoLayerNet(4, 5), n_learners=3)
    booster.learn(x, y)
    booster.learn(x * 1e19, y) if where == "features" else booster.learn(x, y * 1e19)
    for _ in range(5):
        booster.learn(x, y)
    moments = getattr(booster.standardizer, where)
    assert torch.isfinite(moments.sq_dev).all() and torch.isfinite(booster.predict(x)).all()
    assert moments.std().max() > 1e17  # the outlier batch is in the statistics, as it should be


def test_a_stored_scale_is_the_one_its_round_computed_until_the_statistics_change():
    from torchboost.boosters.scaling import _scale

    def fresh(m: RunningMoments) -> Tensor:
        return _scale(m.count, m.mean, m.sq_dev)

    moments = RunningMoments()
    stats = moments.updated(torch.tensor([[1.0, 5.0], [3.0, 5.0]]))
    moments.commit(stats)
    assert moments.scale() is stats.scale  # kept, not computed again
    assert torch.equal(moments.scale(), fresh(moments))
    # every way the statistics change drops it: an in-place write, a load, a conversion
    moments.sq_dev.mul_(4.0)
    assert torch.equal(moments.scale(), fresh(moments)) and moments.scale()[0] == 2.0
    moments.commit(moments.updated(torch.tensor([[7.0, 5.0]])))
    moments.load_state_dict({"count": torch.tensor(2.0, dtype=torch.float64),
                             "mean": torch.tensor([0.0, 0.0], dtype=torch.float64),
                             "sq_dev": torch.tensor([8.0, 0.0], dtype=torch.float64)})
    assert moments.scale().tolist() == [2.0, 1.0]
    moments.commit(moments.updated(torch.tensor([[2.0, 0.0]])))
    converted = moments.float()
    assert converted.scale().dtype == torch.float32
    assert torch.equal(converted.scale(), fresh(converted))


def test_statistics_converted_under_inference_mode_still_scale():
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 2), n_learners=2)
    x = torch.randn(8, 3)
    for _ in range(3):
        booster.learn(x, torch.randn(8))
    expected = booster.predict(x)
    with torch.inference_mode():
        booster.float()  # the float64 statistics become float32 inference tensors (no versions)
    assert booster.standardizer.labels.mean.is_inference()
    assert torch.allclose(booster.predict(x), expected, atol=1e-5)
