"""conv family: convolution / conv1d / conv2d / conv3d / conv_transpose*, all IR forms; the
sliding windows im2col (F.unfold) / col2im (F.fold)."""
import torch
import torch.nn.functional as F

from .case import ONE, Case, long_ints, randn

f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64


def conv_long_windows(n):
    """Channel x window reductions past lavapipe's loop cap (issue 17): a 70,000-tap conv1d
    of one channel (the depthwise kernel) and 300 channels x 15 x 15 taps (67,500 terms: the
    columns and matrix multiply of CPU adapters); integer-valued data made in the program."""
    x1 = long_ints(n, 70_003).reshape(1, 1, 70_003)
    w1 = long_ints(n, 140_000, 5, 2).reshape(2, 1, 70_000)
    x2 = long_ints(n, 67_500).reshape(1, 300, 15, 15)
    w2 = long_ints(n, 135_000, 5, 2).reshape(2, 300, 15, 15)
    return F.conv1d(x1, w1), F.conv2d(x2, w2, padding=1)


def conv_transpose_long_windows(n):
    """Transposed convolutions whose invocations walk past lavapipe's loop cap (issue 17): a
    70,000-tap conv_transpose1d (each output thread walks every tap) and 300 channels x 15 x 15
    taps of a conv_transpose2d (67,500 channel-tap steps); integer-valued data made in the
    program, so sums are exact."""
    x1 = long_ints(n, 6).reshape(1, 2, 3)
    w1 = long_ints(n, 140_000, 5, 2).reshape(2, 1, 70_000)
    x2 = long_ints(n, 4_800).reshape(1, 300, 4, 4)
    w2 = long_ints(n, 135_000, 5, 2).reshape(300, 2, 15, 15)
    return F.conv_transpose1d(x1, w1), F.conv_transpose2d(x2, w2, stride=2, padding=1)


