"""Index family: embedding, advanced indexing (index.Tensor / index_put), index_select,
gather, scatter (all reductions), index_add/copy/fill, take, masked_select.

Related ops share a case (several outputs) to keep the fixture small. src/ops/index/tests.rs
reruns some of these programs with out-of-range indices, so keep their names and inputs."""
import torch

nan = float("nan")
import torch.nn.functional as F

from .case import ONE, Case, long_ints, randn, randint

x34 = randn(3, 4)
x234 = randn(2, 3, 4, seed=1)
i34 = randint(-50, 50, 3, 4, seed=3)
h34 = randn(3, 4, seed=5, dtype=torch.float16)
idx = torch.tensor([2, 0, -1])


class Emb(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4, padding_idx=0)
        with torch.no_grad():
            self.emb.weight.copy_(randn(10, 4, seed=9))

    def forward(self, ids):
        return self.emb(ids)


def _index_more(y, x, i34_, h, a, b, c, d, r, e):
    return (
        y[:, torch.tensor([[0, 2], [1, -3]])],
        y[:, a, b],  # adjacent index tensors: the result keeps their place
        y[c, :, b],  # separated: the broadcast dims go first
        x[d, r],  # broadcast index tensors
        i34_[torch.tensor([2, 0, -1]), 1:],
        x.t()[torch.tensor([3, 1])],
        h[:, torch.tensor([2, 0, -1])],
        x[e],
    )


def _index_mask(x, m, mr):
    return x[m], x[mr]


def _nonzero(x, y):
    z = torch.where(x.abs() < 0.5, 0.0, x)
    return torch.nonzero(z), torch.argwhere(y > 0), torch.nonzero(z[:, 1:].t() < 0), torch.nonzero(x > 100)


def _masked_select_big(x, y):
    return torch.masked_select(x, y > 0), x.t()[(x > 0.3).t()], x[x > 100], x[:, y < 0]


def _index_put(x, i, v, j, k, cols, w, acc_i, acc_v):
    a = x.clone()
    a[i] = v
    b = x.clone()
    b[torch.tensor([1])] = 5.0
    c = x.clone()
    c[j, k] = -1.0
    d = x.clone()
    d[:, cols] = w
    return a, b, c, d, torch.index_put(x, (acc_i,), acc_v, accumulate=True)


def _index_put_mask(x):
    y = x.clone()
    y[y > 0] = 0.0
    return y


def _scatter(z, i, s, z3, o, r):
    y = z.clone()
    y.scatter_(1, i, r)
    return (
        torch.scatter(z, 1, i, s),
        torch.scatter(z3, 0, i, 7.5),
        torch.scatter(o, 1, i, s, reduce="add"),
        torch.scatter(o * 2, 1, i, s, reduce="multiply"),
        y,
    )


def _scatter_reduce(x, i, s):
    return tuple(torch.scatter_reduce(x, 1, i, s, r, include_self=inc) for r in ["sum", "prod", "mean", "amax", "amin"] for inc in [True, False])


def _index_add(x, i, s, j, t, k, u):
    y = x.clone()
    y.index_add_(0, k, u)
    return torch.index_add(x, 0, i, s), torch.index_add(x, 1, j, t, alpha=-2.0), y


def _index_copy_fill(x, i, s, j, n, m):
    return torch.index_copy(x, 1, i, s), torch.index_fill(x, 1, j, -3.0), n.index_fill(0, m, 9)


def _index_copy_inplace(x, i, s, c, p, v):
    # In place (training IR keeps index_copy_): entries along dim 1; a cache-like [1, 2, 6, 4]
    # update at one position from a non-contiguous source.
    y = x.clone()
    y.index_copy_(1, i, s)
    z = c.clone()
    z.index_copy_(2, p, v.transpose(2, 3))
    return y, z


