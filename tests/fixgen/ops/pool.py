"""pool family: max/avg/adaptive pooling, upsampling (interpolate) and grid_sample."""
import torch
import torch.nn.functional as F

from .case import Case, randn, randint

f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64


def with_nan(x):
    x = x.clone()
    x.view(-1)[::7] = float("nan")
    return x


def with_neg_inf(x):
    x = x.clone()
    x[..., :3, :] = float("-inf")
    return x


def interp(**kw):
    return lambda x: F.interpolate(x, **kw)


CASES = [
    # max pooling
    Case("max_pool2d", F.max_pool2d, [randn(1, 2, 6, 7)], {"kernel_size": 2}, tol="exact"),
    Case("max_pool2d_s_p", F.max_pool2d, [randn(2, 3, 9, 8)], {"kernel_size": 3, "stride": 2, "padding": 1}, tol="exact"),
    Case("max_pool2d_ceil", F.max_pool2d, [randn(1, 2, 7, 8)], {"kernel_size": 3, "stride": 2, "ceil_mode": True}, tol="exact"),
    Case("max_pool2d_ceil_pad", F.max_pool2d, [randn(1, 1, 6, 6)], {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, tol="exact"),
    Case("max_pool2d_dilation", F.max_pool2d, [randn(1, 2, 9, 9)], {"kernel_size": (2, 3), "stride": (1, 2), "dilation": (2, 1), "padding": (1, 1)}, tol="exact"),
    Case("max_pool2d_indices", lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), [randn(1, 2, 7, 7)], tol="exact"),
    Case("max_pool2d_nan", lambda x: F.max_pool2d(with_nan(x), 2), [randn(1, 2, 6, 6)], tol="exact"),
    Case("max_pool2d_neg_inf", lambda x: F.max_pool2d(with_neg_inf(x), 2, return_indices=True), [randn(1, 2, 6, 6)], tol="exact"),
    Case("max_pool2d_u8", F.max_pool2d, [randint(0, 255, 1, 2, 5, 5, dtype=torch.uint8)], {"kernel_size": 3, "stride": 2, "padding": 1}, tol="exact"),
    Case("max_pool2d_unbatched", F.max_pool2d, [randn(3, 6, 6)], {"kernel_size": 2}, tol="exact"),
    Case("max_pool2d_noncontig", lambda x: F.max_pool2d(x.transpose(2, 3), 2), [randn(1, 2, 6, 4)], tol="exact"),
    Case("max_pool2d_f16", F.max_pool2d, [randn(1, 2, 6, 6, dtype=f16)], {"kernel_size": 2}, tol="exact"),
    Case("max_pool2d_i64", F.max_pool2d, [randint(-100, 100, 1, 2, 4, 4)], {"kernel_size": 2}, tol="exact"),
    Case("max_pool2d_module", torch.nn.MaxPool2d(3, stride=2, padding=1), [randn(1, 4, 10, 10)], tol="exact"),
    Case("max_pool1d", F.max_pool1d, [randn(2, 3, 10)], {"kernel_size": 3, "stride": 2, "padding": 1}, tol="exact"),
    Case("max_pool1d_indices", lambda x: F.max_pool1d(x, 2, return_indices=True), [randn(1, 3, 9)], tol="exact"),
    Case("max_pool3d", F.max_pool3d, [randn(1, 2, 5, 6, 5)], {"kernel_size": 2, "stride": (1, 2, 2), "ceil_mode": True}, tol="exact"),
    Case("max_pool3d_indices", lambda x: F.max_pool3d(x, 2, return_indices=True), [randn(1, 2, 4, 4, 4)], tol="exact"),
    # average pooling
    Case("avg_pool2d", F.avg_pool2d, [randn(1, 2, 6, 7)], {"kernel_size": 2}, tol="close"),
    Case("avg_pool2d_pad", F.avg_pool2d, [randn(2, 2, 7, 7)], {"kernel_size": 3, "stride": 2, "padding": 1}, tol="close"),
    Case("avg_pool2d_pad_exclude", F.avg_pool2d, [randn(1, 2, 7, 7)], {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, tol="close"),
    Case("avg_pool2d_ceil", F.avg_pool2d, [randn(1, 2, 7, 8)], {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, tol="close"),
    Case("avg_pool2d_ceil_exclude", F.avg_pool2d, [randn(1, 2, 7, 8)], {"kernel_size": 3, "stride": 2, "ceil_mode": True, "count_include_pad": False}, tol="close"),
    Case("avg_pool2d_divisor", F.avg_pool2d, [randn(1, 2, 6, 6)], {"kernel_size": 3, "padding": 1, "divisor_override": 5}, tol="close"),
    Case("avg_pool2d_f64", F.avg_pool2d, [randn(1, 2, 6, 6, dtype=f64)], {"kernel_size": 2}, tol="close"),
    Case("avg_pool2d_bf16", F.avg_pool2d, [randn(1, 2, 6, 6, dtype=bf16)], {"kernel_size": 2}, tol="half"),
    Case("avg_pool2d_i64", F.avg_pool2d, [randint(-100, 100, 1, 2, 4, 4)], {"kernel_size": 2}, tol="exact"),
    Case("avg_pool1d", F.avg_pool1d, [randn(2, 3, 10)], {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, tol="close"),
    Case("avg_pool3d", F.avg_pool3d, [randn(1, 2, 5, 6, 5)], {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, tol="close"),
    Case("avg_pool2d_module", torch.nn.AvgPool2d(2), [randn(1, 3, 4, 6)], tol="close"),
    # adaptive
    Case("adaptive_avg_pool2d", F.adaptive_avg_pool2d, [randn(2, 3, 7, 9)], {"output_size": (3, 4)}, tol="close"),
    Case("adaptive_avg_pool2d_1", F.adaptive_avg_pool2d, [randn(1, 8, 5, 5)], {"output_size": 1}, tol="close"),
    Case("adaptive_avg_pool2d_up", F.adaptive_avg_pool2d, [randn(1, 2, 3, 2)], {"output_size": (5, 4)}, tol="close"),
    Case("adaptive_avg_pool2d_none", F.adaptive_avg_pool2d, [randn(1, 2, 6, 5)], {"output_size": (None, 3)}, tol="close"),
    Case("adaptive_avg_pool2d_module", torch.nn.AdaptiveAvgPool2d((2, 2)), [randn(1, 4, 8, 8)], tol="close"),
    Case("adaptive_avg_pool2d_unbatched", F.adaptive_avg_pool2d, [randn(3, 7, 7)], {"output_size": 2}, tol="close"),
    Case("adaptive_avg_pool1d", F.adaptive_avg_pool1d, [randn(2, 3, 10)], {"output_size": 4}, tol="close"),
    Case("adaptive_avg_pool3d", F.adaptive_avg_pool3d, [randn(1, 2, 5, 6, 7)], {"output_size": (2, 3, 4)}, tol="close"),
    Case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), [randn(1, 2, 7, 5)], tol="exact"),
    Case("adaptive_max_pool2d_nan", lambda x: F.adaptive_max_pool2d(with_nan(x), 2), [randn(1, 2, 5, 5)], tol="exact"),
    Case("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3, return_indices=True), [randn(1, 2, 8)], tol="exact"),
    Case("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, 2), [randn(1, 2, 4, 5, 3)], tol="exact"),
    # interpolate / upsample
    Case("nearest_size", interp(size=(5, 7), mode="nearest"), [randn(1, 2, 3, 4)], tol="exact"),
    Case("nearest_scale2", interp(scale_factor=2, mode="nearest"), [randn(1, 2, 3, 4)], tol="exact"),
    Case("nearest_scale_frac", interp(scale_factor=(1.7, 0.6), mode="nearest"), [randn(1, 2, 5, 6)], tol="exact"),
    Case("nearest_module", torch.nn.Upsample(scale_factor=2, mode="nearest"), [randn(1, 3, 4, 4)], tol="exact"),
    Case("nearest_1d", interp(size=7, mode="nearest"), [randn(1, 2, 4)], tol="exact"),
    Case("nearest_3d", interp(scale_factor=(2, 1.5, 1), mode="nearest"), [randn(1, 1, 2, 4, 3)], tol="exact"),
    Case("nearest_exact", interp(size=(5, 7), mode="nearest-exact"), [randn(1, 2, 3, 4)], tol="exact"),
    Case("nearest_exact_scale", interp(scale_factor=1.5, mode="nearest-exact"), [randn(1, 2, 4, 5)], tol="exact"),
    Case("nearest_exact_1d", interp(size=3, mode="nearest-exact"), [randn(1, 2, 8)], tol="exact"),
    Case("nearest_u8", interp(scale_factor=2, mode="nearest"), [randint(0, 9, 1, 2, 2, 3, dtype=torch.uint8)], tol="exact"),
    Case("bilinear_size", interp(size=(5, 7), mode="bilinear"), [randn(1, 2, 3, 4)], tol="close"),
    Case("bilinear_align", interp(size=(5, 7), mode="bilinear", align_corners=True), [randn(1, 2, 3, 4)], tol="close"),
    Case("bilinear_scale", interp(scale_factor=2, mode="bilinear"), [randn(2, 2, 3, 4)], tol="close"),
    Case("bilinear_scale_frac", interp(scale_factor=(1.5, 0.7), mode="bilinear"), [randn(1, 2, 4, 6)], tol="close"),
    Case("bilinear_scale_recompute", interp(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), [randn(1, 2, 4, 5)], tol="close"),
    Case("bilinear_down", interp(size=(2, 3), mode="bilinear"), [randn(1, 2, 7, 8)], tol="close"),
    Case("bilinear_align_scale", interp(scale_factor=3, mode="bilinear", align_corners=True), [randn(1, 1, 3, 3)], tol="close"),
    Case("bilinear_module", torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), [randn(1, 3, 4, 4)], tol="close"),
    Case("bilinear_f16", interp(scale_factor=2, mode="bilinear"), [randn(1, 2, 3, 3, dtype=f16)], tol="half"),
    Case("linear_1d", interp(size=9, mode="linear"), [randn(1, 2, 4)], tol="close"),
    Case("linear_1d_align", interp(scale_factor=2.5, mode="linear", align_corners=True), [randn(1, 2, 4)], tol="close"),
    Case("trilinear", interp(size=(3, 4, 5), mode="trilinear"), [randn(1, 1, 2, 3, 4)], tol="close"),
    Case("bicubic", interp(size=(6, 7), mode="bicubic"), [randn(1, 2, 4, 5)], tol="close"),
    Case("bicubic_align", interp(scale_factor=2, mode="bicubic", align_corners=True), [randn(1, 2, 3, 4)], tol="close"),
    Case("bicubic_down", interp(size=(3, 2), mode="bicubic"), [randn(1, 1, 7, 6)], tol="close"),
    Case("area", interp(size=(3, 2), mode="area"), [randn(1, 2, 7, 6)], tol="close"),
    # grid_sample
    Case("grid_sample_bilinear", lambda x, g: F.grid_sample(x, g, align_corners=False), [randn(1, 2, 4, 5), torch.rand(1, 3, 6, 2, generator=torch.Generator().manual_seed(3)) * 2.4 - 1.2], tol="close"),
    Case("grid_sample_nearest_border", lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True), [randn(2, 1, 4, 5), torch.rand(2, 3, 3, 2, generator=torch.Generator().manual_seed(4)) * 2.4 - 1.2], tol="close"),
    Case("grid_sample_reflection", lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False), [randn(1, 2, 4, 5), torch.rand(1, 3, 4, 2, generator=torch.Generator().manual_seed(5)) * 3 - 1.5], tol="close"),
    Case("grid_sample_bicubic", lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="zeros", align_corners=True), [randn(1, 2, 4, 5), torch.rand(1, 3, 4, 2, generator=torch.Generator().manual_seed(6)) * 2.2 - 1.1], tol="close"),
]

