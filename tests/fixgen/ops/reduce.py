"""Reductions, softmax and scans (src/ops/reduce/). Related variants share one program (several
outputs) to keep the fixture small; a failure names the output index. core=False where the core
ATen program holds the same ops as the training IR (nothing new to test), and for logsumexp and
norms, whose core forms are long decompositions into other families' ops."""
import torch
import torch.nn.functional as F

from .case import ONE, Case, long_ints, randint, randn

A = torch.ops.aten
f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64
nan, inf = float("nan"), float("inf")


def with_nan():
    x = randn(3, 5, seed=7)
    x[1, 2] = nan
    x[2, 0] = inf
    return x


def ties():
    return torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.0, 0.0, -1.0, -1.0], [5.0, 5.0, 5.0, 5.0]])



def _long_t(n):
    """The positions of two rows of 100,000 (n is 1: an input, so nothing is folded away)."""
    return (n * torch.arange(200000, dtype=torch.int32)).reshape(2, 100000)


def _long_pattern(x, n):
    """Two rows of 100,000 integer-valued floats in [0, 10006] (ties every 10,007 columns),
    times x (1 and 0.5), with a largest value late in each row (column 90,001)."""
    t = _long_t(n)
    return x * (t * 7919 % 10007).float() + 20000.0 * (t % 100000 == 90001)


def _every_1009th(*outs):
    """Every 1009th column of each output: the long rows' outputs stay small in the fixture."""
    return tuple(o[..., ::1009] for o in outs)


def _long_factors(n):
    """Factors 1, 2 and 0.5 whose products along a row of 100,000 are exact (2**50 in all;
    1 after any 21,845)."""
    t = _long_t(n)
    return 1.0 + (t % 1000 == 0) - 0.5 * ((t % 1000 == 500) & (t % 100000 < 50000))


B = torch.export.Dim("b", min=2, max=64)


def histc_long(n):
    """histc of 100,000 values (each bin's thread walks every element: past lavapipe's loop
    cap, issue 17)."""
    return torch.histc(long_ints(n, 100_000, 10_007, 0), bins=10, min=0, max=10_006)


