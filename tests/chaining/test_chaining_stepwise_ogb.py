"""StepwiseOGB (Alg. 1): every weak learner steps on the gradient at the FULL prediction."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from torchboost import OGB, WeakLearners
from torchboost.chaining import ChainingTree, OnlineLearner, StepwiseOGB


def test_chaining_trees_receive_the_gradient_at_the_sum() -> None:
    coarse = ChainingTree((0.0, 1.0), depth=2, bound=4.0)
    fine = ChainingTree((0.0, 1.0), depth=6, bound=4.0)
    reference = [copy.deepcopy(coarse), copy.deepcopy(fine)]
    boost = StepwiseOGB([coarse, fine], "squared")
    assert isinstance(coarse, OnlineLearner) and boost.n_learners == 2
    for _ in range(25):
        x, y = torch.rand(3, 1), 3 * torch.rand(3)
        full = sum(tree.predict(x) for tree in reference)
        assert torch.equal(boost.learn(x, y), full)
        for tree in reference:  # eq. 3: ∂ℓ(f̂_{−n} + h_n)/∂h_n = ℓ'(f̂), the same for all n
            tree.update(x, full - y[:, None])
    x = torch.rand(10, 1)
    assert torch.equal(boost.predict(x), reference[0].predict(x) + reference[1].predict(x))


def test_one_learner_is_the_tree_itself() -> None:
    tree = ChainingTree((0.0, 1.0), depth=5, bound=4.0)
    alone = copy.deepcopy(tree)
    boost = StepwiseOGB([tree], "squared")
    for _ in range(10):
        x, y = torch.rand(2, 1), torch.randn(2)
        assert torch.equal(boost.learn(x, y), alone.learn(x, y))


def test_weak_learners_container_steps_on_the_full_prediction() -> None:
    """Each nn.Linear learner gets ∂(mean loss)/∂h_n = ℓ'(f̂(x))/B, with f̂ the sum of ALL
    learners (Beygelzimer et al.'s OGB would use the partial sums instead)."""
    learners = WeakLearners(lambda: nn.Linear(2, 1), n_learners=3, optimizer=torch.optim.SGD,
                            optimizer_kwargs={"lr": 0.1})
    before = [copy.deepcopy(learners.learner_state(i)) for i in range(3)]
    boost = StepwiseOGB(learners, "squared")
    x, y = torch.randn(4, 2), torch.randn(4)
    prediction = boost.learn(x, y)
    grad = (prediction - y[:, None]) / 4  # ℓ' of ½(ŷ − y)², batch mean
    for i in range(3):
        after = learners.learner_state(i)
        assert torch.allclose(after["weight"], before[i]["weight"] - 0.1 * grad.T @ x, atol=1e-6)
        assert torch.allclose(after["bias"], before[i]["bias"] - 0.1 * grad.sum(0), atol=1e-6)


def test_same_modules_can_be_boosted_by_beygelzimer_ogb() -> None:
    torch.manual_seed(1)
    stepwise = StepwiseOGB(WeakLearners(lambda: nn.Linear(2, 1), n_learners=4), "squared")
    torch.manual_seed(1)
    partial = OGB(WeakLearners(lambda: nn.Linear(2, 1), n_learners=4), "squared")
    x = torch.randn(16, 2)
    assert torch.allclose(stepwise.predict(x), stepwise.container(x).sum(0))
    assert partial.predict(x).shape == stepwise.predict(x).shape == (16, 1)


def test_nested_boosters_and_bad_inputs() -> None:
    inner = StepwiseOGB([ChainingTree((0.0, 1.0), depth=3, bound=2.0)])
    outer = StepwiseOGB([inner, ChainingTree((0.0, 1.0), depth=4, bound=2.0)])
    outer.learn(torch.rand(2, 1), torch.ones(2))
    before = copy.deepcopy(outer.state_dict())
    with pytest.raises(ValueError, match="outside the domain"):
        outer.learn(torch.tensor([[2.0]]), torch.ones(1))
    with pytest.raises(ValueError, match="labels"):
        outer.learn(torch.rand(2, 1), torch.ones(3))
    for key, value in before.items():
        assert torch.equal(value, outer.state_dict()[key]) if torch.is_tensor(value) else True
    with pytest.raises(ValueError, match="predict"):
        StepwiseOGB([nn.Linear(1, 1)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one"):
        StepwiseOGB([])
    container = StepwiseOGB(WeakLearners(lambda: nn.Linear(1, 1), n_learners=2))
    with pytest.raises(ValueError, match="NaN"):
        container.learn(torch.tensor([[float("nan")]]), torch.ones(1))


def test_a_container_of_schedule_free_learners_learns_at_the_learning_point() -> None:
    """The default optimizer (schedule-free) learns through StepwiseOGB (before: every learn
    raised 'run the learners' forward and step inside learners.learning_point()'); between
    rounds the learners hold their averaged weights, which predict uses."""
    torch.manual_seed(0)
    boost = StepwiseOGB(WeakLearners(lambda: nn.Linear(1, 1), n_learners=2,
                                     optimizer_kwargs={"lr": 0.1}))
    x = torch.rand(256, 1)
    before = float((boost.predict(x)[:, 0] - 3 * x[:, 0]).pow(2).mean())
    for _ in range(150):
        batch = torch.rand(16, 1)
        boost.learn(batch, 3 * batch[:, 0])
    after = float((boost.predict(x)[:, 0] - 3 * x[:, 0]).pow(2).mean())
    assert after < 0.02 < before
    assert not any(group["train_mode"] for opt in boost.container.optimizers
                   for group in opt.param_groups)


class _Failing(nn.Module):
    """A linear learner that returns NaN when told to."""

    nan = False

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * (float("nan") if self.nan else 1.0)


def _interrupt(*args: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("failure", ["nan", "interrupt"])
def test_a_containers_round_is_all_or_nothing(failure: str) -> None:
    """A NaN output raises DivergenceError naming the learner (before: NaN reached every
    parameter), and an interruption after the first learner stepped leaves the learners and
    their optimizers bitwise as they were."""
    from torchboost import DivergenceError

    torch.manual_seed(0)
    modules = [_Failing(), _Failing()]
    boost = StepwiseOGB(WeakLearners(modules, mode="loop"))
    x, y = torch.rand(8, 1), torch.rand(8)
    boost.learn(x, y)
    state = copy.deepcopy(boost.state_dict())
    optimizers = copy.deepcopy([opt.state_dict() for opt in boost.container.optimizers])
    modules[1].nan = failure == "nan"
    hook = (boost.container.optimizers[1].register_step_pre_hook(_interrupt)
            if failure == "interrupt" else None)
    try:
        with pytest.raises(DivergenceError if failure == "nan" else KeyboardInterrupt) as error:
            boost.learn(x, y)
    finally:
        modules[1].nan = False
        if hook is not None:
            hook.remove()
    if failure == "nan":
        assert error.value.learner == 1
        assert "no step has been taken yet" not in str(error.value)
    after = boost.state_dict()
    assert all(torch.equal(value, after[key]) for key, value in state.items()
               if torch.is_tensor(value))
    for saved, opt in zip(optimizers, boost.container.optimizers, strict=True):
        now = opt.state_dict()
        assert saved["param_groups"] == now["param_groups"]
        for key, entry in saved["state"].items():
            assert all(torch.equal(v, now["state"][key][k]) for k, v in entry.items()
                       if torch.is_tensor(v))


def test_nan_outputs_in_the_first_round_point_at_the_forward() -> None:
    """As a booster's: before any step the learning rate is not the suspect."""
    from torchboost import DivergenceError

    modules = [_Failing(), _Failing()]
    modules[0].nan = True
    boost = StepwiseOGB(WeakLearners(modules, mode="loop"))
    with pytest.raises(DivergenceError, match="no step has been taken yet"):
        boost.learn(torch.rand(8, 1), torch.rand(8))


def test_a_containers_schedules_step_once_per_round() -> None:
    """As a booster's (before: never; a red-team finding): StepLR halves the rate each round."""
    torch.manual_seed(0)
    container = WeakLearners(lambda: nn.Linear(1, 1), n_learners=2, optimizer=torch.optim.SGD,
                             optimizer_kwargs={"lr": 0.1},
                             lr_scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, 0.5))
    boost = StepwiseOGB(container)
    for _ in range(5):
        boost.learn(torch.rand(4, 1), torch.rand(4))
    assert [group["lr"] for opt in container.optimizers for group in opt.param_groups] == [
        pytest.approx(0.1 * 0.5 ** 5)] * len(container.optimizers)
