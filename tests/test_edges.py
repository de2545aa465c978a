"""Edges a red team found (issue "Nothing left to break"): each promise holds, success or a
named ``ValueError`` with the state unchanged, or a round rolled back or fully committed."""

from __future__ import annotations

import copy
import types

import pytest
import torch
from boost_helpers import assert_identical
from torch import nn

from torchboost import SGB, TwoLayerNet, decay_schedule
from torchboost.data import DataStream


def _dropout_booster() -> SGB:
    torch.manual_seed(0)
    return SGB(lambda: nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1)),
               n_learners=2, mode="loop")


def test_an_interrupt_while_predict_switches_to_eval_leaves_every_mode_as_it_was():
    booster = _dropout_booster()
    victim = next(m for m in booster.learners.modules() if isinstance(m, nn.Dropout))
    original = nn.Dropout.train

    def interrupted(self: nn.Module, mode: bool = True) -> nn.Module:
        if not mode:
            raise KeyboardInterrupt
        return original(self, mode)

    victim.train = types.MethodType(interrupted, victim)
    with pytest.raises(KeyboardInterrupt):
        booster.predict(torch.randn(4, 3))
    del victim.train
    assert all(m.training for m in booster.learners.modules())  # Dropout still on for learn


def test_a_round_failing_in_the_stall_monitor_leaves_the_schedules_where_they_were(
        monkeypatch):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2, lr_scheduler=decay_schedule(10.0))
    x, y = torch.randn(8, 3), torch.randn(8)
    booster.learn(x, y)
    epochs = [s.last_epoch for s in booster.learners.schedulers]
    state = copy.deepcopy(booster.state_dict())

    def failing(*args, **kwargs):
        raise RuntimeError("the monitor failed")

    monkeypatch.setattr(booster.stall, "update", failing)
    with pytest.raises(RuntimeError, match="the monitor failed"):
        booster.learn(x, y)
    assert [s.last_epoch for s in booster.learners.schedulers] == epochs
    assert_identical(booster.state_dict(), state)
    assert booster.rounds == 1


def test_a_stream_refuses_a_state_it_cannot_continue_from_by_name():
    stream = DataStream(torch.randn(20, 3), torch.randn(20), batch_size=4, seed=0)
    next(iter(stream))
    good = stream.state_dict()
    for broken, match in [
        ({**good, "batches_consumed": -3}, "batches_consumed"),
        ({**good, "batches_consumed": 9}, "batches_consumed"),
        ({**good, "count": -1}, "count"),
        ({**good, "mean": torch.zeros(5)}, "mean"),
        ({**good, "m2": None}, "m2"),
        ({k: v for k, v in good.items() if k != "count"}, "count"),
        ([1, 2], "mapping"),
        (None, "mapping"),
    ]:
        before = copy.deepcopy(stream.state_dict())
        with pytest.raises(ValueError, match=match):
            stream.load_state_dict(broken)
        after = stream.state_dict()
        assert after["batches_consumed"] == before["batches_consumed"]
        assert torch.equal(after["mean"], before["mean"])
    stream.load_state_dict(good)  # the good state still loads


def test_a_stream_transforms_integer_features_to_floating_point():
    x = torch.arange(40, dtype=torch.float32).reshape(20, 2)
    stream = DataStream(x, torch.randn(20), batch_size=5, seed=0)
    for _ in stream:
        pass
    out = stream.transform(torch.tensor([[3, 4], [10, 11]]))
    assert out.is_floating_point()
    assert torch.allclose(out, stream.transform(torch.tensor([[3.0, 4.0], [10.0, 11.0]])))


