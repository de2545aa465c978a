"""WeakLearners: stacked == loop, per-learner optimizer state, dropout, BatchNorm, save/load."""

from __future__ import annotations

import copy
import io
import itertools

import pytest
import torch
from boost_helpers import regression_stream
from torch import nn

from torchboost import SGB, ConvNet, TwoLayerNet, WeakLearners
from torchboost.learners import BoundedOutput
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.testing import assert_same


def _pair(factory, n, **kwargs):
    torch.manual_seed(1)
    stacked = WeakLearners(factory, n, mode="stacked", **kwargs)
    torch.manual_seed(1)
    loop = WeakLearners(factory, n, mode="loop", **kwargs)
    return stacked, loop


def _train(learners, x, targets, steps):
    for t in range(steps):
        xb, tb = x[t % 8 * 16:(t % 8 + 1) * 16], targets[:, t % 8 * 16:(t % 8 + 1) * 16]
        with learners.learning_point():
            out = learners(xb)
            learners.step((tb - out).square().sum(-1).mean(-1).sum())


def test_auto_mode_picks_stacked_for_homogeneous_and_loop_otherwise():
    assert WeakLearners(lambda: nn.Linear(3, 1), 4).mode == "stacked"
    mixed = WeakLearners([nn.Linear(3, 1), nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))])
    assert mixed.mode == "loop"
    # LBFGS, the old example here, is now refused at construction (it needs a closure)
    rprop = WeakLearners(lambda: nn.Linear(3, 1), 2, optimizer=torch.optim.Rprop)
    assert rprop.mode == "loop"
    with pytest.raises(ValueError, match="neither an elementwise optimizer nor one that keeps"):
        WeakLearners(lambda: nn.Linear(3, 1), 2, optimizer=torch.optim.Rprop, mode="stacked")


@pytest.mark.parametrize("optimizer", [DEFAULT_OPTIMIZER, torch.optim.Adam])
def test_stacked_equals_loop_over_short_run_tightly(optimizer):
    """Schedule-free (the default) and Adam: both elementwise, with the averaging scalars of
    schedule-free shared by learners that step in lockstep."""
    stacked, loop = _pair(lambda: TwoLayerNet(6, 7), 5, optimizer=optimizer,
                          optimizer_kwargs={"lr": 1e-2})
    x = torch.randn(128, 6)
    targets = torch.randn(5, 128, 1)
    assert torch.allclose(stacked(x), loop(x), atol=1e-7)  # batched matmul rounds differently
    _train(stacked, x, targets, 10)
    _train(loop, x, targets, 10)
    for i in range(5):
        for name, value in loop.learner_state(i).items():
            assert torch.allclose(stacked.learner_state(i)[name], value, atol=1e-6, rtol=1e-5), name


def test_stacked_equals_loop_inside_sgb_long_run_statistically():
    """Cascaded targets amplify rounding, so compare final test losses, not weights."""
    x, y = regression_stream(3000)
    losses = {}
    for mode in ("stacked", "loop"):
        torch.manual_seed(3)
        booster = SGB(lambda: TwoLayerNet(5, 8), n_learners=6, step=0.3, y0="mean",
                      optimizer_kwargs={"lr": 1e-2}, mode=mode)
        for t in range(0, 2500, 25):
            booster.learn(x[t:t + 25], y[t:t + 25])
        losses[mode] = booster.evaluate(x[2500:], y[2500:])["loss"]
    assert losses["stacked"] == pytest.approx(losses["loop"], rel=0.02)


def test_fused_adam_state_is_per_learner():
    """Learner 0 receiving zero gradient does not move, whatever the others do."""
    learners = WeakLearners(lambda: nn.Linear(2, 1), 3, mode="stacked",
                            optimizer=torch.optim.Adam)
    before = learners.learner_state(0)
    out = learners(torch.randn(4, 2))
    learners.step(out[1:].square().sum())
    after = learners.learner_state(0)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not torch.equal(learners.learner_state(1)["weight"], before["weight"])


