"""matmul family: mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, outer, addr, matmul, linear, einsum."""
import torch
import torch.nn.functional as F

from .case import ONE, Case, long_ints, randn, randint

f16, bf16, f64 = torch.float16, torch.bfloat16, torch.float64


def mm_nan_self(s, a, b):
    # beta == 0: NaN/inf in self must not propagate.
    return torch.addmm(s * float("nan"), a, b, beta=0.0, alpha=2.0)


def addmm_inplace(s, a, b):
    y = s.clone()
    y.addmm_(a, b, beta=0.5, alpha=2.0)
    return y


def baddbmm_inplace(s, a, b):
    y = s.clone()
    y.baddbmm_(a, b, alpha=0.25)
    return y


class FrozenRight(torch.nn.Module):
    """`x @ w` or `addmm(b, x, w)` (GPT-2's Conv1D) with `w` and `b` parameters, then `act`:
    frozen state, past the packed GEMM's size floor (pt2web packs `w` once per session)."""

    def __init__(self, k, n, bias=None, act=None, seed=3):
        super().__init__()
        self.w = torch.nn.Parameter(randn(k, n, seed=seed))
        self.b = None if bias is None else torch.nn.Parameter(randn(*bias, seed=seed + 1))
        self.act = act

    def forward(self, x):
        y = x @ self.w if self.b is None else torch.addmm(self.b, x, self.w)
        return y if self.act is None else self.act(y)



def mm_long_k(n):
    """K past lavapipe's loop cap (issue 17) in every matmul form a software adapter picks:
    the few-row gemv, the scalar 4x4 blocks (N = 3), the vec4 blocks with a bias (K / 4 past
    the cap: K = 270,000) and a batch; integer-valued data keeps every sum exact."""
    a, b = long_ints(n, 1_350_000), long_ints(n, 1_350_000, 5, 2)
    return (a[:200_000].reshape(1, 200_000) @ b[:200_000].reshape(200_000, 1),
            a[:420_000].reshape(6, 70_000) @ b[:210_000].reshape(70_000, 3),
            F.linear(a.reshape(5, 270_000), b[:1_080_000].reshape(4, 270_000), torch.arange(4.0)),
            torch.bmm(a[:840_000].reshape(2, 6, 70_000), b[:280_000].reshape(2, 70_000, 2)))


