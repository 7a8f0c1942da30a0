"""Sorting and order statistics (src/ops/sort.rs). core=False where the core ATen program holds
the same ops as the training IR; argsort/msort/views still export both forms."""
import torch

from .case import ONE, Case, long_ints, randint, randn

f16 = torch.float16
nan, inf = float("nan"), float("inf")


def nan_row():
    return torch.tensor([[3.0, nan, 1.0, -inf, 2.0, nan, inf], [0.5, -1.0, nan, 2.0, 2.5, -3.0, 0.0]])


def tied():
    return torch.tensor([[2.0, 1.0, 2.0, 1.0, 3.0, 3.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0]])


def long_rows():
    # Lanes of 1000 with many ties and a few NaNs: the GPU merge sort past its small widths.
    x = randint(-30, 30, 2, 1000, seed=7).to(torch.float32)
    x[:, ::97] = nan
    return x


def _lane_200k(n):
    """A lane of 200,000 distinct integer-valued floats in a scrambled order (n is 1: an
    input, so nothing is folded away): past the lane length whose bitonic sort stays within
    lavapipe's 65,535 loop steps per invocation (issue 17)."""
    return ((n * torch.arange(200000, dtype=torch.int64) * 7919) % 200003).float()



def unique_long_slices(n):
    """unique_consecutive over rows of 70,000 that differ in their last column only (one
    invocation compares two rows: past lavapipe's loop cap, issue 17); the inverse and counts."""
    row = long_ints(n, 70_000)
    x = torch.stack([row, row + (n * torch.arange(70_000) == 69_999), row + (n * torch.arange(70_000) == 69_999)])
    _, inverse, counts = torch.unique_consecutive(x, dim=0, return_inverse=True, return_counts=True)
    return inverse, counts

