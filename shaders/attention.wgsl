// Streaming attention: one invocation per query row, no barriers and no workgroup memory (the
// software adapters' kind of kernel), the scores never stored. For the row (b, h, l):
//
//   out[b, h, l, :] = sum_s softmax_s(scale * q[b, h, l, :] . k[b, h, s, :] + mask[b, h, l, s]) v[b, h, s, :]
//
// The softmax is online: a running maximum and sum, the accumulated output rescaled each time
// the maximum grows. A -inf score (masked) adds nothing. As the softmax kernels: a row with a
// NaN or +inf score is NaN; a row whose scores are all -inf is NaN, or zeros when the
// SAFE flag is set (scaled_dot_product_attention and `_safe_softmax`).
// `Meta` mirrors `AttentionMeta` in src/gpu/kernels/attention.rs.

struct Meta {
    // B * H * L query rows.
    rows: u32,
    // Invocations per row of the 2-D dispatch grid.
    row: u32,
    heads: u32,
    len: u32,
    keys: u32,
    // Embedding sizes of q / k and of v (at most MAX_E each).
    e: u32,
    ev: u32,
    // bit 0: a float mask is bound; bit 1: causal (key s > l masked); bit 2: SAFE.
    flags: u32,
    scale: f32,
    // attention_split / attention_combine: key ranges per row, and keys per range.
    splits: u32,
    chunk: u32,
    // Query heads per key / value head (grouped-query attention).
    group: u32,
    // Element strides (batch, head, row, column) of q [B, H, L, E], k [B, H, S, E],
    // v [B, H, S, Ev] and the mask broadcast to [B, H, L, S] (0 where it broadcasts).
    q: vec4<u32>,
    k: vec4<u32>,
    v: vec4<u32>,
    m: vec4<u32>,
    // Element offsets of q, k, v and the mask.
    offsets: vec4<u32>,
}

const MAX_E: u32 = 128u;

// Storage element types (src/gpu/shaders.rs `Elems`): q, k, v (and the parts `attention_combine`
// reads through `q`) are TIn, the output (and the parts `attention_split` writes) TOut; f16
// forms for an f16 model's KV cache. The mask is always f32; the arithmetic f32.
alias TIn = f32;
alias TOut = f32;
const OUT_F16: bool = false;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> q: array<TIn>;
@group(0) @binding(3) var<storage, read> k: array<TIn>;
@group(0) @binding(4) var<storage, read> v: array<TIn>;
@group(0) @binding(5) var<storage, read> mask: array<f32>;

var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

// One row's running state over a range of keys (`stream_row`): the output accumulated
// unnormalized, the running maximum and sum, and whether a score was NaN or +inf.
var<private> acc: array<f32, MAX_E>;
var<private> qr: array<f32, MAX_E>;
var<private> mx: f32;
var<private> sum: f32;
var<private> bad: bool;

// Row r (= (b * heads + h) * len + l) over keys [first, last) (clipped to l + 1 when causal).
fn stream_row(r: u32, first: u32, last: u32) {
    let l = r % params.len;
    let bh = r / params.len;
    let h = bh % params.heads;
    let b = bh / params.heads;
    let e = params.e;
    let ev = params.ev;
    let qo = params.offsets.x + b * params.q.x + h * params.q.y + l * params.q.z;
    for (var i = 0u; i < e; i = i + 1u) {
        qr[i] = f32(q[qo + i * params.q.w]);
    }
    for (var i = 0u; i < ev; i = i + 1u) {
        acc[i] = 0.0;
    }
    let neg_inf = -bitcast<f32>(INF_BITS);
    mx = neg_inf;
    sum = 0.0;
    bad = false;
    let hk = h / max(params.group, 1u);
    let ko = params.offsets.y + b * params.k.x + hk * params.k.y;
    let vo = params.offsets.z + b * params.v.x + hk * params.v.y;
    let mo = params.offsets.w + b * params.m.x + h * params.m.y + l * params.m.z;
    let has_mask = (params.flags & 1u) != 0u;
    var keys = last;
    if (params.flags & 2u) != 0u {
        keys = min(keys, l + 1u);
    }
    for (var s = first; s < keys; s = s + 1u) {
        let kr = ko + s * params.k.z;
        var dot = 0.0;
        for (var i = 0u; i < e; i = i + 1u) {
            dot = dot + qr[i] * f32(k[kr + i * params.k.w]);
        }
        var x = dot * params.scale;
        if has_mask {
            x = x + mask[mo + s * params.m.w];
        }
        let u = bitcast<u32>(x);
        if (u & 0x7fffffffu) >= 0x7f800000u && u != (INF_BITS | 0x80000000u) {
            // NaN or +inf.
            bad = true;
            break;
        }
        if x == neg_inf {
            continue;
        }
        let vr = vo + s * params.v.z;
        if x > mx {
            // A new maximum: rescale what was accumulated (exp(-inf) = 0 on the first key).
            let c = exp(mx - x);
            mx = x;
            sum = sum * c + 1.0;
            for (var i = 0u; i < ev; i = i + 1u) {
                acc[i] = acc[i] * c + f32(v[vr + i * params.v.w]);
            }
        } else {
            let p = exp(x - mx);
            sum = sum + p;
            for (var i = 0u; i < ev; i = i + 1u) {
                acc[i] = acc[i] + p * f32(v[vr + i * params.v.w]);
            }
        }
    }
}