def _scatter_dups(z, i, s):
    # Many sources per target: the GPU kernels must combine them in source order.
    return (torch.scatter_add(z, 0, i, s), torch.scatter_reduce(z, 0, i, s, "mean", include_self=False),
            torch.scatter_reduce(z, 0, i, s, "amax"))


def _index_put_more(y, c, b, w, z, k, v, n, j, u):
    a = y.clone()
    a[c, :, b] = w  # separated index tensors: the broadcast dims lead the values
    return a, torch.index_put(z, (k,), v, accumulate=True), torch.index_add(n, 1, j, u, alpha=2)


def _scatter_views(x, i, s, m, b, k, w):
    y = x.clone()
    y.t().index_put_((k,), w)  # in place through a transposed view
    bb = b.clone()
    bb[k] = torch.tensor(True)  # bool values, broadcast
    return (torch.scatter(x.t(), 0, i, s), torch.scatter_reduce(m, 1, i, s, "amin", include_self=True),
            y, bb, torch.index_fill(x.t(), 0, torch.tensor([-1, 0]), float("nan")))


nan_src = torch.tensor([[1.0, float("nan"), 3.0, -2.0], [0.5, 2.0, -1.0, 4.0]])
sc_index = torch.tensor([[0, 1, 0, 2], [2, 2, 1, 0]])


def index_long_loops(w, n):
    """One invocation walks 70,000 entries (past lavapipe's loop cap, issue 17): an
    embedding_bag's bag (sum, mean, max), scatter_add's index along dim and an accumulating
    index_put's entries; ids and values made in the program."""
    ids = (long_ints(n, 70_000, 10, 0)).long()
    offsets = torch.tensor([0, 5])
    vals = long_ints(n, 70_000)
    return (F.embedding_bag(ids, w, offsets, mode="sum"), F.embedding_bag(ids, w, offsets, mode="mean"),
            F.embedding_bag(ids, w, offsets, mode="max"),
            torch.zeros(1, 4).scatter_add(1, (ids % 4).reshape(1, 70_000), vals.reshape(1, 70_000)),
            torch.zeros(4).index_put((ids % 4,), vals, accumulate=True))