CASES = [
    # sum / mean / prod
    Case("sum_float", lambda x: (x.sum(), x.sum((0, -1), keepdim=True), x.sum(-2), x.sum(1, dtype=f64)), [randn(2, 3, 4)]),
    Case("sum_views", lambda x: (x.t().sum(1), x[:, ::2].sum(0)), [randn(4, 8)]),
    Case("sum_int", lambda x, y: (x.sum(1), y.sum(), (x > 0).sum(0)), [randint(-5, 5, 3, 4), randint(-5, 5, 3, 4, dtype=torch.int32)], tol="exact"),
    Case("sum_u8_dtype", lambda x: x.sum(0, dtype=torch.uint8), [randint(100, 250, 3, 2, dtype=torch.uint8)], tol="exact", core=False),
    Case("sum_half", lambda x, y: (x.sum(-1), y.sum(0)), [randn(4, 64, dtype=f16), randn(16, 3, dtype=bf16)], tol="half", core=False),
    Case("sum_edge", lambda x, y: (x.sum(0), y.sum(), x.mean(0), x.prod(0)), [torch.zeros(0, 3), torch.tensor(2.5)]),
    Case("sum_dynamic", lambda x: (x.sum(0), x.mean(-1, keepdim=True)), [randn(5, 3)], dynamic_shapes=(({0: B},),), core=False),
    # Rows past the GPU's one-thread-per-output length (reduced in parts) and past lavapipe's
    # 65,535 loop iterations per invocation; the data is made in the program to stay small.
    Case("sum_long_rows", lambda x, n: (
        (y := x * torch.sin(torch.arange(60000, dtype=torch.float32)).reshape(2, 30000)).sum(1), y.mean(1),
        y.amax(1), y.amin(0).sum(), y.t().sum(0), (y > 0).sum(1),
        (n * torch.arange(30000, dtype=torch.int32) % 7).reshape(3, 10000).sum(1)),
        [randn(2, 1), torch.tensor(3, dtype=torch.int32)], core=False),
    # Rows past lavapipe's loop cap for the other one-thread-per-row kernels (arg-reduce,
    # scans, statistics; issue 17): the cap counts every loop iteration of an invocation, so
    # rows of 100,000 are past it whatever the loop's body. Integer-valued data (made in the
    # program) keeps sums and products exact; a late extreme, a NaN and ties cross the parts.
    Case("arg_long_rows", lambda x, n: (
        (y := _long_pattern(x, n)).argmax(1), y.argmin(1), y.max(1), (-y).min(1), y.argmax(),
        torch.where(_long_t(n) == 70001, nan, y).argmax(1),
        (n * torch.arange(100000, dtype=torch.int32) * 7919 % 10007).reshape(1, 100000).argmax(1)),
        [torch.tensor([[1.0], [0.5]]), torch.tensor(1, dtype=torch.int32)], tol="exact", core=False),
    Case("scan_long_rows", lambda x, n: _every_1009th(
        (y := _long_pattern(x, n) % 5 - 2).cumsum(1), *y.cummax(1), *y.cummin(1),
        _long_factors(n).cumprod(1), (0.001 * y).logcumsumexp(1),
        (n * torch.arange(100000, dtype=torch.int32) % 3 - 1).cumsum(0)),
        [torch.tensor([[1.0], [0.5]]), torch.tensor(1, dtype=torch.int32)], tol="loose", core=False),
    Case("stats_long_rows", lambda x, n: (
        (y := _long_pattern(x, n) / 10007).var(1), y.std(1), *torch.var_mean(y, 1), y.logsumexp(1),
        y.norm(dim=1), torch.linalg.vector_norm(y, 3.0, dim=1), _long_factors(n).prod(1), torch.count_nonzero(y, 1),
        *_every_1009th(y.softmax(1), y.log_softmax(1), torch.nn.functional.layer_norm(y, (100000,)))),
        [torch.tensor([[1.0], [0.5]]), torch.tensor(1, dtype=torch.int32)], tol="loose", core=False),
    Case("nan_reductions", lambda x: (x.nansum(1), x.nanmean(1), x.sum(0)), [with_nan()]),
    Case("mean", lambda x: (x.mean(1), x.mean((0, 1, 2), keepdim=True), x.mean()), [randn(3, 4, 5)], core=False),
    Case("mean_f16", lambda x: x.mean(-1), [randn(4, 100, dtype=f16)], tol="half", core=False),
    Case("mean_int_dtype", lambda x: x.mean(0, dtype=torch.float32), [randint(0, 10, 4, 3)], core=False),
    Case("prod", lambda x: (x.prod(), x.prod(1, keepdim=True)), [randn(3, 4)], core=False),
    Case("prod_int", lambda x: x.prod(0), [randint(-3, 4, 3, 4)], tol="exact", core=False),
    # min / max family
    Case("amax_amin", lambda x: (x.amax((0, 2)), x.amin(-1, keepdim=True), x.amax()), [randn(2, 3, 4)], core=False),
    Case("amax_nan_empty", lambda x, e: (x.amax(1), x.amin(0), e.amax(1)), [with_nan(), torch.zeros(0, 3)], core=False),
    Case("amax_int_bool", lambda x, y: (x.amax(0), (y > 0).amax(0), (y > 0).amin(1)), [randint(-9, 9, 4, 3, dtype=torch.int32), randn(4, 3)], tol="exact", core=False),
    Case("max_all", lambda x, y: (x.max(), x.min(), y.max(), y.min()), [randn(3, 4), with_nan()], core=False),
    Case("max_dim", lambda x: (x.max(1), x.min(-1, keepdim=True)), [randn(3, 4, 5)], core=False),
    Case("max_dim_nan_ties", lambda x, y: (x.max(1), x.min(1), y.max(1), y.min(0)), [with_nan(), ties()], core=False),
    Case("max_dim_int", lambda x: x.max(0), [randint(-9, 9, 4, 3)], tol="exact", core=False),
    Case("max_dim_f16", lambda x: x.max(0), [randn(4, 3, dtype=f16)], tol="half", core=False),
    Case("argmax", lambda x: (x.argmax(), x.argmin(), x.argmax(1), x.argmin(0, keepdim=True), x.argmax(keepdim=True), x.t().argmax(1)), [randn(3, 4)], tol="exact"),
    Case("argmax_nan_ties", lambda x, y: (x.argmax(1), x.argmin(1), y.argmax(1), y.argmin(0)), [ties(), with_nan()], tol="exact", core=False),
    Case("aminmax", lambda x: (torch.aminmax(x, dim=1), torch.aminmax(x)), [randn(3, 4)]),
    # var / std
    Case("var", lambda x: (x.var(1), x.var(0, unbiased=False, keepdim=True), x.var(), torch.var(x, dim=(0, 1), correction=2)), [randn(5, 7)]),
    Case("var_one_elem", lambda x: x.var(0), [randn(1, 3)]),
    Case("std", lambda x: (x.std(-1, keepdim=True), x.std(), torch.var_mean(x, 1), torch.std_mean(x, dim=(0,), correction=0)), [randn(3, 6)]),
    Case("var_f16", lambda x: x.var(-1), [randn(3, 32, dtype=f16)], tol="half"),
    # any / all / count_nonzero
    Case("any_all", lambda x: (x.any(), x.all(), x.any(1), x.all(0, keepdim=True), x.any((0, 2)), x.all((0, 1))), [randn(2, 3, 4) > -0.5], tol="exact"),
    Case("any_all_other_dtypes", lambda x, u, e: (x.any(1), x.all(1), u.any(1), u.all(0), e.any(0), e.all(0)), [torch.tensor([[0.0, 1.0], [0.0, 0.0], [nan, 2.0]]), randint(0, 2, 3, 4, dtype=torch.uint8), torch.zeros(0, 3, dtype=torch.bool)], tol="exact"),
    # any.dims / all.dims over [] reduce nothing; sum over [] reduces everything.
    Case("any_all_empty_dims", lambda x, f: (torch.any(x, dim=()), torch.all(x, dim=()), torch.any(f, dim=()), x.sum(dim=())), [randn(2, 3) > 0, randn(2, 3)], tol="exact"),
    Case("count_nonzero", lambda x: (x.count_nonzero(), x.count_nonzero(1), torch.count_nonzero(x, (0, 1))), [torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, -1.0]])], tol="exact"),
    # logsumexp / norms
    Case("logsumexp", lambda x: (x.logsumexp(1), x.logsumexp((0, 2), keepdim=True)), [randn(2, 3, 4)], core=False),
    Case("logsumexp_inf_int", lambda x, i: (x.logsumexp(1), i.logsumexp(0)), [torch.tensor([[1.0, -inf], [-inf, -inf], [inf, 0.0]]), randint(0, 5, 4, 2)], core=False),
    Case("norm", lambda x: (x.norm(), x.norm(p=1, dim=1), x.norm(p=inf), x.norm(p=-inf, dim=0), x.norm(p="fro", dim=(0, 1)), x.norm(p=3, dim=-1, keepdim=True)), [randn(3, 4)], core=False),
    Case("vector_norm", lambda x: (torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 0.5, dim=1), torch.linalg.vector_norm(x, 0, dim=0), torch.linalg.vector_norm(x, dim=-1, dtype=f64)), [randn(3, 4)], core=False),
    Case("normalize", lambda x: F.normalize(x, dim=1), [randn(3, 4)]),
    # softmax family
    Case("softmax", lambda x: (x.softmax(-1), x.softmax(1), x.log_softmax(-1), x.log_softmax(0)), [randn(2, 3, 4)]),
    Case("softmax_views", lambda x: (x.t().softmax(1), x[:, ::2].log_softmax(0)), [randn(4, 6)]),
    Case("softmax_dtype", lambda x, i: (x.softmax(0, dtype=f64), i.softmax(-1, dtype=torch.float32)), [randn(4, 3), randint(0, 4, 2, 3)]),
    Case("softmax_half", lambda x, y: (x.softmax(-1), torch.log_softmax(y, 1)), [randn(3, 16, dtype=f16), randn(3, 16, dtype=bf16)], tol="half"),
    Case("softmax_inf", lambda x: (x.softmax(-1), x.log_softmax(-1)), [torch.tensor([[0.0, -inf, 1.0], [-inf] * 3, [inf, 0.0, 1.0], [nan, 0.0, 1.0]])]),
    Case("softmax_0d", lambda x: (x.softmax(0), x.log_softmax(-1)), [torch.tensor(1.5)]),
    Case("softmax_dynamic", lambda x: x.softmax(-1), [randn(3, 5)], dynamic_shapes=(({0: B},),)),
    Case("safe_softmax", lambda x: A._safe_softmax.default(x, -1), [torch.tensor([[0.0, -inf, 1.0], [-inf] * 3])]),
    # scans
    Case("cumsum", lambda x: (x.cumsum(0), x.cumsum(-1), x.cumsum(1, dtype=f64), x.t().cumsum(1), x.cumprod(1)), [randn(3, 4)]),
    Case("cumsum_int", lambda x, y, u: (x.cumsum(1), (x > 0).cumsum(0), y.cumsum(0), u.cumsum(0, dtype=torch.uint8), x.cumprod(0)), [randint(-3, 4, 3, 4), randint(-5, 5, 4, 2, dtype=torch.int32), randint(100, 250, 4, dtype=torch.uint8)], tol="exact", core=False),
    Case("cumsum_inplace", lambda x: (x.clone().cumsum_(1), x.clone().cumprod_(0)), [randn(3, 4)], core=False),
    Case("cumsum_f16", lambda x: x.cumsum(-1), [randn(2, 20, dtype=f16)], tol="half", core=False),
    Case("cummax", lambda x, y: (x.cummax(1), x.cummin(0), y.cummax(0), y.cummin(0)), [randn(4, 5), torch.tensor([1.0, 3.0, 3.0, nan, 2.0, nan, 0.0])], core=False),
    Case("cummax_int", lambda x: x.cummax(1), [randint(-3, 4, 3, 6)], tol="exact", core=False),
    Case("diff", lambda x, p, a: (torch.diff(x), torch.diff(x, n=2, dim=0), torch.diff(x, dim=0, prepend=p, append=a), torch.diff(x.t(), n=5)), [randn(3, 4), randn(1, 4), randn(2, 4)]),
    Case("diff_int_bool", lambda x, b: (torch.diff(x, dim=-1), torch.diff(b, dim=0), torch.diff(x, n=0)), [randint(-9, 9, 3, 5), randint(0, 2, 4, 3) > 0], tol="exact"),
    Case("logcumsumexp", lambda x: x.logcumsumexp(1), [randn(3, 6)], core=False),
]


