"""Special math (src/ops/elementwise/special/): the gamma family, Bessel and Airy functions,
the normal distribution's ndtr/ndtri/log_ndtr, erfcx, the orthogonal polynomials, and the
float helpers nextafter/copysign/ldexp/frexp/float_power. Expected values come from eager
PyTorch."""
import torch

from .case import Case, randint, randn

S = torch.special
f16, f64, i32 = torch.float16, torch.float64, torch.int32
nan, inf = float("nan"), float("inf")


def u(lo, hi, *shape, seed=0, dtype=torch.float32):
    """Uniform values in [lo, hi)."""
    r = torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=f64)
    return (r * (hi - lo) + lo).to(dtype)


def edges(*vals):
    return torch.tensor(vals)


# Values across the interesting ranges: negatives (near the poles of the gamma family),
# small, moderate and large magnitudes, zeros and infinities.
WIDE = torch.cat([u(-6, 6, 10), u(-40, 40, 6, seed=1), edges(-2.5, -1.0, -0.0, 0.0, 1e-3, 0.5, 1.0, 10.0, 120.0, inf, -inf, nan)])
POS = torch.cat([u(0.01, 30, 12), edges(1e-4, 0.5, 1.0, 2.0, 85.0, 700.0, inf, 0.0)])
PROB = torch.cat([u(0.0, 1.0, 10), edges(0.0, 1.0, 1e-12, 1 - 1e-7, 0.5, -0.1, 1.1)])

UNARY = [
    ("lgamma", torch.lgamma, WIDE),
    ("digamma", torch.digamma, WIDE),
    ("psi", S.psi, WIDE),
    ("gammaln", S.gammaln, POS),
    ("i0", torch.i0, WIDE),
    ("i0e", S.i0e, WIDE),
    ("i1", S.i1, WIDE),
    ("i1e", S.i1e, WIDE),
    ("ndtri", S.ndtri, PROB),
    ("ndtr", S.ndtr, WIDE),
    ("log_ndtr", S.log_ndtr, WIDE),
    ("erfcx", S.erfcx, torch.cat([WIDE, edges(-30.0, 55.0, 6e7)])),
    ("entr", S.entr, WIDE),
    ("bessel_j0", S.bessel_j0, WIDE),
    ("bessel_j1", S.bessel_j1, WIDE),
    ("bessel_y0", S.bessel_y0, POS),
    ("bessel_y1", S.bessel_y1, POS),
    ("modified_bessel_i0", S.modified_bessel_i0, u(-20, 20, 12)),
    ("modified_bessel_i1", S.modified_bessel_i1, u(-20, 20, 12)),
    ("modified_bessel_k0", S.modified_bessel_k0, POS),
    ("modified_bessel_k1", S.modified_bessel_k1, POS),
    ("scaled_modified_bessel_k0", S.scaled_modified_bessel_k0, POS),
    ("scaled_modified_bessel_k1", S.scaled_modified_bessel_k1, POS),
    ("spherical_bessel_j0", S.spherical_bessel_j0, WIDE),
    ("airy_ai", S.airy_ai, torch.cat([u(-12, 12, 14), edges(-2.09, 2.09, 8.5, 104.0, inf)])),
]

POLYS = [
    ("chebyshev_t", S.chebyshev_polynomial_t),
    ("chebyshev_u", S.chebyshev_polynomial_u),
    ("chebyshev_v", S.chebyshev_polynomial_v),
    ("chebyshev_w", S.chebyshev_polynomial_w),
    ("shifted_chebyshev_t", S.shifted_chebyshev_polynomial_t),
    ("shifted_chebyshev_u", S.shifted_chebyshev_polynomial_u),
    ("shifted_chebyshev_v", S.shifted_chebyshev_polynomial_v),
    ("shifted_chebyshev_w", S.shifted_chebyshev_polynomial_w),
    ("hermite_h", S.hermite_polynomial_h),
    ("hermite_he", S.hermite_polynomial_he),
    ("laguerre_l", S.laguerre_polynomial_l),
    ("legendre_p", S.legendre_polynomial_p),
]

