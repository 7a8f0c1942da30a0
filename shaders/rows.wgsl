// Row kernels over a contiguous [rows, cols] input: softmax / log_softmax and layer norm.
// One workgroup of 64 threads per row; partial results are combined in workgroup memory.
// `Meta` mirrors `RowMeta` in src/gpu/kernels.rs.

struct Meta {
    rows: u32,
    cols: u32,
    // Workgroups per row of the 2-D dispatch grid.
    row: u32,
    // layer norm: bit 0 weight present, bit 1 bias present.
    flags: u32,
    eps: f32,
    // Norms: 0 for a layer norm (weight and bias along the row), else a group norm's row is
    // its group's channels of `inner` elements each, and weight and bias are per channel.
    inner: u32,
    groups: u32,
    _p2: f32,
}

// The weight / bias element of row r, column j.
fn affine_index(r: u32, j: u32) -> u32 {
    if params.inner == 0u {
        return j;
    }
    return (r % params.groups) * (params.cols / params.inner) + j / params.inner;
}

// softmax: 0 = softmax, 1 = log_softmax, 2 = attention's safe softmax (a row that is all
// -inf, fully masked, gives zeros instead of NaN).
override LOG: u32 = 0u;

// +inf and NaN as run-time values: WGSL forbids them in constant expressions (Chrome's
// Tint rejects `bitcast<f32>(0x7f800000u)`), a private variable's value is not one.
var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

fn is_nan_or_inf(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}

// Storage element types (see elementwise.wgsl; src/gpu/shaders.rs `Elems`). The mean and
// rstd outputs of layer norm have the output's type.
alias TIn = f32;
alias TOut = f32;
const OUT_F16: bool = false;

// A result in the output's type; past f16's range, inf as torch (see elementwise.wgsl).
fn to_out(v: f32) -> TOut {
    let u = bitcast<u32>(v);
    let nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
    if OUT_F16 && abs(v) >= 65520.0 && !nan {
        let inf = bitcast<f32>(INF_BITS);
        return TOut(select(-inf, inf, v > 0.0));
    }
    return TOut(v);
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> x: array<TIn>;
@group(0) @binding(3) var<storage, read> weight: array<TIn>;
@group(0) @binding(4) var<storage, read> bias: array<TIn>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<TOut>;
@group(0) @binding(6) var<storage, read_write> rstd_out: array<TOut>;

// <group reductions>: the sum / max of `v` over the 64 invocations of the workgroup (`l` the
// local index), the same value returned to every one. rows_subgroup.wgsl replaces this
// block with the subgroup form (`Shader::RowsSubgroup`).
var<workgroup> part: array<f32, 64>;

fn reduce_max(v: f32, l: u32) -> f32 {
    part[l] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if l < s {
            part[l] = max(part[l], part[l + s]);
        }
        workgroupBarrier();
    }
    let r = part[0];
    workgroupBarrier();
    return r;
}

fn reduce_sum(v: f32, l: u32) -> f32 {
    part[l] = v;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if l < s {
            part[l] = part[l] + part[l + s];
        }
        workgroupBarrier();
    }
    let r = part[0];
    workgroupBarrier();
    return r;
}
// </group reductions>

@compute @workgroup_size(64)
fn softmax(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = wid.x + wid.y * params.row;
    // Uniform control flow: every thread of the group takes the same branch.
    if r >= params.rows {
        return;
    }
    let l = lid.x;
    let base = r * params.cols;
    var m = -bitcast<f32>(INF_BITS);
    var bad = 0.0;
    for (var j = l; j < params.cols; j = j + 64u) {
        let v = f32(x[base + j]);
        m = max(m, v);
        let u = bitcast<u32>(v);
        bad = max(bad, select(0.0, 1.0, (is_nan_or_inf(v) && (u & 0x007fffffu) != 0u) || u == INF_BITS));
    }
    m = reduce_max(m, l);
    // A NaN or +inf in the row, or a row of -inf, makes torch's whole row NaN (inf - inf);
    // drivers that flush NaN would not propagate it, so it is decided here.
    bad = reduce_max(bad, l);
    let all_neg_inf = m == -bitcast<f32>(INF_BITS);
    var s = 0.0;
    for (var j = l; j < params.cols; j = j + 64u) {
        s = s + exp(f32(x[base + j]) - m);
    }
    s = reduce_sum(s, l);
    for (var j = l; j < params.cols; j = j + 64u) {
        if all_neg_inf && bad == 0.0 && LOG == 2u {
            out[base + j] = TOut(0.0);
            continue;
        }
        if bad > 0.0 || all_neg_inf {
            out[base + j] = TOut(bitcast<f32>(NAN_BITS));
            continue;
        }
        let e = f32(x[base + j]) - m;
        if LOG == 1u {
            out[base + j] = to_out(e - log(s));
        } else {
            out[base + j] = to_out(exp(e) / s);
        }
    }
}