class _Recording(torch.optim.SGD):
    """SGD that keeps a plain list in each parameter's state, appended at every step."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].setdefault("history", []).append(len(self.state[p].get(
                    "history", [])))
        return loss


def test_a_failed_round_puts_back_plain_values_in_the_optimizer_state(monkeypatch):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer=_Recording,
                  optimizer_kwargs={"lr": 0.01})
    x, y = torch.randn(8, 3), torch.randn(8)
    booster.learn(x, y)
    histories = [list(entry["history"]) for opt in booster.learners.engine.optimizers
                 for entry in opt.state.values()]
    monkeypatch.setattr(booster.stall, "update", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("after the step")))
    with pytest.raises(RuntimeError, match="after the step"):
        booster.learn(x, y)
    assert [entry["history"] for opt in booster.learners.engine.optimizers
            for entry in opt.state.values()] == histories == [[0]] * len(histories)


@pytest.mark.parametrize("optimizer, options, match", [
    ("default", {"betas": (0.0, 0.9)}, "betas\\[0\\] must be > 0"),
    ("default", {"warmup_steps": "10"}, "warmup_steps"),
    ("default", {"weight_decay": "0.1"}, "weight_decay"),
    ("default", {"eps": None}, "eps"),
    ("default", {"r": None}, "'r': None"),
    ("default", {"weight_lr_power": "2"}, "weight_lr_power"),
    (torch.optim.Adam, {"amsgrad": "no"}, "amsgrad is a flag"),
    (torch.optim.Adam, {"differentiable": True}, "differentiable"),
    (torch.optim.Adam, {"fused": True, "foreach": True}, "fused"),
    (torch.optim.SparseAdam, {}, "SparseAdam"),
])
def test_optimizer_options_that_cannot_step_are_refused_when_the_booster_is_built(
        optimizer, options, match):
    kwargs = {} if optimizer == "default" else {"optimizer": optimizer}
    with pytest.raises(ValueError, match=match):
        SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer_kwargs=options, **kwargs)


def test_river_learn_many_names_an_array_instead_of_an_attribute_error():
    np = pytest.importorskip("numpy")
    pytest.importorskip("river")
    from torchboost.river import SGBRegressor

    model = SGBRegressor(n_learners=2, batch_size=4)
    for X in (np.zeros((4, 2)), torch.zeros(4, 2), [[0.0, 1.0]] * 4):
        with pytest.raises(ValueError, match=r"DataFrame or a sequence of dicts|not a dict"):
            model.learn_many(X, [0.0] * 4)
    assert model.booster_ is None and model.features is None


@pytest.mark.parametrize("key, value", [("chained", True), ("n_learners", 5),
                                        ("optimizer", torch.optim.Adam)])
def test_estimators_refuse_booster_kwargs_that_override_their_own_parameters(key, value):
    np = pytest.importorskip("numpy")
    pytest.importorskip("sklearn")
    from torchboost.sklearn import SGBRegressor

    X = np.random.default_rng(0).normal(size=(16, 3))
    with pytest.raises(ValueError, match=f"booster_kwargs sets \\['{key}'\\]"):
        SGBRegressor(n_learners=2, max_passes=1, booster_kwargs={key: value}).fit(X, X[:, 0])


@pytest.mark.parametrize("key, value, match", [
    ("max_train", -5, "max_train must be an integer >= 1"),
    ("fixed_budget", "no", "fixed_budget must be True or False"),
    ("one_pass", "no", "one_pass must be True or False"),
    ("seed", "a", "seed must be an integer >= 0"),
])
def test_experiment_configs_refuse_values_they_would_misread(key, value, match):
    from torchboost.harness import ExperimentConfig

    with pytest.raises(ValueError, match=match):
        ExperimentConfig.from_dict({"name": "x", "dataset": "abalone", key: value})


@pytest.mark.parametrize("make, match", [
    (lambda x: x.to_sparse(), "dense tensor"),
    (lambda x: x.to_sparse_csr(), "dense tensor"),
    (lambda x: torch.nested.nested_tensor(list(x)), "dense tensor"),
    (lambda x: torch.empty(x.shape, device="meta"), "meta device"),
])
def test_learn_and_predict_refuse_tensors_that_are_not_dense_by_name(make, match):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    x, y = torch.randn(8, 3), torch.randn(8)
    booster.learn(x, y)
    state = copy.deepcopy(booster.state_dict())
    for call in (lambda: booster.learn(make(x), y), lambda: booster.predict(make(x))):
        with pytest.raises(ValueError, match=match):
            call()
    assert_identical(booster.state_dict(), state)


def test_a_stream_takes_integer_and_bool_features_and_names_what_it_cannot_take():
    y = torch.randn(6)
    for x in (torch.arange(12).reshape(6, 2), torch.ones(6, 2, dtype=torch.bool)):
        (xb, _), = list(DataStream(x, y, batch_size=6, standardize=None))
        assert xb.is_floating_point()
    with pytest.raises(ValueError, match="real numbers"):
        DataStream(torch.ones(6, 2, dtype=torch.complex64), y)
    with pytest.raises(ValueError, match=r"seed must lie in"):
        DataStream(torch.ones(6, 2), y, seed=2**70)


class _ThreeOutputs(nn.Module):
    """A chained learner that breaks the protocol: (output, features, extra)."""

    takes_carry = True

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 1)

    def forward(self, x, carry=None):
        out = self.layer(x)
        return out, out, out


class _NoCarry(nn.Module):
    takes_carry = True

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 1)

    def forward(self, x):
        return self.layer(x), x


def test_a_chained_learner_breaking_the_protocol_is_refused_without_falling_back():
    torch.manual_seed(0)
    booster = SGB(lambda: _ThreeOutputs(), n_learners=2, chained=True)
    mode = booster.learners.mode
    with pytest.raises(ValueError, match=r"not \(output, features\)"):
        booster.learn(torch.randn(8, 3), torch.randn(8))
    assert booster.learners.mode == mode and booster.rounds == 0
    with pytest.raises(ValueError, match="forward takes no carry"):
        SGB(lambda: _NoCarry(), n_learners=2, chained=True)


def test_a_nested_sequential_is_chained_as_its_layers():
    torch.manual_seed(0)
    booster = SGB(lambda: nn.Sequential(nn.Sequential(nn.Linear(3, 4), nn.ReLU()),
                                        nn.Sequential(nn.Linear(4, 1))),
                  n_learners=2, chained=True)
    x, y = torch.randn(8, 3), torch.randn(8)
    booster.learn(x, y)
    assert booster.predict(x).shape == (8, 1)


def test_stream_wrappers_name_what_they_cannot_take():
    from torchboost.data import MultiPassStream, ScreenedStream

    with pytest.raises(ValueError, match=r"not an \(x, y\) pair"):
        list(ScreenedStream([torch.zeros(4, 2)], loss="squared"))
    with pytest.raises(ValueError, match=r"make_pass\(0\) returned a list, not a DataStream"):
        MultiPassStream(lambda p: [], passes=2)


class _Affine(nn.Module):
    """A learner off the direct GEMM path: its stacked forward is vmap(functional_call)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return (x * self.weight).sum(-1, keepdim=True) + self.bias


