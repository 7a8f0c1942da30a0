"""Empty and 0-d tensors through every op family (issue 17 item 7): each op of the lists below
meets inputs with a zero-sized dimension ([0, 3], [2, 0, 3], an empty batch) and 0-d inputs.
An op is kept for an input where eager PyTorch accepts it and torch.export exports it
(`accepted`); where torch raises, the op is left out and its error is listed in `TORCH_RAISES`
(printed by `python -m ops.empty` from tests/fixgen), since a program whose example input
raises cannot be exported. Accepted ops of one input share a program (up to `PER_CASE`
outputs) to keep the fixture small; a failure names the output index, `note` names the ops.
Expected values come from eager PyTorch (gen_op_cases.py)."""
import warnings

import torch
import torch.nn.functional as F

from .case import Case, randint, randn

PER_CASE = 10

# One input: elementwise, activations, reductions, scans, sorting, shapes and indexing.
UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p,
    "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "atan": torch.atan, "tanh": torch.tanh,
    "asinh": torch.asinh, "erf": torch.erf, "erfinv": torch.erfinv, "sigmoid": torch.sigmoid,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "frac": torch.frac, "sign": torch.sign, "square": torch.square, "relu": F.relu, "gelu": F.gelu,
    "silu": F.silu, "elu": F.elu, "leaky_relu": F.leaky_relu, "softplus": F.softplus,
    "hardswish": F.hardswish, "mish": F.mish, "clamp": lambda x: x.clamp(-0.5, 0.5),
    "pow": lambda x: x.pow(2), "nan_to_num": torch.nan_to_num, "isnan": torch.isnan,
    "isinf": torch.isinf, "logical_not": torch.logical_not, "lgamma": torch.lgamma,
    "digamma": torch.digamma, "affine": lambda x: x * 2 + 1, "to_int": lambda x: x.to(torch.int64),
    "to_half": lambda x: x.to(torch.float16), "gt": lambda x: x > 0,
    "where": lambda x: torch.where(x > 0, x, 0.0), "clone": torch.clone,
    "zeros_like": torch.zeros_like, "full_like": lambda x: torch.full_like(x, 3.0),
    "i0": torch.special.i0, "ndtr": torch.special.ndtr, "xlogy": lambda x: torch.xlogy(x, 2.0),
}
REDUCE = {
    "sum": torch.sum, "sum0": lambda x: x.sum(0), "sum_last": lambda x: x.sum(-1),
    "sum_keep": lambda x: x.sum(-1, keepdim=True), "mean": torch.mean, "mean0": lambda x: x.mean(0),
    "prod": torch.prod, "prod0": lambda x: x.prod(0), "amax_last": lambda x: x.amax(-1),
    "amax0": lambda x: x.amax(0), "amin_last": lambda x: x.amin(-1), "max_last": lambda x: x.max(-1),
    "min0": lambda x: x.min(0), "max": torch.max, "argmax": torch.argmax,
    "argmax_last": lambda x: x.argmax(-1), "argmin0": lambda x: x.argmin(0), "var": torch.var,
    "var0": lambda x: x.var(0), "std_last": lambda x: x.std(-1), "norm": torch.norm,
    "norm_last": lambda x: torch.linalg.vector_norm(x, dim=-1), "logsumexp_last": lambda x: x.logsumexp(-1),
    "logsumexp0": lambda x: x.logsumexp(0), "any": torch.any, "all0": lambda x: (x > 0).all(0),
    "count_nonzero": torch.count_nonzero, "nansum": torch.nansum, "aminmax": lambda x: torch.aminmax(x),
    "softmax_last": lambda x: x.softmax(-1), "softmax0": lambda x: x.softmax(0),
    "log_softmax0": lambda x: x.log_softmax(0), "cumsum0": lambda x: x.cumsum(0),
    "cumsum_last": lambda x: x.cumsum(-1), "cumprod0": lambda x: x.cumprod(0),
    "cummax0": lambda x: x.cummax(0), "logcumsumexp0": lambda x: x.logcumsumexp(0),
    "sort0": lambda x: x.sort(0), "sort_last": lambda x: x.sort(-1, descending=True),
    "argsort0": lambda x: x.argsort(0), "topk0": lambda x: x.topk(0, -1), "median": torch.median,
    "kthvalue1": lambda x: x.kthvalue(1, -1),
}
SHAPE = {
    "reshape": lambda x: x.reshape(-1), "flatten": torch.flatten, "unsqueeze": lambda x: x.unsqueeze(0),
    "squeeze": torch.squeeze, "permute": lambda x: x.permute(*reversed(range(x.dim()))),
    "transpose": lambda x: x.transpose(0, -1), "flip0": lambda x: x.flip(0), "roll": lambda x: x.roll(1, 0),
    "repeat": lambda x: x.repeat(*([2] * x.dim())), "expand": lambda x: x.expand(2, *x.shape),
    "narrow": lambda x: x.narrow(0, 0, 0), "slice_empty": lambda x: x[:0], "step": lambda x: x[::2],
    "cat": lambda x: torch.cat([x, x]), "cat_last": lambda x: torch.cat([x, x], -1),
    "stack": lambda x: torch.stack([x, x]), "split": lambda x: x.split(1, -1),
    "chunk": lambda x: x.chunk(2, -1), "unbind_last": lambda x: x.unbind(-1), "tril": torch.tril,
    "triu": lambda x: torch.triu(x, 1), "pad": lambda x: F.pad(x, (1, 2)),
    "pad_reflect": lambda x: F.pad(x, (1, 1), mode="reflect"),
    "pad_replicate": lambda x: F.pad(x.unsqueeze(0), (1, 1), mode="replicate"),
    "movedim": lambda x: x.movedim(0, -1), "contiguous_t": lambda x: x.transpose(0, -1).contiguous(),
    "index_select": lambda x: x.index_select(-1, torch.tensor([0, 2])),
    "index_select_none": lambda x: x.index_select(0, torch.zeros(0, dtype=torch.int64)),
    "gather": lambda x: x.gather(0, torch.zeros_like(x, dtype=torch.int64)),
    "masked_fill": lambda x: x.masked_fill(x > 0, 0.0), "diag_embed": torch.diag_embed,
    "select_last": lambda x: x.select(-1, 1), "getitem_mask": lambda x: x[x > 0],
    "nonzero": torch.nonzero, "index_mask_sum": lambda x: x[x > 0].sum(),
    "scatter_add": lambda x: torch.zeros(2, x.shape[-1]).scatter_add(0, torch.zeros_like(x, dtype=torch.int64)[:1], x[:1]),
}
UNARY_CASES = [("unary", UNARY), ("reduce", REDUCE), ("shape", SHAPE)]
UNARY_INPUTS = {
    "z03": lambda: randn(0, 3), "z203": lambda: randn(2, 0, 3), "d0": lambda: torch.tensor(-1.5),
    "z40": lambda: randn(4, 0),
}

