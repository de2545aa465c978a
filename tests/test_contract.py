"""The booster contract (issue 11): learners behave as in plain PyTorch, bad input and bad
configuration fail early with our message, and nothing changes silently."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from torchboost import (
    OGB,
    SGB,
    AdaboostOLM,
    DivergenceError,
    OnlineMBBM,
    OzaBoost,
    ResidualSGB,
    SingleLearner,
    StagewiseGB,
)
from torchboost.boosters.registry import BOOSTERS
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


@pytest.mark.parametrize("cls", [SGB, StagewiseGB])
def test_wrong_width_on_a_fresh_booster_is_a_clear_error(cls: type) -> None:
    booster = cls(lambda: nn.Linear(3, 1), n_learners=2, step=0.5, mode="loop")
    before = _state(booster)
    with pytest.raises(ValueError, match=r"shape \(5,\) per example"):
        booster.learn(torch.randn(4, 5), torch.randn(4))
    assert _same_state(before, _state(booster)) and booster.rounds == 0


class _OneRowShort(nn.Module):
    """A user's bug: the forward drops the batch's last row."""

    def __init__(self, outputs: int = 1) -> None:
        super().__init__()
        self.linear = nn.Linear(3, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)[:-1]


def _short_booster(name: str, mode: str) -> nn.Module:
    if name == "OzaBoost":  # trained on the short scores without a word (a red-team finding)
        return OzaBoost(lambda: _OneRowShort(3), n_classes=3, n_learners=2, mode=mode)
    if name in ("AdaboostOLM", "OnlineMBBM"):
        return {"AdaboostOLM": AdaboostOLM, "OnlineMBBM": OnlineMBBM}[name](
            lambda: _OneRowShort(3), 3, n_learners=2, mode=mode)
    if name == "SingleLearner":
        return SingleLearner(_OneRowShort, mode=mode)
    return {"SGB": SGB, "StagewiseGB": StagewiseGB}[name](_OneRowShort, n_learners=2, mode=mode)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
@pytest.mark.parametrize("name", ["OzaBoost", "AdaboostOLM", "OnlineMBBM", "SingleLearner",
                                  "StagewiseGB", "SGB"])
def test_a_learner_that_returns_too_few_rows_is_a_clear_error(name: str, mode: str) -> None:
    """One row of scores per example, or a ValueError naming the counts; nothing changes and
    no random number is drawn (before: OzaBoost trained on 7 of 8 rows, the others raised
    torch's size errors)."""
    torch.manual_seed(0)
    booster = _short_booster(name, mode)
    y = torch.randint(0, 3, (8,)) if name in ("OzaBoost", "AdaboostOLM", "OnlineMBBM") else (
        torch.randn(8))
    x = torch.randn(8, 3)
    before, rng = _state(booster), torch.get_rng_state()
    with pytest.raises(ValueError, match="7 rows of scores for a batch of 8 examples"):
        booster.learn(x, y)
    assert _same_state(before, _state(booster)) and torch.equal(rng, torch.get_rng_state())
    with pytest.raises(ValueError, match="7 rows of scores for a batch of 8 examples"):
        booster.predict(x)


def test_a_stage_of_the_wrong_width_is_a_clear_error() -> None:
    """StagewiseGB's stage learner is held to the loss's width as the other boosters' are
    (before: torch.cat's size error)."""
    booster = StagewiseGB(lambda: nn.Linear(3, 2), n_learners=2)
    before = _state(booster)
    with pytest.raises(ValueError, match="return 2 outputs per example but squared loss"):
        booster.learn(torch.randn(8, 3), torch.randn(8))
    assert _same_state(before, _state(booster))


def test_tuple_outputs_inside_ogbs_bounded_wrapper_are_a_clear_error() -> None:
    booster = OGB(_TupleNet, n_learners=2)
    with pytest.raises(ValueError, match="not a tensor"):
        booster.learn(torch.randn(4, 3), torch.randn(4))


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
    lambda: SGB(lambda: nn.Linear(3, 1), n_learners=2, optimizer_kwargs={"lr": -1.0}),
    lambda: BoundedOutput(nn.Linear(3, 1), bound=math.inf),
], ids=["sgb-step", "rsgb-step", "ogb-step", "radius", "bound", "radius-nan", "lr-inf",
        "lr-negative", "bounded-output"])