# These ops are already core ATen: both IRs hold the same graph, so export them once.
SAME_IN_BOTH_IRS = {
    "max_pool2d_indices", "max_pool3d_indices", "avg_pool2d", "avg_pool2d_pad", "avg_pool2d_pad_exclude", "avg_pool2d_ceil",
    "avg_pool2d_ceil_exclude", "avg_pool2d_divisor", "avg_pool2d_f64", "avg_pool2d_bf16", "avg_pool2d_i64", "avg_pool3d",
    "avg_pool2d_module", "adaptive_max_pool2d", "adaptive_max_pool3d", "nearest_size", "nearest_scale2", "nearest_scale_frac",
    "nearest_module", "nearest_u8", "bilinear_size", "bilinear_align", "bilinear_scale", "bilinear_scale_frac",
    "bilinear_scale_recompute", "bilinear_down", "bilinear_align_scale", "bilinear_module", "bilinear_f16",
}
for _c in CASES:
    if _c.name in SAME_IN_BOTH_IRS:
        _c.core = False


# --- issue 16: max_unpool, max_pool backward, antialiased resize, 3-D grid sampling
def _unpool(x, x3):
    y, i = F.max_pool2d(x, 2, return_indices=True)
    y3, i3 = F.max_pool3d(x3, 2, stride=2, return_indices=True)
    y1, i1 = F.max_pool1d(x[0], 3, return_indices=True)
    return (F.max_unpool2d(y, i, 2), F.max_unpool2d(y, i, 2, output_size=[9, 9]),
            F.max_unpool3d(y3, i3, 2, stride=2), F.max_unpool1d(y1, i1, 3, output_size=[8]),
            F.max_unpool2d(y.transpose(2, 3), i.transpose(2, 3), 2))


