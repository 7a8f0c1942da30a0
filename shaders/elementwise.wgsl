// Elementwise kernels. Every input is a strided view of its storage (rank <= 8; a broadcast
// dimension has stride 0), so views and broadcasting never need a copy first. The output is
// contiguous. `OP` selects the operation; its codes are the `UnaryOp`/`BinaryOp` enums in
// src/gpu/kernels.rs. `Meta` mirrors `ElemMeta` there (a naga test checks the size).

struct Meta {
    numel: u32,
    rank: u32,
    // Threads per row of the 2-D dispatch grid (x workgroups * 64).
    row: u32,
    // Bit 0: `b` is the scalar `p0` rather than a tensor.
    flags: u32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
    c_strides: array<vec4<u32>, 2>,
    // Element offsets of a, b, c into their storage.
    offsets: vec4<u32>,
    alpha: f32,
    beta: f32,
    p0: f32,
    p1: f32,
}

override OP: u32 = 0u;

// Storage element types: f32 here. The f16 variants (src/gpu/shaders.rs, `Elems`) rewrite
// these three lines and put `enable f16;` first; arithmetic stays f32, loads go through
// `f32(...)` and stores through `to_out`.
alias TIn = f32;
alias TOut = f32;
const OUT_F16: bool = false;

// +inf and NaN as run-time values: WGSL forbids them in constant expressions (Chrome's
// Tint rejects `bitcast<f32>(0x7f800000u)`), a private variable's value is not one.
var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> a: array<TIn>;
@group(0) @binding(3) var<storage, read> b: array<TIn>;
@group(0) @binding(4) var<storage, read> c: array<TIn>;
@group(0) @binding(5) var<storage, read_write> out_u: array<u32>;
@group(0) @binding(6) var<storage, read> cond: array<u32>;

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 {
    return v[d / 4u][d % 4u];
}

// Storage offsets of element `i` (row-major over `shape`) in a, b and c.
fn offsets(i: u32) -> vec3<u32> {
    var rem = i;
    var o = params.offsets.xyz;
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = dim(params.shape, d);
        let k = rem % n;
        rem = rem / n;
        o = o + k * vec3<u32>(dim(params.a_strides, d), dim(params.b_strides, d), dim(params.c_strides, d));
    }
    return o;
}

fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

// erf with |error| < 1.2e-7 (Numerical Recipes erfc, Chebyshev fit).
fn erf_(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    return select(r - 1.0, 1.0 - r, x >= 0.0);
}

fn tanh_(x: f32) -> f32 {
    // Some drivers compute tanh as (e^2x - 1) / (e^2x + 1), which is NaN for large |x|.
    return tanh(clamp(x, -20.0, 20.0));
}

fn is_nan(x: f32) -> bool {
    // `x != x` may be folded away by fast-math drivers; test the bits.
    let u = bitcast<u32>(x);
    return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
}

fn nan_() -> f32 {
    return bitcast<f32>(NAN_BITS);
}

fn inf_() -> f32 {
    return bitcast<f32>(INF_BITS);
}

// A result in the output's type. f16 ends at 65504: torch rounds larger values to inf,
// WGSL leaves that conversion undefined, so it is made explicit.
fn to_out(x: f32) -> TOut {
    if OUT_F16 && abs(x) >= 65520.0 && !is_nan(x) {
        return TOut(select(-inf_(), inf_(), x > 0.0));
    }
    return TOut(x);
}

// log, sqrt and inverseSqrt are indeterminate outside their domain in WGSL (SwiftShader gives
// log|x|): torch's NaN and infinities made explicit.
fn log_(x: f32) -> f32 {
    if x < 0.0 || is_nan(x) {
        return nan_();
    }
    return select(log(x), -inf_(), x == 0.0);
}

fn sqrt_(x: f32) -> f32 {
    return select(sqrt(x), nan_(), x < 0.0 || is_nan(x));
}

fn rsqrt_(x: f32) -> f32 {
    if x < 0.0 || is_nan(x) {
        return nan_();
    }
    return select(inverseSqrt(x), inf_(), x == 0.0);
}

// sin and cos to f32 accuracy (WGSL only promises 2^-11 absolute error, and SwiftShader is
// that loose): Cody-Waite reduction by pi/4, then Cephes' minimax polynomials.
fn sincos_poly(r: f32, use_cos: bool) -> f32 {
    let z = r * r;
    if use_cos {
        return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z
            - 0.5 * z + 1.0;
    }
    return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}

fn sin_cos(x: f32, want_cos: bool) -> f32 {
    if is_nan(x) || abs(x) == inf_() {
        return nan_();
    }
    let ax = abs(x);
    var j = i32(ax * 1.27323954473516);
    var y = f32(j);
    if (j & 1) != 0 {
        j = j + 1;
        y = y + 1.0;
    }
    j = j & 7;
    var neg = !want_cos && x < 0.0;
    if j > 3 {
        j = j - 4;
        neg = !neg;
    }
    if want_cos && j > 1 {
        neg = !neg;
    }
    let r = ((ax - y * 0.78515625) - y * 2.4187564849853515625e-4) - y * 3.77489497744594108e-8;
    let poly_cos = (j == 1 || j == 2) != want_cos;
    let v = sincos_poly(r, poly_cos);
    return select(v, -v, neg);
}

