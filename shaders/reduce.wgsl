// Reductions along any set of dimensions (f32: `reduce`; int and bool: `reduce_i`, which
// wraps around in 32 bits): the input is viewed as [kept..., reduced...]
// (strides permuted on the host, no copy); one thread per output element loops over the
// reduced elements. `OP`: 0 sum (times `scale`, so mean is sum * 1/n), 1 max, 2 min.
// `Meta` mirrors `ReduceMeta` in src/gpu/kernels.rs.

struct Meta {
    n_out: u32,
    n_red: u32,
    kept_rank: u32,
    red_rank: u32,
    kept_shape: array<vec4<u32>, 2>,
    kept_strides: array<vec4<u32>, 2>,
    red_shape: array<vec4<u32>, 2>,
    red_strides: array<vec4<u32>, 2>,
    offset: u32,
    row: u32,
    scale: f32,
    _p0: u32,
}

override OP: u32 = 0u;

// +inf and NaN as run-time values: WGSL forbids them in constant expressions (Chrome's
// Tint rejects `bitcast<f32>(0x7f800000u)`), a private variable's value is not one.
var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

// Storage element types of `reduce` (see elementwise.wgsl; src/gpu/shaders.rs `Elems`).
alias TIn = f32;
alias TOut = f32;
const OUT_F16: bool = false;

// A result in the output's type; past f16's range, inf as torch (see elementwise.wgsl).
fn to_out(v: f32) -> TOut {
    if OUT_F16 && abs(v) >= 65520.0 && !is_nan(v) {
        let inf = bitcast<f32>(INF_BITS);
        return TOut(select(-inf, inf, v > 0.0));
    }
    return TOut(v);
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> x: array<TIn>;
// `reduce_i`: int and bool inputs (i32 / u32 0-1 words), an int output.
@group(0) @binding(3) var<storage, read_write> out_i: array<i32>;
@group(0) @binding(4) var<storage, read> x_i: array<i32>;

fn dim(v: array<vec4<u32>, 2>, d: u32) -> u32 {
    return v[d / 4u][d % 4u];
}

fn is_nan(v: f32) -> bool {
    let u = bitcast<u32>(v);
    return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
}

@compute @workgroup_size(64)
fn reduce(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.n_out {
        return;
    }
    var rem = i;
    var base = params.offset;
    var d = params.kept_rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = dim(params.kept_shape, d);
        base = base + (rem % n) * dim(params.kept_strides, d);
        rem = rem / n;
    }
    var acc = 0.0;
    if OP == 1u {
        acc = -bitcast<f32>(INF_BITS);
    } else if OP == 2u {
        acc = bitcast<f32>(INF_BITS);
    }
    var nan = false;
    for (var j = 0u; j < params.n_red; j = j + 1u) {
        var r = j;
        var o = base;
        var e = params.red_rank;
        loop {
            if e == 0u {
                break;
            }
            e = e - 1u;
            let n = dim(params.red_shape, e);
            o = o + (r % n) * dim(params.red_strides, e);
            r = r / n;
        }
        let v = f32(x[o]);
        nan = nan || is_nan(v);
        if OP == 0u {
            acc = acc + v;
        } else if OP == 1u {
            acc = max(acc, v);
        } else {
            acc = min(acc, v);
        }
    }
    if OP == 0u {
        out[i] = to_out(acc * params.scale);
    } else {
        out[i] = to_out(select(acc, bitcast<f32>(NAN_BITS), nan));
    }
}

// Storage offset of the first reduced element of output `i`.
fn base_of(i: u32) -> u32 {
    var rem = i;
    var base = params.offset;
    var d = params.kept_rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = dim(params.kept_shape, d);
        base = base + (rem % n) * dim(params.kept_strides, d);
        rem = rem / n;
    }
    return base;
}

// Offset of reduced element `j` relative to its output's base.
fn red_offset(j: u32) -> u32 {
    var r = j;
    var o = 0u;
    var e = params.red_rank;
    loop {
        if e == 0u {
            break;
        }
        e = e - 1u;
        let n = dim(params.red_shape, e);
        o = o + (r % n) * dim(params.red_strides, e);
        r = r / n;
    }
    return o;
}

@compute @workgroup_size(64)
fn reduce_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.n_out {
        return;
    }
    let base = base_of(i);
    var acc = 0;
    if OP == 1u {
        acc = -2147483647 - 1;
    } else if OP == 2u {
        acc = 2147483647;
    }
    for (var j = 0u; j < params.n_red; j = j + 1u) {
        let v = x_i[base + red_offset(j)];
        if OP == 0u {
            acc = acc + v;
        } else if OP == 1u {
            acc = max(acc, v);
        } else {
            acc = min(acc, v);
        }
    }
    out_i[i] = acc;
}
