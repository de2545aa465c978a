"""Chained learners (a streaming GrowNet, :mod:`torchboost.learners.chained`): a hand-checked
round of two learners, stacked = loop, the carries, anytime prediction, export, resume, stagewise
GB, conv learners, a learner of the user's own, the estimators and the errors."""

from __future__ import annotations

import pytest
import torch
from boost_helpers import (
    assert_learns_tiny_regression,
    assert_same_learners,
    assert_state_round_trips,
    regression_stream,
    stream_both,
)
from torch import Tensor, nn

from torchboost import SGB, ConvNet, StagewiseGB, TwoLayerNet
from torchboost.boosters.registry import BOOSTERS, BoosterSpec
from torchboost.learners import WeakLearners
from torchboost.learners.chained import ChainedSequential, chainable
from torchboost.testing import CHECKS


def _hand_learners() -> list[nn.Module]:
    """Two ``TwoLayerNet(2, 2)`` learners with small integer-scaled weights."""
    learners = []
    for i in range(2):
        net = TwoLayerNet(2, 2)
        with torch.no_grad():
            net[1].weight.copy_(torch.tensor([[0.5, -1.0], [1.0, 0.25]]) * (i + 1))
            net[1].bias.copy_(torch.tensor([0.1, -0.2]))
            net[3].weight.copy_(torch.tensor([[1.0, -0.5]]) / (i + 1))
            net[3].bias.copy_(torch.tensor([0.3]))
        learners.append(ChainedSequential(net))
        with torch.no_grad():
            learners[-1].carry_in.weight.copy_(torch.tensor([[2.0, 0.0], [-1.0, 1.0]]))
    return learners


def _hand_forward(params: list[dict[str, Tensor]], x: Tensor) -> tuple[Tensor, Tensor]:
    """The two learners written out: ``f1 = σ(W1 x + b1)``, ``h1 = w2·f1 + c``;
    ``f2 = σ(V1 x + a1 + U f1)``, ``h2 = v2·f2 + d`` (GrowNet's ``[x, f1]`` input as a sum)."""
    p, q = params
    f1 = torch.sigmoid(x @ p["w1"].T + p["b1"])
    h1 = f1 @ p["w2"].T + p["b2"]
    f2 = torch.sigmoid(x @ q["w1"].T + q["b1"] + f1.detach() @ q["u"].T)
    h2 = f2 @ q["w2"].T + q["b2"]
    return h1, h2


def _hand_params(learners: list[nn.Module]) -> list[dict[str, Tensor]]:
    return [{"w1": m.stem[1].weight.detach().clone().requires_grad_(),
             "b1": m.stem[1].bias.detach().clone().requires_grad_(),
             "u": m.carry_in.weight.detach().clone().requires_grad_(),
             "w2": m.head[0].weight.detach().clone().requires_grad_(),
             "b2": m.head[0].bias.detach().clone().requires_grad_()} for m in learners]


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_two_chained_learners_predict_and_step_as_written_out(mode: str) -> None:
    x = torch.tensor([[1.0, -2.0], [0.5, 0.0], [-1.0, 3.0]])
    y = torch.tensor([1.0, -0.5, 2.0])
    learners = _hand_learners()
    params = _hand_params(learners)
    booster = SGB(learners, "squared", step=0.5, y0=0.0, standardize=False, mode=mode,
                  chained=True, optimizer=torch.optim.SGD, optimizer_kwargs={"lr": 0.1})
    h1, h2 = _hand_forward(params, x)
    y1 = -0.5 * h1
    # Alg. 1 line 6 with the chain: y^2 = y^0 − η h1 − η h2
    torch.testing.assert_close(booster.predict(x), y1 - 0.5 * h2)
    torch.testing.assert_close(booster.predict(x, 1), y1)
    prediction = booster.learn(x, y)
    torch.testing.assert_close(prediction, y1 - 0.5 * h2)
    # line 12: learner i fits ∇ℓ(y^{i−1}) = y^{i−1} − y by mean_b (target − h_i)², one SGD step
    loss = ((h1 - (0.0 - y[:, None])) ** 2).mean() + ((h2 - (y1.detach() - y[:, None])) ** 2).mean()
    loss.backward()
    for mine, module in zip(params, booster.learners.engine.modules_ if mode == "loop" else
                            [booster.learners.learner(i) for i in range(2)], strict=True):
        expected = {k: (v - 0.1 * v.grad if v.grad is not None else v).detach()
                    for k, v in mine.items()}
        got = {"w1": module.stem[1].weight, "b1": module.stem[1].bias,
               "u": module.carry_in.weight, "w2": module.head[0].weight,
               "b2": module.head[0].bias}
        for key, value in expected.items():
            torch.testing.assert_close(got[key].detach(), value, msg=key)
    # the first learner gets no carry: its carry_in never moves
    torch.testing.assert_close(booster.learners.learner(0).carry_in.weight.detach(),
                               torch.tensor([[2.0, 0.0], [-1.0, 1.0]]))
    assert booster.compute_units == 3 * (2 + 2 * 2)  # one prediction and one update per learner