def test_non_finite_hyper_parameters_are_refused(build) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"finite|\[1/N, 1\]"):
        build()


# --- items 3 and 6: guards on every booster, absurd finite steps, recovery ----------------------
def _all_boosters(lr: float, optimizer: type[torch.optim.Optimizer] = torch.optim.SGD):
    """Every registered booster of 3 learners ``Linear(3, 4) → Tanh → Linear(4, m)`` at
    ``optimizer(lr)``, with ``"real"`` or ``"class"`` (3 classes) labels."""
    kw = {"optimizer": optimizer, "optimizer_kwargs": {"lr": lr}}
    boosters = {}
    for name, spec in BOOSTERS.items():
        m = 3 if spec.task == "classification" else 1

        def factory(m: int = m) -> nn.Module:
            return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, m))

        boosters[name] = (spec.make(factory, n_learners=3, n_outputs=m, **kw),
                          "class" if m == 3 else "real")
    return boosters


def _batch(kind: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 3, generator=g)
    y = torch.randint(0, 3, (16,), generator=g) if kind == "class" else torch.randn(16, generator=g)
    return x, y


def _optimizer_state(booster) -> list:  # type: ignore[no-untyped-def]
    import copy
    return copy.deepcopy([opt.state_dict() for opt in booster.learners.optimizers])


@pytest.mark.parametrize("name", list(_all_boosters(0.1)))
def test_every_booster_rejects_an_absurd_step_restores_everything_and_recovers(name: str) -> None:
    torch.manual_seed(0)
    booster, kind = _all_boosters(0.05, torch.optim.SGD)[name]
    for group in (g for opt in booster.learners.optimizers for g in opt.param_groups):
        group["momentum"] = 0.9  # optimizer state that a rejected step must not keep
    booster.learn(*_batch(kind, 0))
    state, opt_state = _state(booster), _optimizer_state(booster)
    generator = getattr(booster, "generator", None)
    generator_state = None if generator is None else generator.get_state()
    for group in (g for opt in booster.learners.optimizers for g in opt.param_groups):
        group["lr"] = 1e30  # finite parameters of ~1e29 after one step: useless, not NaN
    with pytest.raises(DivergenceError):
        booster.learn(*_batch(kind, 1))
    assert _same_state(state, _state(booster)) and booster.rounds == 1
    after = _optimizer_state(booster)
    for saved, now in zip(opt_state, after, strict=True):
        assert saved["state"].keys() == now["state"].keys()
        for key in saved["state"]:
            for name_, value in saved["state"][key].items():
                assert torch.equal(value, now["state"][key][name_]), name_
    if generator is not None:
        assert torch.equal(generator_state, generator.get_state())
    for group in (g for opt in booster.learners.optimizers for g in opt.param_groups):
        group["lr"] = 0.05
    for seed in range(2, 5):  # the booster continues once the learning rate is lowered
        out = booster.learn(*_batch(kind, seed))
        assert torch.isfinite(out).all()
    assert all(torch.isfinite(p).all() for p in booster.parameters())


@pytest.mark.parametrize("name", ["stagewise_gb", "adaboost_olm", "oza_boost", "online_mbbm"])
def test_boosters_that_had_no_guard_raise_divergence_instead_of_nan(name: str) -> None:
    torch.manual_seed(0)
    booster, kind = _all_boosters(1e30, torch.optim.Adam)[name]
    x, y = _batch(kind)
    booster.learners.optimizers[0].param_groups[0]["lr"] = 1e30
    with pytest.raises(DivergenceError):
        for _ in range(5):
            booster.learn(x * 1e30, y)
    assert all(torch.isfinite(p).all() for p in booster.parameters())


# --- item 8: one contract: scores from learn/predict, labels from predict_label -----------------
@pytest.mark.parametrize("name", list(_all_boosters(0.1)))
def test_every_booster_returns_scores_and_labels_from_predict_label(name: str) -> None:
    torch.manual_seed(0)
    booster, kind = _all_boosters(0.05)[name]
    x, y = _batch(kind)
    out = booster.learn(x, y)
    assert out.is_floating_point() and out.shape == (16, booster.out_dim)
    assert booster.predict(x).shape == (16, booster.out_dim)
    if kind == "class":
        labels = booster.predict_label(x)
        assert labels.dtype == torch.int64 and torch.equal(labels, booster.predict(x).argmax(-1))
    else:
        with pytest.raises(ValueError, match="regression"):
            booster.predict_label(x)