# x in [-1.2, 1.2] and at the edges (x = ±1, 0, 1/2 and 1 for the shifted ones); degrees
# -1..9 (beyond 6 the trigonometric forms), broadcast as a column.
PX = torch.cat([u(-1.2, 1.2, 6), edges(-1.0, 0.0, 0.5, 1.0)])
PN = torch.tensor([[-1.0], [0.0], [1.0], [2.0], [3.0], [5.0], [7.0], [9.0]])


def frexp_pair(x):
    m, e = torch.frexp(x)
    return m, e


CASES = (
    [Case(f"{n}", f, [x]) for n, f, x in UNARY]
    + [Case(f"{n}_f64", f, [x.to(f64)]) for n, f, x in UNARY[::2]]
    + [
        Case("lgamma_int", torch.lgamma, [randint(-3, 20, 3, 4)]),
        Case("digamma_int", torch.digamma, [randint(1, 20, 3, 4, dtype=i32)]),
        Case("i0_f16", torch.i0, [randn(3, 4, dtype=f16)], tol="half"),
        Case("lgamma_f16", torch.lgamma, [u(0.1, 8, 3, 4, dtype=f16)], tol="half"),
        Case("bessel_j0_noncontig", lambda x: S.bessel_j0(x.t()), [u(-10, 10, 4, 3)]),
        Case("erfcx_strided", lambda x: S.erfcx(x[:, ::2]), [u(-5, 5, 3, 8)]),
        Case("ndtri_empty", S.ndtri, [torch.rand(0, 3)]),
        Case("digamma_inplace", lambda x: x.clone().digamma_(), [u(-3, 3, 3, 4)]),
        Case("lgamma_inplace", lambda x: x.clone().lgamma_(), [u(-3, 3, 3, 4)]),
        # polygamma / mvlgamma
        *[Case(f"polygamma_{n}", lambda x, n=n: torch.polygamma(n, x), [WIDE]) for n in range(5)],
        *[Case(f"polygamma_{n}_f64", lambda x, n=n: torch.polygamma(n, x), [WIDE.to(f64)]) for n in (1, 3)],
        Case("special_polygamma", lambda x: S.polygamma(2, x), [u(0.1, 5, 3, 4)]),
        Case("polygamma_int", lambda x: torch.polygamma(1, x), [randint(1, 9, 3, 4)]),
        *[Case(f"mvlgamma_p{p}", lambda x, p=p: torch.mvlgamma(x, p), [u(0.5 * p, 0.5 * p + 8, 3, 4)]) for p in (1, 3, 5)],
        Case("multigammaln_f64", lambda x: S.multigammaln(x, 4), [u(2, 20, 3, 4, dtype=f64)]),
        # Binary functions: zeta, the incomplete gamma functions, xlog1py, logaddexp2.
        Case("zeta", S.zeta, [u(0.5, 6, 3, 4), u(-3, 5, 3, 4, seed=1)]),
        Case("zeta_bcast_f64", S.zeta, [u(1, 6, 3, 1, dtype=f64), u(-3, 5, 4, seed=1, dtype=f64)]),
        Case("zeta_scalar", lambda q: S.zeta(2.0, q), [u(0.1, 5, 5)]),
        Case("zeta_other_scalar", lambda x: S.zeta(x, 1.5), [u(1.1, 5, 5)]),
        Case("zeta_edges", S.zeta, [edges(1.0, 0.5, 2.0, 2.0, 3.0, 2.5, inf), edges(1.0, 1.0, 0.0, -2.0, -1.5, -1.5, 2.0)]),
        Case("igamma", torch.igamma, [u(0, 30, 4, 5), u(0, 40, 4, 5, seed=1)]),
        Case("igammac", torch.igammac, [u(0, 30, 4, 5), u(0, 40, 4, 5, seed=1)]),
        Case("igamma_asym_f64", torch.igamma, [u(20, 400, 10, dtype=f64), u(18, 420, 10, seed=1, dtype=f64)]),
        Case("igammac_asym", torch.igammac, [u(20, 400, 10), u(18, 420, 10, seed=1)]),
        Case("gammainc_bcast", S.gammainc, [u(0.1, 5, 3, 1), u(0, 6, 4, seed=1)]),
        Case("gammaincc_edges", S.gammaincc, [edges(0.0, 0.0, 1.0, -1.0, inf, 2.0, 0.5), edges(1.0, 0.0, 0.0, 1.0, 3.0, inf, 0.2)]),
        Case("igamma_noncontig", lambda a, x: torch.igamma(a.t(), x), [u(0.1, 8, 4, 3), u(0, 9, 3, 4, seed=1)]),
        Case("xlog1py", S.xlog1py, [edges(0.0, 1.0, -2.0, 3.0, 0.0, 2.0), edges(-1.0, 0.5, 3.0, nan, nan, -0.5)]),
        Case("xlog1py_scalar", lambda y: S.xlog1py(2.0, y), [u(-0.9, 5, 6)], core=False, note="core: prims.scalar_tensor"),
        Case("logaddexp2", torch.logaddexp2, [randn(3, 4), randn(4, seed=1)]),
        Case("logaddexp2_inf", torch.logaddexp2, [edges(inf, -inf, inf, 1.0), edges(inf, -inf, -inf, nan)]),
        # The polynomials: tensor degrees broadcast, scalar degrees, scalar x, f64, ints.
        *[Case(f"{n}", f, [PX, PN]) for n, f in POLYS],
        *[Case(f"{n}_f64", f, [PX.to(f64), PN.to(f64) + 3]) for n, f in POLYS],
        *[Case(f"{n}_n_scalar", lambda x, f=f: f(x, 4), [PX]) for n, f in POLYS[::3]],
        *[Case(f"{n}_x_scalar", lambda n_, f=f: f(0.3, n_), [PN]) for n, f in POLYS[1::3]],
        Case("hermite_h_large_n", S.hermite_polynomial_h, [u(-1, 1, 3), torch.tensor([[20.0], [129.0], [nan], [inf]])]),
        Case("legendre_int", S.legendre_polynomial_p, [randint(-2, 3, 4), randint(0, 5, 3, 1, seed=1)]),
        Case("chebyshev_t_large_x", S.chebyshev_polynomial_t, [edges(2.0, -3.0, 1.5), edges(3.0, 5.0, 10.0)]),
        # nextafter / copysign / ldexp / frexp / float_power / heaviside.
        Case("nextafter", torch.nextafter, [randn(3, 4), randn(4, seed=1)], tol="exact"),
        Case("nextafter_edges_f64", torch.nextafter, [edges(0.0, 0.0, 1.0, 1.0, nan, -0.0).to(f64), edges(1.0, -1.0, 1.0, 0.0, 1.0, 1.0).to(f64)], tol="exact"),
        Case("copysign", torch.copysign, [randn(3, 4), randn(4, seed=1)], tol="exact"),
        Case("copysign_scalar", lambda x: torch.copysign(x, -1.0), [randn(3, 4)], tol="exact"),
        Case("copysign_int", torch.copysign, [randint(-5, 5, 3, 4), edges(-0.0, 0.0, 1.0, -2.0)], tol="exact"),
        Case("copysign_inplace", lambda x, y: x.clone().copysign_(y), [randn(3, 4), randn(3, 4, seed=1)], tol="exact"),
        Case("ldexp", torch.ldexp, [randn(3, 4), randint(-4, 5, 3, 4)]),
        Case("ldexp_bcast_f64", torch.ldexp, [randn(3, 4, dtype=f64), randint(-4, 5, 4)]),
        Case("frexp", frexp_pair, [torch.cat([randn(8) * 100, edges(0.0, -0.0, 1.0, 0.5, -3.0, inf, nan, 1e-40)])], tol="exact"),
        Case("frexp_f64", frexp_pair, [randn(3, 4, dtype=f64) * 1e10], tol="exact"),
        Case("frexp_f16", frexp_pair, [randn(3, 4, dtype=f16)], tol="exact"),
        Case("float_power", torch.float_power, [u(0.1, 4, 3, 4), randn(4, seed=1)]),
        Case("float_power_scalar", lambda x: torch.float_power(x, 2.5), [randint(0, 6, 3, 4)]),
        Case("float_power_base_scalar", lambda e: torch.float_power(2, e), [randn(3, 4)]),
        Case("heaviside", torch.heaviside, [edges(-1.0, 0.0, 2.0, -0.0, nan, 0.0), edges(0.5, 0.5, 0.5, 0.5, 0.5, nan)], tol="exact"),
        Case("heaviside_int", torch.heaviside, [randint(-2, 3, 3, 4), randint(-2, 3, 4, seed=1)], tol="exact"),
    ]
)
