"""``torchboost.testing.check_learner``: a user's learner behaves under boosting as in plain
PyTorch, or the broken contract is named (issue "A newcomer's first hour")."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchboost.testing import check_learner

X = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))


def _mlp(*middle: nn.Module, out: int = 1) -> nn.Module:
    return nn.Sequential(nn.Linear(3, 8), *middle, nn.Linear(8, out))


def test_a_plain_learner_stacks_and_passes():
    assert check_learner(lambda: _mlp(nn.Tanh(), out=2), X) == {
        "mode": "stacked", "why_not_stacked": "", "random_in_training": False, "outputs": 2}


def test_a_dropout_learner_is_random_not_stateful_and_passes():
    report = check_learner(lambda: _mlp(nn.Dropout(0.3)), X)
    assert report["random_in_training"] and report["mode"] == "stacked"


def test_a_batchnorm_learner_runs_in_a_loop_and_says_why():
    report = check_learner(lambda: _mlp(nn.BatchNorm1d(8)), X)
    assert report["mode"] == "loop" and "BatchNorm" in report["why_not_stacked"]


def test_frozen_parameters_and_chained_learners_pass():
    def frozen() -> nn.Module:
        model = _mlp(nn.Tanh())
        model[0].weight.requires_grad_(False)
        return model

    assert check_learner(frozen, X)["mode"] == "stacked"
    assert check_learner(lambda: _mlp(nn.Tanh()), X, chained=True)["mode"] == "stacked"


class _Counting(nn.Module):
    """State in a plain attribute: how many forwards it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.linear, self.calls = nn.Linear(3, 1), 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.linear(x) * (1 + 0.01 * self.calls)


class _Hidden(nn.Module):
    """State in a plain attribute that only training changes: a running mean of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.linear, self.mean = nn.Linear(3, 1), torch.zeros(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled():
            self.mean = 0.5 * self.mean + 0.5 * x.detach().mean(0)
        return self.linear(x - self.mean)


@pytest.mark.parametrize("learner", [_Counting, _Hidden])
def test_state_in_a_plain_attribute_is_named_with_the_fix(learner):
    with pytest.raises(AssertionError, match=r"plain attribute.*register_buffer"):
        check_learner(learner, X)


def test_a_learner_whose_eval_mode_is_random_is_named():
    class AlwaysNoisy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(3, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x) + torch.randn(len(x), 1)

    with pytest.raises(AssertionError, match="eval"):
        check_learner(AlwaysNoisy, X)


@pytest.mark.parametrize(("factory", "example", "match"), [
    ("not callable", X, "factory must build a learner"),
    (lambda: _mlp(nn.Tanh()), torch.randn(1, 3), "at least 2 rows"),
    (lambda: _mlp(nn.Tanh()), torch.ones(4, 3, dtype=torch.long), "floating-point"),
    (lambda: "a string", X, "must return an nn.Module"),
])
def test_bad_arguments_are_refused_by_name(factory, example, match):
    with pytest.raises(ValueError, match=match):
        check_learner(factory, example)


def test_the_check_leaves_the_callers_random_generator_as_it_was():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    check_learner(lambda: _mlp(nn.Dropout(0.3)), X)
    assert torch.equal(torch.get_rng_state(), before)


class _DriftingFrozen(nn.Module):
    """A frozen weight that its own training forward nudges in place: the check's sensitivity
    (a library that stepped frozen parameters would show the same)."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.out = nn.Linear(3, 8), nn.Linear(8, 1)
        self.first.weight.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled():
            with torch.no_grad():
                self.first.weight.add_(0.01)
        return self.out(torch.tanh(self.first(x)))


def test_a_frozen_parameter_that_moves_in_training_is_named():
    with pytest.raises(AssertionError, match=r"frozen parameters moved or became trainable.*"
                       r"learner 0: first\.weight"):
        check_learner(_DriftingFrozen, X)