def _sgb(mode: str, **options: object) -> SGB:
    torch.manual_seed(0)
    outputs = int(options.get("n_outputs", 1))  # type: ignore[call-overload]
    return SGB(lambda: TwoLayerNet(5, 6, outputs), n_learners=4, mode=mode, chained=True,
               **options)


@pytest.mark.parametrize("options", [{}, {"loss": "softmax", "n_outputs": 3, "targets": "newton",
                                          "step": "learned"}], ids=["squared", "softmax-newton"])
def test_stacked_chained_learners_equal_the_loop(options: dict) -> None:
    x, y = regression_stream(400)
    if options:
        y = torch.bucketize(y, torch.tensor([-0.5, 0.8]))
        options = {**options}
        loss = options.pop("loss")
        stacked, loop = _sgb("stacked", loss=loss, **options), _sgb("loop", loss=loss, **options)
    else:
        stacked, loop = _sgb("stacked"), _sgb("loop")
    stream_both(stacked, loop, x, y, 25)
    assert (stacked.learners.mode, loop.learners.mode) == ("stacked", "loop")
    assert_same_learners(stacked, loop)
    torch.testing.assert_close(stacked.predict(x), loop.predict(x), atol=1e-5, rtol=1e-4)
    for k in (1, 2, 4):  # anytime prediction: the chain of the first k learners
        torch.testing.assert_close(stacked.predict(x, k), loop.predict(x, k), atol=1e-5,
                                   rtol=1e-4)


