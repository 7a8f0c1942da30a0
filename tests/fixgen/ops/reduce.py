"""Reductions, softmax and scans (src/ops/reduce/)."""
import torch

from .case import Case, randint, randn

A = torch.ops.aten
f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64


def with_nan():
    x = randn(3, 5, seed=7)
    x[1, 2] = float("nan")
    x[2, 0] = float("inf")
    return x


def ties():
    return torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.0, 0.0, -1.0, -1.0], [5.0, 5.0, 5.0, 5.0]])


CASES = [
    # sum / mean / prod
    Case("sum_all", lambda x: x.sum(), [randn(3, 4)]),
    Case("sum_dims_keep", lambda x: x.sum((0, -1), keepdim=True), [randn(2, 3, 4)]),
    Case("sum_neg_dim", lambda x: x.sum(-2), [randn(2, 3, 4)]),
    Case("sum_noncontig", lambda x: x.t().sum(1), [randn(4, 5)]),
    Case("sum_strided", lambda x: x[:, ::2].sum(0), [randn(3, 8)]),
    Case("sum_int", lambda x: x.sum(1), [randint(-5, 5, 3, 4)], tol="exact"),
    Case("sum_i32_all", lambda x: x.sum(), [randint(-5, 5, 3, 4, dtype=torch.int32)], tol="exact"),
    Case("sum_bool", lambda x: (x > 0).sum(0), [randn(4, 3)], tol="exact"),
    Case("sum_u8_dtype", lambda x: x.sum(0, dtype=torch.uint8), [randint(100, 250, 3, 2, dtype=torch.uint8)], tol="exact"),
    Case("sum_dtype_f64", lambda x: x.sum(1, dtype=f64), [randn(3, 4)]),
    Case("sum_f16", lambda x: x.sum(-1), [randn(4, 64, dtype=f16)], tol="half"),
    Case("sum_bf16", lambda x: x.sum(0), [randn(16, 3, dtype=bf16)], tol="half"),
    Case("sum_empty", lambda x: x.sum(0), [torch.zeros(0, 3)]),
    Case("sum_0d", lambda x: x.sum(), [torch.tensor(2.5)]),
    Case("nansum", lambda x: x.nansum(1), [with_nan()]),
    Case("mean_dim", lambda x: x.mean(1), [randn(3, 4, 5)]),
    Case("mean_all_keep", lambda x: x.mean((0, 1, 2), keepdim=True), [randn(3, 4, 5)]),
    Case("mean_f16", lambda x: x.mean(-1), [randn(4, 100, dtype=f16)], tol="half"),
    Case("mean_int_dtype", lambda x: x.mean(0, dtype=torch.float32), [randint(0, 10, 4, 3)]),
    Case("mean_empty", lambda x: x.mean(0), [torch.zeros(0, 3)]),
    Case("nanmean", lambda x: x.nanmean(1), [with_nan()]),
    Case("prod_all", lambda x: x.prod(), [randn(2, 3)]),
    Case("prod_dim", lambda x: x.prod(1, keepdim=True), [randn(3, 4)]),
    Case("prod_int", lambda x: x.prod(0), [randint(-3, 4, 3, 4)], tol="exact"),
    Case("prod_empty", lambda x: x.prod(0), [torch.zeros(0, 2)]),
    # min / max family
    Case("amax_dims", lambda x: x.amax((0, 2)), [randn(2, 3, 4)]),
    Case("amin_keep", lambda x: x.amin(-1, keepdim=True), [randn(2, 3, 4)]),
    Case("amax_nan", lambda x: x.amax(1), [with_nan()]),
    Case("amax_empty_other", lambda x: x.amax(1), [torch.zeros(0, 3)]),
    Case("amax_int", lambda x: x.amax(0), [randint(-9, 9, 4, 3, dtype=torch.int32)], tol="exact"),
    Case("amax_bool", lambda x: (x > 0).amax(0), [randn(4, 3)], tol="exact"),
    Case("max_all", lambda x: (x.max(), x.min()), [randn(3, 4)]),
    Case("max_all_nan", lambda x: (x.max(), x.min()), [with_nan()]),
    Case("max_dim", lambda x: x.max(1), [randn(3, 4, 5)]),
    Case("min_dim_keep", lambda x: x.min(-1, keepdim=True), [randn(3, 4, 5)]),
    Case("max_dim_nan", lambda x: (x.max(1), x.min(1)), [with_nan()]),
    Case("max_dim_ties", lambda x: (x.max(1), x.min(1)), [ties()]),
    Case("max_dim_int", lambda x: x.max(0), [randint(-9, 9, 4, 3)], tol="exact"),
    Case("max_dim_f16", lambda x: x.max(0), [randn(4, 3, dtype=f16)], tol="half"),
    Case("argmax_all", lambda x: (x.argmax(), x.argmin()), [randn(3, 4)], tol="exact"),
    Case("argmax_dim", lambda x: (x.argmax(1), x.argmin(0, keepdim=True)), [randn(3, 4)], tol="exact"),
    Case("argmax_keep_none", lambda x: x.argmax(keepdim=True), [randn(3, 4)], tol="exact"),
    Case("argmax_ties_nan", lambda x: (x.argmax(1), x.argmin(1)), [ties()], tol="exact"),
    Case("argmax_nan", lambda x: (x.argmax(1), x.argmin(1)), [with_nan()], tol="exact"),
    Case("argmax_noncontig", lambda x: x.t().argmax(1), [randn(4, 5)], tol="exact"),
    Case("aminmax", lambda x: torch.aminmax(x, dim=1), [randn(3, 4)]),
    # var / std
    Case("var_dim", lambda x: x.var(1), [randn(3, 7)]),
    Case("var_unbiased_false", lambda x: x.var(0, unbiased=False, keepdim=True), [randn(5, 3)]),
    Case("var_all", lambda x: x.var(), [randn(4, 5)]),
    Case("var_correction", lambda x: torch.var(x, dim=(0, 2), correction=2), [randn(3, 4, 5)]),
    Case("var_one_elem", lambda x: x.var(0), [randn(1, 3)]),
    Case("std_dim", lambda x: x.std(-1, keepdim=True), [randn(3, 6)]),
    Case("std_all", lambda x: x.std(), [randn(3, 6)]),
    Case("var_mean", lambda x: torch.var_mean(x, 1), [randn(3, 6)]),
    Case("std_mean", lambda x: torch.std_mean(x, dim=(0,), correction=0), [randn(5, 2)]),
    Case("var_f16", lambda x: x.var(-1), [randn(3, 32, dtype=f16)], tol="half"),
    # any / all / count_nonzero
    Case("any_all_full", lambda x: (x.any(), x.all()), [randn(3, 4) > 0], tol="exact"),
    Case("any_dim", lambda x: (x.any(1), x.all(0, keepdim=True)), [randn(3, 4) > 0], tol="exact"),
    Case("any_dims", lambda x: (x.any((0, 2)), x.all((0, 1))), [randn(2, 3, 4) > -1], tol="exact"),
    Case("any_float", lambda x: (x.any(1), x.all(1)), [torch.tensor([[0.0, 1.0], [0.0, 0.0], [float("nan"), 2.0]])], tol="exact"),
    Case("any_u8", lambda x: (x.any(1), x.all(0)), [randint(0, 2, 3, 4, dtype=torch.uint8)], tol="exact"),
    Case("any_empty", lambda x: (x.any(0), x.all(0)), [torch.zeros(0, 3, dtype=torch.bool)], tol="exact"),
    Case("count_nonzero", lambda x: (x.count_nonzero(), x.count_nonzero(1), torch.count_nonzero(x, (0, 1))), [torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, -1.0]])], tol="exact"),
    # logsumexp / norms
    Case("logsumexp", lambda x: x.logsumexp(1), [randn(3, 8)]),
    Case("logsumexp_keep_dims", lambda x: x.logsumexp((0, 2), keepdim=True), [randn(2, 3, 4)]),
    Case("logsumexp_inf", lambda x: x.logsumexp(1), [torch.tensor([[1.0, float("-inf")], [float("-inf"), float("-inf")], [float("inf"), 0.0]])]),
    Case("logsumexp_int", lambda x: x.logsumexp(0), [randint(0, 5, 4, 2)]),
    Case("norm_default", lambda x: x.norm(), [randn(3, 4)]),
    Case("norm_p1_dim", lambda x: x.norm(p=1, dim=1), [randn(3, 4)]),
    Case("norm_inf", lambda x: (x.norm(p=float("inf")), x.norm(p=float("-inf"), dim=0)), [randn(3, 4)]),
    Case("norm_fro", lambda x: x.norm(p="fro", dim=(0, 1)), [randn(3, 4)]),
    Case("norm_p3_keep", lambda x: x.norm(p=3, dim=-1, keepdim=True), [randn(3, 4)]),
    Case("vector_norm", lambda x: (torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 0.5, dim=1), torch.linalg.vector_norm(x, 0, dim=0)), [randn(3, 4)]),
    Case("vector_norm_dtype", lambda x: torch.linalg.vector_norm(x, dim=-1, dtype=f64), [randn(3, 4)]),
    Case("normalize", lambda x: torch.nn.functional.normalize(x, dim=1), [randn(3, 4)]),
    # softmax family
    Case("softmax_last", lambda x: x.softmax(-1), [randn(3, 7)]),
    Case("softmax_mid", lambda x: x.softmax(1), [randn(2, 3, 4)]),
    Case("softmax_noncontig", lambda x: x.t().softmax(1), [randn(4, 5)]),
    Case("softmax_dtype", lambda x: x.softmax(0, dtype=f64), [randn(4, 3)]),
    Case("softmax_f16", lambda x: x.softmax(-1), [randn(3, 16, dtype=f16)], tol="half"),
    Case("softmax_bf16", lambda x: torch.log_softmax(x, 1), [randn(3, 16, dtype=bf16)], tol="half"),
    Case("softmax_inf", lambda x: x.softmax(-1), [torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3, [float("inf"), 0.0, 1.0]])]),
    Case("softmax_0d", lambda x: (x.softmax(0), x.log_softmax(-1)), [torch.tensor(1.5)]),
    Case("log_softmax", lambda x: (x.log_softmax(-1), x.log_softmax(0)), [randn(3, 5)]),
    Case("softmax_int_dtype", lambda x: x.softmax(-1, dtype=torch.float32), [randint(0, 4, 2, 3)]),
    Case("safe_softmax", lambda x: A._safe_softmax.default(x, -1), [torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3])]),
    # scans
    Case("cumsum", lambda x: (x.cumsum(0), x.cumsum(-1)), [randn(3, 4)]),
    Case("cumsum_int", lambda x: x.cumsum(1), [randint(-5, 5, 3, 4)], tol="exact"),
    Case("cumsum_bool", lambda x: (x > 0).cumsum(0), [randn(5, 2)], tol="exact"),
    Case("cumsum_u8_wrap", lambda x: x.cumsum(0, dtype=torch.uint8), [randint(100, 250, 4, dtype=torch.uint8)], tol="exact"),
    Case("cumsum_i32", lambda x: x.cumsum(0), [randint(-5, 5, 4, 2, dtype=torch.int32)], tol="exact"),
    Case("cumsum_dtype", lambda x: x.cumsum(1, dtype=f64), [randn(2, 5)]),
    Case("cumsum_f16", lambda x: x.cumsum(-1), [randn(2, 20, dtype=f16)], tol="half"),
    Case("cumsum_noncontig", lambda x: x.t().cumsum(1), [randn(4, 3)]),
    Case("cumprod", lambda x: x.cumprod(1), [randn(3, 5)]),
    Case("cumprod_int", lambda x: x.cumprod(0), [randint(-3, 4, 4, 3)], tol="exact"),
    Case("cummax", lambda x: (x.cummax(1), x.cummin(0)), [randn(4, 5)]),
    Case("cummax_ties_nan", lambda x: (x.cummax(0), x.cummin(0)), [torch.tensor([1.0, 3.0, 3.0, float("nan"), 2.0, float("nan"), 0.0])]),
    Case("cummax_int", lambda x: x.cummax(1), [randint(-3, 4, 3, 6)], tol="exact"),
    Case("logcumsumexp", lambda x: x.logcumsumexp(1), [randn(3, 6)]),
]
