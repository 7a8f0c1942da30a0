// Scalar math shared by the elementwise kernels and the fused kernels generated for
// elementwise chains (src/gpu/kernels/fused.rs): torch's special cases (NaN, infinities,
// signed zeros) made explicit, and every unary, binary and comparison op by its code
// (`unary_value_k(UnaryOp_Relu, x, ...)`). A pipeline whose op is an override constant
// (elementwise.wgsl) or a literal (a fused kernel) has the switch folded by the compiler.
// NaN / inf helpers and the accurate sin / cos come first, from trig.wgsl.

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

// torch.pow: a negative base with an integral exponent keeps its sign rule.
fn pow_(x: f32, y: f32) -> f32 {
    if y == 0.0 {
        return 1.0;
    }
    // NaN in, NaN out, except pow(1, NaN) = 1 (C's pow; SwiftShader gave pow(-1.5, NaN) = inf).
    if is_nan(x) || is_nan(y) {
        return select(nan_(), 1.0, x == 1.0);
    }
    if x < 0.0 && floor(y) == y {
        let m = pow(-x, y);
        return select(m, -m, abs(y % 2.0) == 1.0);
    }
    // A negative base with a fractional exponent is NaN, -inf's is inf or 0 (C's pow; WGSL
    // leaves pow undefined for negative bases: SwiftShader answers |x|^y).
    if x < 0.0 {
        if x == -inf_() {
            return select(0.0, inf_(), y > 0.0);
        }
        return nan_();
    }
    if x == 0.0 {
        return select(0.0, bitcast<f32>(INF_BITS), y < 0.0);
    }
    return pow(x, y);
}

fn is_inf(x: f32) -> bool {
    return abs(x) == inf_();
}

// log1p and expm1 accurate near 0 (Goldberg's trick: the rounding error of 1 + x cancels).
fn log1p_(x: f32) -> f32 {
    if x == inf_() {
        return x;
    }
    let u = 1.0 + x;
    if u == 1.0 {
        return x;
    }
    return log_(u) * (x / (u - 1.0));
}

fn expm1_(x: f32) -> f32 {
    if x > 88.7 {
        return inf_();
    }
    let u = exp(x);
    if u == 1.0 {
        return x;
    }
    let um1 = u - 1.0;
    if um1 == -1.0 {
        return -1.0;
    }
    return um1 * (x / log(u));
}

// atan (Cephes atanf): reduction by tan(3pi/8) and tan(pi/8), then a minimax polynomial.
fn atan_(x: f32) -> f32 {
    var ax = abs(x);
    var y = 0.0;
    if ax > 2.414213562373095 {
        y = 1.5707963267948966;
        ax = -1.0 / ax;
    } else if ax > 0.4142135623730950 {
        y = 0.7853981633974483;
        ax = (ax - 1.0) / (ax + 1.0);
    }
    let z = ax * ax;
    y = y + (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
        - 3.33329491539e-1) * z * ax + ax;
    return select(y, -y, x < 0.0);
}

