// Pooling over planes of a 3-D (D, H, W) volume (1-D and 2-D pools have leading size-1
// dims), contiguous input, one thread per output element, following torch's CPU kernels
// (src/ops/pool): max pooling propagates NaN and reports the flat index within the input
// plane; average pooling divides by the window clipped to the padded input (or to the
// input, or a divisor override); adaptive windows span [floor(i*in/out), ceil((i+1)*in/out)).
// `Meta` mirrors `PoolMeta` in src/gpu/kernels/pool.rs.
//
// Tensors are bound as 32-bit words: f32, or with `INT` = 1 int words (every int dtype is held
// as i32, see src/gpu/store.rs): max pooling compares them as i32 (values and indices exact),
// average pooling sums them in i32 and divides truncating toward zero, as torch's integer
// kernels (the result of a small int dtype stays in its range).

struct Meta {
    numel: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // Bit 0: avg counts the padding (count_include_pad), bit 1: `divisor` overrides.
    flags: u32,
    divisor: i32,
    // (d, h, w, d * h * w)
    ins: vec4<u32>,
    outs: vec4<u32>,
    k: vec4<u32>,
    s: vec4<u32>,
    p: vec4<u32>,
    d: vec4<u32>,
}

// +inf as a run-time value: WGSL forbids it in constant expressions (Chrome's Tint rejects
// `bitcast<f32>(0x7f800000u)`), a private variable's value is not one.
var<private> INF_BITS: u32 = 0x7f800000u;

// 1: int words (`Variant::with(.., "INT", 1)`), 0: f32.
override INT: u32 = 0u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<u32>;
@group(0) @binding(3) var<storage, read_write> indices: array<i32>;

fn xf(o: u32) -> f32 {
    return bitcast<f32>(x[o]);
}

fn xi(o: u32) -> i32 {
    return bitcast<i32>(x[o]);
}

// Whether element `a` beats the current maximum `b` (storage offsets): greater, or a NaN.
fn beats(a: u32, b: u32) -> bool {
    if INT != 0u {
        return xi(a) > xi(b);
    }
    let v = xf(a);
    return v > xf(b) || is_nan(v);
}

fn is_nan(v: f32) -> bool {
    let u = bitcast<u32>(v);
    return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
}

// Output coordinates (z, y, x) and plane of element `i`.
fn coords(i: u32) -> vec4<u32> {
    let op = params.outs.w;
    let q = i % op;
    return vec4<u32>(q / (params.outs.y * params.outs.z), (q / params.outs.z) % params.outs.y,
        q % params.outs.z, i / op);
}

// Max window along axis `a` for output `o`: [start, end) aligned to the dilation grid.
fn max_span(o: u32, a: u32) -> vec2<i32> {
    let start = i32(o * params.s[a]) - i32(params.p[a]);
    let end = min(start + i32((params.k[a] - 1u) * params.d[a]) + 1, i32(params.ins[a]));
    var s = start;
    while s < 0 {
        s = s + i32(params.d[a]);
    }
    return vec2<i32>(s, max(end, 0));
}

// The max of output `i`'s window: (its word, its flat index within the plane). The first
// element of the window is the start; a later one takes over if it `beats` it. A window
// without elements (not with torch's padding limit) gives f32 -inf.
fn max_pool_at(i: u32) -> vec2<u32> {
    let c = coords(i);
    let zs = max_span(c.x, 0u);
    let ys = max_span(c.y, 1u);
    let xs = max_span(c.z, 2u);
    let ih = i32(params.ins.y);
    let iw = i32(params.ins.z);
    let base = c.w * params.ins.w;
    var idx = (zs.x * ih + ys.x) * iw + xs.x;
    var first = true;
    for (var z = zs.x; z < zs.y; z = z + i32(params.d.x)) {
        for (var y = ys.x; y < ys.y; y = y + i32(params.d.y)) {
            for (var xx = xs.x; xx < xs.y; xx = xx + i32(params.d.z)) {
                let at = (z * ih + y) * iw + xx;
                if first || beats(base + u32(at), base + u32(idx)) {
                    first = false;
                    idx = at;
                }
            }
        }
    }
    if first {
        return vec2<u32>(bitcast<u32>(-bitcast<f32>(INF_BITS)), u32(idx));
    }
    return vec2<u32>(x[base + u32(idx)], u32(idx));
}