@pytest.mark.parametrize("name", list(_all_boosters(0.1)))
def test_every_booster_trains_under_the_lightning_module(name: str) -> None:
    import lightning.pytorch as pl

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule

    torch.manual_seed(0)
    booster, kind = _all_boosters(0.05)[name]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=g, dtype=torch.float64)  # cast to float32 by the booster
    y = torch.randint(0, 3, (64,), generator=g) if kind == "class" else torch.randn(64)
    module = StreamingBoosterModule(booster)
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu")
    trainer.fit(module, DataStream(x, y, batch_size=16, seed=0, standardize=None))
    assert booster.rounds == 4
    assert module.progressive_scores()["loss"] is not None


# --- item 5: the configuration is part of the state -------------------------------------------
def test_loading_a_differently_configured_booster_lists_every_difference() -> None:
    torch.manual_seed(0)
    squared = SGB(lambda: nn.Linear(3, 1), "squared", n_learners=2, step=0.5)
    squared.learn(torch.randn(8, 3), torch.randn(8))
    huber = SGB(lambda: nn.Linear(3, 1), "huber", n_learners=2, step=0.3, y0="mean")
    before = _state(huber)
    with pytest.raises(ValueError, match="configured differently") as info:
        huber.load_state_dict(squared.state_dict())
    for key in ("loss: saved", "step: saved", "y0: saved"):
        assert key in str(info.value)
    assert _same_state(before, _state(huber)) and huber.rounds == 0


def test_optimizer_class_and_defaults_are_compared_before_anything_loads() -> None:
    torch.manual_seed(0)
    adam = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)  # the default optimizer
    adam.learn(torch.randn(8, 3), torch.randn(8))
    sgd = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5, optimizer=torch.optim.SGD,
              optimizer_kwargs={"lr": 0.1})
    with pytest.raises(ValueError, match=r"optimizer: saved 'schedulefree\.adamw_schedulefree"
                                         r"\.AdamWScheduleFree'"):
        sgd.load_state_dict(adam.state_dict())
    other_lr = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5, optimizer_kwargs={"lr": 0.5})
    with pytest.raises(ValueError, match="optimizer_defaults"):
        other_lr.load_state_dict(adam.state_dict())
    same = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    same.load_state_dict(adam.state_dict())  # the same configuration loads
    x = torch.randn(4, 3)
    assert torch.equal(same.predict(x), adam.predict(x))


def test_ogb_radius_bound_and_mode_are_compared() -> None:
    """The default bound D is 3 for standardised labels (STANDARDIZED_BOUND)."""
    a = OGB(lambda: nn.Linear(3, 1), n_learners=2, radius=2.0, mode="loop")
    b = OGB(lambda: nn.Linear(3, 1), n_learners=2, radius=3.0, bound=0.5, mode="stacked")
    with pytest.raises(ValueError) as info:
        b.load_state_dict(a.state_dict())
    for key in ("radius: saved 2.0", "bound: saved 3.0", "mode: saved 'loop'"):
        assert key in str(info.value)


# --- item 9: mode="auto" probes the learners once and falls back to the loop --------------------
class _LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True)
        self.out = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(x.unsqueeze(1))
        return self.out(h[:, -1])


class _ItemNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 1.0 if self.linear.weight.abs().max().item() < 1e6 else 0.0
        return self.linear(x) * scale


@pytest.mark.parametrize("learner", [_LSTMNet, _ItemNet], ids=["lstm", "item"])
def test_auto_mode_falls_back_to_the_loop_with_one_warning(learner: type[nn.Module]) -> None:
    import warnings

    torch.manual_seed(0)
    booster = SGB(learner, n_learners=2, step=0.5)
    assert booster.learners.mode == "stacked"
    x, y = torch.randn(8, 3), torch.randn(8)
    with pytest.warns(UserWarning, match="falls back to mode='loop'") as caught:
        booster.learn(x, y)
    assert len(caught) == 1 and booster.learners.mode == "loop"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        booster.learn(x, y)
        assert booster.predict(x).shape == (8, 1)
        assert booster.learners.training
    torch.manual_seed(0)
    fresh = SGB(learner, n_learners=2, step=0.5)
    fresh.load_state_dict(booster.state_dict())  # the saved loop form is adopted
    assert fresh.learners.mode == "loop" and torch.equal(fresh.predict(x), booster.predict(x))


