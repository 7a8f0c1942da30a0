"""Out-of-range indices: every gather / scatter-style op with an index too large and one too
negative, where eager torch raises; the case records torch's error, which the runtime must
give too on every backend (tests/ops.rs, tests/ops_gpu.rs). A few `_ok` cases run the same
program with valid indices: on the GPU the session that raised runs them next
(tests/ops_gpu.rs::index_faults_fail_the_run_and_the_session_recovers).

Indices pass through `on_device` (+ 1 - 1; the graph passes drop a lone + 0) so that on the
GPU they are computed there:
the host cannot check them, the kernels must (src/gpu/fault.rs). `embedding_direct` reads
its program input as it is."""
import torch
import torch.nn.functional as F

from .case import Case, randn

x34 = randn(3, 4)
w53 = randn(5, 3, seed=1)


def t(*v):
    return torch.tensor(v)


def on_device(i):
    return i + 1 - 1


def embedding(w, i):
    return F.embedding(on_device(i), w)


def embedding_direct(w, i):
    return F.embedding(i, w)


class EmbeddingModule(torch.nn.Module):
    """An embedding table as a parameter: `--weights int8` quantizes it at load
    (tests/ops_gpu.rs::quantized_embedding_faults_on_the_gpu)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(6, 8)
        with torch.no_grad():
            self.emb.weight.copy_(randn(6, 8, seed=4))

    def forward(self, i):
        return self.emb(on_device(i))


def embedding_bag(w, i, offsets):
    return F.embedding_bag(on_device(i), w, offsets, mode="sum")


def index_select(x, i):
    return torch.index_select(x, 1, on_device(i))


def gather(x, i):
    return torch.gather(x, 1, on_device(i))


def index_1(x, i):
    return x[on_device(i)]


def index_2(x, i, j):
    return x[on_device(i), on_device(j)]


def take(x, i):
    return torch.take(x, on_device(i))


def scatter(x, i, s):
    return x.scatter(1, on_device(i), s)


def scatter_add(x, i, s):
    return x.scatter_add(1, on_device(i), s)


def scatter_reduce(x, i, s):
    return x.scatter_reduce(1, on_device(i), s, "amax", include_self=True)


def index_put(x, i, v):
    return x.index_put((on_device(i),), v)


def index_put_acc(x, i, v):
    return x.index_put((on_device(i),), v, accumulate=True)


def index_add(x, i, s):
    return x.index_add(1, on_device(i), s)


def index_copy(x, i, s):
    return x.index_copy(1, on_device(i), s)


def index_fill(x, i):
    return x.index_fill(1, on_device(i), -1.0)


def searchsorted(s, v, o):
    return torch.searchsorted(s, v, sorter=on_device(o))


s32 = randn(3, 2, seed=2)
s4 = t(3.0, 1.0, 2.0, 4.0)
v3 = t(1.5, 2.5, 0.0)
r4 = randn(2, 4, seed=3)

# (name, fn, inputs with an index too large, the same too negative, valid inputs or None)
OPS = [
    ("embedding", embedding, [w53, t(1, 5)], [w53, t(-1, 2)], [w53, t(4, 0)]),
    ("embedding_direct", embedding_direct, [w53, t(7, 0)], [w53, t(0, -6)], [w53, t(1, 2)]),
    ("embedding_module", EmbeddingModule(), [t(1, 6)], [t(-7, 0)], [t(5, 0)]),
    ("embedding_bag", embedding_bag, [w53, t(0, 5, 1), t(0, 2)], [w53, t(0, -1, 1), t(0, 2)], None),
    ("index_select", index_select, [x34, t(0, 4)], [x34, t(-5, 1)], None),
    ("gather", gather, [x34, t([0, 4], [1, 1], [2, 2])], [x34, t([0, 1], [-1, 1], [2, 2])], None),
    ("index_1", index_1, [x34, t(0, 3)], [x34, t(-4, 1)], [x34, t(2, -3)]),
    ("index_2", index_2, [x34, t(0, 1), t(4, 0)], [x34, t(-4, 1), t(0, 0)], None),
    ("take", take, [x34, t(0, 12)], [x34, t(-13, 0)], None),
    ("scatter", scatter, [x34, t([0, 4], [1, 1], [2, 2]), s32], [x34, t([0, 1], [-1, 1], [2, 2]), s32], None),
    ("scatter_add", scatter_add, [x34, t([0, 4], [1, 1], [2, 2]), s32], [x34, t([0, 1], [-1, 1], [2, 2]), s32],
     [x34, t([0, 3], [1, 1], [2, 2]), s32]),
    ("scatter_reduce", scatter_reduce, [x34, t([0, 4], [1, 1], [2, 2]), s32], [x34, t([0, 1], [-1, 1], [2, 2]), s32], None),
    ("index_put", index_put, [x34, t(0, 3), r4], [x34, t(-4, 1), r4], [x34, t(0, -1), r4]),
    ("index_put_acc", index_put_acc, [x34, t(3, 1), r4], [x34, t(1, -4), r4], None),
    ("index_add", index_add, [x34, t(0, 4), s32], [x34, t(-1, 0), s32], None),
    ("index_copy", index_copy, [x34, t(4, 0), s32], [x34, t(0, -1), s32], None),
    ("index_fill", index_fill, [x34, t(0, 4)], [x34, t(-5, 0)], None),
    ("searchsorted", searchsorted, [s4, v3, t(1, 2, 0, 4)], [s4, v3, t(1, -1, 0, 3)], [s4, v3, t(1, 2, 0, 3)]),
]

CASES = []
for name, fn, hi, lo, ok in OPS:
    # searchsorted has no core ATen decomposition to export (as in sort.py).
    core = name != "searchsorted"
    CASES.append(Case(f"{name}_hi", fn, hi, tol="exact", raises=True, core=core))
    CASES.append(Case(f"{name}_lo", fn, lo, tol="exact", raises=True, core=core))
    if ok is not None:
        CASES.append(Case(f"{name}_ok", fn, ok, tol="exact", core=core))
