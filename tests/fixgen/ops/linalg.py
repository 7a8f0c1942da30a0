"""linalg family: LU, determinants, inverses and solves, triangular solves, Cholesky, QR,
symmetric eigenvalues, singular values, pinv / rank / cond / matrix norms, matrix_exp and
matrix_power. Matrices are small and well conditioned (built from torch's own random
numbers); outputs determined only up to sign (eigenvectors, singular vectors) are compared
through sign-free functions of them."""
import torch

from .case import ONE, Case, long_ints, randn

f64 = torch.float64


def wellcond(*shape, seed=0, dtype=torch.float32):
    """A random square matrix (batch) with a strong diagonal: well conditioned."""
    n = shape[-1]
    return (randn(*shape, seed=seed, dtype=f64) + n * torch.eye(n, dtype=f64)).to(dtype)


def spd(*shape, seed=0, dtype=torch.float32):
    """A symmetric positive definite matrix (batch): A Aᵀ + n I."""
    n = shape[-1]
    a = randn(*shape, seed=seed, dtype=f64)
    return (a @ a.mT + n * torch.eye(n, dtype=f64)).to(dtype)


def sym(*shape, seed=0, dtype=torch.float32):
    a = randn(*shape, seed=seed, dtype=f64)
    return (a + a.mT).to(dtype)


def tri(*shape, seed=0, upper=False, dtype=torch.float32):
    a = wellcond(*shape, seed=seed, dtype=f64)
    return (a.triu() if upper else a.tril()).to(dtype)


def lu_solve_fn(a, b):
    lu, piv = torch.linalg.lu_factor(a)
    return torch.linalg.lu_solve(lu, piv, b)


def lu_solve_adj_right(a, b):
    lu, piv = torch.linalg.lu_factor(a)
    return torch.linalg.lu_solve(lu, piv, b, left=False, adjoint=True)


def lu_solve_legacy(a, b):
    lu, piv = torch.linalg.lu_factor(a)
    return torch.lu_solve(b, lu, piv)


def lu_unpack_fn(a):
    lu, piv = torch.linalg.lu_factor(a)
    return torch.lu_unpack(lu, piv)


def lu_factor_ex_fn(a):
    return torch.linalg.lu_factor_ex(a)


def lu_legacy(a):
    return torch.linalg.lu_factor_ex(a.mT)


def eigh_abs(a):
    w, v = torch.linalg.eigh(a)
    return w, v.abs()


def eigh_upper_abs(a):
    w, v = torch.linalg.eigh(a, UPLO="U")
    return w, v.abs()


def svd_abs(a):
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return u.abs(), s, vh.abs()


def svd_recon(a):
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    return (u * s.unsqueeze(-2)) @ vh


def svd_full_gram(a):
    u, s, vh = torch.linalg.svd(a, full_matrices=True)
    return u.mT @ u, s, vh @ vh.mT


def svd_legacy(a):
    u, s, v = torch.svd(a)
    return (u * s.unsqueeze(-2)) @ v.mT, s


def qr_complete(a):
    return torch.linalg.qr(a, mode="complete")


def qr_r(a):
    return torch.linalg.qr(a, mode="r")[1]


def geqrf_hh(a):
    q, tau = torch.geqrf(a)
    return q, tau, torch.linalg.householder_product(q, tau)


def ormqr_fn(a, c):
    q, tau = torch.geqrf(a)
    return (
        torch.ormqr(q, tau, c),
        torch.ormqr(q, tau, c, transpose=True),
        torch.ormqr(q, tau, c.mT, left=False),
        torch.ormqr(q, tau, c.mT, left=False, transpose=True),
    )


def chol_solve(a, b):
    return torch.cholesky_solve(b, torch.linalg.cholesky(a))


def chol_solve_upper(a, b):
    return torch.cholesky_solve(b, torch.linalg.cholesky(a, upper=True), upper=True)


def chol_inverse(a):
    return torch.cholesky_inverse(torch.linalg.cholesky(a))


def chol_inverse_upper(a):
    return torch.cholesky_inverse(torch.linalg.cholesky(a, upper=True), upper=True)


def pinv_rtol(a):
    return torch.linalg.pinv(a, rtol=0.1)


def pinv_atol_t(a, t):
    return torch.linalg.pinv(a, atol=t)


def rank_tol(a):
    return torch.linalg.matrix_rank(a, atol=1.0, rtol=0.0)


def rank_herm(a):
    return torch.linalg.matrix_rank(a, hermitian=True)