def _pool_backward(g, x):
    y, i = torch.ops.aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], True)
    return torch.ops.aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], True, i)


def _aa(x):
    return (F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
            F.interpolate(x, scale_factor=(1.7, 0.6), mode="bilinear", antialias=True),
            F.interpolate(x.transpose(2, 3), size=(5, 5), mode="bicubic", antialias=True),
            F.interpolate(x, size=(4, 11), mode="bilinear", antialias=True, align_corners=True))


def _grid3d(x, g):
    return (F.grid_sample(x, g, mode="bilinear", align_corners=False),
            F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True),
            F.grid_sample(x, g * 1.3, mode="bilinear", padding_mode="reflection"))


CASES += [
    Case("max_unpool", _unpool, [randn(2, 3, 8, 8, seed=60), randn(1, 2, 4, 6, 4, seed=61)]),
    Case("max_pool_backward", _pool_backward, [randn(2, 3, 5, 5, seed=62), randn(2, 3, 8, 9, seed=63)]),
    Case("upsample_aa", _aa, [randn(2, 3, 7, 9, seed=64)]),
    Case("grid_sample_3d", _grid3d, [randn(2, 3, 4, 5, 6, seed=65), torch.rand(2, 3, 4, 2, 3, generator=torch.Generator().manual_seed(66)) * 2.2 - 1.1]),
]