@compute @workgroup_size(64)
fn max_pool(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    out[i] = max_pool_at(i).x;
}

@compute @workgroup_size(64)
fn max_pool_indices(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let r = max_pool_at(i);
    out[i] = r.x;
    indices[i] = bitcast<i32>(r.y);
}

@compute @workgroup_size(64)
fn avg_pool(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let c = coords(i);
    var lo: vec3<i32>;
    var hi: vec3<i32>;
    var padded = 1;
    var clipped = 1;
    var empty = false;
    for (var a = 0u; a < 3u; a = a + 1u) {
        let start = i32(c[a] * params.s[a]) - i32(params.p[a]);
        let end = min(start + i32(params.k[a]), i32(params.ins[a] + params.p[a]));
        padded = padded * (end - start);
        lo[a] = max(start, 0);
        hi[a] = min(end, i32(params.ins[a]));
        empty = empty || lo[a] >= hi[a];
        clipped = clipped * max(hi[a] - lo[a], 0);
    }
    if empty {
        out[i] = 0u;
        return;
    }
    var div = clipped;
    if (params.flags & 2u) != 0u {
        div = params.divisor;
    } else if (params.flags & 1u) != 0u {
        div = padded;
    }
    let ih = i32(params.ins.y);
    let iw = i32(params.ins.z);
    let base = c.w * params.ins.w;
    var sum = 0.0;
    var sum_i = 0;
    for (var z = lo.x; z < hi.x; z = z + 1) {
        for (var y = lo.y; y < hi.y; y = y + 1) {
            for (var xx = lo.z; xx < hi.z; xx = xx + 1) {
                let o = base + u32((z * ih + y) * iw + xx);
                if INT != 0u {
                    sum_i = sum_i + xi(o);
                } else {
                    sum = sum + xf(o);
                }
            }
        }
    }
    if INT != 0u {
        out[i] = bitcast<u32>(sum_i / div);
    } else {
        out[i] = bitcast<u32>(sum / f32(div));
    }
}

@compute @workgroup_size(64)
fn adaptive_avg(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let c = coords(i);
    var lo: vec3<u32>;
    var hi: vec3<u32>;
    for (var a = 0u; a < 3u; a = a + 1u) {
        let o = c[a];
        let n = params.outs[a];
        let len = params.ins[a];
        lo[a] = (o / n) * len + ((o % n) * len) / n;
        hi[a] = 1u + ((o + 1u) * len - 1u) / n;
    }
    let ih = params.ins.y;
    let iw = params.ins.z;
    let base = c.w * params.ins.w;
    var sum = 0.0;
    for (var z = lo.x; z < hi.x; z = z + 1u) {
        for (var y = lo.y; y < hi.y; y = y + 1u) {
            for (var xx = lo.z; xx < hi.z; xx = xx + 1u) {
                sum = sum + xf(base + (z * ih + y) * iw + xx);
            }
        }
    }
    out[i] = bitcast<u32>(sum / f32((hi.x - lo.x) * (hi.y - lo.y) * (hi.z - lo.z)));
}

// Adaptive max pooling: the adaptive windows of `adaptive_avg`, the max (NaN propagates: the
// last NaN of the window wins, as torch's CPU kernel) and its flat index within the plane.
@compute @workgroup_size(64)
fn adaptive_max(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let c = coords(i);
    var lo: vec3<u32>;
    var hi: vec3<u32>;
    for (var a = 0u; a < 3u; a = a + 1u) {
        let o = c[a];
        let n = params.outs[a];
        let len = params.ins[a];
        lo[a] = (o / n) * len + ((o % n) * len) / n;
        hi[a] = 1u + ((o + 1u) * len - 1u) / n;
    }
    let ih = params.ins.y;
    let iw = params.ins.z;
    let base = c.w * params.ins.w;
    var idx = (lo.x * ih + lo.y) * iw + lo.z;
    var first = true;
    for (var z = lo.x; z < hi.x; z = z + 1u) {
        for (var y = lo.y; y < hi.y; y = y + 1u) {
            for (var xx = lo.z; xx < hi.z; xx = xx + 1u) {
                let at = (z * ih + y) * iw + xx;
                if first || beats(base + at, base + idx) {
                    first = false;
                    idx = at;
                }
            }
        }
    }
    out[i] = x[base + idx];
    indices[i] = i32(idx);
}