def singular(n=4, seed=0, dtype=torch.float32):
    """A rank-2 n×n matrix (exact in floating point up to rounding)."""
    a = randn(n, 2, seed=seed, dtype=f64)
    b = randn(2, n, seed=seed + 1, dtype=f64)
    return (a @ b).to(dtype)



def cdist_long_features(n):
    """cdist over 70,000 features (one invocation per pair walks them: past lavapipe's loop
    cap, issue 17); integer-valued points made in the program."""
    a = long_ints(n, 140_000).reshape(2, 70_000)
    b = long_ints(n, 210_000, 5, 2).reshape(3, 70_000)
    return torch.cdist(a, b), torch.cdist(a, b, p=1.0), torch.cdist(a, b, p=float("inf"))


CASES = [
    # LU
    Case("lu_factor", torch.linalg.lu_factor, [wellcond(4, 4)], tol="loose"),
    Case("lu_factor_batched_f64", torch.linalg.lu_factor, [randn(2, 3, 5, 5, dtype=f64)], tol="loose"),
    Case("lu_factor_ex_rect", lu_factor_ex_fn, [randn(4, 6)], tol="loose"),
    Case("lu_factor_ex_tall", lu_factor_ex_fn, [randn(2, 6, 3, seed=1)], tol="loose"),
    Case("lu_factor_ex_transposed", lu_legacy, [randn(5, 5, seed=2)], tol="loose"),
    Case("lu_factor_ex_singular", lu_factor_ex_fn, [torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 1.0, 1.0]])], tol="loose"),
    Case("lu_plu", torch.linalg.lu, [randn(2, 4, 4, seed=3)], tol="loose"),
    Case("lu_plu_wide_f64", torch.linalg.lu, [randn(3, 5, seed=4, dtype=f64)], tol="loose"),
    Case("lu_unpack", lu_unpack_fn, [randn(2, 5, 5, seed=5)], tol="loose"),
    Case("lu_solve", lu_solve_fn, [wellcond(2, 4, 4, seed=6), randn(2, 4, 3, seed=7)], tol="loose"),
    Case("lu_solve_adjoint_right_f64", lu_solve_adj_right, [wellcond(4, 4, seed=8, dtype=f64), randn(3, 4, seed=9, dtype=f64)], tol="loose"),
    Case("lu_solve_legacy", lu_solve_legacy, [wellcond(3, 3, seed=10), randn(3, 2, seed=11)], tol="loose"),
    # determinants
    Case("det", torch.linalg.det, [randn(3, 4, 4, seed=12)], tol="loose"),
    Case("det_f64", torch.det, [randn(5, 5, seed=13, dtype=f64)], tol="loose"),
    Case("det_transposed", lambda a: torch.linalg.det(a.mT), [randn(2, 3, 3, seed=14)], tol="loose"),
    Case("det_empty_batch", torch.linalg.det, [randn(0, 3, 3)], tol="loose"),
    Case("det_singular", torch.linalg.det, [singular(4, seed=15)], tol="loose"),
    Case("slogdet", torch.linalg.slogdet, [randn(3, 4, 4, seed=16)], tol="loose"),
    Case("slogdet_f64", torch.slogdet, [randn(4, 4, seed=17, dtype=f64)], tol="loose"),
    Case("logdet", torch.logdet, [spd(2, 4, 4, seed=18)], tol="loose"),
    Case("logdet_negative", torch.logdet, [torch.diag(torch.tensor([1.0, -2.0, 3.0]))], tol="loose"),
    # inverses and solves
    Case("inv", torch.linalg.inv, [wellcond(4, 4, seed=19)], tol="loose"),
    Case("inv_batched_f64", torch.linalg.inv, [wellcond(2, 3, 5, 5, seed=20, dtype=f64)], tol="loose"),
    Case("inv_transposed", lambda a: torch.linalg.inv(a.mT), [wellcond(2, 4, 4, seed=21)], tol="loose"),
    Case("inv_empty_batch", torch.linalg.inv, [randn(0, 3, 3)], tol="loose"),
    Case("inv_ex", torch.linalg.inv_ex, [wellcond(2, 3, 3, seed=22)], tol="loose"),
    Case("inverse", torch.inverse, [wellcond(3, 3, seed=23)], tol="loose"),
    Case("solve", torch.linalg.solve, [wellcond(4, 4, seed=24), randn(4, 3, seed=25)], tol="loose"),
    Case("solve_vector", torch.linalg.solve, [wellcond(4, 4, seed=26), randn(4, seed=27)], tol="loose"),
    Case("solve_batched_vector", torch.linalg.solve, [wellcond(2, 4, 4, seed=28), randn(2, 4, seed=29)], tol="loose"),
    Case("solve_broadcast", torch.linalg.solve, [wellcond(2, 1, 3, 3, seed=30), randn(3, 3, 2, seed=31)], tol="loose"),
    Case("solve_right_f64", lambda a, b: torch.linalg.solve(a, b, left=False), [wellcond(4, 4, seed=32, dtype=f64), randn(2, 4, seed=33, dtype=f64)], tol="loose"),
    Case("solve_transposed", lambda a, b: torch.linalg.solve(a.mT, b), [wellcond(3, 3, seed=34), randn(3, 2, seed=35)], tol="loose"),
    Case("solve_ex", torch.linalg.solve_ex, [wellcond(2, 3, 3, seed=36), randn(2, 3, 2, seed=37)], tol="loose"),
    Case("tensorsolve", torch.linalg.tensorsolve, [wellcond(6, 6, seed=38).reshape(2, 3, 6), randn(2, 3, seed=39)], tol="loose"),
    Case("tensorsolve_dims", lambda a, b: torch.linalg.tensorsolve(a, b, dims=(0,)), [wellcond(6, 6, seed=40).reshape(6, 2, 3), randn(2, 3, seed=41)], tol="loose"),
    Case("tensorinv", lambda a: torch.linalg.tensorinv(a, ind=2), [wellcond(6, 6, seed=42).reshape(2, 3, 6)], tol="loose"),
    Case("tensorinv_ind1_f64", lambda a: torch.linalg.tensorinv(a, ind=1), [wellcond(4, 4, seed=43, dtype=f64).reshape(4, 2, 2)], tol="loose"),
    # triangular solves
    Case("solve_triangular_lower", lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), [tri(4, 4, seed=44), randn(4, 3, seed=45)], tol="loose"),
    Case("solve_triangular_upper_right", lambda a, b: torch.linalg.solve_triangular(a, b, upper=True, left=False), [tri(2, 4, 4, seed=46, upper=True), randn(2, 3, 4, seed=47)], tol="loose"),
    Case("solve_triangular_unit_f64", lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True), [randn(3, 3, seed=48, dtype=f64), randn(3, 2, seed=49, dtype=f64)], tol="loose"),
    Case("solve_triangular_full_matrix", lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), [wellcond(3, 3, seed=50), randn(3, 3, seed=51)], tol="loose"),
    Case("triangular_solve", torch.triangular_solve, [randn(2, 3, 2, seed=52), tri(3, 3, seed=53, upper=True)], tol="loose"),
    Case("triangular_solve_lower_transposed", lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True), [randn(3, 2, seed=54), tri(3, 3, seed=55)], tol="loose"),
    # Cholesky
    Case("cholesky", torch.linalg.cholesky, [spd(4, 4, seed=56)], tol="loose"),
    # Bunch-Kaufman LDLᵀ (LAPACK sytrf): 1x1 and 2x2 pivots (a zero diagonal forces 2x2 blocks).
    Case("ldl_factor", torch.linalg.ldl_factor, [sym(2, 5, 5, seed=57)], tol="loose"),
    Case("ldl_factor_ex_2x2", torch.linalg.ldl_factor_ex,
         [(lambda a: a - torch.diag_embed(torch.diagonal(a, dim1=-2, dim2=-1)))(sym(6, 6, seed=58))], tol="loose"),
    Case("ldl_solve", lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a), b),
         [sym(3, 4, 4, seed=59), randn(3, 4, 2, seed=60)], tol="loose"),
    Case("ldl_solve_2x2", lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a), b),
         [(lambda a: a - torch.diag_embed(torch.diagonal(a, dim1=-2, dim2=-1)))(sym(5, 5, seed=61)), randn(5, 3, seed=62)], tol="loose"),
    Case("cholesky_upper_batched_f64", lambda a: torch.linalg.cholesky(a, upper=True), [spd(2, 3, 3, seed=57, dtype=f64)], tol="loose"),
    Case("cholesky_empty_batch", torch.linalg.cholesky, [spd(0, 3, 3)], tol="loose"),
    Case("cholesky_ex", torch.linalg.cholesky_ex, [spd(2, 4, 4, seed=58)], tol="loose"),
    Case("cholesky_ex_not_pd", torch.linalg.cholesky_ex, [torch.tensor([[1.0, 2.0], [2.0, 1.0]])], tol="loose"),
    Case("cholesky_solve", chol_solve, [spd(2, 4, 4, seed=59), randn(2, 4, 3, seed=60)], tol="loose"),
    Case("cholesky_solve_upper_f64", chol_solve_upper, [spd(3, 3, seed=61, dtype=f64), randn(3, 2, seed=62, dtype=f64)], tol="loose"),
    Case("cholesky_inverse", chol_inverse, [spd(4, 4, seed=63)], tol="loose"),
    Case("cholesky_inverse_upper", chol_inverse_upper, [spd(2, 3, 3, seed=64)], tol="loose"),
    # QR
    Case("qr", torch.linalg.qr, [randn(5, 3, seed=65)], tol="loose"),
    Case("qr_wide_batched", torch.linalg.qr, [randn(2, 3, 5, seed=66)], tol="loose"),
    Case("qr_complete_f64", qr_complete, [randn(5, 3, seed=67, dtype=f64)], tol="loose"),
    Case("qr_r", qr_r, [randn(4, 4, seed=68)], tol="loose"),
    Case("qr_transposed", lambda a: torch.linalg.qr(a.mT), [randn(3, 4, seed=69)], tol="loose"),
    Case("geqrf_householder_product", geqrf_hh, [randn(2, 5, 3, seed=70)], tol="loose"),
    Case("ormqr", ormqr_fn, [randn(4, 3, seed=71), randn(4, 2, seed=72)], tol="loose"),
    # symmetric eigenvalues, singular values
    Case("eigvalsh", torch.linalg.eigvalsh, [sym(2, 4, 4, seed=73)], tol="loose"),
    Case("eigvalsh_upper_f64", lambda a: torch.linalg.eigvalsh(a, UPLO="U"), [randn(5, 5, seed=74, dtype=f64)], tol="loose"),
    Case("eigh_abs", eigh_abs, [sym(3, 3, seed=75)], tol="loose"),
    Case("eigh_upper_abs", eigh_upper_abs, [randn(2, 4, 4, seed=76)], tol="loose"),
    Case("svdvals", torch.linalg.svdvals, [randn(2, 4, 3, seed=77)], tol="loose"),
    Case("svdvals_wide_f64", torch.linalg.svdvals, [randn(3, 5, seed=78, dtype=f64)], tol="loose"),
    Case("svdvals_transposed", lambda a: torch.linalg.svdvals(a.mT), [randn(4, 4, seed=79)], tol="loose"),
    Case("svd_abs", svd_abs, [randn(5, 3, seed=80)], tol="loose"),
    Case("svd_reconstruct", svd_recon, [randn(2, 3, 4, seed=81)], tol="loose"),
    Case("svd_full_gram", svd_full_gram, [randn(4, 2, seed=82)], tol="loose"),
    Case("svd_legacy", svd_legacy, [randn(3, 5, seed=83)], tol="loose"),
    # pinv, rank, cond, norms
    Case("pinv", torch.linalg.pinv, [randn(4, 3, seed=84)], tol="loose"),
    Case("pinv_wide_batched_f64", torch.linalg.pinv, [randn(2, 3, 5, seed=85, dtype=f64)], tol="loose"),
    Case("pinv_singular", torch.linalg.pinv, [singular(4, seed=86)], tol="loose"),
    Case("pinv_rtol", pinv_rtol, [randn(4, 4, seed=87)], tol="loose"),
    Case("pinv_atol_tensor", pinv_atol_t, [randn(2, 4, 3, seed=88), torch.tensor([0.5, 100.0])], tol="loose"),
    Case("pinv_hermitian", lambda a: torch.linalg.pinv(a, hermitian=True), [sym(4, 4, seed=89)], tol="loose"),
    Case("pinverse", torch.pinverse, [randn(3, 4, seed=90)], tol="loose"),
    Case("matrix_rank", torch.linalg.matrix_rank, [singular(5, seed=91)], tol="exact"),
    Case("matrix_rank_batched", torch.linalg.matrix_rank, [randn(2, 4, 3, seed=92)], tol="exact"),
    Case("matrix_rank_atol", rank_tol, [randn(4, 4, seed=93)], tol="exact"),
    Case("matrix_rank_hermitian", rank_herm, [sym(4, 4, seed=94)], tol="exact"),
    Case("cond", torch.linalg.cond, [wellcond(2, 3, 3, seed=95)], tol="loose"),
    Case("cond_rect_f64", torch.linalg.cond, [randn(5, 3, seed=96, dtype=f64)], tol="loose"),
    Case("cond_fro", lambda a: torch.linalg.cond(a, "fro"), [wellcond(3, 3, seed=97)], tol="loose"),
    Case("cond_inf", lambda a: torch.linalg.cond(a, float("inf")), [wellcond(2, 3, 3, seed=98)], tol="loose"),
    Case("cond_neg2", lambda a: torch.linalg.cond(a, -2), [wellcond(3, 3, seed=99)], tol="loose"),
    Case("matrix_norm_fro", torch.linalg.matrix_norm, [randn(2, 3, 4, seed=100)], tol="loose"),
    Case("matrix_norm_nuc", lambda a: torch.linalg.matrix_norm(a, "nuc"), [randn(2, 3, 4, seed=101)], tol="loose"),
    Case("matrix_norm_2_dims_keepdim", lambda a: torch.linalg.matrix_norm(a, 2, dim=(0, 2), keepdim=True), [randn(3, 2, 4, seed=102)], tol="loose"),
    Case("matrix_norm_ords_f64", lambda a: [torch.linalg.matrix_norm(a, o) for o in (1, -1, float("inf"), float("-inf"), -2)], [randn(3, 4, seed=103, dtype=f64)], tol="loose"),
    Case("norm_matrix", lambda a: torch.linalg.norm(a, "nuc"), [randn(3, 4, seed=104)], tol="loose"),
    Case("norm_ord_2d", lambda a: torch.linalg.norm(a, 2), [randn(3, 4, seed=105)], tol="loose"),
    Case("norm_vector_dim", lambda a: torch.linalg.norm(a, 3, dim=1), [randn(3, 4, seed=106)], tol="loose"),
    Case("norm_default", torch.linalg.norm, [randn(2, 3, 4, seed=107)], tol="loose"),
    Case("nuclear_norm", lambda a: torch.nuclear_norm(a, keepdim=True), [randn(3, 5, seed=108)], tol="loose"),
    # matrix functions
    Case("matrix_exp", torch.linalg.matrix_exp, [randn(2, 4, 4, seed=109)], tol="loose"),
    Case("matrix_exp_large_norm_f64", torch.matrix_exp, [3 * randn(5, 5, seed=110, dtype=f64)], tol="loose"),
    Case("matrix_exp_transposed", lambda a: torch.linalg.matrix_exp(a.mT), [randn(3, 3, seed=111)], tol="loose"),
    Case("matrix_power_5", lambda a: torch.linalg.matrix_power(a, 5), [randn(2, 3, 3, seed=112)], tol="loose"),
    Case("matrix_power_0", lambda a: torch.linalg.matrix_power(a, 0), [randn(3, 3, seed=113)], tol="loose"),
    Case("matrix_power_neg_f64", lambda a: torch.matrix_power(a, -2), [wellcond(3, 3, seed=114, dtype=f64)], tol="loose"),
    Case("matrix_power_int", lambda a: torch.linalg.matrix_power(a, 3), [torch.tensor([[1, 2], [3, 4]])], tol="exact"),
]