def test_auto_mode_probe_does_not_hide_bad_input_or_change_randomness() -> None:
    torch.manual_seed(0)
    booster = SGB(lambda: nn.Linear(3, 1), n_learners=2, step=0.5)
    with pytest.raises(ValueError, match="per example"):
        booster.learn(torch.randn(4, 5), torch.randn(4))
    assert booster.learners.mode == "stacked"
    torch.manual_seed(1)
    booster.learn(torch.randn(4, 3), torch.randn(4))
    after_probe = torch.rand(1)
    torch.manual_seed(1)
    torch.randn(4, 3), torch.randn(4)
    assert torch.equal(after_probe, torch.rand(1))


# --- item 7: OGB warns once when the labels exceed its radius ------------------------------------
def test_ogb_warns_once_when_labels_exceed_the_radius() -> None:
    import warnings

    torch.manual_seed(0)
    # labels in the user's units (the default standardises them, and they fit the ball)
    booster = OGB(lambda: nn.Linear(3, 1), n_learners=4, y0="mean", standardize=False)
    x, y = torch.randn(16, 3), 10 + 0.1 * torch.randn(16)
    with pytest.warns(UserWarning, match=r"radius B=1 \(the default B assumes labels in "
                                         r"\[-D, D\], here \[-1, 1\]\).*y0='mean'"):
        booster.learn(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        booster.learn(x, y)  # once
        wide = OGB(lambda: nn.Linear(3, 1), n_learners=4, y0="mean", radius=20.0,
                   standardize=False)
        wide.learn(x, y)  # labels inside the radius: no warning
        OGB(lambda: nn.Linear(3, 1), n_learners=4).learn(x, torch.rand(16) - 0.5)


def test_ogb_on_standardised_labels_warns_only_beyond_twice_its_radius() -> None:
    """Standardised labels are in standard deviations; a few beyond B = 3 are a Gaussian's
    tail and do not warn, one beyond 2B does."""
    import warnings

    torch.manual_seed(0)
    y = torch.randn(64)
    y[0] = 4.0  # about 4 standard deviations: beyond B, within 2B
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OGB(lambda: nn.Linear(3, 1), n_learners=4).learn(torch.randn(64, 3), y)
    y[0] = 40.0  # about 7.7 standard deviations
    with pytest.warns(UserWarning, match=r"standardised labels reach 7\.\d+ standard deviations, "
                      r"more than twice the radius B=3 \(in standard deviations"):
        OGB(lambda: nn.Linear(3, 1), n_learners=4).learn(torch.randn(64, 3), y)



def test_ogb_told_its_labels_are_standardised_warns_as_if_it_had_standardised_them() -> None:
    """Labels standardised by the user (standardize=False, standardized_labels=True) get the
    bound and the radius warning of the booster's own standardisation: D = 3, and a label at 4
    standard deviations does not warn; without the flag it warns, B = 1."""
    import warnings

    from torchboost import ConvexHullOGB
    from torchboost.boosters.online_linear import STANDARDIZED_BOUND

    torch.manual_seed(0)
    x, y = torch.randn(64, 3), torch.randn(64)
    y[0] = 4.0
    told = OGB(lambda: nn.Linear(3, 1), n_learners=4, standardize=False,
               standardized_labels=True)
    assert (told.bound, told.radius) == (STANDARDIZED_BOUND, 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        told.learn(x, y)
    untold = OGB(lambda: nn.Linear(3, 1), n_learners=4, standardize=False)
    assert untold.bound == 1.0
    with pytest.warns(UserWarning, match=r"labels reach norm 4 but .* radius B=1 "):
        untold.learn(x, y)
    assert ConvexHullOGB(lambda: nn.Linear(3, 1), n_learners=2, standardize=False,
                         standardized_labels=True).bound == STANDARDIZED_BOUND
    # a booster pickled before the flag has none: read as whether it standardises itself
    default = OGB(lambda: nn.Linear(3, 1), n_learners=4)
    for booster, own in ((told, False), (default, True)):
        del booster.standardized_labels
        assert booster._labels_in_deviations() is own


@pytest.mark.parametrize(("options", "message"), [
    ({"standardized_labels": "yes", "standardize": False},
     "standardized_labels must be True or False, got 'yes'"),
    ({"standardized_labels": True, "standardize": False, "loss": "logistic"},
     "standardized_labels=True needs a regression loss"),
    ({"standardized_labels": False}, "standardized_labels=False contradicts standardize=True")])
def test_ogb_standardized_labels_is_checked(options, message) -> None:
    loss = options.pop("loss", "squared")
    with pytest.raises(ValueError, match=message):
        OGB(lambda: nn.Linear(3, 1), loss, n_learners=4, **options)

# --- item 12: corrupted checkpoints are named, latest_checkpoint skips them ----------------------
def test_corrupted_checkpoints_are_named_and_skipped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    from torchboost.lightning import (
        AtomicCheckpointIO,
        CorruptCheckpointError,
        atomic_save,
        latest_checkpoint,
    )

    good = atomic_save({"state_dict": {"w": torch.randn(2000)}}, tmp_path / "good.ckpt")
    data = good.read_bytes()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # inside the tensor data: torch.load would not notice
    (tmp_path / "flipped.ckpt").write_bytes(bytes(flipped))
    (tmp_path / "empty.ckpt").write_bytes(b"")
    stamp = good.stat().st_mtime_ns
    for i, name in enumerate(["truncated.ckpt", "flipped.ckpt", "empty.ckpt"], start=1):
        os.utime(tmp_path / name, ns=(stamp + i * 10**9, stamp + i * 10**9))
    with pytest.warns(UserWarning, match="empty.ckpt"):
        assert latest_checkpoint(tmp_path) == good
    io = AtomicCheckpointIO()
    for name in ("truncated.ckpt", "flipped.ckpt", "empty.ckpt"):
        with pytest.raises(CorruptCheckpointError, match=f"{name}.*latest_checkpoint"):
            io.load_checkpoint(tmp_path / name)
    assert torch.equal(io.load_checkpoint(good)["state_dict"]["w"],
                       torch.load(good)["state_dict"]["w"])


# --- item 8, chaining family: the ChainingBooster adapter under the Lightning module ------------
def _chaining(name: str):  # type: ignore[no-untyped-def]
    from torchboost.chaining import ChainingBooster, ChainingTree, LocAdaBoost, StepwiseOGB

    if name == "tree":
        return ChainingBooster(ChainingTree((0.0, 1.0), depth=4))
    if name == "stepwise":
        return ChainingBooster(StepwiseOGB([ChainingTree((0.0, 1.0), depth=4)], "squared"))
    return ChainingBooster(LocAdaBoost((0.0, 1.0), depth=4, bound=2.0))


@pytest.mark.parametrize("name", ["tree", "stepwise", "loc"])
def test_chaining_models_follow_the_contract_under_the_lightning_module(name: str) -> None:
    import lightning.pytorch as pl

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule

    booster = _chaining(name)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, generator=g)
    y = torch.sin(6 * x[:, 0])
    out = booster.learn(x[:8], y[:8])
    assert out.shape == (8, 1) and out.is_floating_point()
    assert booster.predict(x[:8]).shape == (8, 1)
    with pytest.raises(ValueError, match="regression"):
        booster.predict_label(x[:8])
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu")
    module = StreamingBoosterModule(booster)
    trainer.fit(module, DataStream(x, y, batch_size=16, seed=0, standardize=None))
    assert booster.rounds == 5 and booster.samples_seen == 72
    assert module.progressive_scores()["loss"] is not None


def test_the_streaming_callback_does_not_change_the_trained_model() -> None:
    import lightning.pytorch as pl

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule, StreamingCallback

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 3, generator=g), torch.randn(96, generator=g)
    states = []
    for with_callback in (False, True):
        torch.manual_seed(0)
        booster = SGB(_bn_learner, n_learners=2, step=0.5)  # BatchNorm: loop mode
        callbacks = [StreamingCallback(x[:32] * 5 + 3, y[:32], eval_every_units=50)] if (
            with_callback) else []
        trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False,
                             accelerator="cpu", callbacks=callbacks)
        trainer.fit(StreamingBoosterModule(booster),
                    DataStream(x, y, batch_size=16, seed=0, standardize=None))
        states.append(_state(booster))
    assert _same_state(*states)


