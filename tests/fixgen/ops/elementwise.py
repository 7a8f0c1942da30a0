"""Elementwise ops (src/ops/elementwise/): arithmetic, float math, comparisons and logic,
clamps, copies and dtype conversions. Expected values come from eager PyTorch."""
import torch

from .case import Case, randint, randn

f16, bf16, f64, i32, i8, u8 = torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int8, torch.uint8
nan, inf = float("nan"), float("inf")


def special():
    """Signed zeros, halves (rounding ties), NaN and infinities."""
    return torch.tensor([[-2.5, -1.0, -0.0, 0.0, 0.5, 1.5], [2.5, 3.7, nan, inf, -inf, -0.3]])


def unit(*shape, seed=0):
    """Values in (-1, 1) for asin/atanh/erfinv."""
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 1.98 - 0.99


def pos(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 4 + 0.1


def small_int_wrap(x, y, f):
    u = torch.uint8
    return (
        (x + 200) > 100, (-x) > 128, (~x) // 3, (y << 1) < 0, (y * y) > 50, (y - 100) > 0,
        (y.to(torch.int16) * 300) > 0, x.to(torch.int8) < 0, f.to(u) > 128,
        x.sum(0, dtype=u) > 100, x.cumsum(1, dtype=u) < 50, x.masked_fill(x > 100, -1) > 200,
        x < -1, torch.where(x > 100, x, 0) + 100,
    )


def ints(*shape, seed=0, dtype=torch.int64):
    x = randint(-9, 10, *shape, seed=seed, dtype=dtype)
    return x


def nonzero_ints(*shape, seed=0, dtype=torch.int64):
    x = randint(1, 6, *shape, seed=seed, dtype=dtype)
    sign = randint(0, 2, *shape, seed=seed + 1, dtype=dtype) * 2 - 1
    return x * sign


def add_inplace(x, y):
    z = x.clone()
    z.add_(y, alpha=2)
    z.mul_(y)
    z.sub_(1.5)
    z.div_(y)
    return z


def inplace_views(x, y):
    # in-place ops on a whole tensor, a row and a strided column (the GPU writes them in place)
    z = x.clone()
    z.relu_()
    z.add_(y, alpha=2)
    z.mul_(y)
    z.sub_(1.5)
    z[0].mul_(3)
    z[:, 1].add_(y[:, 1])
    z[:, 2].exp_()
    return z


def mutate_input(x, y):
    x.mul_(y)
    return x + 1


def copy_into_slice(x, z):
    y = x.clone()
    y[:, 1:3].copy_(z)
    return y


def masked_fill_inplace(x, m):
    y = x.clone()
    y.masked_fill_(m, -1.0)
    return y


def fill_zero(x):
    y = x.clone()
    y[0].fill_(7.0)
    y[1].zero_()
    return y


def clamp_inplace(x):
    y = x.clone()
    y.clamp_(-0.5, 0.5)
    return y


def pow_inplace(x):
    y = x.clone()
    y.pow_(2)
    return y


CASES = [
    # add / sub / rsub, promotion and broadcasting
    Case("add", lambda x, y: x + y, [randn(3, 4), randn(3, 4, seed=1)]),
    Case("add_bcast_row", lambda x, y: x + y, [randn(2, 3, 4), randn(4, seed=1)]),
    Case("add_bcast_mid", lambda x, y: x + y, [randn(2, 3, 4), randn(3, 1, seed=1)]),
    Case("add_bcast_both", lambda x, y: x + y, [randn(3, 1), randn(1, 4, seed=1)]),
    Case("add_bcast_left", lambda x, y: y + x, [randn(2, 3), randn(3, seed=1)]),
    Case("add_alpha", lambda x, y: torch.add(x, y, alpha=2.5), [randn(3, 4), randn(3, 4, seed=1)]),
    Case("add_scalar", lambda x: x + 2, [randn(3, 4)]),
    Case("add_int_float_scalar", lambda x: x + 2.5, [ints(3, 4)]),
    Case("add_i32", lambda x, y: x + y, [ints(3, 4, dtype=i32), ints(3, 4, seed=1, dtype=i32)], tol="exact"),
    Case("add_i8_wrap", lambda x: x + 1000, [ints(2, 3, dtype=i8)], tol="exact"),
    Case("add_u8_i8", lambda x, y: x + y, [randint(0, 200, 2, 3, dtype=u8), ints(2, 3, dtype=i8)], tol="exact"),
    Case("add_f16", lambda x, y: x + y * 0.1, [randn(3, 4, dtype=f16), randn(3, 4, seed=1, dtype=f16)], tol="half"),
    Case("add_bf16_f32", lambda x, y: x + y, [randn(3, 4, dtype=bf16), randn(3, 4, seed=1)]),
    Case("add_f64", lambda x, y: x + y, [randn(3, 4, dtype=f64), randn(3, 4, seed=1, dtype=f64)]),
    Case("add_0d", lambda x, y: x + y, [randn(3, 4), torch.tensor(2.0, dtype=f64)]),
    Case("add_int_0d_float", lambda x, y: x + y, [ints(3, 4), torch.tensor(0.5)]),
    Case("add_noncontig", lambda x, y: x.t() + y, [randn(4, 3), randn(3, 4, seed=1)]),
    Case("add_strided", lambda x: x[:, ::2] + 1, [randn(3, 8)]),
    Case("add_empty", lambda x, y: x + y, [randn(0, 3), randn(3, seed=1)]),
    Case("add_bool", lambda x, y: x + y, [randn(3, 4) > 0, randn(3, 4, seed=1) > 0], tol="exact"),
    Case("sub_alpha", lambda x, y: torch.sub(x, y, alpha=3), [randn(3, 4), randn(4, seed=1)]),
    Case("sub_int", lambda x, y: x - y, [ints(3, 4), ints(3, 4, seed=1)], tol="exact"),
    Case("rsub", lambda x: 1 - x, [randn(3, 4)]),
    Case("rsub_int", lambda x: 3 - x, [ints(3, 4)], tol="exact"),
    Case("inplace_chain", add_inplace, [randn(3, 4), pos(3, 4, seed=1)]),
    Case("inplace_views", inplace_views, [randn(3, 4), pos(3, 4, seed=1)]),
    Case("inplace_views_f16", inplace_views, [randn(3, 4, dtype=f16), pos(3, 4, seed=1).half()], tol="half"),
    Case("mutate_input", mutate_input, [randn(3, 4), randn(3, 4, seed=1)]),
    # mul / div
    Case("mul", lambda x, y: x * y, [randn(3, 4), randn(3, 1, seed=1)]),
    Case("mul_scalar_int", lambda x: x * 3, [ints(3, 4)], tol="exact"),
    Case("mul_bool", lambda x, y: x * y, [randn(3, 4) > 0, randn(3, 4, seed=1) > 0], tol="exact"),
    Case("div", lambda x, y: x / y, [randn(3, 4), pos(3, 4, seed=1)]),
    Case("div_special", lambda x: (x / 0.0, x / -0.0, 1.0 / x), [special()]),
    Case("div_int", lambda x, y: x / y, [ints(3, 4), nonzero_ints(3, 4, seed=1)]),
    Case("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), [randn(3, 4) * 5, randn(3, 4, seed=1)]),
    Case("div_floor", lambda x, y: torch.div(x, y, rounding_mode="floor"), [randn(3, 4) * 5, randn(3, 4, seed=1)]),
    Case("div_trunc_int", lambda x, y: torch.div(x, y, rounding_mode="trunc"), [ints(3, 4), nonzero_ints(3, 4, seed=1)], tol="exact"),
    Case("div_floor_int", lambda x, y: torch.div(x, y, rounding_mode="floor"), [ints(3, 4), nonzero_ints(3, 4, seed=1)], tol="exact"),
    Case("floor_divide", lambda x: x // 3, [ints(3, 4)], tol="exact"),
    Case("floor_divide_float", lambda x, y: x // y, [randn(3, 4) * 5, randn(3, 4, seed=1)]),
    Case("remainder", lambda x, y: x % y, [randn(3, 4) * 5, randn(3, 4, seed=1)]),
    Case("remainder_int", lambda x, y: x % y, [ints(3, 4), nonzero_ints(3, 4, seed=1)], tol="exact"),
    Case("remainder_scalar_self", lambda x: torch.remainder(7, x), [nonzero_ints(3, 4)], tol="exact"),
    Case("fmod", lambda x, y: torch.fmod(x, y), [randn(3, 4) * 5, randn(3, 4, seed=1)]),
    Case("fmod_int", lambda x: torch.fmod(x, -4), [ints(3, 4)], tol="exact"),
    # pow
    Case("pow_2", lambda x: x ** 2, [randn(3, 4)]),
    Case("pow_half", lambda x: x ** 0.5, [pos(3, 4)]),
    Case("pow_neg1", lambda x: x ** -1, [pos(3, 4)]),
    Case("pow_float", lambda x: x ** 2.7, [pos(3, 4)]),
    Case("pow_tensor", lambda x, y: x ** y, [pos(3, 4), randn(3, 4, seed=1)]),
    Case("pow_scalar_base", lambda x: 2 ** x, [randn(3, 4)]),
    # Negative bases: integral exponents keep the sign rule, fractional ones give NaN, -inf's
    # give inf or 0 (WGSL leaves pow undefined for negative bases).
    Case("pow_negative_base", lambda x, y: x ** y,
         [torch.tensor([-2.0, -2.0, -0.5, -3.0, float("-inf"), float("-inf"), -1.5, 2.0]),
          torch.tensor([3.0, 0.5, 2.0, -1.0, 0.5, -1.5, float("nan"), -0.25])]),
    Case("rpow_negative_base", lambda x: (-1.5) ** x, [torch.tensor([2.0, 0.3, -1.0, 3.0])]),
    Case("pow_int", lambda x, y: (x ** 2, x ** y), [ints(3, 4), randint(0, 4, 3, 4, seed=1)], tol="exact"),
    Case("pow_int_float_exp", lambda x: x ** 1.5, [randint(0, 5, 3, 4)]),
    Case("pow_inplace", pow_inplace, [randn(3, 4)]),
    # unary float math
    Case("unary_exp_log", lambda x: (x.exp(), torch.exp2(x), x.expm1(), x.abs().log(), x.abs().log2(), x.abs().log10(), x.abs().log1p()), [randn(3, 5)]),
    Case("unary_trig", lambda x: (x.sin(), x.cos(), x.tan(), x.atan(), x.sinh(), x.cosh(), x.tanh(), x.asinh()), [randn(3, 5)]),
    Case("unary_inverse_trig", lambda x: (x.asin(), x.acos(), x.atanh(), (x.abs() + 1).acosh()), [unit(3, 5)]),
    Case("unary_roots", lambda x: (x.sqrt(), x.rsqrt(), x.reciprocal()), [pos(3, 5)]),
    Case("unary_erf", lambda x, u: (x.erf(), x.erfc(), torch.erfinv(u)), [randn(3, 5) * 2, unit(3, 5, seed=1)]),
    Case("unary_special", lambda x: (x.exp(), x.sqrt(), x.log(), x.sigmoid(), x.tanh(), x.reciprocal()), [special()]),
    Case("unary_int_to_float", lambda x: (x.sqrt(), x.exp(), x.sin(), x.sigmoid()), [randint(0, 9, 3, 4)]),
    Case("unary_f16", lambda x: (x.exp(), x.sin(), x.sigmoid(), x.tanh()), [randn(3, 4, dtype=f16)], tol="half"),
    Case("unary_bf16", lambda x: (x.exp(), x.rsqrt(), x.erf()), [pos(3, 4).to(bf16)], tol="half"),
    Case("unary_f64", lambda x: (x.exp(), x.erf(), x.log1p(), x.atan()), [pos(3, 4).to(f64)]),
    Case("sigmoid_logit", lambda x, p: (x.sigmoid(), torch.logit(p), torch.logit(p, eps=0.2)), [randn(3, 4), torch.rand(3, 4, generator=torch.Generator().manual_seed(3))]),
    Case("unary_noncontig", lambda x: x.t().exp() + x.t()[:, ::2].sum(), [randn(4, 6)]),
    # sign / rounding
    Case("neg_abs_sign", lambda x: (-x, x.abs(), x.sign(), torch.sgn(x)), [special()]),
    Case("neg_abs_sign_int", lambda x: (-x, x.abs(), x.sign(), x.square()), [ints(3, 4)], tol="exact"),
    Case("rounding", lambda x: (x.floor(), x.ceil(), x.round(), x.trunc(), x.frac()), [special()]),
    Case("round_decimals", lambda x: (torch.round(x, decimals=2), torch.round(x * 1000, decimals=-2)), [randn(3, 4) * 10]),
    Case("rounding_int", lambda x: (x.floor(), x.round(), x.ceil()), [ints(3, 4)], tol="exact"),
    Case("square", lambda x: torch.square(x), [randn(3, 4)]),
    # clamp family
    Case("clamp", lambda x: (x.clamp(-0.5, 0.5), x.clamp(min=0.1), x.clamp(max=-0.1), x.clamp(1.0, -1.0)), [special()]),
    Case("clamp_tensor", lambda x, lo, hi: torch.clamp(x, lo, hi), [randn(3, 4), -randn(4, seed=1).abs(), randn(3, 1, seed=2).abs()]),
    Case("clamp_tensor_min_only", lambda x, lo: torch.clamp(x, min=lo), [randn(3, 4), randn(3, 4, seed=1)]),
    Case("clamp_int", lambda x: (x.clamp(-3, 4), x.clamp(min=1.5)), [ints(3, 4)]),
    Case("clamp_min_max", lambda x: (torch.clamp_min(x, 0.2), torch.clamp_max(x, 0.2), torch.clip(x, -1, 1)), [randn(3, 4)]),
    Case("clamp_inplace", clamp_inplace, [randn(3, 4)]),
    Case("clamp_f16", lambda x: x.clamp(-0.5, 0.5), [randn(3, 4, dtype=f16)], tol="half"),
    # minimum / maximum / fmin / fmax
    Case("maximum_minimum", lambda x, y: (torch.maximum(x, y), torch.minimum(x, y), torch.max(x, y), torch.min(x, y)), [special(), randn(2, 6, seed=1)]),
    Case("fmax_fmin", lambda x, y: (torch.fmax(x, y), torch.fmin(x, y)), [special(), randn(2, 6, seed=1)]),
    Case("maximum_int", lambda x, y: torch.maximum(x, y), [ints(3, 4), ints(4, seed=1)], tol="exact"),
    # other binary float ops
    Case("atan2_hypot", lambda x, y: (torch.atan2(x, y), torch.hypot(x, y)), [randn(3, 4), randn(3, 4, seed=1)]),
    Case("logaddexp", lambda x, y: torch.logaddexp(x, y), [randn(3, 4) * 10, randn(3, 4, seed=1)]),
    Case("logaddexp_inf", lambda x, y: torch.logaddexp(x, y), [torch.tensor([inf, -inf, inf, 1.0, nan]), torch.tensor([inf, -inf, -inf, -inf, 0.0])]),
    Case("xlogy", lambda x, y: torch.xlogy(x, y), [torch.tensor([0.0, 1.0, 2.0, 0.0, 3.0]), torch.tensor([0.0, 2.0, 0.5, nan, 4.0])]),
    Case("lerp", lambda x, y, w: (torch.lerp(x, y, 0.3), torch.lerp(x, y, 0.8), torch.lerp(x, y, w)), [randn(3, 4), randn(3, 4, seed=1), torch.rand(4, generator=torch.Generator().manual_seed(2))]),
    Case("addcmul_addcdiv", lambda x, a, b: (torch.addcmul(x, a, b, value=0.5), torch.addcdiv(x, a, b, value=-2)), [randn(3, 4), randn(3, 4, seed=1), pos(4, seed=2)]),
    Case("addcmul_int", lambda x, a, b: torch.addcmul(x, a, b, value=2), [ints(3, 4), ints(3, 4, seed=1), ints(3, 4, seed=2)], tol="exact"),
    Case("nan_to_num", lambda x: (torch.nan_to_num(x), torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0)), [special()]),
    Case("nan_to_num_f16", lambda x: torch.nan_to_num(x), [special().to(f16)], tol="half"),
    Case("float_predicates", lambda x: (x.isnan(), x.isinf(), x.isfinite(), x.isposinf(), x.isneginf(), x.signbit()), [special()], tol="exact"),
    Case("int_predicates", lambda x: (x.isnan(), x.isfinite()), [ints(3, 4)], tol="exact"),
    # comparisons
    Case("compare", lambda x, y: (x == y, x != y, x < y, x <= y, x > y, x >= y), [randint(0, 3, 3, 4).float(), randint(0, 3, 4, seed=1).float()], tol="exact"),
    Case("compare_scalar", lambda x: (x == 0.5, x < 0, x >= 1.5, x != 2.5), [special()], tol="exact"),
    Case("compare_int_float", lambda x: (x < 2.5, x == 3), [ints(3, 4)], tol="exact"),
    Case("compare_i8_overflow", lambda x: x < 1000, [ints(3, 4, dtype=i8)], tol="exact"),
    Case("compare_nan", lambda x, y: (x == y, x < y, x != y), [special(), special().flip(1)], tol="exact"),
    Case("compare_inplace", lambda x, y: x.clone().lt_(y), [randn(3, 4), randn(3, 4, seed=1)]),
    # logical / bitwise
    Case("logical", lambda x, y: (torch.logical_and(x, y), torch.logical_or(x, y), torch.logical_xor(x, y), torch.logical_not(x)), [special(), randint(0, 2, 2, 6).float()], tol="exact"),
    Case("logical_bool", lambda x, y: (x & y, x | y, x ^ y, ~x), [randn(3, 4) > 0, randn(3, 4, seed=1) > 0], tol="exact"),
    Case("bitwise_int", lambda x, y: (x & y, x | y, x ^ y, ~x), [ints(3, 4), ints(3, 4, seed=1)], tol="exact"),
    Case("bitwise_scalar_i32", lambda x: (x & 6, x | 1, x ^ -1), [ints(3, 4, dtype=i32)], tol="exact"),
    Case("shifts", lambda x, s: (x << s, x >> s, x << 2, x >> 1), [ints(3, 4), randint(0, 5, 3, 4, seed=1)], tol="exact"),
    Case("shifts_u8", lambda x: (x << 3, x >> 2), [randint(0, 255, 3, 4, dtype=u8)], tol="exact"),
    # uint8 / int8 / int16 results that leave the dtype's range (wrapped as torch does), each
    # consumed by a further op: on the GPU the wrap must happen on store, not on download.
    Case("small_int_wrap", small_int_wrap, [randint(0, 255, 3, 4, dtype=u8), randint(-128, 127, 3, 4, seed=1, dtype=i8), randn(3, 4, seed=2) * 5], tol="exact"),
    # where / masked_fill
    Case("where", lambda c, x, y: torch.where(c, x, y), [randn(3, 4) > 0, randn(3, 4, seed=1), randn(4, seed=2)]),
    Case("where_scalars", lambda c, x: (torch.where(c, x, 0.0), torch.where(c, -1.0, x), torch.where(c, 1.0, 0.0), torch.where(c, 1, 0)), [randn(3, 4) > 0, randn(3, 4, seed=1)]),
    Case("where_int_float", lambda c, x: torch.where(c, x, 0.5), [randn(3, 4) > 0, ints(3, 4)]),
    Case("where_promote", lambda c, x, y: torch.where(c, x, y), [randn(3, 4) > 0, ints(3, 4), randn(3, 4, seed=1, dtype=f64)]),
    Case("masked_fill", lambda x, m: (x.masked_fill(m, -1e9), x.masked_fill(m, torch.tensor(2.0))), [randn(2, 3, 4), randn(3, 4, seed=1) > 0]),
    Case("masked_fill_bcast_self", lambda x, m: x.masked_fill(m, 0.0), [randn(4), randn(3, 4, seed=1) > 0]),
    Case("masked_fill_int", lambda x, m: x.masked_fill(m, 7), [ints(3, 4), randn(3, 4, seed=1) > 0], tol="exact"),
    Case("masked_fill_inplace", masked_fill_inplace, [randn(3, 4), randn(3, 4, seed=1) > 0]),
    # copies and conversions
    Case("clone_t", lambda x: x.t().clone(), [randn(3, 4)]),
    Case("contiguous", lambda x: x.t().contiguous().view(-1), [randn(3, 4)]),
    Case("detach", lambda x: x.detach() * 2, [randn(3, 4)]),
    Case("copy_slice", copy_into_slice, [randn(3, 5), randn(3, 2, seed=1)]),
    Case("copy_bcast", copy_into_slice, [randn(3, 5), randn(2, seed=1)]),
    Case("to_int", lambda x: (x.to(torch.int64), x.to(i32), x.to(u8), x.to(torch.bool)), [randn(3, 4) * 5], tol="exact"),
    Case("to_float", lambda x: (x.to(torch.float32), x.to(f64), x.float() / 2), [ints(3, 4)]),
    Case("to_half", lambda x: (x.to(f16), x.to(bf16), x.half().float()), [randn(3, 4)], tol="half"),
    Case("to_same", lambda x: x.to(torch.float32) + 1, [randn(3, 4)]),
    Case("to_bool_int", lambda x: (x.to(torch.bool), x.bool().long()), [ints(3, 4)], tol="exact"),
    Case("type_as", lambda x, y: x.type_as(y) + y, [randn(3, 4) * 5, ints(3, 4)], tol="exact"),
    Case("fill_zero", fill_zero, [randn(3, 4)]),
    Case("lift_fresh_copy", lambda x: x + torch.tensor([1.0, 2.0, 3.0, 4.0]), [randn(3, 4)]),
    Case("zero_d_ops", lambda x: (x * 2, x.exp(), x > 0, x.clamp(0, 1)), [torch.tensor(0.7)]),
]

# Cases whose core ATen graph is node-for-node the training IR graph (checked with torch 2.15):
# exporting them twice only doubles the fixture, so they export once.
SAME_IN_CORE = {
    "add", "add_bcast_row", "add_bcast_mid", "add_bcast_both", "add_bcast_left", "add_alpha", "add_scalar",
    "add_int_float_scalar", "add_i32", "add_i8_wrap", "add_u8_i8", "add_f16", "add_bf16_f32", "add_f64", "add_0d",
    "add_int_0d_float", "add_strided", "add_empty", "add_bool", "sub_alpha", "sub_int", "mul", "mul_scalar_int",
    "mul_bool", "div", "div_special", "div_int", "div_trunc", "div_floor", "div_trunc_int", "div_floor_int",
    "remainder", "remainder_int", "remainder_scalar_self", "fmod", "fmod_int", "pow_2", "pow_half", "pow_neg1",
    "pow_float", "pow_tensor", "pow_scalar_base", "pow_int", "pow_int_float_exp", "unary_exp_log", "unary_trig",
    "unary_inverse_trig", "unary_roots", "unary_erf", "unary_special", "unary_int_to_float", "unary_f16",
    "unary_bf16", "unary_f64", "round_decimals", "rounding_int", "clamp", "clamp_tensor", "clamp_tensor_min_only",
    "clamp_int", "clamp_f16", "fmax_fmin", "maximum_int", "atan2_hypot", "compare", "compare_scalar",
    "compare_int_float", "compare_i8_overflow", "compare_nan", "logical", "shifts", "shifts_u8", "where",
    "where_promote", "zero_d_ops",
}
for _c in CASES:
    if _c.name in SAME_IN_CORE:
        _c.core = False
