"""StagewiseGB's frozen learners evaluated as one stacked call (FrozenPrefix) give the results of
the loop, one learner after another: predictions, learner parameters and compute units, over
several stages, across save/load mid-stage, best-epoch restores, modes, dtypes and fallbacks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchboost import StagewiseGB, TwoLayerNet

ADAM = {"optimizer": torch.optim.Adam, "optimizer_kwargs": {"lr": 0.1}}
TOL = {"rtol": 1e-5, "atol": 1e-6}


def build(factory=lambda: TwoLayerNet(6, 4), stacked: bool = True, n: int = 5) -> StagewiseGB:
    torch.manual_seed(0)
    gb = StagewiseGB(factory, "squared", n_learners=n, step=0.5, y0="mean", **ADAM)
    if not stacked:
        gb.frozen_prefix.problem = "the reference: one learner after another"
    return gb


def batches(count: int = 12, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        x = torch.randn(16, 6, generator=generator)
        out.append((x, x[:, 0] - 2 * x[:, 1].tanh() + 0.1 * torch.randn(16, generator=generator)))
    return out


def assert_same(a: StagewiseGB, b: StagewiseGB, x: torch.Tensor) -> None:
    assert a.compute_units == b.compute_units and int(a.stage) == int(b.stage)
    for n in (None, 1, 2, a.n_learners):  # anytime predictions: a slice of the stack, or more
        torch.testing.assert_close(a.predict(x, n), b.predict(x, n), **TOL)
    for (name, pa), pb in zip(a.learners.named_parameters(), b.learners.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, **TOL, msg=name)


def train_stages(boosters: tuple[StagewiseGB, ...], data: list, stages: int = 3) -> None:
    """``stages`` full stages of every booster on ``data``, one after another."""
    for gb in boosters:
        for _ in range(stages):
            for x, y in data:
                gb.learn(x, y)
            gb.next_stage()


def test_stacked_prefix_equals_the_loop_over_stages_save_load_and_best_epoch_restores():
    data, held_out = batches(), batches(4, seed=2)
    x_val = torch.cat([x for x, _ in held_out])
    y_val = torch.cat([y for _, y in held_out])
    stacked, loop = build(), build(stacked=False)
    for gb in (stacked, loop):
        for _ in range(2):  # stages 0 and 1, then half of stage 2
            for x, y in data:
                gb.learn(x, y)
            gb.next_stage()
        for x, y in data[:5]:
            gb.learn(x, y)
    assert_same(stacked, loop, x_val)
    assert stacked.frozen_prefix.problem is None and len(stacked.frozen_prefix._engine) == 2

    resumed = build()  # mid-stage checkpoint, loaded into a fresh booster
    resumed.load_state_dict(stacked.state_dict())
    assert set(resumed.state_dict()) == set(build().state_dict())  # nothing of the prefix saved
    assert_same(resumed, loop, x_val)

    def validate(gb: StagewiseGB) -> float:
        return gb.evaluate(x_val, y_val)["loss"]

    runs = [gb.fit(data, max_epochs=6, patience=1, tol=0.02,
                   validate=validate) for gb in (resumed, loop)]
    assert [s["epochs"] for s in runs[0]] == [s["epochs"] for s in runs[1]]
    assert [s["best_epoch"] for s in runs[0]] == [s["best_epoch"] for s in runs[1]]
    assert any(s["best_epoch"] != s["epochs"] for s in runs[0])  # a best epoch was restored
    assert_same(resumed, loop, x_val)
    assert int(resumed.stage) == 4 and len(resumed.frozen_prefix._engine) == 4
    # units charged as (i − 1) + 1 + 2 per example in stage i (1-based), whichever path ran
    before_fit = 192 * 3 + 192 * 4 + 80 * 5  # stages 0, 1 (12 batches of 16), 5 batches of 2
    assert resumed.compute_units == before_fit + sum((s["stage"] + 3) * s["epochs"] * 192
                                                     for s in runs[0])


def test_prefix_follows_modes_moves_and_in_place_edits():
    def dropout_net() -> nn.Module:
        return nn.Sequential(nn.Linear(6, 4), nn.Tanh(), nn.Dropout(0.5), nn.Linear(4, 1))

    data = batches(6)
    stacked, loop = build(dropout_net), build(dropout_net, stacked=False)
    for gb in (stacked, loop):
        gb.eval()  # deterministic training: Dropout off in the frozen learners too
    train_stages((stacked, loop), data)
    x = data[0][0]
    assert_same(stacked, loop, x)
    stacked.train()  # Dropout on: the stacked prefix draws its own masks per learner
    scores = stacked.predict(x)  # predict runs eval(): deterministic, and the modes come back
    torch.testing.assert_close(scores, loop.predict(x), **TOL)
    assert all(m.training for m in stacked.learners.modules())
    stacked.learners.learner(0).eval()  # mixed modes: the loop runs, in each learner's mode
    torch.testing.assert_close(stacked._forward_learners(x, 3)[0], loop.learners.learner(0)(x))
    stacked.eval()

    for gb in (stacked, loop):
        with torch.no_grad():
            gb.learners.learner(1)[0].weight.mul_(-2.0)  # an in-place edit of a frozen learner
    assert_same(stacked, loop, x)
    for gb in (stacked, loop):
        gb.double()
        gb.learn(*data[0])
    assert stacked.predict(x).dtype == torch.float64
    assert_same(stacked, loop, x.double())


def test_unstackable_learners_run_the_loop():
    class ItemScale(nn.Module):  # .item() fails under vmap
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(6, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x) * (1.0 + 0.0 * self.linear.bias.item())

    cases = {
        "running statistics": lambda: nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4),
                                                    nn.Linear(4, 1)),
        "fails under vmap": ItemScale,
    }
    data = batches(4)
    for reason, factory in cases.items():
        stacked, loop = build(factory, n=4), build(factory, stacked=False, n=4)
        for gb in (stacked, loop):
            for _ in range(3):
                for x, y in data:
                    gb.learn(x, y)
                gb.next_stage()
        assert stacked.frozen_prefix.problem is not None, reason
        assert stacked.frozen_prefix.problem != loop.frozen_prefix.problem
        assert_same(stacked, loop, data[0][0])


def test_a_frozen_learner_keeps_no_gradient():
    gb = build()
    gb.learn(*batches(1)[0])
    assert all(p.grad is not None for p in gb.learners.learner(0).parameters())
    gb.next_stage()
    assert all(p.grad is None for p in gb.learners.learner(0).parameters())
    gb.learn(*batches(1)[0])
    assert all(p.grad is None for p in gb.learners.learner(0).parameters())
    assert all(p.grad is not None for p in gb.learners.learner(1).parameters())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_stacked_prefix_on_cuda_equals_the_loop():
    data = [(x.cuda(), y.cuda()) for x, y in batches(6)]
    stacked, loop = build().cuda(), build(stacked=False).cuda()
    train_stages((stacked, loop), data)
    assert_same(stacked, loop, data[0][0])


def test_learners_step_fused_by_default_and_unfused_checkpoints_still_load():
    fused = build()
    assert all(opt.defaults["fused"] for opt in fused.learners.optimizers)
    torch.manual_seed(0)
    unfused = StagewiseGB(lambda: TwoLayerNet(6, 4), "squared", n_learners=5, step=0.5,
                          y0="mean", optimizer=torch.optim.Adam,
                          optimizer_kwargs={"lr": 0.1, "foreach": False})
    assert not any(opt.defaults["fused"] for opt in unfused.learners.optimizers)
    for gb in (fused, unfused):
        for x, y in batches(3):
            gb.learn(x, y)
    fused.load_state_dict(unfused.state_dict())  # as a checkpoint saved before fused steps
    assert_same(fused, unfused, batches(1)[0][0])
    for gb in (fused, unfused):
        gb.learn(*batches(1, seed=3)[0])
    assert_same(fused, unfused, batches(1)[0][0])


def test_the_stacked_rows_follow_the_engine_to_another_dtype():
    gb = build()
    for x, y in batches(2):
        gb.learn(x, y)
    gb.next_stage()
    gb.learn(*batches(1)[0])
    gb.next_stage()
    x = batches(1)[0][0]
    expected = gb.frozen_prefix(x, 2)
    engine = gb.frozen_prefix._engine
    assert next(iter(engine.rows(2).values())).dtype == torch.float32
    engine.double()  # the cached row views go with the replaced stacked tensors
    assert all(rows.dtype == torch.float64 for rows in engine.rows(2).values())
    gb.double()
    torch.testing.assert_close(gb.frozen_prefix(x.double(), 2), expected.double(), **TOL)


def test_fit_loss_is_the_epochs_size_weighted_fit_error_summed_in_batch_order():
    """``fit``'s ``fit_loss``: the last epoch's ``last_diagnostics()["fit_error"]`` of each
    round times its batch size, summed in float64 in batch order, over the examples (batches
    of different sizes), to the last bit."""
    data = batches(5)
    data[2] = (data[2][0][:7], data[2][1][:7])
    gb = build()
    seen: list[float] = []

    def record(model: StagewiseGB) -> None:
        seen.append(model.last_diagnostics["fit_error"][0].double())

    history = gb.fit(data, max_epochs=1, on_batch_end=record)
    assert len(seen) == len(data) * gb.n_learners
    for stage in history:
        last = seen[stage["stage"] * len(data):(stage["stage"] + 1) * len(data)]
        total = last[0] * data[0][0].shape[0]
        for error, (x, _) in zip(last[1:], data[1:], strict=True):
            total = total + error * x.shape[0]
        assert stage["fit_loss"] == float(total) / sum(x.shape[0] for x, _ in data)


def test_every_edit_of_a_frozen_learner_reaches_the_stacked_copy():
    """The stacked copy is refilled from the learners on every call: each edit below, a write
    through ``.data`` included (which no version counter records), reaches the next call."""
    data = batches(4)
    stacked, loop = build(), build(stacked=False)
    train_stages((stacked, loop), data)
    x = data[0][0]
    assert_same(stacked, loop, x)

    def in_place(gb: StagewiseGB) -> None:
        with torch.no_grad():
            gb.learners.learner(1)[1].weight.mul_(-2.0)

    def through_detach(gb: StagewiseGB) -> None:
        gb.learners.learner(0)[3].bias.detach().add_(3.0)

    def through_data(gb: StagewiseGB) -> None:
        gb.learners.learner(1)[3].weight.data.mul_(3.0)

    def load(gb: StagewiseGB) -> None:
        gb.learners.learner(0).load_state_dict(gb.learners.learner(2).state_dict())

    def assign_data(gb: StagewiseGB) -> None:
        bias = gb.learners.learner(2)[1].bias
        bias.data = torch.linspace(-1.0, 1.0, bias.numel())

    def vector(gb: StagewiseGB) -> None:
        params = list(gb.learners.learner(1).parameters())
        torch.nn.utils.vector_to_parameters(
            torch.nn.utils.parameters_to_vector(params).flip(0), params)

    def new_parameter(gb: StagewiseGB) -> None:
        layer = gb.learners.learner(2)[3]
        layer.weight = nn.Parameter(torch.full_like(layer.weight, 0.5))

    for edit in (in_place, through_detach, through_data, load, assign_data, vector, new_parameter):
        before = stacked.predict(x)
        for gb in (stacked, loop):
            edit(gb)
        assert not torch.allclose(stacked.predict(x), before), edit.__name__
        assert_same(stacked, loop, x)
        for gb in (stacked, loop):
            gb.learn(*data[1])
        assert_same(stacked, loop, x)
