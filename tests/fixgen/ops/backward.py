"""backward family: the core ATen backward ops of joint training graphs, called directly
(torch.export keeps a direct `torch.ops.aten.X.default(...)` call as that node). pt2web
decomposes them at load (src/passes/decompose/backward.rs) into ops every backend runs.
Outputs that output_mask turns off are None (not compared)."""
import torch

from .case import Case, randn, randint

A = torch.ops.aten


# --- native_layer_norm_backward: mean and rstd from the forward op, as a joint graph has them
def _ln_bwd(shape, mask, affine=True):
    def f(g, x, w, b):
        w, b = (w, b) if affine else (None, None)
        _, mean, rstd = A.native_layer_norm.default(x, shape, w, b, 1e-5)
        return A.native_layer_norm_backward.default(g, x, shape, mean, rstd, w, b, mask)
    return f


def _ln_inputs(x_shape, n, seed):
    return [randn(*x_shape, seed=seed), randn(*x_shape, seed=seed + 1),
            randn(*n, seed=seed + 2), randn(*n, seed=seed + 3)]


# --- native_group_norm_backward
def _gn_bwd(group, mask, affine=True):
    def f(g, x, w):
        w = w if affine else None
        n, c = x.shape[0], x.shape[1]
        hxw = x[0, 0].numel()
        _, mean, rstd = A.native_group_norm.default(x, w, None, n, c, hxw, group, 1e-5)
        return A.native_group_norm_backward.default(g, x, mean, rstd, w, n, c, hxw, group, mask)
    return f


# --- convolution_backward: grad_out has the forward output's shape
def _conv_bwd(stride, padding, dilation, transposed, output_padding, groups, mask, bias=True):
    def f(g, x, w):
        bias_sizes = [w.shape[1] * groups if transposed else w.shape[0]] if bias else None
        return A.convolution_backward.default(g, x, w, bias_sizes, stride, padding, dilation,
                                              transposed, output_padding, groups, mask)
    return f