def test_dropout_differs_between_stacked_learners():
    torch.manual_seed(0)
    lin = nn.Linear(8, 8)

    def factory():
        net = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
        net[0].load_state_dict(lin.state_dict())  # identical weights in every learner
        return net

    learners = WeakLearners(factory, 4, mode="stacked")
    out = learners(torch.ones(1, 8))
    masks = (out != 0).squeeze(1)
    assert len({tuple(m.tolist()) for m in masks}) > 1  # different randomness per learner
    learners.eval()
    out = learners(torch.ones(1, 8))
    assert torch.allclose(out[0], out[3])


def test_batchnorm_needs_loop_mode_and_works_there():
    def factory():
        return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))

    with pytest.raises(ValueError, match="BatchNorm"):
        WeakLearners(factory, 2, mode="stacked")
    learners = WeakLearners(factory, 2)
    assert learners.mode == "loop"
    with learners.learning_point():
        out = learners(torch.randn(16, 3))
        learners.step(out.square().sum())
    assert learners.learner_state(0)["1.num_batches_tracked"].item() == 1


@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_state_dict_round_trip_includes_optimizer_state(mode):
    torch.manual_seed(0)
    a = WeakLearners(lambda: nn.Linear(3, 1), 3, mode=mode)
    x, t = torch.randn(8, 3), torch.randn(3, 8, 1)
    for _ in range(3):
        with a.learning_point():
            a.step((a(x) - t).square().sum())
    buffer = io.BytesIO()
    torch.save(a.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(5)
    b = WeakLearners(lambda: nn.Linear(3, 1), 3, mode=mode)
    b.load_state_dict(torch.load(buffer, weights_only=False))
    assert torch.equal(a(x), b(x))
    for learners in (a, b):
        with learners.learning_point():
            learners.step((learners(x) - t).square().sum())
    # identical continued training needs identical moments, z and averaging scalars
    assert torch.equal(a(x), b(x))


def test_to_moves_optimizer_state():
    learners = WeakLearners(lambda: nn.Linear(3, 1), 2, optimizer=torch.optim.Adam)
    learners.step(learners(torch.randn(4, 3)).sum())
    learners.to(torch.float64)
    state = next(iter(learners.optimizers[0].state.values()))
    assert state["exp_avg"].dtype == torch.float64
    learners.step(learners(torch.randn(4, 3, dtype=torch.float64)).sum())


def test_learner_copy_matches_stacked_slice():
    learners = WeakLearners(lambda: TwoLayerNet(4, 3), 3, mode="stacked")
    x = torch.randn(5, 4)
    assert torch.allclose(learners.learner(2)(x), learners(x)[2])


def test_bad_learner_sources():
    with pytest.raises(ValueError, match="factory"):
        WeakLearners(nn.Linear(2, 1))
    with pytest.raises(ValueError, match="n_learners"):
        WeakLearners(lambda: nn.Linear(2, 1))
    shared = nn.Linear(2, 1)
    with pytest.raises(ValueError, match="share parameters"):
        WeakLearners(lambda: shared, 2)
    with pytest.raises(ValueError, match="empty"):
        WeakLearners([])


def test_bounded_output_respects_bound_in_every_direction():
    wrapped = BoundedOutput(nn.Linear(3, 2), bound=0.7)
    out = wrapped(100 * torch.randn(64, 3))
    assert torch.linalg.vector_norm(out, dim=-1).max() <= 0.7 + 1e-6


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", ["stacked", "loop"])
def test_cuda_learners_match_cpu(mode):
    torch.manual_seed(0)
    cpu = WeakLearners(lambda: TwoLayerNet(4, 3), 3, mode=mode)
    torch.manual_seed(0)
    gpu = WeakLearners(lambda: TwoLayerNet(4, 3), 3, mode=mode)
    x, t = torch.randn(16, 4), torch.randn(3, 16, 1)

    def step(learners: WeakLearners, x: torch.Tensor, t: torch.Tensor) -> None:
        with learners.learning_point():  # schedule-free: forward and step at the learning point
            learners.step((learners(x) - t).square().sum())

    step(cpu, x, t)
    step(gpu, x, t)  # state created on CPU, then moved
    gpu.to("cuda")
    xc, tc = x.cuda(), t.cuda()
    for _ in range(3):
        step(cpu, x, t)
        step(gpu, xc, tc)
    assert torch.allclose(cpu(x), gpu(xc).cpu(), atol=1e-5)  # the averaged weights


@pytest.mark.parametrize(
    "factory",
    [
        lambda: TwoLayerNet(6, 5),
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(6, 4, bias=False), nn.Tanh(),
                              nn.Sequential(nn.Linear(4, 3), nn.GELU()), nn.Linear(3, 2),
                              nn.Flatten()),
        lambda: ConvNet(in_channels=2, image_size=7, out_features=3, channels=2, kernel_size=3),
        lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(3, 2, 2, stride=2, bias=False, dilation=1), nn.Tanh(),
                              nn.Flatten(), nn.Linear(18, 4), nn.Sigmoid(), nn.Linear(4, 2)),
        lambda: nn.Sequential(nn.Conv1d(2, 3, 3, padding="same"), nn.SiLU()),
        lambda: ConvNet(),  # the head's features past TRANSPOSED_FROM: its own gradients
    ],
    ids=["two_layer", "deep_nested", "convnet", "two_convolutions", "convolution_out",
         "mnist_convnet"],
)
def test_sequential_fast_path_equals_vmap(factory):
    """The direct path (one GEMM or convolution for every learner's first layer, a grouped
    convolution after it, a batched product per later Linear) equals vmap's, values and
    gradients, all learners and the first two."""
    torch.manual_seed(0)
    learners = WeakLearners(factory, 4, mode="stacked")
    engine = learners.engine
    assert engine._plan is not None
    first = engine.template[0]
    x = (torch.randn(16, first.in_channels, 28, 28) if isinstance(first, nn.Conv2d)
         and first.in_channels == 1 else torch.randn(9, 2, 7, 7)
         if isinstance(first, nn.Conv2d) else torch.randn(9, 2, 6)
         if isinstance(first, nn.Conv1d) else torch.randn(9, 6))
    fast, reference = engine(x, 4), engine(x, 4, fast=False)
    assert torch.allclose(fast, reference, atol=1e-6)
    grads = [torch.autograd.grad(out.square().sum(), list(engine.stacked_params.values()))
             for out in (fast, reference)]
    for g_fast, g_ref in zip(*grads, strict=True):
        assert torch.allclose(g_fast, g_ref, atol=1e-5)
    assert torch.allclose(engine(x, 2), reference[:2], atol=1e-6)  # anytime slices


