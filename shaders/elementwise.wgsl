// Elementwise kernels. Every input is a strided view of its storage (rank <= 8; a broadcast
// dimension has stride 0), so views and broadcasting never need a copy first. The output is
// contiguous. `OP` selects the operation: a code of the `UnaryOp` / `BinaryOp` /
// `CompareOp` enums of src/gpu/kernels/params.rs, whose constants (`UnaryOp_Silu`...) are
// generated into this module from those enums, and the op itself is the function of that
// code in math.wgsl (which the module includes first). `Meta` mirrors `ElemMeta` there (a
// naga test checks the size).

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


@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> a: array<TIn>;
@group(0) @binding(3) var<storage, read> b: array<TIn>;
@group(0) @binding(4) var<storage, read> c: array<TIn>;
@group(0) @binding(5) var<storage, read_write> out_u: array<u32>;
@group(0) @binding(6) var<storage, read> cond: array<u32>;


// Storage offsets of element `i` (row-major over `shape`) in a, b and c.
// The host merges dims walked as one (a contiguous operation has rank 1), and the outermost
// dim needs no division: what is left of `i` is its index.
fn offsets(i: u32) -> vec3<u32> {
    var rem = i;
    var o = params.offsets.xyz;
    var d = params.rank;
    loop {
        if d <= 1u {
            break;
        }
        d = d - 1u;
        let n = params.shape[d / 4u][d % 4u];
        let k = rem % n;
        rem = rem / n;
        o = o + k * vec3<u32>(params.a_strides[d / 4u][d % 4u], params.b_strides[d / 4u][d % 4u], params.c_strides[d / 4u][d % 4u]);
    }
    if d == 1u {
        o = o + rem * vec3<u32>(params.a_strides[0].x, params.b_strides[0].x, params.c_strides[0].x);
    }
    return o;
}

fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

// A result in the output's type. f16 ends at 65504: torch rounds larger values to inf,
// WGSL leaves that conversion undefined, so it is made explicit.
fn to_out(x: f32) -> TOut {
    if OUT_F16 && abs(x) >= 65520.0 && !is_nan(x) {
        return TOut(select(-inf_(), inf_(), x > 0.0));
    }
    return TOut(x);
}

fn b_value(o: u32) -> f32 {
    if (params.flags & 1u) != 0u {
        return params.p0;
    }
    return f32(b[o]);
}

// The op of this pipeline (its `OP` override constant) on the kernel parameters.
fn unary_value(x: f32) -> f32 {
    return unary_value_k(OP, x, params.alpha, params.beta, params.p1);
}

fn binary_op(x: f32, y: f32) -> f32 {
    return binary_k(OP, x, y, params.alpha);
}

fn compare_op(x: f32, y: f32) -> bool {
    return compare_k(OP, x, y);
}


@compute @workgroup_size(64)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    out[i] = to_out(unary_value(f32(a[offsets(i).x])));
}

@compute @workgroup_size(64)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    // flags bit 2: the operands swapped (a Python number as `self`).
    if (params.flags & 4u) != 0u {
        out[i] = to_out(binary_op(b_value(o.y), f32(a[o.x])));
        return;
    }
    out[i] = to_out(binary_op(f32(a[o.x]), b_value(o.y)));
}

// In place (relu_, add_, mul_...): `self` is `out`, each element read and written at its
// own strided offset (a_strides, offsets.x) by one invocation. `b` never shares its buffer.
@compute @workgroup_size(64)
fn unary_ip(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let j = offsets(i).x;
    out[j] = to_out(unary_value(f32(out[j])));
}

@compute @workgroup_size(64)
fn binary_ip(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[o.x] = to_out(binary_op(f32(out[o.x]), f32(b[o.y])));
}

// binary_ip with the number p0 as `b` (no `b` binding).
@compute @workgroup_size(64)
fn binary_ip_s(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let j = offsets(i).x;
    out[j] = to_out(binary_op(f32(out[j]), params.p0));
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
    // flags bit 1: the condition negated (masked_fill: cond ? b : a).
    let c = (cond[o.z] != 0u) != ((params.flags & 2u) != 0u);
    out[i] = to_out(select(b_value(o.y), f32(a[o.x]), c));
}

// lerp(a, b, weight) with a tensor weight read from `c` through `c_strides`.
@compute @workgroup_size(64)
fn lerp3(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[i] = to_out(lerp_(f32(a[o.x]), b_value(o.y), f32(c[o.z])));
}

// clamp with tensor bounds: the lower bound `b` (or the number p0), the upper bound `c`
// through `c_strides` (or the number p1 when flags bit 3 is set); NaN in any operand gives
// NaN (torch's maximum/minimum).
@compute @workgroup_size(64)
fn clamp3(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    let x = f32(a[o.x]);
    let lo = b_value(o.y);
    var hi = params.p1;
    if (params.flags & 8u) == 0u {
        hi = f32(c[o.z]);
    }
    var r = min(max(x, lo), hi);
    if is_nan(x) || is_nan(lo) || is_nan(hi) {
        r = nan_();
    }
    out[i] = to_out(r);
}