// asin (Cephes asinf); NaN outside [-1, 1].
fn asin_(x: f32) -> f32 {
    var a = abs(x);
    if a > 1.0 {
        return nan_();
    }
    var z = 0.0;
    var big = false;
    if a > 0.5 {
        z = 0.5 * (1.0 - a);
        a = sqrt(z);
        big = true;
    } else {
        z = a * a;
    }
    var r = ((((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z
        + 7.4953002686e-2) * z + 1.6666752422e-1) * z * a + a;
    if big {
        r = 1.5707963267948966 - 2.0 * r;
    }
    return select(r, -r, x < 0.0);
}

fn acos_(x: f32) -> f32 {
    if abs(x) > 1.0 {
        return nan_();
    }
    if x < -0.5 {
        return 3.141592653589793 - 2.0 * asin_(sqrt(0.5 * (1.0 + x)));
    }
    if x > 0.5 {
        return 2.0 * asin_(sqrt(0.5 * (1.0 - x)));
    }
    return 1.5707963267948966 - asin_(x);
}

fn sinh_(x: f32) -> f32 {
    let ax = abs(x);
    var r = 0.0;
    if ax >= 9.0 {
        let e = exp(0.5 * ax);
        r = (0.5 * e) * e;
    } else {
        let u = expm1_(ax);
        r = 0.5 * (u + u / (u + 1.0));
    }
    return select(r, -r, x < 0.0);
}

fn cosh_(x: f32) -> f32 {
    let ax = abs(x);
    if ax >= 9.0 {
        let e = exp(0.5 * ax);
        return (0.5 * e) * e;
    }
    let e = exp(ax);
    return 0.5 * (e + 1.0 / e);
}

fn asinh_(x: f32) -> f32 {
    let ax = abs(x);
    var r = 0.0;
    if ax > 1e9 {
        r = log_(ax) + 0.6931471805599453;
    } else {
        r = log1p_(ax + ax * ax / (1.0 + sqrt(1.0 + ax * ax)));
    }
    return select(r, -r, x < 0.0);
}

fn acosh_(x: f32) -> f32 {
    if x < 1.0 {
        return nan_();
    }
    if x > 1e9 {
        return log_(x) + 0.6931471805599453;
    }
    let t = x - 1.0;
    return log1p_(t + sqrt(2.0 * t + t * t));
}

fn atanh_(x: f32) -> f32 {
    let ax = abs(x);
    if ax > 1.0 {
        return nan_();
    }
    let r = 0.5 * log1p_(2.0 * ax / (1.0 - ax));
    return select(r, -r, x < 0.0);
}

// erfc from the same Chebyshev fit as erf_ (relative accuracy kept in the tail).
fn erfc_(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    return select(2.0 - r, r, x >= 0.0);
}

// erfinv: torch's calc_erfinv (a rational first guess and two Newton steps).
fn erfinv_(y: f32) -> f32 {
    let ya = abs(y);
    if ya > 1.0 {
        return nan_();
    }
    if ya == 1.0 {
        return select(inf_(), -inf_(), y < 0.0);
    }
    var x = 0.0;
    if ya <= 0.7 {
        let z = y * y;
        let num = ((-0.140543331 * z + 0.914624893) * z - 1.645349621) * z + 0.886226899;
        let dem = (((0.012229801 * z - 0.329097515) * z + 1.442710462) * z - 2.118377725) * z + 1.0;
        x = y * num / dem;
    } else {
        let z = sqrt(-log((1.0 - ya) / 2.0));
        let num = ((1.641345311 * z + 3.429567803) * z - 1.624906493) * z - 1.970840454;
        let dem = (1.637067800 * z + 3.543889200) * z + 1.0;
        x = select(num, -num, y < 0.0) / dem;
    }
    for (var k = 0; k < 2; k = k + 1) {
        x = x - (erf_(x) - y) / (1.1283791670955126 * exp(-x * x));
    }
    return x;
}

fn log2_(x: f32) -> f32 {
    if x < 0.0 || is_nan(x) {
        return nan_();
    }
    return select(log2(x), -inf_(), x == 0.0);
}

fn softplus1_(x: f32) -> f32 {
    // log(1 + e^x), stable for large |x|.
    return max(x, 0.0) + log1p_(exp(-abs(x)));
}

// C fmod: the sign of x, |r| < |y|; NaN for y = 0 or an infinite x.
fn fmod_(x: f32, y: f32) -> f32 {
    if y == 0.0 || is_inf(x) || is_nan(x) || is_nan(y) {
        return nan_();
    }
    if is_inf(y) {
        return x;
    }
    let ay = abs(y);
    var r = abs(x);
    // Exact for |x / y| < 2^24; beyond that repeated subtraction of scaled y.
    var q = trunc(r / ay);
    r = fma(-q, ay, r);
    if r < 0.0 {
        r = r + ay;
    }
    if r >= ay {
        r = r - ay;
    }
    return select(r, -r, x < 0.0 || (x == 0.0 && bitcast<u32>(x) != 0u));
}

// hypot without overflow or underflow of the squares; inf wins over NaN as in C.
fn hypot_(x: f32, y: f32) -> f32 {
    let ax = abs(x);
    let ay = abs(y);
    if is_inf(ax) || is_inf(ay) {
        return inf_();
    }
    if is_nan(ax) || is_nan(ay) {
        return nan_();
    }
    let m = max(ax, ay);
    if m == 0.0 {
        return 0.0;
    }
    let r = min(ax, ay) / m;
    return m * sqrt(1.0 + r * r);
}

// Python's modulo (torch.remainder on floats): fmod, moved to the sign of y.
fn remainder_(x: f32, y: f32) -> f32 {
    let m = fmod_(x, y);
    if m != 0.0 && (y < 0.0) != (m < 0.0) {
        return m + y;
    }
    return m;
}

// torch's div_floor_floating: floor division that agrees with remainder.
fn div_floor_(a: f32, b: f32) -> f32 {
    if b == 0.0 {
        return a / b;
    }
    let m = fmod_(a, b);
    var d = (a - m) / b;
    if m != 0.0 && (b < 0.0) != (m < 0.0) {
        d = d - 1.0;
    }
    if d != 0.0 {
        var f = floor(d);
        if d - f > 0.5 {
            f = f + 1.0;
        }
        return f;
    }
    // copysign(0, a / b)
    let q = a / b;
    return bitcast<f32>(bitcast<u32>(q) & 0x80000000u);
}

// torch.lerp: the two-sided formula (exact at weight 0 and 1).
fn lerp_(s: f32, e: f32, w: f32) -> f32 {
    if abs(w) < 0.5 {
        return s + w * (e - s);
    }
    return e - (e - s) * (1.0 - w);
}

fn logaddexp_(x: f32, y: f32) -> f32 {
    if is_nan(x) || is_nan(y) {
        return nan_();
    }
    if is_inf(x) && x == y {
        return x;
    }
    let m = max(x, y);
    return m + log1p_(exp(-abs(x - y)));
}

// atan2(y, x) from atan_ with the quadrant and signed-zero rules of C.
fn atan2_(y: f32, x: f32) -> f32 {
    if is_nan(x) || is_nan(y) {
        return nan_();
    }
    let pi = 3.141592653589793;
    let y_neg = (bitcast<u32>(y) & 0x80000000u) != 0u;
    let x_neg = (bitcast<u32>(x) & 0x80000000u) != 0u;
    var r = 0.0;
    if is_inf(x) && is_inf(y) {
        r = select(0.7853981633974483, 2.356194490192345, x_neg);
    } else if is_inf(x) {
        r = select(0.0, pi, x_neg);
    } else if is_inf(y) || x == 0.0 {
        if y == 0.0 {
            r = select(0.0, pi, x_neg);
        } else {
            r = 1.5707963267948966;
        }
    } else {
        let a = atan_(abs(y / x));
        r = select(a, pi - a, x < 0.0);
    }
    return select(r, -r, y_neg);
}

fn unary_op2_k(op: u32, x: f32, alpha: f32, beta: f32, p1: f32) -> f32 {
    switch op {
        case UnaryOp_Log1p: { return log1p_(x); }
        case UnaryOp_Expm1: { return expm1_(x); }
        // round half to even, trunc, frac
        case UnaryOp_Round: { return round(x); }
        case UnaryOp_Trunc: { return trunc(x); }
        case UnaryOp_Frac: { return x - trunc(x); }
        case UnaryOp_Atan: { return atan_(x); }
        case UnaryOp_Tan: { return sin_cos(x, false) / sin_cos(x, true); }
        case UnaryOp_Sinh: { return sinh_(x); }
        case UnaryOp_Cosh: { return cosh_(x); }
        case UnaryOp_Asin: { return asin_(x); }
        case UnaryOp_Acos: { return acos_(x); }
        case UnaryOp_Asinh: { return asinh_(x); }
        case UnaryOp_Acosh: { return acosh_(x); }
        case UnaryOp_Atanh: { return atanh_(x); }
        case UnaryOp_Erfc: { return erfc_(x); }
        case UnaryOp_Log10: { return log_(x) * 0.43429448190325176; }
        case UnaryOp_Log2: { return log2_(x); }
        case UnaryOp_Exp2: { return exp2(x); }
        // logit: alpha = eps, clamped when beta != 0
        case UnaryOp_Logit: {
            var v = x;
            if beta != 0.0 {
                v = clamp(v, alpha, 1.0 - alpha);
            }
            return log_(v / (1.0 - v));
        }
        // nan_to_num (alpha nan, beta +inf, p1 -inf)
        case UnaryOp_NanToNum: {
            if is_nan(x) {
                return alpha;
            }
            if x == inf_() {
                return beta;
            }
            if x == -inf_() {
                return p1;
            }
            return x;
        }
        // threshold: x <= alpha ? beta : x
        case UnaryOp_Threshold: { return select(x, beta, x <= alpha); }
        // hardshrink, softshrink (alpha = lambda)
        case UnaryOp_Hardshrink: { return select(x, 0.0, x >= -alpha && x <= alpha); }
        case UnaryOp_Softshrink: {
            if x > alpha {
                return x - alpha;
            }
            if x < -alpha {
                return x + alpha;
            }
            return x * 0.0;
        }
        // log_sigmoid, mish
        case UnaryOp_LogSigmoid: { return min(x, 0.0) - log1p_(exp(-abs(x))); }
        case UnaryOp_Mish: { return x * tanh_(softplus1_(x)); }
        // round to decimals: alpha = 10^|d|, beta != 0 for d < 0
        case UnaryOp_RoundDecimals: {
            if beta != 0.0 {
                return round(x / alpha) * alpha;
            }
            return round(x * alpha) / alpha;
        }
        case UnaryOp_Erfinv: { return erfinv_(x); }
        // pow(alpha, x) (a scalar base), NaN exponent kept except for base 1
        case UnaryOp_PowScalarBase: {
            if alpha == 1.0 {
                return 1.0;
            }
            if is_nan(x) {
                return x;
            }
            return pow_(alpha, x);
        }
        case UnaryOp_FmodScalar: { return fmod_(x, alpha); }
        // lgamma, digamma, the Bessel I functions, ndtr... (special.wgsl)
        default: { return special_k(op, x); }
    }
}

fn unary_k(op: u32, x: f32, alpha: f32, beta: f32, p1: f32) -> f32 {
    switch op {
        case UnaryOp_Copy: { return x; }
        case UnaryOp_Neg: { return -x; }
        case UnaryOp_Relu: { return select(max(x, 0.0), x, is_nan(x)); }
        case UnaryOp_Sigmoid: { return 1.0 / (1.0 + exp(-x)); }
        case UnaryOp_Tanh: { return tanh_(x); }
        case UnaryOp_Exp: { return exp(x); }
        case UnaryOp_Log: { return log_(x); }
        case UnaryOp_Sqrt: { return sqrt_(x); }
        case UnaryOp_Rsqrt: { return rsqrt_(x); }
        case UnaryOp_Abs: { return abs(x); }
        // gelu (erf form), gelu (tanh form), silu
        case UnaryOp_Gelu: { return 0.5 * x * (1.0 + erf_(x * 0.70710678118654752)); }
        case UnaryOp_GeluTanh: { return 0.5 * x * (1.0 + tanh_(0.79788456080286536 * (x + 0.044715 * x * x * x))); }
        case UnaryOp_Silu: { return x / (1.0 + exp(-x)); }
        case UnaryOp_Sin: { return sin_cos(x, false); }
        case UnaryOp_Cos: { return sin_cos(x, true); }
        case UnaryOp_Reciprocal: { return 1.0 / x; }
        // x * alpha + beta (scalar add/sub/mul/div folded on the host)
        case UnaryOp_Affine: { return x * alpha + beta; }
        case UnaryOp_PowScalar: { return pow_(x, alpha); }
        // clamp(x, alpha, beta), NaN kept
        case UnaryOp_Clamp: { return select(min(max(x, alpha), beta), x, is_nan(x)); }
        case UnaryOp_LeakyRelu: { return select(x * alpha, x, x > 0.0); }
        case UnaryOp_Erf: { return erf_(x); }
        case UnaryOp_Floor: { return floor(x); }
        case UnaryOp_Ceil: { return ceil(x); }
        // hardsigmoid, hardswish
        case UnaryOp_Hardsigmoid: { return clamp(x / 6.0 + 0.5, 0.0, 1.0); }
        case UnaryOp_Hardswish: { return x * clamp(x / 6.0 + 0.5, 0.0, 1.0); }
        case UnaryOp_Sign: { return sign(x); }
        // elu: x <= 0 ? expm1(x * beta) * alpha : x * p1 (alpha, scale, input_scale folded)
        case UnaryOp_Elu: { return select(alpha * expm1_(x * beta), x * p1, x > 0.0); }
        // softplus (beta = alpha, threshold = beta)
        case UnaryOp_Softplus: { return select(log(1.0 + exp(x * alpha)) / alpha, x, x * alpha > beta); }
        case UnaryOp_Square: { return x * x; }
        default: { return unary_op2_k(op, x, alpha, beta, p1); }
    }
}

fn binary_k(op: u32, x: f32, y: f32, alpha: f32) -> f32 {
    switch op {
        case BinaryOp_Add: { return x + alpha * y; }
        case BinaryOp_Sub: { return x - alpha * y; }
        case BinaryOp_Mul: { return x * y; }
        case BinaryOp_Div: { return x / y; }
        case BinaryOp_Maximum: { return select(max(x, y), x + y, is_nan(x) || is_nan(y)); }
        case BinaryOp_Minimum: { return select(min(x, y), x + y, is_nan(x) || is_nan(y)); }
        case BinaryOp_Pow: { return pow_(x, y); }
        // y - alpha * x (rsub)
        case BinaryOp_Rsub: { return y - alpha * x; }
        case BinaryOp_Fmod: { return fmod_(x, y); }
        // lerp(x, y, alpha)
        case BinaryOp_Lerp: { return lerp_(x, y, alpha); }
        case BinaryOp_LogAddExp: { return logaddexp_(x, y); }
        // prelu (y the weight), glu (x * sigmoid(y))
        case BinaryOp_Prelu: { return select(y * x, x, x > 0.0); }
        case BinaryOp_Glu: { return x / (1.0 + exp(-y)); }
        // fmax / fmin: a NaN operand is ignored
        case BinaryOp_Fmax: { return select(select(max(x, y), x, is_nan(y)), y, is_nan(x)); }
        case BinaryOp_Fmin: { return select(select(min(x, y), x, is_nan(y)), y, is_nan(x)); }
        case BinaryOp_Atan2: { return atan2_(x, y); }
        case BinaryOp_Hypot: { return hypot_(x, y); }
        // xlogy: 0 where x == 0 (unless y is NaN)
        case BinaryOp_Xlogy: { return select(select(x * log_(y), 0.0, x == 0.0), nan_(), is_nan(y)); }
        case BinaryOp_Xlog1py: { return select(select(x * log1p_(y), 0.0, x == 0.0), nan_(), is_nan(y)); }
        case BinaryOp_Remainder: { return remainder_(x, y); }
        case BinaryOp_FloorDiv: { return div_floor_(x, y); }
        case BinaryOp_DivTrunc: { return trunc(x / y); }
        default: { return x; }
    }
}

fn compare_k(op: u32, x: f32, y: f32) -> bool {
    switch op {
        case CompareOp_Eq: { return x == y; }
        case CompareOp_Ne: { return x != y || is_nan(x) || is_nan(y); }
        case CompareOp_Lt: { return x < y; }
        case CompareOp_Le: { return x <= y; }
        case CompareOp_Gt: { return x > y; }
        case CompareOp_Ge: { return x >= y; }
        // predicates of x alone: isnan, isinf, isfinite, signbit
        case CompareOp_IsNan: { return is_nan(x); }
        case CompareOp_IsInf: { return is_inf(x); }
        case CompareOp_IsFinite: { return !is_nan(x) && !is_inf(x); }
        case CompareOp_SignBit: { return (bitcast<u32>(x) & 0x80000000u) != 0u; }
        default: { return false; }
    }
}

// NaN in, NaN out (as torch), except pow(NaN, 0) = 1, sign(NaN) = 0, nan_to_num and
// pow(1, NaN) = 1.
fn unary_value_k(op: u32, x: f32, alpha: f32, beta: f32, p1: f32) -> f32 {
    return select(unary_k(op, x, alpha, beta, p1), x, is_nan(x) && op != UnaryOp_PowScalar && op != UnaryOp_Sign && op != UnaryOp_NanToNum && op != UnaryOp_PowScalarBase);
}