CASES = [
    Case("embedding", Emb(), [torch.tensor([[1, 0, 9], [3, 3, 2]])]),
    Case("embedding_fn", lambda w, i: F.embedding(i, w), [randn(6, 3), torch.tensor([5, 0, 2, 2])]),
    Case("embedding_i32", lambda w, i: F.embedding(i, w), [randn(6, 3), torch.tensor([[5, 1]], dtype=torch.int32)]),
    # --- advanced indexing
    Case("index_1d", lambda x, i: x[i], [x34, idx]),
    Case("index_dim1", lambda x, i: x[:, i], [x34, idx]),
    Case("index_more", _index_more, [x234, x34, i34, h34, torch.tensor([0, 2, 1]), torch.tensor([3, 0, -1]), torch.tensor([[0], [1]]),
                                     torch.tensor([[0], [2]]), torch.tensor([1, 3]), torch.tensor([], dtype=torch.int64)]),
    Case("index_mask", _index_mask, [x34, x34 > 0, torch.tensor([True, False, True])]),
    Case("index_put", _index_put, [x34, torch.tensor([0, 2]), randn(2, 4, seed=3), torch.tensor([0, 2, 2]), torch.tensor([1, 0, 3]),
                                   torch.tensor([3, 1]), randn(3, 2, seed=8), torch.tensor([0, 2, 0, 0]), randn(4, 4, seed=8)]),
    Case("index_put_mask", _index_put_mask, [x34]),
    # --- index_select / gather / take / masked_select
    Case("index_select", lambda x, i: torch.index_select(x, 1, i), [x34, torch.tensor([2, 0, 3])]),
    Case("index_select_more", lambda y, i, n, j: (torch.index_select(y, -3, i), torch.index_select(n, 0, j)),
         [x234, torch.tensor([1, 1, 0]), i34, torch.tensor([2, 0], dtype=torch.int32)]),
    Case("gather", lambda x, i: torch.gather(x, 1, i), [x34, torch.tensor([[0, 0], [3, 1], [2, 3]])]),
    Case("gather_more", lambda x, i, j: (torch.gather(x, 0, i), torch.gather(x.t(), 0, j)),
         [x34, torch.tensor([[0, 1, 2, 0], [2, 2, 1, 1]]), torch.tensor([[0, 1, 2], [3, 3, 0]])]),
    Case("take", lambda x, i: torch.take(x, i), [x34, torch.tensor([[0, 11], [-1, 5]])]),
    Case("masked_select", lambda x, m: torch.masked_select(x, m), [x34, torch.tensor([True, False, True, True])], core=False),
    # Several blocks of 256 for the GPU's count / scan / emit passes: a broadcast mask, a
    # strided mask computed in the graph, and an empty selection.
    Case("nonzero", _nonzero, [randn(5, 4, seed=7), randint(-2, 3, 3, 2, 4, seed=8)]),
    Case("masked_select_big", _masked_select_big, [randn(37, 29, seed=5), randn(29, seed=6)], core=False),
    # --- scatter
    Case("scatter", _scatter, [torch.zeros(2, 5), sc_index, nan_src, torch.zeros(3, 4), torch.ones(2, 5), randn(2, 4)]),
    Case("scatter_add", lambda x, i, s: torch.scatter_add(x, 1, i, s), [torch.ones(2, 3), sc_index, randn(2, 4)]),
    Case("scatter_add_dtypes", lambda x, i, s, h, t: (torch.scatter_add(x, 0, i, s), torch.scatter_add(h, 1, i, t)),
         [torch.zeros(3, 4, dtype=torch.int64), sc_index, i34[:2], torch.ones(2, 3, dtype=torch.float16), randn(2, 4, dtype=torch.float16)]),
    Case("scatter_reduce", _scatter_reduce, [randn(2, 3, seed=11), sc_index, nan_src]),
    Case("scatter_reduce_int", lambda x, i, s: (torch.scatter_reduce(x, 0, i, s, "mean"), torch.scatter_reduce(x, 0, i, s, "amax", include_self=False)),
         [i34, sc_index, -i34[:2]]),
    # --- index_add / copy / fill
    Case("index_add", _index_add, [x34, torch.tensor([0, 2, 0]), randn(3, 4, seed=2), torch.tensor([3, 3]), randn(3, 2, seed=2),
                                   torch.tensor([1, 1]), randn(2, 4, seed=4)]),
    Case("index_copy_fill", _index_copy_fill, [x34, torch.tensor([3, 0]), randn(3, 2, seed=2), torch.tensor([1, -1]), i34, torch.tensor([2])]),
    Case("index_copy_inplace", _index_copy_inplace, [x34, torch.tensor([3, 0]), randn(3, 2, seed=2), torch.zeros(1, 2, 6, 4),
                                                     torch.tensor([4]), randn(1, 2, 4, 1, seed=5)]),
    Case("scatter_dups", _scatter_dups, [torch.zeros(4, 3), randint(0, 4, 300, 3, seed=12), randn(300, 3, seed=13)]),
    Case("index_put_more", _index_put_more, [x234, torch.tensor([[0], [1]]), torch.tensor([3, 0, -1]), randn(2, 3, 3, seed=14),
                                             torch.zeros(5, 3), randint(-5, 5, 200, seed=15), randn(200, 3, seed=16),
                                             i34, torch.tensor([0, 3, 0]), randint(-9, 9, 3, 3, seed=17)], core=False),
    Case("scatter_views", _scatter_views, [randn(4, 3, seed=18), torch.tensor([[2, 0], [1, 1]]), randn(2, 2, seed=19),
                                           torch.tensor([[nan, 1.0, -2.0], [0.5, 0.0, 3.0]]), torch.zeros(3, 4, dtype=torch.bool),
                                           torch.tensor([2, 0]), randn(4, seed=20)], core=False),
    Case("index_fill_tensor", lambda x, j, v: (torch.index_fill(x, 0, j, v), x.clone().index_fill_(1, j, v)),
         [x34, torch.tensor([2, -3]), torch.tensor(2.5)]),
]