// The output row at `base` from the state: NaN for a NaN / +inf score; a row with no key
// left is NaN, or zeros when SAFE.
fn finish_row(base: u32) {
    let ev = params.ev;
    if bad || sum == 0.0 {
        let fill = select(bitcast<f32>(NAN_BITS), 0.0, !bad && (params.flags & 4u) != 0u);
        for (var i = 0u; i < ev; i = i + 1u) {
            out[base + i] = TOut(fill);
        }
        return;
    }
    let inv = 1.0 / sum;
    for (var i = 0u; i < ev; i = i + 1u) {
        out[base + i] = TOut(acc[i] * inv);
    }
}

@compute @workgroup_size(64)
fn attention_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * params.row;
    if r >= params.rows {
        return;
    }
    stream_row(r, 0u, params.keys);
    finish_row(r * params.ev);
}

// Flash-decoding, for few query rows over many keys: `attention_split` runs invocation
// (row r, split p) over keys [p * chunk, (p + 1) * chunk) and writes the part's state to
// `out` (a scratch [rows, splits, ev + 3]: maximum, sum, NaN flag, then the accumulated
// output); `attention_combine`, one invocation per row, reads the parts back through the
// `q` binding, rescales each to the largest maximum and writes the row.
@compute @workgroup_size(64)
fn attention_split(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.rows * params.splits {
        return;
    }
    let r = t / params.splits;
    let p = t % params.splits;
    let first = min(p * params.chunk, params.keys);
    stream_row(r, first, min(first + params.chunk, params.keys));
    let base = t * (params.ev + 3u);
    out[base] = TOut(mx);
    out[base + 1u] = TOut(sum);
    out[base + 2u] = TOut(select(0.0, 1.0, bad));
    for (var i = 0u; i < params.ev; i = i + 1u) {
        out[base + 3u + i] = TOut(acc[i]);
    }
}

@compute @workgroup_size(64)
fn attention_combine(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * params.row;
    if r >= params.rows {
        return;
    }
    let ev = params.ev;
    let stride = ev + 3u;
    let first = r * params.splits * stride;
    var top = -bitcast<f32>(INF_BITS);
    bad = false;
    for (var p = 0u; p < params.splits; p = p + 1u) {
        let o = first + p * stride;
        top = max(top, f32(q[o]));
        bad = bad || f32(q[o + 2u]) != 0.0;
    }
    sum = 0.0;
    for (var i = 0u; i < ev; i = i + 1u) {
        acc[i] = 0.0;
    }
    for (var p = 0u; p < params.splits; p = p + 1u) {
        let o = first + p * stride;
        if f32(q[o + 1u]) == 0.0 {
            continue;
        }
        let c = exp(f32(q[o]) - top);
        sum = sum + f32(q[o + 1u]) * c;
        for (var i = 0u; i < ev; i = i + 1u) {
            acc[i] = acc[i] + f32(q[o + 3u + i]) * c;
        }
    }
    finish_row(r * ev);
}

// The streaming kernel for GPUs with workgroup memory (flash-attention style): a workgroup of
// 64 invocations takes 64 query rows of one (b, h), one row each as `attention_row`, and
// stages the keys and values through workgroup memory TILE keys at a time, so each key and
// value row is read from memory once per 64 query rows instead of once per row. Each row's
// arithmetic is `attention_row`'s, in the same order. Every invocation of the group takes
// part in the loads and barriers (rows past L only load).
const TILE: u32 = 16u;
var<workgroup> k_tile: array<f32, 2048>;
var<workgroup> v_tile: array<f32, 2048>;