CASES = [
    Case("sort_long_lane", lambda n: (
        (s := _lane_200k(n).sort(stable=True))[0][::1009], s[1][::1009], _lane_200k(n).topk(5),
        _lane_200k(n).argsort(descending=True, stable=True)[:7]),
        [torch.tensor(1)], tol="exact", core=False),
    Case("sort_last", lambda x: x.sort(), [randn(3, 6)], core=False),
    Case("sort_dim0_desc", lambda x: x.sort(0, descending=True), [randn(5, 3)], core=False),
    Case("sort_stable_ties", lambda x: (torch.sort(x, stable=True), torch.sort(x, dim=1, descending=True, stable=True)), [tied()], core=False),
    Case("sort_nan", lambda x: (x.sort(1), x.sort(1, descending=True)), [nan_row()], core=False),
    Case("sort_int", lambda x: x.sort(-1, descending=True), [randint(-5, 5, 3, 6)], tol="exact", core=False),
    Case("sort_bool", lambda x: (x > 0).sort(dim=1, stable=True), [randn(2, 5)], tol="exact", core=False),
    Case("sort_f16", lambda x: x.sort(0), [randn(4, 3, dtype=f16)], tol="half", core=False),
    Case("sort_noncontig", lambda x: x.t().sort(1), [randn(4, 5)]),
    Case("sort_mid_dim", lambda x: x.sort(1), [randn(2, 4, 3)], core=False),
    Case("sort_empty", lambda x: x.sort(0), [torch.zeros(0, 3)], core=False),
    Case("sort_0d", lambda x: x.sort(), [torch.tensor(1.5)], core=False),
    Case("argsort", lambda x: (x.argsort(), x.argsort(0, descending=True)), [randn(3, 4)], tol="exact"),
    Case("argsort_stable", lambda x: torch.argsort(x, dim=-1, stable=True), [tied()], tol="exact"),
    Case("msort", lambda x: x.msort(), [randn(4, 3)]),
    Case("topk", lambda x: x.topk(3), [randn(3, 8)], core=False),
    Case("topk_smallest_dim0", lambda x: x.topk(2, dim=0, largest=False), [randn(5, 3)], core=False),
    Case("topk_nan", lambda x: (x.topk(3, 1), x.topk(2, 1, largest=False)), [nan_row()], core=False),
    Case("topk_int", lambda x: x.topk(2), [torch.tensor([[5, 1, 9, 3], [2, 8, 0, 7]])], tol="exact", core=False),
    Case("topk_k0", lambda x: x.topk(0), [randn(2, 4)], core=False),
    Case("kthvalue", lambda x: (x.kthvalue(2), x.kthvalue(3, 0, keepdim=True)), [randn(4, 5)], core=False),
    Case("kthvalue_nan", lambda x: x.kthvalue(6, 1), [nan_row()], core=False),
    Case("median", lambda x: (x.median(), x.median(1), x.median(0, keepdim=True)), [randn(3, 5)], core=False),
    Case("median_even", lambda x: (x.median(), x.median(1)), [randn(2, 4)], core=False),
    Case("median_nan", lambda x: (x.median(1), x.nanmedian(1), x.nanmedian()), [nan_row()], core=False),
    Case("median_int", lambda x: x.median(1), [torch.tensor([[5, 1, 9, 3, 4], [2, 8, 0, 7, 6]])], tol="exact", core=False),
    Case("searchsorted", lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True)), [torch.tensor([1.0, 2.0, 2.0, 3.0, 5.0]), torch.tensor([[0.0, 2.0, 2.5], [5.0, 6.0, nan]])], tol="exact", core=False),
    Case("searchsorted_side_int32", lambda s, v: torch.searchsorted(s, v, side="right", out_int32=True), [torch.tensor([1.0, 2.0, 2.0, 3.0]), torch.tensor([2.0, 0.0, 9.0])], tol="exact", core=False),
    Case("searchsorted_nd", lambda s, v: torch.searchsorted(s, v), [torch.tensor([[1.0, 3.0, 5.0], [0.0, 0.5, 1.0]]), torch.tensor([[2.0, 5.0], [0.75, -1.0]])], tol="exact", core=False),
    Case("searchsorted_sorter", lambda s, v, o: torch.searchsorted(s, v, sorter=o), [torch.tensor([3.0, 1.0, 2.0]), torch.tensor([1.5, 2.5, 0.0]), torch.tensor([1, 2, 0])], tol="exact", core=False),
    Case("bucketize", lambda v, b: (torch.bucketize(v, b), torch.bucketize(v, b, right=True)), [torch.tensor([[0.0, 1.0], [2.5, 9.0]]), torch.tensor([1.0, 2.0, 3.0])], tol="exact", core=False),
    Case("sort_long", lambda x: (x.sort(dim=1, stable=True), x.sort(dim=1, descending=True, stable=True)), [long_rows()], tol="exact", core=False),
    # Distinct values: torch's topk / kthvalue / median pick any of tied elements' indices.
    Case("order_stats_long", lambda x: (x.topk(5, 1), x.topk(4, 1, largest=False), x.kthvalue(300, 1), x.median(1), x.nanmedian()),
         [torch.randperm(2000, generator=torch.Generator().manual_seed(9)).to(torch.float32).reshape(2, 1000) / 7], tol="exact", core=False),
    Case("sort_long_int_dim0", lambda x: x.sort(dim=0, descending=True, stable=True), [randint(-100, 100, 600, 2, seed=8)], tol="exact", core=False),
    Case("sort_misc_dtypes", lambda a, b, s, v: (a.sort(dim=0, descending=True, stable=True), (b > 0).argsort(dim=1, descending=True, stable=True),
                                                 (a * 16 + torch.arange(15, dtype=torch.int32).reshape(5, 3)).topk(3, 0), b.t().kthvalue(2, 0, keepdim=True), torch.searchsorted(s, v, right=True)),
         [randint(-4, 4, 5, 3, seed=21, dtype=torch.int32), randn(3, 6, seed=22), torch.tensor([-3, 0, 0, 2, 7]), torch.tensor([[0, 7], [-5, 2]])],
         tol="exact", core=False),
    Case("median_0d", lambda x: (x.median(), x.median(0), x.sort(), x.topk(1)), [torch.tensor(2.5)], core=False),
]


# --- issue 16: unique (data-dependent lengths) and mode
nan = float("nan")


def _unique(x, y, z):
    a, inv, cnt = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
    c, ci, cc = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
    d, di, dc = torch.unique(z, dim=1, return_inverse=True, return_counts=True)
    e, ei, ec = torch.unique_consecutive(z.t(), dim=0, return_inverse=True, return_counts=True)
    return a, inv, cnt, torch.unique(y), c, ci, cc, d, di, dc, e, ei, ec


def _mode(x, y, i):
    return torch.mode(x), torch.mode(x, 0, keepdim=True), torch.mode(y.t(), 1), torch.mode(i), torch.mode(torch.tensor(3.0))