# --- issue 16: index_reduce, put, masked_scatter, nonzero_static, embedding_bag, 0-d index_select
def _index_reduce(x, i, s, j, s2, xi, si, e, se):
    return (
        x.index_reduce(0, i, s, "prod"),
        x.index_reduce(0, i, s, "mean", include_self=False),
        x.t().index_reduce(1, i, s.t(), "amax"),  # non-contiguous self and source
        x.index_reduce(1, j, s2, "amin", include_self=False),
        xi.index_reduce(0, i, si, "mean"),  # integers: floor division
        xi.index_reduce(0, i, si, "amax", include_self=False),
        x.index_reduce(0, e, se, "prod"),  # empty index
    )


def _put(x, i, s, j, v):
    return x.put(i, s), x.put(j, v, accumulate=True), x.t().put(i, s), x.clone().put_(j, v)


def _masked_scatter(x, m, s, r):
    return x.masked_scatter(m, s), x.masked_scatter(m[0], s), x.t().masked_scatter(m.t(), s), r.masked_scatter(m, s)


def _nonzero_static(x):
    z = torch.where(x.abs() < 0.5, 0.0, x)
    return (torch.nonzero_static(z, size=3), torch.nonzero_static(z, size=20, fill_value=-7),
            torch.nonzero_static(z.t(), size=0), torch.nonzero_static(z[:0], size=2))


def _embedding_bag(w, ids, offs, psw, ids2):
    return (
        F.embedding_bag(ids, w, offs, mode="sum"),
        F.embedding_bag(ids, w, offs, mode="mean"),
        F.embedding_bag(ids, w, offs, mode="max"),
        F.embedding_bag(ids, w, offs, mode="sum", per_sample_weights=psw),
        F.embedding_bag(ids, w, offs, mode="mean", include_last_offset=True),
        F.embedding_bag(ids, w, offs, mode="mean", padding_idx=2),
        F.embedding_bag(ids2, w, mode="max"),  # 2-D indices: one bag per row
        F.embedding_bag(ids[:0], w, offs[:1], mode="sum"),  # an empty bag
    )


def _masked_scatter_more(x, m, s, xi, mi, si, col):
    return (
        x.masked_scatter(m, s.t()),  # a non-contiguous source (read in row-major order)
        x.masked_scatter(col, s),  # a [rows, 1] mask broadcast along the columns
        x[:, ::2].masked_scatter(m[:, ::2], s),  # strided self and mask
        x.masked_scatter(torch.zeros_like(m), s[:0]),  # nothing masked, an empty source
        xi.masked_scatter(mi, si),  # int64
        mi.masked_scatter(m, mi),  # bool values
        x[:0].masked_scatter(m[:0], s),  # empty self
    )


def _masked_scatter_blocks(x, m, s):
    # 37 x 19 elements: the rank of a masked element crosses the shader's 256-element blocks.
    return x.masked_scatter(m, s), x.t().masked_scatter(m.t(), s)


def _embedding_bag_outputs(w, wt, ids, offs, psw):
    """All four outputs of _embedding_bag (offset2bag, bag_size, max_indices as torch's CPU
    kernel gives them): empty bags (offsets 2, 2 and 9, 9), integer-valued rows for ties in
    max mode, padding_idx, include_last_offset (trailing indices 9, 10 in no bag)."""
    bag = torch.ops.aten._embedding_bag
    return (
        bag(w, ids, offs, False, 0),
        bag(w, ids, offs, False, 1),
        bag(wt, ids, offs, False, 2),
        bag(w, ids, offs, False, 0, False, psw),
        bag(w, ids, offs, False, 1, False, None, True),
        bag(w, ids, offs, False, 0, False, None, False, 2),
        bag(wt, ids, offs, False, 2, False, None, True, 4),
        bag(w.t().contiguous().t(), ids, offs, False, 1, False, None, False, 4),
    )