# --- issue 16: histograms, bincount, segment_reduce, softmax backward
def _hist(x, w, edges, y, wy, e0, e1):
    h1, b1 = torch.histogram(x, bins=5)
    h2, b2 = torch.histogram(x, bins=edges, weight=w, density=True)
    h3, b3 = torch.histogram(x.t(), bins=4, range=(-1.0, 1.0), density=True)
    hd, bd = torch.histogramdd(y, bins=[3, 4])
    hw, bw = torch.histogramdd(y, bins=[2, 3], weight=wy, density=True)
    ht, bt = torch.histogramdd(y, bins=[e0, e1])
    return (torch.histc(x, bins=7), torch.histc(x, bins=4, min=-1, max=1), torch.histc(x[:0], bins=3),
            h1, b1, h2, b2, h3, b3, hd, *bd, hw, *bw, ht, *bt)


def _segment(x, lengths, offsets, x2, l2):
    return (
        torch.segment_reduce(x, "sum", lengths=lengths),
        torch.segment_reduce(x, "max", lengths=lengths),
        torch.segment_reduce(x, "mean", lengths=lengths, initial=1.0),
        torch.segment_reduce(x, "min", offsets=offsets),
        torch.segment_reduce(x, "prod", offsets=offsets, initial=2.0),
        torch.segment_reduce(x, "mean", lengths=lengths),  # an empty segment: NaN
        torch.segment_reduce(x2, "sum", lengths=l2, axis=1),
    )