CASES = [
    # conv2d
    Case("conv2d", F.conv2d, [randn(1, 3, 7, 8), randn(4, 3, 3, 3, seed=1), randn(4, seed=2)], tol="loose"),
    Case("conv2d_nobias", F.conv2d, [randn(2, 3, 6, 6), randn(5, 3, 3, 3, seed=1)], tol="loose"),
    Case("conv2d_stride_pad", F.conv2d, [randn(2, 3, 9, 8), randn(4, 3, 3, 3, seed=1), randn(4, seed=2)], {"stride": 2, "padding": 1}, tol="loose"),
    Case("conv2d_asym", F.conv2d, [randn(1, 2, 9, 11), randn(3, 2, 3, 5, seed=1)], {"stride": (2, 3), "padding": (1, 2), "dilation": (2, 1)}, tol="loose"),
    Case("conv2d_dilation", F.conv2d, [randn(1, 2, 10, 10), randn(3, 2, 3, 3, seed=1)], {"dilation": 2, "padding": 2}, tol="loose"),
    Case("conv2d_groups", F.conv2d, [randn(2, 4, 6, 6), randn(6, 2, 3, 3, seed=1), randn(6, seed=2)], {"groups": 2, "padding": 1}, tol="loose"),
    Case("conv2d_groups_many", F.conv2d, [randn(1, 8, 5, 5), randn(8, 2, 3, 3, seed=1)], {"groups": 4}, tol="loose"),
    Case("conv2d_depthwise", F.conv2d, [randn(2, 6, 9, 9), randn(6, 1, 3, 3, seed=1), randn(6, seed=2)], {"groups": 6, "padding": 1}, tol="loose"),
    Case("conv2d_depthwise_s2_k5", F.conv2d, [randn(1, 4, 11, 10), randn(4, 1, 5, 5, seed=1), randn(4, seed=2)], {"groups": 4, "stride": 2, "padding": 2}, tol="loose"),
    Case("conv2d_depthwise_mult", F.conv2d, [randn(1, 3, 6, 6), randn(6, 1, 3, 3, seed=1)], {"groups": 3, "dilation": 2, "padding": 1}, tol="loose"),
    Case("conv2d_depthwise_wide_s2_dil", F.conv2d, [randn(1, 4, 7, 21), randn(4, 1, 3, 3, seed=1), randn(4, seed=2)], {"groups": 4, "stride": 2, "padding": 2, "dilation": 2}, tol="loose"),
    Case("conv2d_depthwise_wide", F.conv2d, [randn(1, 3, 5, 20), randn(3, 1, 3, 3, seed=1)], {"groups": 3, "padding": 1}, tol="loose"),
    Case("conv2d_depthwise_s3_asym", F.conv2d, [randn(1, 2, 9, 30), randn(2, 1, 2, 4, seed=1)], {"groups": 2, "stride": (2, 3), "padding": (1, 2)}, tol="loose"),
    Case("conv2d_pointwise", F.conv2d, [randn(2, 8, 5, 6), randn(4, 8, 1, 1, seed=1), randn(4, seed=2)], tol="loose"),
    Case("conv2d_1x1_stride2", F.conv2d, [randn(1, 4, 7, 7), randn(6, 4, 1, 1, seed=1)], {"stride": 2}, tol="loose"),
    Case("conv2d_same", F.conv2d, [randn(1, 2, 7, 6), randn(3, 2, 3, 3, seed=1)], {"padding": "same"}, tol="loose"),
    Case("conv2d_same_even", F.conv2d, [randn(1, 2, 7, 6), randn(3, 2, 4, 2, seed=1)], {"padding": "same", "dilation": (1, 2)}, tol="loose"),
    Case("conv2d_valid", F.conv2d, [randn(1, 2, 7, 6), randn(3, 2, 3, 3, seed=1)], {"padding": "valid"}, tol="loose"),
    Case("conv2d_unbatched", F.conv2d, [randn(3, 6, 6), randn(4, 3, 3, 3, seed=1), randn(4, seed=2)], {"padding": 1}, tol="loose"),
    Case("conv2d_noncontig", lambda x, w: F.conv2d(x.transpose(2, 3), w, padding=1), [randn(1, 3, 5, 7), randn(2, 3, 3, 3, seed=1)], tol="loose"),
    Case("conv2d_channels_last", lambda x, w: F.conv2d(x.contiguous(memory_format=torch.channels_last), w), [randn(1, 3, 5, 5), randn(2, 3, 2, 2, seed=1)], tol="loose"),
    Case("conv2d_empty_batch", F.conv2d, [randn(0, 3, 5, 5), randn(2, 3, 3, 3, seed=1)], tol="exact"),
    # Column buffers past src/ops/conv/kernels.rs's COL_BYTES (32 MiB): made a band of rows at
    # a time (a 48x48 kernel over 96x96 in float64 is 42 MB of im2col columns; the transposed
    # 48x48 kernel over 64x64, 38 MB of GEMM columns).
    Case("conv2d_f64_banded", F.conv2d, [randn(1, 1, 96, 96, dtype=f64), randn(1, 1, 48, 48, seed=1, dtype=f64)], tol="close"),
    Case("conv_transpose2d_banded", F.conv_transpose2d, [randn(1, 1, 64, 64), randn(1, 1, 48, 48, seed=1)], tol="loose"),
    Case("conv2d_f64", F.conv2d, [randn(1, 3, 6, 6, dtype=f64), randn(4, 3, 3, 3, seed=1, dtype=f64), randn(4, seed=2, dtype=f64)], {"padding": 1}, tol="close"),
    Case("conv2d_f16", F.conv2d, [randn(1, 3, 6, 6, dtype=f16), randn(4, 3, 3, 3, seed=1, dtype=f16), randn(4, seed=2, dtype=f16)], {"padding": 1}, tol="half"),
    Case("conv2d_bf16", F.conv2d, [randn(1, 3, 6, 6, dtype=bf16), randn(4, 3, 3, 3, seed=1, dtype=bf16)], {"padding": 1}, tol="half"),
    Case("conv2d_larger", F.conv2d, [randn(1, 8, 10, 10), randn(16, 8, 3, 3, seed=1), randn(16, seed=2)], {"padding": 1}, tol="loose"),
    Case("conv2d_module", torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), [randn(1, 3, 8, 8)], tol="loose"),
    Case("conv2d_module_reflect", torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), [randn(1, 2, 5, 5)], tol="loose"),
    # conv1d / conv3d
    Case("conv1d", F.conv1d, [randn(2, 3, 10), randn(4, 3, 3, seed=1), randn(4, seed=2)], {"stride": 2, "padding": 1}, tol="loose"),
    Case("conv1d_groups_dil", F.conv1d, [randn(1, 4, 12), randn(4, 2, 3, seed=1)], {"groups": 2, "dilation": 3}, tol="loose"),
    Case("conv1d_same", F.conv1d, [randn(1, 2, 9), randn(3, 2, 4, seed=1)], {"padding": "same"}, tol="loose"),
    Case("conv1d_depthwise", F.conv1d, [randn(2, 4, 9), randn(4, 1, 3, seed=1)], {"groups": 4, "padding": 1}, tol="loose"),
    Case("conv1d_unbatched", F.conv1d, [randn(3, 8), randn(2, 3, 3, seed=1)], tol="loose"),
    Case("conv3d", F.conv3d, [randn(1, 2, 5, 6, 5), randn(3, 2, 3, 3, 2, seed=1), randn(3, seed=2)], {"stride": (1, 2, 1), "padding": (1, 0, 1)}, tol="loose"),
    Case("conv3d_depthwise", F.conv3d, [randn(1, 3, 4, 5, 5), randn(3, 1, 3, 3, 3, seed=1)], {"groups": 3, "padding": 1}, tol="loose"),
    Case("conv3d_same", F.conv3d, [randn(1, 2, 4, 4, 4), randn(2, 2, 2, 3, 3, seed=1)], {"padding": "same"}, tol="loose"),
    # transposed
    Case("conv_transpose2d", F.conv_transpose2d, [randn(1, 4, 5, 5), randn(4, 3, 3, 3, seed=1), randn(3, seed=2)], {"stride": 2, "padding": 1, "output_padding": 1}, tol="loose"),
    Case("conv_transpose2d_plain", F.conv_transpose2d, [randn(2, 3, 4, 4), randn(3, 2, 2, 2, seed=1)], tol="loose"),
    Case("conv_transpose2d_groups_dil", F.conv_transpose2d, [randn(1, 4, 4, 5), randn(4, 3, 3, 2, seed=1)], {"groups": 2, "dilation": (2, 1), "stride": (1, 2)}, tol="loose"),
    Case("conv_transpose2d_module", torch.nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1), [randn(1, 4, 3, 3)], tol="loose"),
    Case("conv_transpose2d_unbatched", F.conv_transpose2d, [randn(2, 3, 3), randn(2, 3, 3, 3, seed=1)], {"stride": 2}, tol="loose"),
    Case("conv_transpose1d", F.conv_transpose1d, [randn(2, 3, 6), randn(3, 2, 3, seed=1), randn(2, seed=2)], {"stride": 3, "padding": 1, "output_padding": 2}, tol="loose"),
    Case("conv_transpose3d", F.conv_transpose3d, [randn(1, 2, 3, 3, 3), randn(2, 2, 2, 2, 2, seed=1), randn(2, seed=2)], {"stride": 2}, tol="loose"),
    Case("conv_transpose2d_f16", F.conv_transpose2d, [randn(1, 2, 3, 3, dtype=f16), randn(2, 2, 3, 3, seed=1, dtype=f16)], {"stride": 2}, tol="half"),
    # im2col (F.unfold / nn.Unfold) and col2im (F.fold / nn.Fold)
    Case("unfold", F.unfold, [randn(2, 3, 5, 6)], {"kernel_size": (2, 3)}),
    Case("unfold_pad_stride_dil", F.unfold, [randn(1, 2, 7, 8)], {"kernel_size": 3, "dilation": (2, 1), "padding": (1, 2), "stride": (2, 3)}),
    Case("unfold_unbatched", F.unfold, [randn(3, 4, 4)], {"kernel_size": 2, "stride": 2}),
    Case("unfold_noncontig", lambda x: F.unfold(x.transpose(2, 3), 2, padding=1), [randn(1, 2, 5, 4)]),
    Case("unfold_module", torch.nn.Unfold(kernel_size=(3, 2), padding=1, stride=(1, 2)), [randn(2, 2, 6, 5)]),
    Case("unfold_f64", F.unfold, [randn(1, 2, 5, 5, dtype=f64)], {"kernel_size": 3, "padding": 1}, tol="exact"),
    Case("unfold_f16", F.unfold, [randn(1, 2, 5, 5, dtype=f16)], {"kernel_size": 2}, tol="exact"),
    Case("unfold_patches", lambda x: F.unfold(x, 4, stride=4).transpose(1, 2), [randn(1, 3, 8, 12)]),
    Case("fold", F.fold, [randn(2, 3 * 2 * 3, 9)], {"output_size": (4, 5), "kernel_size": (2, 3)}, tol="loose"),
    Case("fold_overlap_pad_stride_dil", F.fold, [randn(1, 2 * 9, 12)], {"output_size": (7, 8), "kernel_size": 3, "dilation": (2, 1), "padding": (1, 2), "stride": (2, 3)}, tol="loose"),
    Case("fold_unbatched", F.fold, [randn(4 * 4, 9)], {"output_size": 6, "kernel_size": 2, "stride": 2}, tol="loose"),
    Case("fold_module", torch.nn.Fold(output_size=(5, 4), kernel_size=(2, 2), padding=1), [randn(2, 3 * 4, 30)], tol="loose"),
    Case("fold_f64", F.fold, [randn(1, 8, 9, dtype=f64)], {"output_size": 4, "kernel_size": 2}, tol="close"),
    Case("fold_of_unfold", lambda x: F.fold(F.unfold(x, 3, padding=1), (6, 7), 3, padding=1), [randn(1, 2, 6, 7)], tol="loose"),
    Case("conv_long_windows", conv_long_windows, [ONE], tol="exact", core=False),
    Case("conv_transpose_long_windows", conv_transpose_long_windows, [ONE], tol="exact", core=False),
]