def test_large_stacked_heads_take_their_own_gradients_and_equal_the_plain_product():
    """Features of at least TRANSPOSED_FROM entries (a transposed view of a wide layer) go
    through ``weight · featuresᵀ`` and its own backward: the same values and gradients as
    ``baddbmm(bias, features, weightᵀ)`` under autograd, the features' gradient laid out as
    the features are."""
    from torchboost.learners.stacked_sequential import TRANSPOSED_FROM, stacked_linear
    torch.manual_seed(0)
    k, batch, width = 4, 64, 160
    assert k * batch * width >= TRANSPOSED_FROM
    wide = torch.randn(batch, k * width, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(k, 3, width, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(k, 3, dtype=torch.float64, requires_grad=True)
    features = wide.view(batch, k, width).transpose(0, 1)
    grad = torch.randn(k, batch, 3, dtype=torch.float64)
    out = stacked_linear(features, weight, bias)
    assert out.grad_fn.name() == "_StackedLinearBackward"
    reference = torch.baddbmm(bias.unsqueeze(1), features, weight.transpose(1, 2))
    torch.testing.assert_close(out, reference)
    got = torch.autograd.grad(out, (features, weight, bias), grad)
    expected = torch.autograd.grad(reference, (features, weight, bias), grad)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    assert got[0].stride() == features.stride()
    with torch.no_grad():
        torch.testing.assert_close(stacked_linear(features, weight, bias), reference)
        assert stacked_linear(features[:, :4, :8], weight[..., :8], None).grad_fn is None


@pytest.mark.parametrize("shape", [
    ((4, 1, 9, 11), (3, 1, 3, 2), (2, 1), (1, 2), (1, 2), True),
    ((2, 1, 28, 28), (40, 1, 5, 5), 2, 0, 1, True),
    ((3, 1, 7, 7), (2, 1, 3, 3), (1,), (1,), (2,), False),
], ids=["strided_padded_dilated", "mnist_stem", "one_element_tuples_no_bias"])
def test_one_channel_convolution_as_patches_equals_torch(shape):
    """The first convolution of one-channel images as products of their patches equals
    ``functional.conv2d``: values and the gradients of weight and bias (float64, against
    finite differences too, and differentiated twice), for strides, padding and dilation per
    axis or as one-element tuples, and without a bias."""
    from torchboost.learners.one_channel_conv import one_channel_conv2d, one_channel_geometry
    image, kernel, stride, padding, dilation, with_bias = shape
    torch.manual_seed(0)
    x = torch.randn(image, dtype=torch.float64)
    weight = torch.randn(kernel, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(kernel[0], dtype=torch.float64, requires_grad=True) if with_bias else None
    geometry = one_channel_geometry(x, weight, stride, padding, dilation)
    assert geometry is not None
    inputs = [t for t in (weight, bias) if t is not None]
    out = one_channel_conv2d(x, weight, bias, geometry)
    reference = nn.functional.conv2d(x, weight, bias, stride, padding, dilation)
    assert out.grad_fn.name() == "_OneChannelConv2dBackward"
    torch.testing.assert_close(out, reference)
    grad = torch.randn_like(out)
    for got, expected in zip(torch.autograd.grad(out, inputs, grad),
                             torch.autograd.grad(reference, inputs, grad), strict=True):
        torch.testing.assert_close(got, expected)

    def conv(*params):
        return one_channel_conv2d(x, params[0], params[1] if with_bias else None, geometry)
    assert torch.autograd.gradcheck(conv, inputs)
    assert torch.autograd.gradgradcheck(conv, inputs)


def test_one_channel_patches_apply_only_where_they_are_torchs_convolution_and_pay():
    """Patches for a non-empty batch of one-channel images that need no gradient, whose
    convolution weight is differentiated, with a geometry torch accepts; torch's kernel for
    several channels, padding by name, predictions (no gradient), frozen weights, images that
    require a gradient (second derivatives through them), ``torch.func`` transforms and
    forward-mode AD (no vmap rule, no jvp), zero or negative strides, dilations and padding
    (torch states the error), a kernel past the image, an empty batch, and patches far larger
    than the output (large images with few channels). A stacked MNIST learner's round takes
    them (its first layer's gradient node)."""
    from torch.autograd import forward_ad

    from torchboost.learners.one_channel_conv import one_channel_geometry

    def one_channel_applies(*args):
        return one_channel_geometry(*args) is not None
    x, weight = torch.randn(2, 1, 8, 8), torch.randn(3, 1, 3, 3, requires_grad=True)
    assert one_channel_applies(x, weight, 1, 0, 1)
    assert not one_channel_applies(torch.randn(2, 3, 8, 8), torch.randn(3, 3, 3, 3,
                                                                        requires_grad=True),
                                   1, 0, 1)
    assert not one_channel_applies(x, weight, 1, "same", 1)
    assert not one_channel_applies(x, weight.detach(), 1, 0, 1)
    assert not one_channel_applies(x.requires_grad_(), weight, 1, 0, 1)
    x = x.detach()
    with torch.no_grad():
        assert not one_channel_applies(x, weight, 1, 0, 1)
    seen = []
    torch.func.vmap(lambda t: seen.append(one_channel_applies(x, weight, 1, 0, 1)) or t)(
        torch.zeros(2))
    with forward_ad.dual_level():
        seen.append(one_channel_applies(x, weight, 1, 0, 1))
    assert seen == [False, False]
    for stride, padding, dilation in [(0, 0, 1), ((1, 0), 0, 1), (1, -1, 1), (1, 0, 0)]:
        assert not one_channel_applies(x, weight, stride, padding, dilation)
    assert not one_channel_applies(x, torch.randn(3, 1, 9, 9, requires_grad=True), 1, 0, 1)
    assert one_channel_applies(x, torch.randn(3, 1, 9, 9, requires_grad=True), 1, 1, 1)
    assert not one_channel_applies(x[:0], weight, 1, 0, 1)
    large = torch.randn(32, 1, 128, 128)
    assert not one_channel_applies(large, torch.randn(2, 1, 5, 5, requires_grad=True), 1, 0, 1)
    assert one_channel_applies(large, torch.randn(32, 1, 5, 5, requires_grad=True), 1, 0, 1)
    engine = WeakLearners(lambda: ConvNet(), 3, mode="stacked").engine
    nodes, names = [engine(torch.randn(4, 1, 28, 28), 3).grad_fn], set()
    while nodes:  # every node of the round's graph
        node = nodes.pop()
        names.add(node.name())
        nodes.extend(fn for fn, _ in node.next_functions if fn is not None)
    assert "_OneChannelConv2dBackward" in names and "ConvolutionBackward0" not in names
    with torch.no_grad():
        assert engine(torch.randn(4, 1, 28, 28), 3).grad_fn is None


def test_stacked_one_channel_learners_with_unusual_settings_learn_as_in_a_loop():
    """A first convolution given one-element tuples (which ``nn.Conv2d`` keeps as given) trains
    stacked as in a loop; one torch refuses (stride 0) raises the same error both ways and
    leaves the booster bitwise as it was."""
    def factory(stride):
        return lambda: nn.Sequential(nn.Conv2d(1, 2, 3, stride=stride, padding=(1,)), nn.ReLU(),
                                     nn.Flatten(), nn.Linear(72, 10))
    x, y = torch.randn(8, 1, 12, 12), torch.randint(0, 10, (8,))
    predictions = []
    for mode in ("stacked", "loop"):
        torch.manual_seed(0)
        booster = SGB(factory((2,)), n_learners=3, loss="softmax", n_outputs=10, mode=mode)
        for _ in range(3):
            booster.learn(x, y)
        predictions.append(booster.predict(x))
    torch.testing.assert_close(predictions[0], predictions[1], atol=1e-5, rtol=1e-4)
    errors = []
    for mode in ("stacked", "loop"):
        booster = SGB(factory(0), n_learners=3, loss="softmax", n_outputs=10, mode=mode)
        before = copy.deepcopy(booster.state_dict())
        with pytest.raises(ValueError) as error:
            booster.learn(x, y)
        errors.append(str(error.value))
        assert_same(booster.state_dict(), before)
    assert "non-positive stride" in errors[0] and errors[0] == errors[1]


def test_one_output_mlps_store_their_first_layer_hidden_major():
    torch.manual_seed(0)
    learners = WeakLearners(lambda: TwoLayerNet(6, 5), 4, mode="stacked")
    weight = learners.engine.stacked_params["1__weight"]
    assert weight.shape == (4, 5, 6) and weight.transpose(0, 1).is_contiguous()
    x = torch.randn(9, 6)
    other = WeakLearners(lambda: TwoLayerNet(6, 5), 4, mode="stacked")
    other.load_state_dict(learners.state_dict())
    assert torch.equal(other(x), learners(x))
    assert torch.allclose(learners.learner(2)(x), learners(x)[2], atol=1e-6)  # a standalone copy
    learners.double()  # moving keeps the layout (and the fast path)
    assert learners.engine.stacked_params["1__weight"].transpose(0, 1).is_contiguous()
    assert torch.allclose(learners(x.double()).float(), other(x), atol=1e-6)
    wide = WeakLearners(lambda: TwoLayerNet(6, 5, out_features=3), 4, mode="stacked")
    assert wide.engine.stacked_params["1__weight"].is_contiguous()  # 3 outputs: baddbmm


def test_fast_path_not_used_when_randomness_would_be_shared():
    from torchboost.learners.stacked_sequential import sequential_plan
    assert sequential_plan(nn.Sequential(nn.Dropout(0.1), nn.Linear(3, 1))) is None
    assert sequential_plan(nn.Sequential(nn.Linear(3, 1), nn.Dropout(0.1))) is not None
    assert sequential_plan(nn.Sequential(nn.Dropout(0.1), nn.Conv1d(1, 1, 1))) is None
    assert sequential_plan(nn.Sequential(nn.Conv1d(1, 1, 1), nn.Dropout(0.1))) is not None


def test_fast_path_takes_only_the_layers_it_writes():
    """Grouped or non-zero-padded convolutions, a convolution after a Linear or a Flatten, and
    a Linear on a convolution's unflattened output are left to vmap."""
    from torchboost.learners.stacked_sequential import sequential_plan
    assert sequential_plan(nn.Sequential(nn.Conv2d(2, 2, 1, groups=2))) is None
    assert sequential_plan(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1,
                                                   padding_mode="reflect"))) is None
    assert sequential_plan(nn.Sequential(nn.Linear(4, 4), nn.Conv1d(1, 1, 1))) is None
    assert sequential_plan(nn.Sequential(nn.Conv1d(1, 2, 1), nn.Flatten(),
                                         nn.Conv1d(1, 1, 1))) is None
    assert sequential_plan(nn.Sequential(nn.Flatten(), nn.Conv1d(1, 1, 1))) is None
    assert sequential_plan(nn.Sequential(nn.Conv1d(1, 2, 1), nn.Linear(3, 1))) is None
    assert sequential_plan(nn.Sequential(nn.Conv1d(1, 2, 1), nn.Flatten(),
                                         nn.Linear(6, 1))) is not None


def test_loading_a_live_state_dict_does_not_share_optimizer_moments():
    a = WeakLearners(lambda: nn.Linear(3, 1), 2, optimizer=torch.optim.Adam)
    x = torch.randn(4, 3)
    a.step(a(x).sum())
    b = WeakLearners(lambda: nn.Linear(3, 1), 2, optimizer=torch.optim.Adam)
    b.load_state_dict(a.state_dict())  # no serialisation in between
    b.step(b(x).sum())
    moments = [next(iter(o.state.values()))["exp_avg"] for o in (a.optimizers[0], b.optimizers[0])]
    assert moments[0].data_ptr() != moments[1].data_ptr()
    assert not torch.equal(moments[0], moments[1])


def test_dtype_is_the_first_floating_parameter():
    """``WeakLearners.dtype`` walks to the first floating tensor of ``parameters()`` then
    ``buffers()``, past integer buffers, ``None`` entries and nested modules."""

    class Nested(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))
            self.register_parameter("unused", None)
            self.inner = nn.Sequential(nn.Identity(), nn.Linear(3, 2).double())
            self.head = nn.Linear(2, 1)

    def reference(learners: WeakLearners) -> torch.dtype:
        return next((t.dtype for t in itertools.chain(learners.parameters(), learners.buffers())
                     if t.is_floating_point()), torch.get_default_dtype())

    cases = [WeakLearners(Nested, 2, mode="loop"), WeakLearners(lambda: nn.Linear(3, 1), 3),
             WeakLearners(lambda: nn.Linear(3, 1).double(), 3, mode="loop")]
    assert [learners.dtype for learners in cases] == [reference(learners) for learners in cases]
    assert [learners.dtype for learners in cases] == [torch.float64, torch.float32,
                                                       torch.float64]
    cases[0].float()  # converted in place: the walk reads the live tensors
    assert cases[0].dtype == torch.float32