def _conv_case(name, x_shape, w_shape, stride, padding, dilation, transposed=False,
               output_padding=None, groups=1, mask=(True, True, True), bias=True, seed=0):
    nd = len(x_shape) - 2
    output_padding = output_padding or [0] * nd
    x, w = randn(*x_shape, seed=seed), randn(*w_shape, seed=seed + 1)
    y = A.convolution.default(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
    g = randn(*y.shape, seed=seed + 2)
    fn = _conv_bwd(stride, padding, dilation, transposed, output_padding, groups, list(mask), bias)
    return Case(name, fn, [g, x, w], tol="loose")


# --- avg_pool2d_backward / _adaptive_avg_pool2d_backward
def _avg_case(name, x_shape, k, s, p, ceil, include_pad, divisor=None, seed=0):
    x = randn(*x_shape, seed=seed)
    y = A.avg_pool2d.default(x, k, s, p, ceil, include_pad, divisor)
    g = randn(*y.shape, seed=seed + 1)
    return Case(name, lambda g, x: A.avg_pool2d_backward.default(g, x, k, s, p, ceil, include_pad, divisor),
                [g, x])


def _adaptive_case(name, x_shape, out, seed=0):
    x = randn(*x_shape, seed=seed)
    y = A._adaptive_avg_pool2d.default(x, out)
    g = randn(*y.shape, seed=seed + 1)
    return Case(name, lambda g, x: A._adaptive_avg_pool2d_backward.default(g, x), [g, x])


# --- embedding_dense_backward
def _emb_case(name, idx, d, num_weights, padding_idx, scale, seed=0):
    g = randn(*idx.shape, d, seed=seed)
    return Case(name, lambda g, i: A.embedding_dense_backward.default(g, i, num_weights, padding_idx, scale),
                [g, idx])


# --- max_pool2d_with_indices_backward: indices from the forward op
def _max_case(name, x_shape, k, s, p, d, ceil, seed=0):
    x = randn(*x_shape, seed=seed)
    y, _ = A.max_pool2d_with_indices.default(x, k, s, p, d, ceil)
    g = randn(*y.shape, seed=seed + 1)

    def f(g, x):
        _, i = A.max_pool2d_with_indices.default(x, k, s, p, d, ceil)
        return A.max_pool2d_with_indices_backward.default(g, x, k, s, p, d, ceil, i)
    return Case(name, f, [g, x])


# Repeated rows, so gradients of one weight row add up.
_IDX = torch.tensor([[1, 4, 4, 0], [2, 9, 4, 1], [7, 2, 2, 4]])

CASES = [
    Case("layer_norm_bwd", _ln_bwd([5], [True, True, True]), _ln_inputs((3, 4, 5), (5,), 0), tol="loose"),
    Case("layer_norm_bwd_2d_shape", _ln_bwd([4, 5], [True, False, True]), _ln_inputs((2, 3, 4, 5), (4, 5), 10), tol="loose"),
    Case("layer_norm_bwd_noaffine", _ln_bwd([6], [True, False, False], affine=False), _ln_inputs((4, 6), (6,), 20), tol="loose"),
    Case("layer_norm_bwd_params_only", _ln_bwd([8], [False, True, True]), _ln_inputs((5, 8), (8,), 30), tol="loose"),
    Case("group_norm_bwd", _gn_bwd(3, [True, True, True]), [randn(2, 6, 3, 4, seed=40), randn(2, 6, 3, 4, seed=41), randn(6, seed=42)], tol="loose"),
    Case("group_norm_bwd_1d", _gn_bwd(2, [True, True, False]), [randn(3, 4, 5, seed=43), randn(3, 4, 5, seed=44), randn(4, seed=45)], tol="loose"),
    Case("group_norm_bwd_noaffine", _gn_bwd(4, [True, False, True], affine=False), [randn(2, 8, 2, 2, seed=46), randn(2, 8, 2, 2, seed=47), randn(8, seed=48)], tol="loose"),
    Case("group_norm_bwd_params_only", _gn_bwd(1, [False, True, True]), [randn(2, 3, 5, seed=49), randn(2, 3, 5, seed=50), randn(3, seed=51)], tol="loose"),
    _conv_case("conv2d_bwd", (2, 3, 6, 7), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], seed=60),
    _conv_case("conv2d_bwd_strided", (2, 4, 9, 8), (6, 2, 3, 2), [2, 3], [1, 0], [2, 1], groups=2, mask=(True, True, False), bias=False, seed=63),
    _conv_case("conv2d_bwd_depthwise", (1, 3, 7, 7), (3, 1, 3, 3), [2, 2], [1, 1], [1, 1], groups=3, seed=66),
    _conv_case("conv2d_bwd_weight_only", (2, 2, 5, 5), (3, 2, 2, 2), [1, 1], [0, 0], [1, 1], mask=(False, True, False), seed=69),
    _conv_case("conv1d_bwd", (2, 3, 11), (5, 3, 3), [3], [1], [1], seed=72),
    _conv_case("conv1d_bwd_input_only", (1, 4, 10), (4, 2, 4), [2], [2], [2], groups=2, mask=(True, False, False), seed=75),
    _conv_case("conv3d_bwd", (1, 2, 4, 5, 4), (3, 2, 2, 3, 2), [1, 2, 1], [1, 1, 0], [1, 1, 2], seed=78),
    _conv_case("conv_transpose2d_bwd", (2, 4, 4, 5), (4, 3, 3, 3), [2, 2], [1, 0], [1, 1], transposed=True, output_padding=[1, 0], seed=81),
    _conv_case("conv_transpose2d_bwd_groups", (1, 4, 3, 4), (4, 2, 2, 3), [2, 1], [0, 1], [2, 1], transposed=True, groups=2, mask=(True, True, False), seed=84),
    _conv_case("conv_transpose1d_bwd", (2, 3, 6), (3, 2, 4), [3], [1], [1], transposed=True, output_padding=[2], seed=87),
    _avg_case("avg_pool2d_bwd", (2, 3, 6, 8), [2, 2], [2, 2], [0, 0], False, True, seed=90),
    _avg_case("avg_pool2d_bwd_pad_ceil", (1, 2, 7, 8), [3, 3], [2, 2], [1, 1], True, True, seed=92),
    _avg_case("avg_pool2d_bwd_exclude_pad", (2, 2, 7, 6), [3, 2], [2, 1], [1, 1], True, False, seed=94),
    _avg_case("avg_pool2d_bwd_divisor", (1, 3, 5, 5), [3, 3], [1, 2], [1, 0], False, True, 4, seed=96),
    _avg_case("avg_pool2d_bwd_unbatched", (3, 6, 5), [2, 3], [1, 2], [1, 1], False, False, seed=98),
    _adaptive_case("adaptive_avg_pool2d_bwd", (2, 3, 7, 9), [3, 4], seed=100),
    _adaptive_case("adaptive_avg_pool2d_bwd_global", (2, 4, 5, 3), [1, 1], seed=102),
    _adaptive_case("adaptive_avg_pool2d_bwd_up", (3, 4, 5), [6, 7], seed=104),
    _emb_case("embedding_bwd", _IDX, 3, 10, -1, False, seed=110),
    _emb_case("embedding_bwd_padding", _IDX, 4, 12, 4, False, seed=111),
    _emb_case("embedding_bwd_scale_freq", _IDX, 2, 10, 2, True, seed=112),
    _emb_case("embedding_bwd_1d", randint(0, 6, 9, seed=113), 5, 6, -1, True, seed=114),
    _max_case("max_pool2d_bwd", (2, 3, 8, 9), [3, 3], [2, 2], [1, 1], [1, 1], False, seed=120),
    _max_case("max_pool2d_bwd_dilated_ceil", (1, 2, 9, 10), [2, 3], [2, 2], [1, 1], [2, 1], True, seed=122),
    _max_case("max_pool2d_bwd_unbatched", (3, 6, 6), [2, 2], [1, 1], [0, 0], [1, 1], False, seed=124),
]

# Half precision (computed in f32, as torch's CPU kernels do) and int32 indices.
_ln16 = [t.half() for t in _ln_inputs((3, 8), (8,), 150)]
CASES += [
    Case("layer_norm_bwd_f16", _ln_bwd([8], [True, True, True]), _ln16, tol="half"),
    _emb_case("embedding_bwd_int32", _IDX.int(), 3, 10, 4, True, seed=155),
]

# A dynamic batch: decomposed per call, for the call's shapes (on the CPU kernels).
_N = torch.export.Dim("n")
_conv_dyn = _conv_case("conv2d_bwd_dynamic", (3, 2, 5, 6), (4, 2, 3, 3), [2, 1], [1, 1], [1, 1], seed=130)
CASES += [
    Case("layer_norm_bwd_dynamic", _ln_bwd([5], [True, True, True]), _ln_inputs((4, 5), (5,), 140), tol="loose",
         dynamic_shapes=(({0: _N}, {0: _N}, None, None),)),
    Case(_conv_dyn.name, _conv_dyn.fn, _conv_dyn.inputs, tol="loose", dynamic_shapes=(({0: _N}, {0: _N}, None),)),
]
