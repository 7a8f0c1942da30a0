// NaN and infinity helpers and sin / cos to f32 accuracy, shared by the elementwise math
// (math.wgsl, which comes after this in the module) and the complex and FFT kernels
// (complex.wgsl, fft.wgsl): src/gpu/shaders.rs prepends this file to those modules.

// +inf and NaN as run-time values: WGSL forbids them in constant expressions (Chrome's
// Tint rejects `bitcast<f32>(0x7f800000u)`), a private variable's value is not one.
var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

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