def _softmax_backward(g, x):
    y = torch.softmax(x, 1)
    ly = torch.log_softmax(x, 0)
    return (torch.ops.aten._softmax_backward_data(g, y, 1, torch.float32),
            torch.ops.aten._log_softmax_backward_data(g.t().contiguous().t(), ly, 0, torch.float32))


CASES += [
    Case("histogram", _hist, [randn(6, 5, seed=50), randn(6, 5, seed=51).abs(), torch.tensor([-2.0, -0.5, 0.0, 0.3, 2.0]),
                              randn(10, 2, seed=52), randn(10, seed=53).abs(), torch.tensor([-1.0, 0.0, 1.0]),
                              torch.tensor([-2.0, -1.0, 0.5, 3.0])], core=False),
    Case("histogram_core", lambda x, y: (torch.histc(x, bins=6), torch.histogramdd(y, bins=[2, 2])[0]),
         [randn(6, 5, seed=50), randn(10, 2, seed=52)], training=False),
    Case("bincount", lambda i, w: (torch.bincount(i), torch.bincount(i, w, minlength=12), torch.bincount(i[:0], minlength=3)),
         [randint(0, 8, 20, seed=54), randn(20, seed=55)], core=False),
    Case("segment_reduce", _segment, [randn(9, 3, seed=56), torch.tensor([2, 0, 4, 3]), torch.tensor([0, 2, 2, 6, 9]),
                                      randn(2, 5, seed=57), torch.tensor([[1, 4], [3, 2]])]),
    Case("softmax_backward", _softmax_backward, [randn(3, 5, seed=58), randn(3, 5, seed=59)]),
]