CASES += [
    Case("unique", _unique, [randint(0, 5, 3, 4, seed=40).float(), torch.tensor([2.0, nan, 1.0, nan, 2.0]),
                             randint(0, 2, 2, 6, seed=41)], core=False, tol="exact"),
    Case("unique_core", lambda x: torch.unique(x, return_counts=True), [randint(0, 5, 3, 4, seed=40)], training=False),
    Case("mode", _mode, [randint(0, 3, 4, 5, seed=42).float(), randint(-2, 2, 6, 3, seed=43).float(), randint(0, 4, 2, 7, seed=44)], tol="exact"),
]


# --- issue 16: unique on the GPU (tests/ops_gpu.rs `unique_cases_run_on_gpu_kernels`): each
# flag combination, empty / all-equal / NaN / signed-zero / non-contiguous / integer / bool
# inputs, dims 0, 1, -1, and lanes past the GPU sort's workgroup width and the scan's block.
def _unique_flags(x):
    outs = []
    for inv in (False, True):
        for cnt in (False, True):
            outs += list(torch.unique(x, return_inverse=inv, return_counts=cnt)) if inv or cnt else [torch.unique(x)]
            outs += list(torch.unique_consecutive(x, return_inverse=inv, return_counts=cnt)) if inv or cnt else [torch.unique_consecutive(x)]
    return tuple(outs)


def _unique_all(x):
    return torch.unique(x, return_inverse=True, return_counts=True) + torch.unique_consecutive(x, return_inverse=True, return_counts=True)


def _unique_dims(x):
    outs = []
    for d in (0, 1, -1):
        outs += list(torch.unique(x, dim=d, return_inverse=True, return_counts=True))
        # A nonnegative dim: torch's meta of unique_consecutive with dim=-1 gives [4, 3, ?, 4, 3, 2] for [4, 3, 2].
        outs += list(torch.unique_consecutive(x, dim=d % x.dim(), return_inverse=True, return_counts=True))
    outs += [torch.unique(x, dim=0), torch.unique(x, dim=1, return_counts=True)[1]]
    return tuple(outs)


def _signed_zeros():
    return torch.tensor([[0.0, -0.0, nan, 1.5, -2.0], [1.5, nan, 0.0, -inf, -0.0], [inf, -2.0, 3.0, nan, 0.0]])


def _unique_long():
    x = randint(-40, 40, 1300, seed=45).to(torch.float32)
    x[::101] = nan
    return x


CASES += [
    Case("unique_flags", _unique_flags, [_signed_zeros()], tol="exact", core=False),
    Case("unique_empty", _unique_all, [torch.zeros(0, 3)], tol="exact", core=False),
    Case("unique_all_equal", _unique_all, [torch.full((4, 5), 2.5)], tol="exact", core=False),
    Case("unique_noncontig", lambda x: _unique_all(x.t()[1:]), [randint(0, 4, 3, 5, seed=46).float()], tol="exact", core=False),
    Case("unique_ints", lambda a, b: _unique_all(a) + _unique_all(b) + _unique_all(a > 0),
         [randint(-3, 3, 4, 6, seed=47), randint(-5, 5, 17, seed=48, dtype=torch.int32)], tol="exact", core=False),
    # torch orders the NaNs of a long input among themselves as its sort happens to (not by
    # position): their inverse is checked where the input has none.
    Case("unique_long", lambda x: torch.unique(x, return_counts=True) + torch.unique_consecutive(x, return_inverse=True, return_counts=True)
         + _unique_all(torch.nan_to_num(x, nan=7.5)), [_unique_long()], tol="exact", core=False),
    Case("unique_dims", _unique_dims, [randint(0, 2, 4, 3, 2, seed=49).float()], tol="exact", core=False),
    Case("unique_dims_int", lambda x: _unique_dims(x) + _unique_dims(x.transpose(0, 2)),
         [randint(0, 2, 3, 5, 2, seed=50, dtype=torch.int32)], tol="exact", core=False),
    Case("unique_dim_long", lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True),
         [randint(0, 3, 300, 3, seed=51)], tol="exact", core=False),
    Case("unique_private", lambda x: torch._unique(x, sorted=True, return_inverse=True), [randint(0, 5, 3, 4, seed=52)], tol="exact", core=False),
    Case("unique_long_slices", unique_long_slices, [ONE], tol="exact", core=False),
]