@compute @workgroup_size(64)
fn attention_tiled(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    // wid.x: the block of 64 query rows; wid.y + wid.z * 65535: the (b, h) problem.
    let bh = wid.y + wid.z * 65535u;
    if bh * params.len >= params.rows {
        return;
    }
    let t = lid.x;
    let l = wid.x * 64u + t;
    let live = l < params.len;
    let h = bh % params.heads;
    let b = bh / params.heads;
    let e = params.e;
    let ev = params.ev;
    var qr: array<f32, MAX_E>;
    var acc: array<f32, MAX_E>;
    let qo = params.offsets.x + b * params.q.x + h * params.q.y + l * params.q.z;
    if live {
        for (var i = 0u; i < e; i = i + 1u) {
            qr[i] = f32(q[qo + i * params.q.w]);
        }
    }
    for (var i = 0u; i < ev; i = i + 1u) {
        acc[i] = 0.0;
    }
    let neg_inf = -bitcast<f32>(INF_BITS);
    var mx = neg_inf;
    var sum = 0.0;
    var bad = false;
    let hk = h / max(params.group, 1u);
    let ko = params.offsets.y + b * params.k.x + hk * params.k.y;
    let vo = params.offsets.z + b * params.v.x + hk * params.v.y;
    let mo = params.offsets.w + b * params.m.x + h * params.m.y + l * params.m.z;
    let has_mask = (params.flags & 1u) != 0u;
    let causal = (params.flags & 2u) != 0u;
    // The keys this row reads, and (uniform over the group) the keys any of its rows reads.
    var keys = params.keys;
    var group_keys = params.keys;
    if causal {
        keys = min(keys, l + 1u);
        group_keys = min(group_keys, min(params.len, wid.x * 64u + 64u));
    }
    for (var s0 = 0u; s0 < group_keys; s0 = s0 + TILE) {
        let n = min(TILE, group_keys - s0);
        workgroupBarrier();
        for (var i = t; i < n * e; i = i + 64u) {
            let s = s0 + i / e;
            k_tile[i] = f32(k[ko + s * params.k.z + (i % e) * params.k.w]);
        }
        for (var i = t; i < n * ev; i = i + 64u) {
            let s = s0 + i / ev;
            v_tile[i] = f32(v[vo + s * params.v.z + (i % ev) * params.v.w]);
        }
        workgroupBarrier();
        // (Not a `continue`: the barriers above stay in uniform control flow.)
        if live && !bad {
            for (var j = 0u; j < n; j = j + 1u) {
                let s = s0 + j;
                if s >= keys {
                    break;
                }
                var dot = 0.0;
                for (var i = 0u; i < e; i = i + 1u) {
                    dot = dot + qr[i] * k_tile[j * e + i];
                }
                var x = dot * params.scale;
                if has_mask {
                    x = x + mask[mo + s * params.m.w];
                }
                let u = bitcast<u32>(x);
                if (u & 0x7fffffffu) >= 0x7f800000u && u != (INF_BITS | 0x80000000u) {
                    bad = true;
                    break;
                }
                if x == neg_inf {
                    continue;
                }
                if x > mx {
                    let c = exp(mx - x);
                    mx = x;
                    sum = sum * c + 1.0;
                    for (var i = 0u; i < ev; i = i + 1u) {
                        acc[i] = acc[i] * c + v_tile[j * ev + i];
                    }
                } else {
                    let p = exp(x - mx);
                    sum = sum + p;
                    for (var i = 0u; i < ev; i = i + 1u) {
                        acc[i] = acc[i] + p * v_tile[j * ev + i];
                    }
                }
            }
        }
    }
    if !live {
        return;
    }
    let base = (bh * params.len + l) * ev;
    if bad || sum == 0.0 {
        let fill = select(bitcast<f32>(NAN_BITS), 0.0, !bad && (params.flags & 4u) != 0u);
        for (var i = 0u; i < ev; i = i + 1u) {
            out[base + i] = TOut(fill);
        }
        return;
    }
    let inv = 1.0 / sum;
    for (var i = 0u; i < ev; i = i + 1u) {
        out[base + i] = TOut(acc[i] * inv);
    }
}
