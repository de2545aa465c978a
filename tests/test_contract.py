"""The booster contract (issue 11): learners behave as in plain PyTorch, bad input and bad
configuration fail early with our message, and nothing changes silently."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from torchboost import OGB, SGB, ResidualSGB
from torchboost.data import BadInputError, ScreenedStream
from torchboost.learners import BoundedOutput, WeakLearners


def _state(booster: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in booster.state_dict().items() if torch.is_tensor(v)}


def _same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --- item 2: evaluation-time calls run the learners in eval() mode ------------------------------
def _bn_learner() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))


def test_predict_and_evaluate_leave_batchnorm_statistics_alone() -> None:
    torch.manual_seed(0)
    booster = SGB(_bn_learner, n_learners=2, step=0.5)
    x, y = torch.randn(16, 3), torch.randn(16)
    booster.learn(x, y)
    before = _state(booster)
    booster.predict(torch.randn(32, 3) * 10 + 5)
    booster.evaluate(torch.randn(32, 3) * 10 + 5, torch.randn(32))
    assert _same_state(before, _state(booster))
    assert booster.learners.training  # the previous (train) mode is back


def test_a_rows_prediction_does_not_depend_on_its_batch() -> None:
    torch.manual_seed(0)
    booster = SGB(_bn_learner, n_learners=2, step=0.5)
    booster.learn(torch.randn(16, 3), torch.randn(16))
    x = torch.randn(8, 3)
    one = booster.predict(x[:1])  # raised in train mode (BatchNorm on a single row)
    assert torch.allclose(one, booster.predict(x)[:1], atol=1e-6)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_dropout_makes_predict_deterministic_and_training_restored(mode: str) -> None:
    torch.manual_seed(0)
    booster = SGB(lambda: nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1)),
                  n_learners=3, step=0.5, mode=mode)
    booster.learn(torch.randn(16, 3), torch.randn(16))
    x = torch.randn(8, 3)
    assert torch.equal(booster.predict(x), booster.predict(x))
    assert all(m.training for m in booster.learners.modules())
    booster.learners.eval()
    booster.predict(x)
    assert not any(m.training for m in booster.learners.modules())  # eval stays eval


# --- item 1: frozen parameters stay frozen on every path ----------------------------------------
@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_frozen_parameters_stay_frozen(mode: str) -> None:
    torch.manual_seed(0)

    def learner() -> nn.Module:
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        net[0].requires_grad_(False)
        return net

    booster = SGB(learner, n_learners=3, step=0.5, mode=mode)
    assert booster.learners.mode == mode
    frozen = [booster.learners.learner_state(i)["0.weight"].clone() for i in range(3)]
    trained = [booster.learners.learner_state(i)["2.weight"].clone() for i in range(3)]
    for _ in range(3):
        booster.learn(torch.randn(16, 3), torch.randn(16))
    for i in range(3):
        assert torch.equal(booster.learners.learner_state(i)["0.weight"], frozen[i])
        assert not torch.equal(booster.learners.learner_state(i)["2.weight"], trained[i])


def test_learners_frozen_differently_are_not_stacked() -> None:
    modules = [nn.Linear(3, 1), nn.Linear(3, 1)]
    modules[1].bias.requires_grad_(False)
    assert WeakLearners(modules).mode == "loop"


# --- item 11: learn never writes into the caller's x.grad ---------------------------------------
def test_learn_leaves_the_callers_gradient_alone() -> None:
    booster = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    x = torch.randn(8, 3, requires_grad=True)
    booster.learn(x, torch.randn(8))
    assert x.grad is None


# --- item 10: clear errors, state unchanged ---------------------------------------------------
class _TupleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), x


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_tuple_outputs_are_a_clear_error(mode: str) -> None:
    booster = SGB(_TupleNet, n_learners=2, step=0.5, mode=mode)
    before = _state(booster)
    with pytest.raises(ValueError, match="not a tensor"):
        booster.learn(torch.randn(4, 3), torch.randn(4))
    assert _same_state(before, _state(booster))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_other_float_dtypes_are_cast_to_the_learners_dtype(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    a = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    b = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    b.load_state_dict(a.state_dict())
    x, y = torch.randn(8, 3).to(dtype), torch.randn(8)
    assert a.learn(x, y).dtype == torch.float32
    b.learn(x.float(), y)
    assert _same_state(_state(a), _state(b))
    assert a.predict(x).dtype == torch.float32
    stream = ScreenedStream([(x, y)], a)
    assert next(iter(stream))[0].dtype == torch.float32


def test_wrong_width_on_a_fresh_booster_is_a_clear_error() -> None:
    booster = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5, mode="loop")
    before = _state(booster)
    with pytest.raises(ValueError, match=r"shape \(5,\) per example"):
        booster.learn(torch.randn(4, 5), torch.randn(4))
    assert _same_state(before, _state(booster)) and booster.rounds == 0


def test_learn_works_under_no_grad_and_refuses_inference_mode() -> None:
    torch.manual_seed(0)
    a = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    b = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    b.load_state_dict(a.state_dict())
    x, y = torch.randn(8, 3), torch.randn(8)
    with torch.no_grad():
        a.learn(x, y)
    b.learn(x, y)
    assert _same_state(_state(a), _state(b))
    with torch.inference_mode(), pytest.raises(ValueError, match="inference_mode"):
        a.learn(x, y)


def test_labels_on_the_meta_device_are_a_clear_error() -> None:
    booster = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    with pytest.raises(ValueError, match="meta device"):
        booster.learn(torch.randn(4, 3), torch.randn(4, device="meta"))


def test_screened_stream_reports_a_1d_batch_as_a_shape_problem() -> None:
    booster = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    with pytest.raises(BadInputError, match="unsqueeze") as info:
        list(ScreenedStream([(torch.randn(3), torch.randn(1))], booster))
    assert info.value.reason == "features_shape"
    skipping = ScreenedStream([(torch.randn(3), torch.randn(1))], booster, policy="skip")
    assert list(skipping) == [] and skipping.skipped["features_shape"] == 1


def test_optimizers_needing_a_closure_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="LBFGS needs a closure"):
        SGB(lambda: nn.Linear(3, 1), n_learners=2, optimizer=torch.optim.LBFGS)


# --- item 4: non-finite or non-positive hyper-parameters are refused ----------------------------
@pytest.mark.parametrize("build", [
    lambda: SGB(lambda: nn.Linear(3, 1), n_learners=2, step=math.inf),
    lambda: ResidualSGB(lambda: nn.Linear(3, 1), n_learners=2, step=math.inf),
    lambda: OGB(lambda: nn.Linear(3, 1), n_learners=2, step=math.inf),
    lambda: OGB(lambda: nn.Linear(3, 1), n_learners=2, radius=math.inf),
    lambda: OGB(lambda: nn.Linear(3, 1), n_learners=2, bound=math.inf),
    lambda: OGB(lambda: nn.Linear(3, 1), n_learners=2, radius=math.nan),
    lambda: SGB(lambda: nn.Linear(3, 1), n_learners=2, optimizer_kwargs={"lr": math.inf}),
    lambda: SGB(lambda: nn.Linear(3, 1), n_learners=2, optimizer_kwargs={"lr": 0.0}),
    lambda: BoundedOutput(nn.Linear(3, 1), bound=math.inf),
], ids=["sgb-step", "rsgb-step", "ogb-step", "radius", "bound", "radius-nan", "lr-inf", "lr-0",
        "bounded-output"])
def test_non_finite_hyper_parameters_are_refused(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"finite|\[1/N, 1\]"):
        build()