# Two inputs: broadcasting binary ops, products, and the ops of nn with an empty batch.
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2, "fmod": torch.fmod,
    "remainder": torch.remainder, "eq": torch.eq, "lt": torch.lt, "hypot": torch.hypot,
    "copysign": torch.copysign, "floor_divide": torch.floor_divide,
    "where": lambda x, y: torch.where(x > y, x, y), "lerp": lambda x, y: torch.lerp(x, y, 0.3),
    "addcmul": lambda x, y: torch.addcmul(x, x, y, value=0.5), "logical_and": torch.logical_and,
}
BINARY_INPUTS = {
    "z03_3": lambda: [randn(0, 3), randn(3, seed=1)], "z03_d0": lambda: [randn(0, 3), torch.tensor(2.0)],
    "z01_13": lambda: [randn(0, 1), randn(1, 3, seed=1)], "d0_d0": lambda: [torch.tensor(0.7), torch.tensor(-2.0)],
    "d0_z203": lambda: [torch.tensor(0.7), randn(2, 0, 3, seed=1)],
}
NN = {
    "mm_rows": (lambda a, b: a @ b, [randn(0, 3), randn(3, 4)]),
    "mm_inner": (lambda a, b: a @ b, [randn(2, 0), randn(0, 4)]),
    "mm_cols": (lambda a, b: a @ b, [randn(2, 3), randn(3, 0)]),
    "bmm_batch": (torch.bmm, [randn(0, 2, 3), randn(0, 3, 4)]),
    "bmm_inner": (torch.bmm, [randn(2, 2, 0), randn(2, 0, 3)]),
    "matmul_vec": (torch.matmul, [randn(0, 3), randn(3)]),
    "dot_empty": (torch.dot, [randn(0), randn(0, seed=1)]),
    "mv_empty": (torch.mv, [randn(2, 0), randn(0)]),
    "outer_empty": (torch.outer, [randn(0), randn(3)]),
    "addmm_inner": (lambda b, a, c: torch.addmm(b, a, c), [randn(4), randn(2, 0), randn(0, 4)]),
    "baddbmm": (lambda b, a, c: torch.baddbmm(b, a, c), [randn(2, 2, 4), randn(2, 2, 0), randn(2, 0, 4)]),
    "einsum": (lambda a, b: torch.einsum("ij,jk->ik", a, b), [randn(2, 0), randn(0, 3)]),
    "linear": (F.linear, [randn(0, 3), randn(4, 3), randn(4)]),
    "linear_0d_batch": (F.linear, [randn(2, 0, 3), randn(4, 3)]),
    "bilinear": (F.bilinear, [randn(0, 3), randn(0, 2), randn(4, 3, 2), randn(4)]),
    "conv1d": (F.conv1d, [randn(0, 2, 5), randn(3, 2, 3)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), [randn(0, 2, 4, 4), randn(3, 2, 3, 3)]),
    "conv_transpose2d": (F.conv_transpose2d, [randn(0, 2, 3, 3), randn(2, 3, 2, 2)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [randn(0, 2, 4, 4)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [randn(0, 2, 4, 4)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 2), [randn(0, 2, 4, 4)]),
    "interpolate": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), [randn(0, 2, 3, 3)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [randn(0, 4), randn(4), randn(4)]),
    "layer_norm_0": (lambda x: F.layer_norm(x, (0,)), [randn(3, 0)]),
    "group_norm": (lambda x: F.group_norm(x, 2), [randn(0, 4, 2, 2)]),
    "batch_norm": (lambda x, m, v: F.batch_norm(x, m, v), [randn(0, 3), randn(3), randn(3).abs()]),
    "rms_norm": (lambda x: F.rms_norm(x, (4,)), [randn(0, 4)]),
    "embedding": (F.embedding, [randint(0, 5, 0), randn(5, 3)]),
    "embedding_2d": (F.embedding, [randint(0, 5, 2, 0), randn(5, 3)]),
    "one_hot": (lambda i: F.one_hot(i, 4), [randint(0, 4, 0)]),
    "sdpa_q0": (F.scaled_dot_product_attention, [randn(1, 2, 0, 4), randn(1, 2, 3, 4), randn(1, 2, 3, 4)]),
    "sdpa_batch0": (F.scaled_dot_product_attention, [randn(0, 2, 3, 4), randn(0, 2, 3, 4), randn(0, 2, 3, 4)]),
    "mse_loss": (F.mse_loss, [randn(0, 3), randn(0, 3)]),
    "cross_entropy": (F.cross_entropy, [randn(0, 4), randint(0, 4, 0)]),
    "cross_entropy_sum": (lambda x, t: F.cross_entropy(x, t, reduction="sum"), [randn(0, 4), randint(0, 4, 0)]),
    "index_put": (lambda x, i, v: x.index_put((i,), v), [randn(4, 3), randint(0, 4, 0), randn(0, 3)]),
    "scatter": (lambda x, i, v: x.scatter(0, i, v), [randn(4, 3), randint(0, 4, 0, 3), randn(0, 3)]),
    "index_add": (lambda x, i, v: x.index_add(0, i, v), [randn(4, 3), randint(0, 4, 0), randn(0, 3)]),
    "bincount": (lambda i: torch.bincount(i, minlength=3), [randint(0, 3, 0)]),
    "int_sum_cumsum": (lambda i: (i.sum(), i.cumsum(0), i.sort(0)[0], i & 3), [randint(0, 9, 0, 2)]),
    "int_0d": (lambda i, j: (i + j, i * 3, i // 2, i.sum(), j.cumsum(0), torch.maximum(i, j)), [torch.tensor(7), torch.tensor(-3)]),
    "bool_0d": (lambda b: (b.logical_not(), b & b, b.sum(), b.any()), [torch.tensor(True)]),
    "half_empty": (lambda x: (x.sum(0), x * 2, x.softmax(-1)), [randn(0, 4, dtype=torch.float16)]),
    "factories": (lambda x: (torch.zeros(0, 3) + x.sum(), torch.arange(0) + 1, torch.full((2, 0), 1.0),
                             torch.eye(0), torch.linspace(0, 1, 0), torch.ones(()) * x.sum()), [randn(2)]),
}

TORCH_RAISES: dict = {}


def accepted(name, fn, inputs):
    """Whether eager PyTorch and torch.export take `fn` on `inputs`; the error where not."""

    class M(torch.nn.Module):
        def forward(self, *a):
            return fn(*a)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            M()(*[a.clone() for a in inputs])
            torch.export.export(M(), tuple(inputs), strict=False)
        return True
    except Exception as e:  # torch's own refusal: record it, leave the op out
        TORCH_RAISES[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return False


def packed(prefix, ops, make_inputs):
    """Cases over the accepted ops of `ops` for one input set, `PER_CASE` ops each."""
    ok = [(n, f) for n, f in ops.items() if accepted(f"{prefix}/{n}", f, make_inputs())]
    cases = []
    for k in range(0, len(ok), PER_CASE):
        part = ok[k:k + PER_CASE]
        fns = [f for _, f in part]
        cases.append(Case(f"{prefix}_{k // PER_CASE}", lambda *a, fns=fns: tuple(f(*a) for f in fns),
                          make_inputs(), note=" ".join(n for n, _ in part)))
    return cases


def build():
    cases = []
    for fam, ops in UNARY_CASES:
        for iname, make in UNARY_INPUTS.items():
            cases += packed(f"{fam}_{iname}", ops, lambda make=make: [make()])
    for iname, make in BINARY_INPUTS.items():
        cases += packed(f"binary_{iname}", BINARY, make)
    for name, (fn, inputs) in NN.items():
        if accepted(name, fn, inputs):
            cases.append(Case(name, fn, inputs, note=name))
    return cases


CASES = build()

if __name__ == "__main__":
    for k, v in sorted(TORCH_RAISES.items()):
        print(f"{k}: {v}")
    print(f"{len(CASES)} cases, {len(TORCH_RAISES)} op/input pairs torch refuses")
