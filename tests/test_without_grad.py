"""without_grad: torch.no_grad()'s effect, the previous mode back whatever happens, and traced
by torch.compile without a graph break."""

import pytest
import torch
from boost_helpers import compiles

from torchboost.without_grad import without_grad


@pytest.mark.parametrize("before", [True, False])
def test_the_block_runs_without_gradients_and_the_mode_comes_back(before):
    x = torch.ones(3, requires_grad=True)
    with torch.set_grad_enabled(before):
        with without_grad():
            assert not torch.is_grad_enabled()
            y = x * 2
            with without_grad():  # nested: still off, and off again after the inner block
                pass
            assert not torch.is_grad_enabled()
        assert torch.is_grad_enabled() is before
    assert not y.requires_grad


@pytest.mark.parametrize("before", [True, False])
def test_the_mode_comes_back_after_an_exception(before):
    with torch.set_grad_enabled(before):
        with pytest.raises(KeyboardInterrupt), without_grad():
            raise KeyboardInterrupt
        assert torch.is_grad_enabled() is before

        @without_grad()
        def fails():
            assert not torch.is_grad_enabled()
            raise ValueError("inside")

        with pytest.raises(ValueError, match="inside"):
            fails()
        assert torch.is_grad_enabled() is before


def test_a_decorated_function_keeps_its_name_and_returns_its_value():
    @without_grad()
    def double(x):
        """Twice x."""
        return x * 2

    x = torch.ones(2, requires_grad=True)
    out = double(x)
    assert double.__name__ == "double" and double.__doc__ == "Twice x."
    assert torch.equal(out, torch.full((2,), 2.0)) and not out.requires_grad
    assert torch.is_grad_enabled()


def test_a_generator_function_is_refused():
    def rows():
        yield 1

    with pytest.raises(TypeError, match=r"generator function .*torch\.no_grad"):
        without_grad()(rows)


@compiles
def test_torch_compile_traces_it_in_one_graph():
    def f(x):
        with without_grad():
            y = x * 2
        return y.sum() + x.sum()

    x = torch.randn(4, requires_grad=True)
    out = torch.compile(f, fullgraph=True)(x)
    out.backward()
    assert torch.allclose(out, f(x))
    assert torch.equal(x.grad, torch.ones(4))  # y's branch carries no gradient
