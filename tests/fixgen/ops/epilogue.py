"""Matrix products and convolutions with the elementwise ops that read their results, which
the epilogue pass (src/passes/epilogue.rs) makes one node and the GPU one kernel: bias and
activations, residual adds (contiguous, broadcast, strided), scaling and masks after a
batched product, a bool `where`, depthwise and pointwise convolutions, and shapes that must
stay apart (a result read twice, a transposed convolution whose kernel takes no epilogue,
a chain that broadcasts the result to a larger shape). Expected values come from eager
PyTorch."""
import torch
import torch.nn.functional as F

from .case import Case, randn


def conv_relu(x, w, b):
    return F.relu(F.conv2d(x, w, b, padding=1))


def conv_residual_relu(x, w, b, r):
    # resnet's block end: conv (+ folded bn) + identity, then relu
    return F.relu(F.conv2d(x, w, b, padding=1) + r)


def conv_hardswish(x, w):
    return F.hardswish(F.conv2d(x, w, stride=2, padding=1))


def depthwise_relu6(x, w, b):
    return F.relu6(F.conv2d(x, w, b, padding=1, groups=x.shape[1]))


def pointwise_silu(x, w, b):
    y = F.conv2d(x, w, b)
    return y * torch.sigmoid(y)


def conv_bias_channel(x, w, s):
    # a per-channel scale broadcast over the spatial dims, and a 1-d convolution
    return torch.tanh(F.conv1d(x, w, padding=2) * s)


def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


def linear_gelu_tanh_3d(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def mm_where(a, b, m):
    return torch.where(m, a @ b, -1.5)


def bmm_scale_mask(q, k, mask):
    # attention scores: q k^T / sqrt(d) + an additive mask broadcast over the heads
    return torch.bmm(q, k.transpose(1, 2)) * 0.25 + mask


def addmm_residual_strided(x, w, b, r):
    # a residual read transposed (strided)
    return torch.addmm(b, x, w) + r.t()


def conv_read_twice(x, w):
    # the convolution's result is read by the chain and returned: it stays its own value
    y = F.conv2d(x, w)
    return y, F.relu(y)


def conv_transpose_relu(x, w, b):
    return F.relu(F.conv_transpose2d(x, w, b, stride=2))


def broadcast_up(x, w, r):
    # the chain's result is larger than the product's: no epilogue
    return F.linear(x, w) + r


def specials(a, b):
    # NaN and infinities from the product through the epilogue
    return torch.clamp(a @ b, min=-1.0) * 2


nan, inf = float("nan"), float("inf")

CASES = [
    Case("conv_relu", conv_relu, [randn(2, 3, 9, 8), randn(8, 3, 3, 3, seed=1), randn(8, seed=2)], tol="loose"),
    Case("conv_residual_relu", conv_residual_relu, [randn(1, 4, 8, 8), randn(4, 4, 3, 3, seed=1), randn(4, seed=2), randn(1, 4, 8, 8, seed=3)], tol="loose"),
    Case("conv_hardswish", conv_hardswish, [randn(1, 3, 11, 10) * 3, randn(6, 3, 3, 3, seed=1)], tol="loose"),
    Case("depthwise_relu6", depthwise_relu6, [randn(1, 5, 7, 7) * 3, randn(5, 1, 3, 3, seed=1), randn(5, seed=2)], tol="loose"),
    Case("pointwise_silu", pointwise_silu, [randn(2, 8, 4, 4), randn(12, 8, 1, 1, seed=1), randn(12, seed=2)], tol="loose"),
    Case("conv_bias_channel", conv_bias_channel, [randn(2, 3, 10), randn(4, 3, 5, seed=1), randn(4, 1, seed=2)], tol="loose"),
    Case("linear_gelu", linear_gelu, [randn(5, 12), randn(16, 12, seed=1), randn(16, seed=2)], tol="loose"),
    Case("linear_gelu_tanh_3d", linear_gelu_tanh_3d, [randn(2, 3, 8), randn(20, 8, seed=1), randn(20, seed=2)], tol="loose"),
    Case("mm_where", mm_where, [randn(6, 8), randn(8, 10, seed=1), randn(6, 10, seed=2) > 0], tol="loose"),
    Case("bmm_scale_mask", bmm_scale_mask, [randn(4, 7, 16), randn(4, 7, 16, seed=1), randn(1, 7, 7, seed=2)], tol="loose"),
    Case("addmm_residual_strided", addmm_residual_strided, [randn(6, 8), randn(8, 5, seed=1), randn(5, seed=2), randn(5, 6, seed=3)], tol="loose"),
    Case("conv_read_twice", conv_read_twice, [randn(1, 3, 6, 6), randn(4, 3, 3, 3, seed=1)], tol="loose"),
    Case("conv_transpose_relu", conv_transpose_relu, [randn(1, 4, 5, 5), randn(4, 3, 3, 3, seed=1), randn(3, seed=2)], tol="loose"),
    Case("broadcast_up", broadcast_up, [randn(4, 8), randn(6, 8, seed=1), randn(3, 4, 6, seed=2)], tol="loose"),
    Case("specials", specials, [torch.tensor([[1.0, nan, -2.0, 0.5], [inf, 1.0, 3.0, -inf]]), randn(4, 4, seed=1)], tol="loose"),
    Case(
        "dynamic_batch",
        linear_gelu,
        [randn(3, 12), randn(16, 12, seed=1), randn(16, seed=2)],
        dynamic_shapes=(({0: torch.export.Dim("batch", min=1, max=16)}, None, None),),
    ),
]