# --- issue 16 (GPU): bincount over int dtypes, strided and empty inputs, minlength below and
# above the length, weights; histc over the data's range (min == max)
def _bincount_dtypes(i, w, u8, i32, big, wbig):
    return (torch.bincount(i[::2]), torch.bincount(i, w, minlength=3), torch.bincount(i[::3], w[1::3]),
            torch.bincount(u8), torch.bincount(i32, minlength=40), torch.bincount(i[:0], w[:0], minlength=2),
            torch.bincount(big), torch.bincount(big, wbig))


def _histc_data_range(x, c, big):
    return (torch.histc(x, bins=7), torch.histc(x.t(), bins=5, min=3, max=3), torch.histc(c, bins=4),
            torch.histc(x[:0], bins=3), torch.histc(big, bins=50), torch.histc(x, bins=1))


CASES += [
    Case("bincount_dtypes", _bincount_dtypes,
         [randint(0, 8, 20, seed=60), randn(20, seed=61), randint(0, 256, 50, seed=62, dtype=torch.uint8),
          randint(0, 30, 25, seed=63, dtype=torch.int32), randint(0, 300, 1000, seed=64), randn(1000, seed=65)],
         core=False),
    Case("histc_data_range", _histc_data_range, [randn(6, 5, seed=66), torch.full((5,), 2.5), randn(3000, seed=67)]),
    Case("histc_long", histc_long, [ONE], tol="exact", core=False),
]