@pytest.mark.parametrize("name", ["tree", "stepwise", "loc"])
def test_the_streaming_callback_runs_on_the_chaining_models(name: str, tmp_path) -> None:
    """Issue 31: StreamingCallback crashed on ChainingBooster ('y0_fixed')."""
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import TensorBoardLogger

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule, StreamingCallback

    booster = _chaining(name)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(96, 1, generator=g)
    y = torch.sin(6 * x[:, 0])
    callback = StreamingCallback(x[64:], y[64:], eval_every_units=16)
    trainer = pl.Trainer(max_epochs=1, logger=TensorBoardLogger(tmp_path), accelerator="cpu",
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[callback])
    trainer.fit(StreamingBoosterModule(booster),
                DataStream(x[:64], y[:64], batch_size=16, seed=0, standardize=None))
    assert len(callback.history) >= 3
    assert callback.history[-1]["test_loss"] < callback.history[0]["test_loss"]


def test_the_streaming_callback_evaluates_in_the_units_the_stream_feeds() -> None:
    """Issue 31: the Lightning guide standardised the training stream but gave raw x_test to
    the callback: final test loss 30.3 where a constant scores 0.06, with no warning."""
    import lightning.pytorch as pl

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule, StreamingCallback

    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 3, generator=g) * 50 + 200
    y = torch.tanh((x[:, 0] - 200) / 50) + 0.05 * torch.randn(400, generator=g)
    losses = []
    for transform in ("stream", "explicit"):
        torch.manual_seed(0)
        stream = DataStream(x[:300], y[:300], batch_size=20, seed=0)  # standardises (warm-up)
        callback = StreamingCallback(
            x[300:], y[300:], eval_every_units=1e9,
            **({"transform": stream.transform} if transform == "explicit" else {}))
        trainer = pl.Trainer(max_epochs=1, logger=False, accelerator="cpu",
                             enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, callbacks=[callback])
        trainer.fit(StreamingBoosterModule(SGB(lambda: nn.Sequential(
            nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)), n_learners=4)),
                    stream)
        losses.append(callback.history[-1]["test_loss"])
    assert losses[0] == losses[1]
    assert losses[0] < 0.5 * float(y[300:].var()) / 2


