// Complex64 elementwise kernels (src/gpu/kernels/complex.rs). A complex64 tensor is stored as
// interleaved f32 (re, im) pairs; a real operand is read as (x, 0). Every operand is a
// strided view of its storage in f32 words (rank <= 8, a broadcast dimension has stride 0;
// a complex operand's strides and offset are twice its element ones), the output is
// contiguous: complex (two words per element) or real (`abs`, `angle`). `OP` is a code of
// the `ComplexOp` enum of src/gpu/kernels/complex.rs (its constants are generated into this
// module). Arithmetic is f32 (torch's complex64 CPU kernels compute in complex64 too).
// `Meta` is the elementwise shader's (`ElemMeta`; `c_strides` unused).

struct Meta {
    numel: u32,
    rank: u32,
    // Threads per row of the 2-D dispatch grid (x workgroups * 64).
    row: u32,
    // Bit 0: `a` is complex; bit 1: `b` is complex; bit 2: `b` is a tensor (else the
    // scalar (s_re, s_im)); bit 3: the output is complex.
    flags: u32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
    c_strides: array<vec4<u32>, 2>,
    // Word offsets of a and b.
    offsets: vec4<u32>,
    // `b` is multiplied by alpha (add / sub's `alpha`; rsub's applies to `a`).
    alpha: f32,
    beta: f32,
    // The number `b` (re, im) when it is not a tensor.
    p0: f32,
    p1: f32,
}

override OP: u32 = 0u;

const A_COMPLEX: u32 = 1u;
const B_COMPLEX: u32 = 2u;
const B_TENSOR: u32 = 4u;
const OUT_COMPLEX: u32 = 8u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

// Word offsets of element `i` (row-major over `shape`) in a and b.
fn offsets(i: u32) -> vec2<u32> {
    var rem = i;
    var o = params.offsets.xy;
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.shape[d / 4u][d % 4u];
        let k = rem % n;
        rem = rem / n;
        o = o + k * vec2<u32>(params.a_strides[d / 4u][d % 4u], params.b_strides[d / 4u][d % 4u]);
    }
    return o;
}

fn load_a(w: u32) -> vec2<f32> {
    if (params.flags & A_COMPLEX) != 0u {
        return vec2<f32>(a[w], a[w + 1u]);
    }
    return vec2<f32>(a[w], 0.0);
}

fn load_b(w: u32) -> vec2<f32> {
    if (params.flags & B_TENSOR) == 0u {
        return vec2<f32>(params.p0, params.p1);
    }
    if (params.flags & B_COMPLEX) != 0u {
        return vec2<f32>(b[w], b[w + 1u]);
    }
    return vec2<f32>(b[w], 0.0);
}

fn cmul(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
}

// x / y by Smith's algorithm (no overflow of |y|^2 for large y).
fn cdiv(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    if abs(y.x) >= abs(y.y) {
        let r = y.y / y.x;
        let d = y.x + y.y * r;
        return vec2<f32>((x.x + x.y * r) / d, (x.y - x.x * r) / d);
    }
    let r = y.x / y.y;
    let d = y.y + y.x * r;
    return vec2<f32>((x.x * r + x.y) / d, (x.y * r - x.x) / d);
}

fn cabs(x: vec2<f32>) -> f32 {
    // Scaled, as hypot: no overflow of the squares.
    let m = max(abs(x.x), abs(x.y));
    if m == 0.0 || m != m || m > 3.4e38 {
        return select(m, abs(x.x) + abs(x.y), m != m);
    }
    let s = x / m;
    return m * sqrt(s.x * s.x + s.y * s.y);
}

fn apply(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    switch OP {
        case ComplexOp_Copy: {
            return x;
        }
        case ComplexOp_Add: {
            return x + params.alpha * y;
        }
        case ComplexOp_Sub: {
            return x - params.alpha * y;
        }
        case ComplexOp_RSub: {
            return y - params.alpha * x;
        }
        case ComplexOp_Mul: {
            return cmul(x, y);
        }
        case ComplexOp_Div: {
            return cdiv(x, y);
        }
        case ComplexOp_Neg: {
            return -x;
        }
        case ComplexOp_Conj: {
            return vec2<f32>(x.x, -x.y);
        }
        case ComplexOp_Abs: {
            return vec2<f32>(cabs(x), 0.0);
        }
        case ComplexOp_Angle: {
            return vec2<f32>(atan2(x.y, x.x), 0.0);
        }
        case ComplexOp_Exp: {
            let r = exp(x.x);
            return vec2<f32>(r * sin_cos(x.y, true), r * sin_cos(x.y, false));
        }
        case ComplexOp_Polar: {
            return vec2<f32>(x.x * sin_cos(y.x, true), x.x * sin_cos(y.x, false));
        }
        case ComplexOp_Make: {
            return vec2<f32>(x.x, y.x);
        }
        default: {
            return x;
        }
    }
}

@compute @workgroup_size(64)
fn elementwise(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    let r = apply(load_a(o.x), load_b(o.y));
    if (params.flags & OUT_COMPLEX) != 0u {
        out[2u * i] = r.x;
        out[2u * i + 1u] = r.y;
    } else {
        out[i] = r.x;
    }
}