def test_an_interrupt_while_the_stacked_call_swaps_back_leaves_the_learners_usable(
        monkeypatch):
    import pickle

    from torch.nn.utils._named_member_accessor import NamedMemberAccessor

    torch.manual_seed(0)
    booster = SGB(lambda: _Affine(), n_learners=3, mode="stacked")
    x, y = torch.randn(8, 3), torch.randn(8)
    booster.learn(x, y)
    swap = NamedMemberAccessor.swap_tensors_dict
    calls = []

    def interrupted(self, named_tensors, allow_missing=False):
        calls.append(1)
        if len(calls) == 2:  # the swap back: the learner's tensors stay in the template
            raise KeyboardInterrupt
        return swap(self, named_tensors, allow_missing)

    monkeypatch.setattr(NamedMemberAccessor, "swap_tensors_dict", interrupted)
    with pytest.raises(KeyboardInterrupt):
        booster.predict(x)
    monkeypatch.undo()
    assert len(calls) >= 2
    copy.deepcopy(booster), pickle.loads(pickle.dumps(booster))
    assert torch.allclose(booster.export()(x), booster.predict(x), atol=1e-6)
    assert booster.learners.learner(0)(x).shape == (8, 1)
    booster.learn(x, y)


def test_the_conformance_kit_tells_a_dropout_learner_from_state_kept_in_a_plain_attribute():
    from torchboost.boosters.registry import BoosterSpec
    from torchboost.testing import check_state_dict_resumes_exactly

    def with_dropout(learners, n_learners, n_outputs=1, **options):
        return SGB(lambda: nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Dropout(0.3),
                                         nn.Linear(8, n_outputs)),
                   n_learners=n_learners, n_outputs=n_outputs, **options)

    check_state_dict_resumes_exactly(BoosterSpec("dropout_sgb", SGB, build=with_dropout))

    class Forgetful(SGB):  # round state in a plain attribute: still named
        def after_step(self, h, partials, z):
            super().after_step(h, partials, z)
            vars(self)["shift"] = vars(self).get("shift", 0.0) + 0.01

        def partial_sums(self, h, y0):
            return super().partial_sums(h, y0) + vars(self).get("shift", 0.0)

    with pytest.raises(AssertionError, match="plain attribute"):
        check_state_dict_resumes_exactly(BoosterSpec("forgetful", Forgetful))


def test_red_team_optimizers_that_worked_before_still_build():
    if hasattr(torch.optim, "Muon"):  # matrices only
        SGB(lambda: nn.Sequential(nn.Linear(3, 4, bias=False), nn.Tanh(),
                                  nn.Linear(4, 1, bias=False)),
            n_learners=2, optimizer=torch.optim.Muon, optimizer_kwargs={"lr": 0.01},
            mode="loop")
    SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer=torch.optim.Adam,
        optimizer_kwargs={"capturable": True})  # its step needs CUDA: built, not stepped
    SGB(lambda: TwoLayerNet(3, 4), n_learners=2, optimizer=torch.optim.Adam,
        optimizer_kwargs={"amsgrad": 1})  # torch takes 0 and 1 for flags