def test_a_streaming_run_prints_none_of_the_notices_that_concern_no_stream() -> None:
    """Issue 31: every Lightning run printed "validation_step but no val_dataloader" and a
    pytree deprecation from inside Lightning; the module filters those two, nothing else."""
    import warnings

    import lightning.pytorch as pl

    from torchboost.data import DataStream
    from torchboost.lightning import StreamingBoosterModule

    x, y = torch.randn(64, 3), torch.randn(64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        module = StreamingBoosterModule(SGB(lambda: nn.Linear(3, 1), n_learners=2))
        trainer = pl.Trainer(max_epochs=1, logger=False, accelerator="cpu",
                             enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False)
        trainer.fit(module, DataStream(x, y, batch_size=16, seed=0, standardize=None))
        warnings.warn("a user's own warning", UserWarning, stacklevel=1)
    texts = [str(w.message) for w in caught]
    assert not [t for t in texts if "val_dataloader" in t or "LeafSpec" in t], texts
    assert "a user's own warning" in texts


class _Hooked(nn.Module):
    """A learner that registers a tensor hook on its output in forward, as a user may."""

    calls = 0

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.linear(x)
        if out.requires_grad:
            out.register_hook(self._count)
        return out

    @staticmethod
    def _count(grad: torch.Tensor) -> None:
        _Hooked.calls += 1


def test_a_hook_registered_in_forward_fires_in_loop_mode() -> None:
    """As in plain PyTorch: once per learner per round (stacked, under vmap, it does not; the
    custom-learners page says so and names mode='loop')."""
    _Hooked.calls = 0
    booster = SGB(_Hooked, n_learners=3, mode="loop")
    booster.learn(torch.randn(8, 3), torch.randn(8))
    booster.predict(torch.randn(4, 3))  # no backward: no call
    assert _Hooked.calls == 3