CASES = [
    # Frozen weights on the packed path: bias [n] and [1, n], a fused activation, mm, and a
    # 3-D input (a view to 2-D and mm in core ATen, matmul in the training IR).
    Case("addmm_frozen_packed", FrozenRight(32, 40, bias=(40,)), [randn(16, 32)], tol="loose"),
    Case("addmm_frozen_row_bias_relu", FrozenRight(24, 36, bias=(1, 36), act=torch.relu), [randn(21, 24)], tol="loose"),
    Case("mm_frozen_packed", FrozenRight(32, 33), [randn(17, 32)], tol="loose"),
    Case("matmul_frozen_3d", FrozenRight(24, 28, seed=5), [randn(2, 15, 24)], tol="loose"),
    Case("linear_module_packed", torch.nn.Linear(40, 36), [randn(2, 9, 40)], tol="loose"),
    # mm
    Case("mm", torch.mm, [randn(3, 4), randn(4, 5, seed=1)], tol="loose"),
    Case("mm_transposed", lambda a, b: torch.mm(a.t(), b.t()), [randn(4, 3), randn(5, 4, seed=1)], tol="loose"),
    Case("mm_strided", lambda a, b: torch.mm(a[:, ::2], b[1:, :]), [randn(5, 8), randn(5, 6, seed=1)], tol="loose"),
    Case("mm_large", torch.mm, [randn(37, 70), randn(70, 33, seed=1)], tol="loose"),
    # Past one 64x64 workgroup tile (the tiled GPU kernel) on every edge, K not a multiple of 16.
    Case("mm_tiles", torch.mm, [randn(130, 45), randn(45, 70, seed=1)], tol="loose"),
    Case("bmm_tiles_transposed", lambda a, b: torch.bmm(a, b.transpose(1, 2)), [randn(2, 67, 33), randn(2, 66, 33, seed=1)], tol="loose"),
    Case("linear_tiles", F.linear, [randn(3, 50, 40), randn(72, 40, seed=1), randn(72, seed=2)], tol="loose"),
    # Few rows (a decode step): the gemv forms, one invocation or one workgroup splitting K per 4
    # outputs (src/gpu/kernels/params.rs GemvForm); K past a 64-wide split and not a multiple of
    # it, N not a multiple of 4, a bias, a batch with a transposed B, f16, alpha and beta.
    Case("linear_decode", F.linear, [randn(1, 1, 130), randn(66, 130, seed=1), randn(66, seed=2)], tol="loose"),
    Case("linear_decode_rows", F.linear, [randn(3, 97), randn(70, 97, seed=1)], tol="loose"),
    Case("bmm_decode_transposed", lambda a, b: torch.bmm(a, b.transpose(1, 2)), [randn(2, 2, 150), randn(2, 9, 150, seed=1)], tol="loose"),
    Case("addmm_decode", lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0), [randn(34), randn(1, 150, seed=1), randn(150, 34, seed=2)], tol="loose"),
    Case("linear_decode_f16", F.linear, [randn(1, 160, dtype=f16), randn(36, 160, seed=1, dtype=f16), randn(36, seed=2, dtype=f16)], tol="half"),
    # matmul4.wgsl's 16x16 block (params.rs matmul4_block) with partial blocks at the edges: N-contiguous
    # B (the last column quad clamped), K-contiguous B in a batch, and beta * C.
    Case("mm_vec4_blocks", torch.mm, [randn(70, 36), randn(36, 132, seed=1)], tol="loose"),
    Case("bmm_vec4_blocks_transposed", lambda a, b: torch.bmm(a, b.transpose(1, 2)), [randn(2, 48, 36), randn(2, 68, 36, seed=1)], tol="loose"),
    Case("addmm_vec4_blocks", lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0), [randn(68), randn(66, 40, seed=1), randn(40, 68, seed=2)], tol="loose"),
    Case("mm_tiles_f16", torch.mm, [randn(65, 24, dtype=f16), randn(24, 66, seed=1, dtype=f16)], tol="half"),
    Case("mm_f64", torch.mm, [randn(3, 4, dtype=f64), randn(4, 5, seed=1, dtype=f64)], tol="close"),
    Case("mm_f16", torch.mm, [randn(3, 8, dtype=f16), randn(8, 5, seed=1, dtype=f16)], tol="half"),
    Case("mm_bf16", torch.mm, [randn(3, 8, dtype=bf16), randn(8, 5, seed=1, dtype=bf16)], tol="half"),
    Case("mm_i64", torch.mm, [randint(-50, 50, 3, 4), randint(-50, 50, 4, 2, seed=1)], tol="exact"),
    Case("mm_i32", torch.mm, [randint(-50, 50, 3, 4, dtype=torch.int32), randint(-50, 50, 4, 2, seed=1, dtype=torch.int32)], tol="exact"),
    Case("mm_empty_k", torch.mm, [randn(3, 0), randn(0, 4)], tol="exact"),
    Case("mm_empty_m", torch.mm, [randn(0, 3), randn(3, 4)], tol="exact"),
    Case("mm_inf_nan", torch.mm, [torch.tensor([[1.0, float("inf")], [float("nan"), 2.0]]), torch.tensor([[1.0, 0.0], [2.0, 3.0]])], tol="loose"),
    # bmm / baddbmm / addbmm
    Case("bmm", torch.bmm, [randn(2, 3, 4), randn(2, 4, 5, seed=1)], tol="loose"),
    Case("bmm_transposed", lambda a, b: torch.bmm(a, b.transpose(1, 2)), [randn(3, 4, 6), randn(3, 5, 6, seed=1)], tol="loose"),
    Case("bmm_i64", torch.bmm, [randint(-9, 9, 2, 3, 4), randint(-9, 9, 2, 4, 2, seed=1)], tol="exact"),
    Case("baddbmm", lambda s, a, b: torch.baddbmm(s, a, b, beta=0.5, alpha=2.0), [randn(3, 1), randn(2, 3, 4, seed=1), randn(2, 4, 5, seed=2)], tol="loose"),
    Case("baddbmm_inplace", baddbmm_inplace, [randn(2, 3, 5), randn(2, 3, 4, seed=1), randn(2, 4, 5, seed=2)], tol="loose"),
    Case("addbmm", lambda s, a, b: torch.addbmm(s, a, b, beta=2.0, alpha=0.5), [randn(3, 5), randn(4, 3, 2, seed=1), randn(4, 2, 5, seed=2)], tol="loose"),
    # addmm
    Case("addmm_bias", torch.addmm, [randn(5), randn(3, 4, seed=1), randn(4, 5, seed=2)], tol="loose"),
    Case("addmm_beta_alpha", lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=-2.0), [randn(3, 5), randn(3, 4, seed=1), randn(4, 5, seed=2)], tol="loose"),
    Case("addmm_beta0_nan", mm_nan_self, [randn(3, 5), randn(3, 4, seed=1), randn(4, 5, seed=2)], tol="loose"),
    Case("addmm_i64", lambda s, a, b: torch.addmm(s, a, b, beta=3, alpha=2), [randint(-5, 5, 1, 2), randint(-5, 5, 3, 4, seed=1), randint(-5, 5, 4, 2, seed=2)], tol="exact"),
    Case("addmm_inplace", addmm_inplace, [randn(3, 5), randn(3, 4, seed=1), randn(4, 5, seed=2)], tol="loose"),
    # vectors
    Case("mv", torch.mv, [randn(3, 4), randn(4, seed=1)], tol="loose"),
    Case("addmv", lambda s, a, v: torch.addmv(s, a, v, beta=0.5, alpha=3.0), [randn(3), randn(3, 4, seed=1), randn(4, seed=2)], tol="loose"),
    Case("dot", torch.dot, [randn(7), randn(7, seed=1)], tol="loose"),
    Case("dot_i64", torch.dot, [randint(-9, 9, 7), randint(-9, 9, 7, seed=1)], tol="exact"),
    Case("vdot", torch.vdot, [randn(5), randn(5, seed=1)], tol="loose"),
    Case("outer", torch.outer, [randn(3), randn(4, seed=1)], tol="close"),
    Case("outer_i64", torch.outer, [randint(-9, 9, 3), randint(-9, 9, 2, seed=1)], tol="exact"),
    Case("addr", lambda s, a, b: torch.addr(s, a, b, beta=2.0, alpha=0.5), [randn(3, 4), randn(3, seed=1), randn(4, seed=2)], tol="close"),
    Case("inner", torch.inner, [randn(2, 3, 4), randn(5, 4, seed=1)], tol="loose"),
    # matmul: every rank combination
    Case("matmul_1d_1d", torch.matmul, [randn(6), randn(6, seed=1)], tol="loose"),
    Case("matmul_1d_2d", torch.matmul, [randn(4), randn(4, 3, seed=1)], tol="loose"),
    Case("matmul_2d_1d", torch.matmul, [randn(3, 4), randn(4, seed=1)], tol="loose"),
    Case("matmul_3d_2d", torch.matmul, [randn(2, 3, 4), randn(4, 5, seed=1)], tol="loose"),
    Case("matmul_2d_3d", torch.matmul, [randn(3, 4), randn(2, 4, 5, seed=1)], tol="loose"),
    Case("matmul_1d_3d", torch.matmul, [randn(4), randn(2, 4, 5, seed=1)], tol="loose"),
    Case("matmul_3d_1d", torch.matmul, [randn(2, 3, 4), randn(4, seed=1)], tol="loose"),
    Case("matmul_broadcast_4d", torch.matmul, [randn(2, 1, 3, 4), randn(1, 5, 4, 2, seed=1)], tol="loose"),
    Case("matmul_4d_transposed", lambda a, b: a @ b.transpose(-1, -2), [randn(2, 3, 5, 8), randn(2, 3, 6, 8, seed=1)], tol="loose"),
    Case("matmul_i64", torch.matmul, [randint(-9, 9, 2, 3, 4), randint(-9, 9, 4, seed=1)], tol="exact"),
    Case("matmul_f16", torch.matmul, [randn(2, 3, 8, dtype=f16), randn(8, 4, seed=1, dtype=f16)], tol="half"),
    # linear
    Case("linear", F.linear, [randn(3, 4), randn(5, 4, seed=1), randn(5, seed=2)], tol="loose"),
    Case("linear_nobias", F.linear, [randn(2, 3, 4), randn(5, 4, seed=1)], tol="loose"),
    Case("linear_3d_bias", F.linear, [randn(2, 3, 4), randn(5, 4, seed=1), randn(5, seed=2)], tol="loose"),
    Case("linear_1d_input", F.linear, [randn(4), randn(5, 4, seed=1), randn(5, seed=2)], tol="loose"),
    Case("linear_module", torch.nn.Linear(16, 8), [randn(2, 5, 16)], tol="loose"),
    Case("linear_noncontig_input", lambda x, w, b: F.linear(x.transpose(0, 1), w, b), [randn(4, 3, 6), randn(2, 6, seed=1), randn(2, seed=2)], tol="loose"),
    Case("linear_f16", F.linear, [randn(3, 8, dtype=f16), randn(4, 8, seed=1, dtype=f16), randn(4, seed=2, dtype=f16)], tol="half"),
    Case("linear_bf16", F.linear, [randn(3, 8, dtype=bf16), randn(4, 8, seed=1, dtype=bf16), randn(4, seed=2, dtype=bf16)], tol="half"),
    # einsum
    Case("einsum_mm", lambda a, b: torch.einsum("ij,jk->ik", a, b), [randn(3, 4), randn(4, 5, seed=1)], tol="loose"),
    Case("einsum_bmm", lambda a, b: torch.einsum("bij,bjk->bik", a, b), [randn(2, 3, 4), randn(2, 4, 5, seed=1)], tol="loose"),
    Case("einsum_attention", lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), [randn(1, 2, 3, 4), randn(1, 2, 5, 4, seed=1)], tol="loose"),
    Case("einsum_diag", lambda a: torch.einsum("ii->i", a), [randn(4, 4)], tol="close"),
    Case("einsum_trace", lambda a: torch.einsum("ii", a), [randn(4, 4)], tol="close"),
    Case("einsum_sum", lambda a: torch.einsum("ij->", a), [randn(3, 4)], tol="close"),
    Case("einsum_transpose", lambda a: torch.einsum("ij->ji", a), [randn(3, 4)], tol="close"),
    Case("einsum_outer", lambda a, b: torch.einsum("i,j->ij", a, b), [randn(3), randn(4, seed=1)], tol="close"),
    Case("einsum_hadamard", lambda a, b: torch.einsum("ij,ij->ij", a, b), [randn(3, 4), randn(3, 4, seed=1)], tol="close"),
    Case("einsum_implicit", lambda a, b: torch.einsum("jk,ij", a, b), [randn(4, 5), randn(3, 4, seed=1)], tol="loose"),
    Case("einsum_ellipsis", lambda a, b: torch.einsum("...ij,...jk->...ik", a, b), [randn(2, 3, 4), randn(1, 4, 5, seed=1)], tol="loose"),
    Case("einsum_ellipsis_broadcast", lambda a, b: torch.einsum("...ij,jk", a, b), [randn(2, 2, 3, 4), randn(4, 2, seed=1)], tol="loose"),
    Case("einsum_three", lambda a, b, c: torch.einsum("abc,cd,de->abe", a, b, c), [randn(2, 3, 4), randn(4, 5, seed=1), randn(5, 2, seed=2)], tol="loose"),
    Case("einsum_bilinear", lambda a, w, b: torch.einsum("bn,anm,bm->ba", a, w, b), [randn(2, 3), randn(4, 3, 5, seed=1), randn(2, 5, seed=2)], tol="loose"),
    # 3-5 operands where the contraction order matters (backends.opt_einsum's path; the
    # tests run these under every strategy and left to right)
    Case("einsum_chain4", lambda a, b, c, d: torch.einsum("ab,bc,cd,de->ae", a, b, c, d), [randn(6, 5), randn(5, 2, seed=1), randn(2, 7, seed=2), randn(7, 4, seed=3)], tol="loose"),
    Case("einsum_mat_vec_chain", lambda a, b, c: torch.einsum("ij,jk,k->i", a, b, c), [randn(5, 6), randn(6, 7, seed=1), randn(7, seed=2)], tol="loose"),
    Case("einsum_five", lambda a, b, c, d, e: torch.einsum("ab,bc,cd,de,ef->af", a, b, c, d, e), [randn(4, 6), randn(6, 2, seed=1), randn(2, 6, seed=2), randn(6, 3, seed=3), randn(3, 5, seed=4)], tol="loose"),
    Case("einsum_batched_three", lambda a, b, c: torch.einsum("bij,bjk,bk->bi", a, b, c), [randn(2, 3, 4), randn(2, 4, 5, seed=1), randn(2, 5, seed=2)], tol="loose"),
    Case("einsum_chain4_i64", lambda a, b, c, d: torch.einsum("ab,bc,cd,de->ae", a, b, c, d), [randint(-5, 5, 3, 4), randint(-5, 5, 4, 2, seed=1), randint(-5, 5, 2, 4, seed=2), randint(-5, 5, 4, 3, seed=3)], tol="exact"),
    Case("einsum_i64", lambda a, b: torch.einsum("ij,jk->ik", a, b), [randint(-9, 9, 3, 4), randint(-9, 9, 4, 2, seed=1)], tol="exact"),
    # composites that may stay or decompose
    Case("tensordot", lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1])), [randn(2, 3, 4), randn(3, 4, 5, seed=1)], tol="loose"),
    Case("bilinear", F.bilinear, [randn(2, 3), randn(2, 5, seed=1), randn(4, 3, 5, seed=2), randn(4, seed=3)], tol="loose"),
    Case("multi_dot", lambda a, b, c: torch.linalg.multi_dot([a, b, c]), [randn(3, 4), randn(4, 5, seed=1), randn(5, 2, seed=2)], tol="loose"),
    # issue 17: K past lavapipe's 65,535 loop steps per invocation
    Case("mm_long_k", mm_long_k, [ONE], tol="exact", core=False),
]

# These ops are already core ATen: both IRs hold the same graph, so export them once.
SAME_IN_BOTH_IRS = {
    "mm", "mm_strided", "mm_large", "mm_f64", "mm_f16", "mm_bf16", "mm_i64", "mm_i32", "mm_empty_k", "mm_empty_m",
    "mm_inf_nan", "bmm", "bmm_i64", "addbmm", "addmm_bias", "addmm_beta_alpha", "addmm_beta0_nan", "addmm_i64", "addmv",
}
for _c in CASES:
    if _c.name in SAME_IN_BOTH_IRS:
        _c.core = False
