// PT2E quantization (src/ops/quantized/ gives torch's arithmetic; src/gpu/kernels/quant.rs
// dispatches): one invocation per element of a contiguous tensor. Int tensors are i32 words
// (src/gpu/store.rs), so `quantize` stores the clamped value as a word and `dequantize` reads
// one. Channel c of element t is (t / inner) % channels; per tensor, channels is 1 and the
// scale and zero point come in `Meta`. `Meta` mirrors `AffineMeta`.

struct Meta {
    n: u32,
    inner: u32,
    channels: u32,
    // 1: scales and zero points from the buffers (per channel).
    per_channel: u32,
    qmin: i32,
    qmax: i32,
    zero_point: i32,
    // Offset (elements) of the input.
    x_off: u32,
    // Per tensor: quantize multiplies by `inv_scale` (1 / scale rounded to f32 on the host,
    // as torch does), dequantize by `scale`.
    inv_scale: f32,
    scale: f32,
    // Invocations per row of the 2-D dispatch grid.
    row: u32,
    // 1: per channel without zero points (all 0).
    no_zero_points: u32,
    // choose_qparams: the scale's lower bound, 1 for the symmetric form, and
    // (quant_max - quant_min) / 2 (computed in f64, then f32, as torch).
    eps: f32,
    symmetric: u32,
    half_range: f32,
    pad0: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read> zero_points: array<i32>;
// choose_qparams: the zero point (an int64 as its i32 word; `out` holds the scale's bits).
@group(0) @binding(5) var<storage, read_write> zero_point_out: array<i32>;

// a / b within an ulp of the correctly rounded quotient that torch's CPU kernels compute
// (WGSL's division is within 2.5 ulp): one correction step from the residual, exact where
// `fma` is fused.
fn div(a: f32, b: f32) -> f32 {
    let q = a / b;
    return q + fma(-q, b, a) / b;
}

fn zero_point(c: u32) -> i32 {
    if params.per_channel == 0u {
        return params.zero_point;
    }
    if params.no_zero_points != 0u {
        return 0;
    }
    return zero_points[c];
}

@compute @workgroup_size(64)
fn quantize(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.n {
        return;
    }
    let c = (t / params.inner) % params.channels;
    var inv = params.inv_scale;
    if params.per_channel != 0u {
        // torch: 1.0 / scales in f32 (per tensor, `.tensor`: 1.0 / scale in f64, then f32,
        // the same value but in rare double-rounding cases).
        inv = div(1.0, scales[c]);
    }
    let v = bitcast<f32>(x[params.x_off + t]);
    // round() is half to even, as torch.round.
    let r = clamp(round(v * inv) + f32(zero_point(c)), f32(params.qmin), f32(params.qmax));
    out[t] = bitcast<u32>(i32(r));
}

@compute @workgroup_size(64)
fn dequantize(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.n {
        return;
    }
    let c = (t / params.inner) % params.channels;
    var s = params.scale;
    if params.per_channel != 0u {
        s = scales[c];
    }
    let q = bitcast<i32>(x[params.x_off + t]);
    out[t] = bitcast<u32>(f32(q - zero_point(c)) * s);
}

// `choose_qparams` (pt2web.choose_qparams: src/ops/quantized/mod.rs gives torch's
// arithmetic): one 64-invocation workgroup takes the range of the `n` values of `x` (each
// invocation a stride of them, then a tree in workgroup memory), widens it to hold 0, and
// invocation 0 writes the scale's bits to out[0] and the zero point to zero_point_out[0].
// A NaN in the input gives an unspecified scale (the CPU kernel reports it).
var<workgroup> ranges: array<vec2<f32>, 64>;
// +inf's bits (a constant inf is an error in Tint, Chromium's WGSL compiler: a private
// variable's value is not a constant).
var<private> INF_BITS: u32 = 0x7f800000u;

@compute @workgroup_size(64)
fn choose_qparams(@builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let inf = bitcast<f32>(INF_BITS);
    var r = vec2<f32>(inf, -inf);
    for (var t = lid; t < params.n; t = t + 64u) {
        let v = bitcast<f32>(x[params.x_off + t]);
        r = vec2<f32>(min(r.x, v), max(r.y, v));
    }
    ranges[lid] = r;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if lid < s {
            let o = ranges[lid + s];
            ranges[lid] = vec2<f32>(min(ranges[lid].x, o.x), max(ranges[lid].y, o.y));
        }
        workgroupBarrier();
    }
    if lid != 0u {
        return;
    }
    let min_neg = min(ranges[0].x, 0.0);
    let max_pos = max(ranges[0].y, 0.0);
    var scale: f32;
    var zp: i32;
    if params.symmetric != 0u {
        scale = max(div(max(-min_neg, max_pos), params.half_range), params.eps);
        zp = params.zero_point;
    } else {
        scale = max(div(max_pos - min_neg, f32(params.qmax - params.qmin)), params.eps);
        zp = clamp(params.qmin - i32(round(div(min_neg, scale))), params.qmin, params.qmax);
    }
    out[0] = bitcast<u32>(scale);
    zero_point_out[0] = zp;
}