def test_the_multiclass_boosters_take_n_threads():
    from torchboost import AdaboostOLM, OnlineMBBM, OzaBoost

    for cls, args in ((OzaBoost, ()), (AdaboostOLM, ()), (OnlineMBBM, (0.1,))):
        booster = cls(lambda: nn.Linear(3, 3), 3, *args, n_learners=2, n_threads=None)
        assert booster.n_threads is None


def _scheduled() -> SGB:
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2,
                  lr_scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, 2, 0.9))
    for _ in range(3):
        x = torch.randn(16, 3)
        booster.learn(x, x[:, 0])
    return booster


@pytest.mark.parametrize("where", ["after the schedules", "in the standardiser's commit"])
def test_an_interrupt_at_the_end_of_a_round_changes_nothing(where, monkeypatch):
    booster = _scheduled()
    state = copy.deepcopy(booster.state_dict())
    epochs = [s.last_epoch for s in booster.learners.schedulers]
    if where == "after the schedules":
        original = booster.learners.step_schedules

        def interrupted(index=None, restore=None):  # an interrupt once they stepped
            original(index, restore)
            raise KeyboardInterrupt

        monkeypatch.setattr(booster.learners, "step_schedules", interrupted)
    else:
        monkeypatch.setattr(booster.standardizer, "commit",
                            lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    x = torch.randn(16, 3)
    with pytest.raises(KeyboardInterrupt):
        booster.learn(x, x[:, 0])
    monkeypatch.undo()
    assert [s.last_epoch for s in booster.learners.schedulers] == epochs
    assert_identical(booster.state_dict(), state)
    assert booster.rounds == 3


def test_an_interrupt_after_the_first_rounds_commit_leaves_the_booster_as_built(monkeypatch):
    torch.manual_seed(0)
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    fresh = copy.deepcopy(booster)
    commit = booster.standardizer.commit

    def interrupted_commit():  # the buffers sized and written, then an interrupt
        commit()
        raise KeyboardInterrupt

    monkeypatch.setattr(booster.standardizer, "commit", interrupted_commit)
    x = torch.randn(16, 3) * 5 + 3
    with pytest.raises(KeyboardInterrupt):
        booster.learn(x, x[:, 0])
    monkeypatch.undo()
    assert not booster.standardizer.started and booster.rounds == 0
    assert_identical(booster.state_dict(), fresh.state_dict())
    torch.manual_seed(1)
    booster.learn(x, x[:, 0])  # the next round is a first round again, as for the fresh one
    torch.manual_seed(1)
    fresh.learn(x, x[:, 0])
    assert_identical(booster.state_dict(), fresh.state_dict())


def test_red_team_stream_states_and_labels():
    np = pytest.importorskip("numpy")
    stream = DataStream(torch.randn(20, 3), torch.randn(20), batch_size=4, seed=0)
    next(iter(stream))
    state = stream.state_dict()
    twin = DataStream(torch.randn(20, 3), torch.randn(20), batch_size=4, seed=0)
    twin.load_state_dict({**state, "batches_consumed": np.int64(1), "count": float(state["count"])})
    assert twin.batches_consumed == 1
    booster = SGB(lambda: TwoLayerNet(3, 4), n_learners=2)
    x, y = torch.randn(8, 3), torch.randn(8)
    for labels in (y.to_sparse(), torch.nested.nested_tensor([y[:3], y[3:]])):
        with pytest.raises(ValueError, match="labels must be a dense tensor"):
            booster.learn(x, labels)
    assert booster.rounds == 0


@pytest.mark.parametrize("booster_class", ["SGB", "ResidualSGB"])
@pytest.mark.parametrize("column", ["features", "labels"])
def test_values_too_large_to_standardise_are_refused_by_name(booster_class, column):
    import torchboost

    torch.manual_seed(0)
    booster = getattr(torchboost, booster_class)(lambda: TwoLayerNet(3, 4).double(), n_learners=2)
    state = copy.deepcopy(booster.state_dict())
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    (x[:, 1] if column == "features" else y)[0] = 1e300
    with pytest.raises(ValueError, match=f"the {column} are too large to standardise"):
        booster.learn(x, y)
    assert_identical(booster.state_dict(), state)
    assert booster.rounds == 0