# --- issue 16: pairwise distances
def _cdist(a, b, c):
    return (torch.cdist(a, b), torch.cdist(a, b, p=1.0), torch.cdist(a, b, p=0.0), torch.cdist(a, b, p=float("inf")),
            torch.cdist(a, b, p=3.0), torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
            torch.cdist(c, b.transpose(-1, -2).contiguous().transpose(-1, -2)), torch.cdist(a[:, :0], b))


def _pdist(x):
    return F.pdist(x), F.pdist(x, p=1.0), F.pdist(x.t(), p=0.5), F.pdist(x, p=float("inf")), F.pdist(x[:1])


import torch.nn.functional as F  # noqa: E402

CASES += [
    Case("cdist", _cdist, [randn(2, 4, 3, seed=70), randn(2, 5, 3, seed=71), randn(3, 1, 6, 3, seed=72)], tol="loose"),
    Case("pdist", _pdist, [randn(5, 4, seed=73)], tol="loose"),
]

CASES += [
    Case("dist", lambda a, b: (torch.dist(a, b), torch.dist(a, b[0], p=1.0), torch.dist(a.t(), b.t(), p=0.0),
                               torch.dist(a, b, p=float("inf")), torch.dist(a, b, p=3.5), torch.dist(a[:0], b[:0])),
         [randn(4, 3, seed=74), randn(4, 3, seed=75)], tol="loose"),
]

# torch.linalg.polar (a decomposition over the thin SVD): square, batched and tall matrices.
CASES += [
    Case("polar", lambda a, b, c: (*torch.linalg.polar(a), *torch.linalg.polar(b), *torch.linalg.polar(c)),
         [randn(4, 4, seed=76), randn(2, 3, 3, seed=77), randn(5, 3, seed=78)], tol="loose"),
    Case("cdist_long_features", cdist_long_features, [ONE], tol="loose", core=False),
]