// torch.pow: a negative base with an integral exponent keeps its sign rule.
fn pow_(x: f32, y: f32) -> f32 {
    if y == 0.0 {
        return 1.0;
    }
    if x < 0.0 && floor(y) == y {
        let m = pow(-x, y);
        return select(m, -m, abs(y % 2.0) == 1.0);
    }
    if x == 0.0 {
        return select(0.0, bitcast<f32>(INF_BITS), y < 0.0);
    }
    return pow(x, y);
}

fn unary_op(x: f32) -> f32 {
    switch OP {
        case 0u: { return x; }
        case 1u: { return -x; }
        case 2u: { return select(max(x, 0.0), x, is_nan(x)); }
        case 3u: { return 1.0 / (1.0 + exp(-x)); }
        case 4u: { return tanh_(x); }
        case 5u: { return exp(x); }
        case 6u: { return log_(x); }
        case 7u: { return sqrt_(x); }
        case 8u: { return rsqrt_(x); }
        case 9u: { return abs(x); }
        // gelu (erf form), gelu (tanh form), silu
        case 10u: { return 0.5 * x * (1.0 + erf_(x * 0.70710678118654752)); }
        case 11u: { return 0.5 * x * (1.0 + tanh_(0.79788456080286536 * (x + 0.044715 * x * x * x))); }
        case 12u: { return x / (1.0 + exp(-x)); }
        case 13u: { return sin_cos(x, false); }
        case 14u: { return sin_cos(x, true); }
        case 15u: { return 1.0 / x; }
        // x * alpha + beta (scalar add/sub/mul/div folded on the host)
        case 16u: { return x * params.alpha + params.beta; }
        case 17u: { return pow_(x, params.alpha); }
        // clamp(x, alpha, beta), NaN kept
        case 18u: { return select(min(max(x, params.alpha), params.beta), x, is_nan(x)); }
        case 19u: { return select(x * params.alpha, x, x > 0.0); }
        case 20u: { return erf_(x); }
        case 21u: { return floor(x); }
        case 22u: { return ceil(x); }
        // hardsigmoid, hardswish
        case 23u: { return clamp(x / 6.0 + 0.5, 0.0, 1.0); }
        case 24u: { return x * clamp(x / 6.0 + 0.5, 0.0, 1.0); }
        case 25u: { return sign(x); }
        // elu (alpha)
        case 26u: { return select(params.alpha * (exp(x) - 1.0), x, x > 0.0); }
        // softplus (beta = alpha, threshold = beta)
        case 27u: { return select(log(1.0 + exp(x * params.alpha)) / params.alpha, x, x * params.alpha > params.beta); }
        case 28u: { return x * x; }
        default: { return x; }
    }
}

fn binary_op(x: f32, y: f32) -> f32 {
    switch OP {
        case 0u: { return x + params.alpha * y; }
        case 1u: { return x - params.alpha * y; }
        case 2u: { return x * y; }
        case 3u: { return x / y; }
        case 4u: { return select(max(x, y), x + y, is_nan(x) || is_nan(y)); }
        case 5u: { return select(min(x, y), x + y, is_nan(x) || is_nan(y)); }
        case 6u: { return pow_(x, y); }
        // y - alpha * x (rsub)
        case 7u: { return y - params.alpha * x; }
        default: { return x; }
    }
}

fn compare_op(x: f32, y: f32) -> bool {
    switch OP {
        case 0u: { return x == y; }
        case 1u: { return x != y || is_nan(x) || is_nan(y); }
        case 2u: { return x < y; }
        case 3u: { return x <= y; }
        case 4u: { return x > y; }
        case 5u: { return x >= y; }
        default: { return false; }
    }
}

fn b_value(o: u32) -> f32 {
    if (params.flags & 1u) != 0u {
        return params.p0;
    }
    return f32(b[o]);
}

@compute @workgroup_size(64)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let x = f32(a[offsets(i).x]);
    // NaN in, NaN out (as torch), except pow(NaN, 0) = 1 and sign(NaN) = 0.
    out[i] = to_out(select(unary_op(x), x, is_nan(x) && OP != 17u && OP != 25u));
}

@compute @workgroup_size(64)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[i] = to_out(binary_op(f32(a[o.x]), b_value(o.y)));
}

@compute @workgroup_size(64)
fn compare(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out_u[i] = select(0u, 1u, compare_op(f32(a[o.x]), b_value(o.y)));
}

// where(cond, a, b): the condition is stored as u32 (bool); here `a`/`b` are bindings 2/3
// and the condition is read through `c_strides`.
@compute @workgroup_size(64)
fn where_(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[i] = to_out(select(b_value(o.y), f32(a[o.x]), cond[o.z] != 0u));
}