def test_anytime_prediction_runs_the_chain_of_the_first_learners() -> None:
    booster = _sgb("stacked")
    x, y = regression_stream(300)
    for t in range(0, 300, 30):
        booster.learn(x[t:t + 30], y[t:t + 30])
    modules = [booster.learners.learner(i).eval() for i in range(4)]
    z = booster.standardizer.inputs(x)
    with torch.no_grad():
        carry, total = None, torch.zeros(300, 1)
        for k, module in enumerate(modules, start=1):
            out, carry = module(z, carry)
            total = total - booster.step * out
            expected = booster.standardizer.outputs(booster.initial_prediction(z) + total)
            torch.testing.assert_close(booster.predict(x, k), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_export_equals_predict_and_resume_is_exact(mode: str) -> None:
    x, y = regression_stream(200)
    booster = _sgb(mode)
    for t in range(0, 150, 25):
        booster.learn(x[t:t + 25], y[t:t + 25])
    for k in (1, 3, 4):
        torch.testing.assert_close(booster.export(n_learners=k)(x), booster.predict(x, k),
                                   atol=1e-5, rtol=1e-5)
    program = torch.export.export(booster.export(), (x[:4],),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.testing.assert_close(program.module()(x[:9]), booster.predict(x[:9]), atol=1e-5,
                               rtol=1e-5)
    assert booster.config()["chained"] is True
    assert_state_round_trips(booster, lambda: _sgb(mode), x[150:175], y[150:175])
    with pytest.raises(ValueError, match="chained"):  # an unchained booster refuses the state
        torch.manual_seed(0)
        SGB(lambda: TwoLayerNet(5, 6), n_learners=4, mode=mode).load_state_dict(
            booster.state_dict())


def test_chained_learners_learn_and_the_stacked_round_is_cheaper_than_the_loop() -> None:
    assert_learns_tiny_regression(_sgb("stacked"))


def test_chained_sgb_beats_plain_sgb_after_one_pass() -> None:
    """``sin(x_1) + x_2² / 2 + noise``: with the same learners, rate and stream, chained
    learners end one pass at about half plain SGB's held-out loss (0.024 against 0.048 of
    the variance, 2 seeds, when this test was written)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6000, 6, generator=g)
    y = torch.sin(x[:, 0]) + x[:, 1] ** 2 / 2 + 0.05 * torch.randn(6000, generator=g)
    losses = {}
    for chained in (False, True):
        torch.manual_seed(0)
        booster = SGB(lambda: TwoLayerNet(6, 10), n_learners=16, chained=chained)
        for t in range(0, 5000, 32):
            booster.learn(x[t:t + 32], y[t:t + 32])
        losses[chained] = booster.evaluate(x[5000:], y[5000:])["loss"]
    assert losses[True] < 0.75 * losses[False], losses


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_conv_learners_chain_their_hidden_maps(mode: str) -> None:
    torch.manual_seed(0)
    booster = SGB(lambda: ConvNet(image_size=12, channels=3), n_learners=3, loss="softmax",
                  n_outputs=10, targets="newton", mode=mode, chained=True)
    learner = booster.learners.learner(1)
    assert isinstance(learner.carry_in, nn.Conv2d) and learner.carry_in.kernel_size == (1, 1)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 1, 12, 12, generator=g), torch.randint(0, 10, (40,), generator=g)
    with torch.no_grad():
        _, features = learner(x)
    assert features.shape == (40, 3, 4, 4)  # the hidden map: (12 − 5) // 2 + 1 = 4
    for t in range(0, 40, 10):
        booster.learn(x[t:t + 10], y[t:t + 10])
    torch.testing.assert_close(booster.export()(x), booster.predict(x), atol=1e-5, rtol=1e-5)


def test_stacked_conv_chain_equals_the_loop() -> None:
    boosters = []
    for mode in ("stacked", "loop"):
        torch.manual_seed(0)
        boosters.append(SGB(lambda: ConvNet(image_size=12, channels=3), n_learners=3,
                            loss="softmax", n_outputs=10, mode=mode, chained=True))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(60, 1, 12, 12, generator=g), torch.randint(0, 10, (60,), generator=g)
    stream_both(*boosters, x, y, 15)
    assert_same_learners(*boosters)


class CarryNet(nn.Module):
    """A learner of the user's own that follows the protocol: ``tanh`` features, the carry
    added to them."""

    takes_carry = True

    def __init__(self) -> None:
        super().__init__()
        self.inner, self.out = nn.Linear(5, 3), nn.Linear(3, 1)
        self.mix = nn.Parameter(torch.zeros(()))

    def forward(self, x: Tensor, carry: Tensor | None = None) -> tuple[Tensor, Tensor]:
        features = torch.tanh(self.inner(x))
        if carry is not None:
            features = features + self.mix * carry
        return self.out(features), features


def test_a_learner_of_ones_own_follows_the_protocol_stacked_and_looped() -> None:
    boosters = []
    for mode in ("stacked", "loop"):
        torch.manual_seed(0)
        boosters.append(SGB(lambda: CarryNet(), n_learners=3, mode=mode, chained=True))
    assert chainable(boosters[0].learners.learner(0)).__class__ is CarryNet
    x, y = regression_stream(200)
    stream_both(*boosters, x, y, 20)
    assert_same_learners(*boosters)
    assert float(boosters[1].learners.learner(2).mix.detach()) != 0.0  # the carry's weight learned


def test_stagewise_gb_stage_sees_the_previous_stage_features() -> None:
    x, y = regression_stream(600)
    torch.manual_seed(0)
    gb = StagewiseGB(lambda: TwoLayerNet(5, 6), n_learners=3, chained=True)
    batches = [(x[t:t + 50], y[t:t + 50]) for t in range(0, 500, 50)]
    gb.fit(batches, max_epochs=2, patience=1)
    assert gb.prediction_learners == 3
    first = gb.learners.learner(0).carry_in.weight
    torch.manual_seed(0)
    untouched = StagewiseGB(lambda: TwoLayerNet(5, 6), n_learners=3, chained=True)
    torch.testing.assert_close(first, untouched.learners.learner(0).carry_in.weight)
    assert not torch.equal(gb.learners.learner(2).carry_in.weight,
                           untouched.learners.learner(2).carry_in.weight)
    torch.testing.assert_close(gb.export()(x[500:]), gb.predict(x[500:]), atol=1e-5, rtol=1e-5)
    assert gb.evaluate(x[500:], y[500:])["loss"] < 0.7 * untouched.evaluate(x[500:],
                                                                            y[500:])["loss"]


#: the boosters whose learners chain (issue 33's scope): SGB and its variants, stagewise GB
CHAINABLE = ["sgb", "residual_sgb", "stagewise_gb"]


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
@pytest.mark.parametrize("name", CHAINABLE)
def test_every_booster_conforms_with_chained_learners(name: str, check) -> None:  # type: ignore[no-untyped-def]
    spec = BOOSTERS[name]

    def build(learners, **options):  # type: ignore[no-untyped-def]
        return spec.make(learners, chained=True, **options)

    check(BoosterSpec(f"{name}_chained", spec.cls, spec.task, build))


@pytest.mark.parametrize("module, match", [
    (nn.Linear(5, 1), "neither a plain nn.Sequential"),
    (nn.Sequential(nn.Linear(5, 1)), "no penultimate features"),
    (nn.Sequential(nn.Sigmoid(), nn.Linear(5, 1)), "no Linear or convolution first layer"),
])
def test_learners_that_cannot_chain_say_how_to_write_one(module: nn.Module, match: str) -> None:
    with pytest.raises(ValueError, match=match) as error:
        WeakLearners([module], chained=True)
    assert "takes_carry = True" in str(error.value)


def test_chained_options_are_checked() -> None:
    from torchboost import OGB
    from torchboost.harness import LearnerConfig

    with pytest.raises(ValueError, match="chained must be True or False"):
        WeakLearners(lambda: TwoLayerNet(2, 2), 2, chained="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chained must be True or False"):
        OGB(lambda: TwoLayerNet(2, 2), n_learners=2, chained=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chained must be True or False"):
        LearnerConfig(chained="yes")  # type: ignore[arg-type]
    plain = WeakLearners(lambda: TwoLayerNet(2, 2), 2)
    with pytest.raises(ValueError, match="pass chained=True to WeakLearners"):
        SGB(plain, chained=True)


def test_a_chained_learner_that_returns_one_tensor_is_explained() -> None:
    class Forgetful(CarryNet):
        def forward(self, x: Tensor, carry: Tensor | None = None) -> Tensor:  # type: ignore[override]
            return self.out(torch.tanh(self.inner(x)))

    booster = SGB(lambda: Forgetful(), n_learners=2, chained=True, mode="loop")
    with pytest.raises(ValueError, match=r"not \(output, features\)"):
        booster.learn(*regression_stream(8))


def test_estimators_take_chained() -> None:
    pytest.importorskip("sklearn")
    from sklearn.base import clone

    from torchboost.sklearn import SGBRegressor

    x, y = regression_stream(300)
    model = SGBRegressor(n_learners=3, chained=True, max_passes=1, random_state=0)
    assert clone(model).get_params()["chained"] is True
    model.fit(x.numpy(), y.numpy())
    assert model.booster_.learners.chained
    river = pytest.importorskip("torchboost.river")
    online = river.SGBRegressor(n_learners=2, batch_size=4, chained=True)
    for i in range(8):
        online.learn_one({"a": float(x[i, 0]), "b": float(x[i, 1])}, float(y[i]))
    assert online.booster_.learners.chained


def test_boosters_that_do_not_chain_say_so() -> None:
    from torchboost import OGB, SingleLearner

    for cls in (OGB, SingleLearner):
        with pytest.raises(ValueError, match=f"{cls.__name__} does not chain its learners"):
            cls(lambda: TwoLayerNet(5, 3), n_learners=2, chained=True)
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBRegressor

    x, y = regression_stream(40)
    with pytest.raises(ValueError, match="OGB does not chain its learners"):
        SGBRegressor("ogb", n_learners=2, chained=True, max_passes=1).fit(x.numpy(), y.numpy())


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_a_chained_learner_predicts_in_eval_mode_and_keeps_frozen_parameters(mode: str) -> None:
    """A user's Sequential with Dropout and a frozen first layer, chained: predictions run in
    eval mode (deterministic, the mode restored after), and the frozen layer never moves."""
    def learner() -> nn.Module:
        net = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Dropout(0.5), nn.Linear(6, 1))
        net[0].requires_grad_(False)
        return net

    torch.manual_seed(0)
    booster = SGB(learner, n_learners=3, chained=True, mode=mode)
    frozen = [booster.learners.learner_state(i)["stem.0.weight"].clone() for i in range(3)]
    carry_in = booster.learners.learner_state(2)["carry_in.weight"].clone()
    x, y = regression_stream(120)
    for t in range(0, 120, 20):
        booster.learn(x[t:t + 20], y[t:t + 20])
    assert booster.learners.training
    torch.testing.assert_close(booster.predict(x), booster.predict(x), rtol=0, atol=0)
    assert booster.learners.training  # predict gave the mode back
    for i in range(3):
        state = booster.learners.learner_state(i)
        assert torch.equal(state["stem.0.weight"], frozen[i])
        assert not booster.learners.learner(i).stem[0].weight.requires_grad
    # the chain's own projection trains (the frozen stem does not stop it)
    assert not torch.equal(booster.learners.learner_state(2)["carry_in.weight"], carry_in)