def _embedding_bag_module(w, ids, offs, psw):
    return (
        F.embedding_bag(ids, w.t(), offs, mode="max", padding_idx=0),  # a strided weight
        # A strided weight leaves torch's offsets kernel (the trailing indices join the last bag).
        F.embedding_bag(ids, w.t(), offs, mode="mean", include_last_offset=True),
        F.embedding_bag(ids, w.t().contiguous(), offs, mode="sum", per_sample_weights=psw, include_last_offset=True),
    )


CASES += [
    Case("masked_scatter_more", _masked_scatter_more,
         [x34, randn(3, 4, seed=40) > 0, randn(4, 3, seed=41), i34, randn(3, 4, seed=42) > 0,
          randint(-9, 9, 12, seed=43), torch.tensor([[True], [False], [True]])]),
    Case("masked_scatter_blocks", _masked_scatter_blocks,
         [randn(37, 19, seed=44), randn(37, 19, seed=45) > -0.3, randn(37 * 19, seed=46)]),
    Case("embedding_bag_outputs", _embedding_bag_outputs,
         [randn(6, 3, seed=47), randint(-2, 3, 6, 3, seed=48).float(),
          torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 2, 1, 3]), torch.tensor([0, 2, 2, 5, 9, 9]),
          randn(11, seed=49)]),
    Case("embedding_bag_strided", _embedding_bag_module,
         [randn(5, 8, seed=50), randint(0, 8, 10, seed=51), torch.tensor([0, 4, 4, 7]), randn(10, seed=52)]),
]

CASES += [
    Case("index_reduce", _index_reduce, [x34, torch.tensor([0, 2, 0, 2, 1]), randn(5, 4, seed=21), torch.tensor([3, 3, 0]),
                                         randn(3, 3, seed=22), i34, randint(-50, 50, 5, 4, seed=23),
                                         torch.zeros(0, dtype=torch.int64), randn(0, 4)]),
    Case("put", _put, [x34, torch.tensor([0, -1, 5, 7]), randn(4, seed=24), torch.tensor([[1, 1], [11, 1]]), randn(2, 2, seed=25)]),
    Case("masked_scatter", _masked_scatter, [x34, randn(3, 4, seed=26) > 0, randn(12, seed=27), randn(4, seed=28)]),
    Case("nonzero_static", _nonzero_static, [randn(3, 4, seed=29)]),
    Case("embedding_bag", _embedding_bag, [randn(10, 4, seed=30), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 2]),
                                           torch.tensor([0, 3, 3, 7]), randn(9, seed=31), randint(0, 10, 3, 4, seed=32)]),
    Case("index_select_0d", lambda x, i: torch.index_select(x, 0, i), [torch.tensor(2.5), torch.tensor([0])]),
]


# --- issue 16 (GPU): nonzero_static over int, bool and strided inputs, counts past one
# 256-element block, sizes below and above the count
def _nonzero_static_dtypes(a, b, m):
    return (torch.nonzero_static(a, size=5), torch.nonzero_static(b, size=30, fill_value=4),
            torch.nonzero_static(m, size=8), torch.nonzero_static(a.permute(2, 0, 1), size=40, fill_value=0),
            torch.nonzero_static(b, size=600))


CASES += [
    Case("nonzero_static_dtypes", _nonzero_static_dtypes,
         [randint(-1, 2, 3, 2, 4, seed=33), randint(0, 3, 700, seed=34, dtype=torch.int32), randn(10, seed=35) > 0]),
    Case("index_long_loops", index_long_loops, [randint(-4, 5, 10, 3).float(), ONE], tol="exact", core=False),
]