// Softmax with one invocation per row, three passes, no workgroup memory and no barriers:
// for short rows (the host picks it when cols <= 1024), where a 64-thread group per row
// would mostly wait at barriers (SwiftShader switches fibers at each one). Same results as
// `softmax` (NaN/+inf rows NaN; an all -inf row NaN, or zeros when LOG == 2).
@compute @workgroup_size(64)
fn softmax_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * params.row;
    if r >= params.rows {
        return;
    }
    let base = r * params.cols;
    var m = -bitcast<f32>(INF_BITS);
    var bad = false;
    for (var j = 0u; j < params.cols; j = j + 1u) {
        let v = f32(x[base + j]);
        m = max(m, v);
        let u = bitcast<u32>(v);
        bad = bad || (is_nan_or_inf(v) && (u & 0x007fffffu) != 0u) || u == INF_BITS;
    }
    let all_neg_inf = m == -bitcast<f32>(INF_BITS);
    if bad || all_neg_inf {
        let fill = select(bitcast<f32>(NAN_BITS), 0.0, all_neg_inf && !bad && LOG == 2u);
        for (var j = 0u; j < params.cols; j = j + 1u) {
            out[base + j] = TOut(fill);
        }
        return;
    }
    var s = 0.0;
    for (var j = 0u; j < params.cols; j = j + 1u) {
        s = s + exp(f32(x[base + j]) - m);
    }
    for (var j = 0u; j < params.cols; j = j + 1u) {
        let e = f32(x[base + j]) - m;
        if LOG == 1u {
            out[base + j] = to_out(e - log(s));
        } else {
            out[base + j] = to_out(exp(e) / s);
        }
    }
}

// Layer norm over the last `cols` elements, with mean and 1/sqrt(var + eps) per row
// (native_layer_norm's second and third outputs).
@compute @workgroup_size(64)
fn layer_norm(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = wid.x + wid.y * params.row;
    if r >= params.rows {
        return;
    }
    let l = lid.x;
    let base = r * params.cols;
    let n = f32(params.cols);
    var s = 0.0;
    for (var j = l; j < params.cols; j = j + 64u) {
        s = s + f32(x[base + j]);
    }
    let mean = reduce_sum(s, l) / n;
    var v = 0.0;
    for (var j = l; j < params.cols; j = j + 64u) {
        let d = f32(x[base + j]) - mean;
        v = v + d * d;
    }
    let rstd = inverseSqrt(reduce_sum(v, l) / n + params.eps);
    for (var j = l; j < params.cols; j = j + 64u) {
        var y = (f32(x[base + j]) - mean) * rstd;
        if (params.flags & 1u) != 0u {
            y = y * f32(weight[affine_index(r, j)]);
        }
        if (params.flags & 2u) != 0u {
            y = y + f32(bias[affine_index(r, j)]);
        }
        out[base + j] = to_out(y);
    }
    if l == 0u {
        mean_out[r] = to_out(mean);
        rstd_out[r] = to_out(rstd);
    }
}

// `layer_norm` with one invocation per row and no barriers, for short rows (the host picks it
// when cols <= 1024, as for `softmax_row`).
@compute @workgroup_size(64)
fn layer_norm_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * params.row;
    if r >= params.rows {
        return;
    }
    let base = r * params.cols;
    let n = f32(params.cols);
    var s = 0.0;
    for (var j = 0u; j < params.cols; j = j + 1u) {
        s = s + f32(x[base + j]);
    }
    let mean = s / n;
    var v = 0.0;
    for (var j = 0u; j < params.cols; j = j + 1u) {
        let d = f32(x[base + j]) - mean;
        v = v + d * d;
    }
    let rstd = inverseSqrt(v / n + params.eps);
    for (var j = 0u; j < params.cols; j = j + 1u) {
        var y = (f32(x[base + j]) - mean) * rstd;
        if (params.flags & 1u) != 0u {
            y = y * f32(weight[affine_index(r, j)]);
        }
        if (params.flags & 2u) != 0u {
            y = y + f32(bias[affine_index(r, j)]);
        }
        out[base + j] = to_out(y);
    }
    mean_out[r] = to_out(mean);
    rstd_out[r] = to_out(rstd);
}
