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
    _p0: f32,
    _p1: f32,
    _p2: f32,
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

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read> mask: array<f32>;

var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

@compute @workgroup_size(64)
fn attention_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x + gid.y * params.row;
    if r >= params.rows {
        return;
    }
    let l = r % params.len;
    let bh = r / params.len;
    let h = bh % params.heads;
    let b = bh / params.heads;
    let e = params.e;
    let ev = params.ev;
    var qr: array<f32, MAX_E>;
    let qo = params.offsets.x + b * params.q.x + h * params.q.y + l * params.q.z;
    for (var i = 0u; i < e; i = i + 1u) {
        qr[i] = q[qo + i * params.q.w];
    }
    var acc: array<f32, MAX_E>;
    for (var i = 0u; i < ev; i = i + 1u) {
        acc[i] = 0.0;
    }
    let neg_inf = -bitcast<f32>(INF_BITS);
    var mx = neg_inf;
    var sum = 0.0;
    var bad = false;
    let ko = params.offsets.y + b * params.k.x + h * params.k.y;
    let vo = params.offsets.z + b * params.v.x + h * params.v.y;
    let mo = params.offsets.w + b * params.m.x + h * params.m.y + l * params.m.z;
    let has_mask = (params.flags & 1u) != 0u;
    var keys = params.keys;
    if (params.flags & 2u) != 0u {
        keys = min(keys, l + 1u);
    }
    for (var s = 0u; s < keys; s = s + 1u) {
        let kr = ko + s * params.k.z;
        var dot = 0.0;
        for (var i = 0u; i < e; i = i + 1u) {
            dot = dot + qr[i] * k[kr + i * params.k.w];
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
                acc[i] = acc[i] * c + v[vr + i * params.v.w];
            }
        } else {
            let p = exp(x - mx);
            sum = sum + p;
            for (var i = 0u; i < ev; i = i + 1u) {
                acc[i] = acc[i] + p * v[vr + i * params.v.w];
            }
        }
    }
    let base = r * ev;
    if bad || sum == 0.0 {
        let fill = select(bitcast<f32>(NAN_BITS), 0.0, !bad && (params.flags & 4u) != 0u);
        for (var i = 0u; i < ev; i = i + 1u) {
            out[base + i] = fill;
        }
        return;
    }
    let inv = 1.0 / sum;
    for (var i = 0u; i < ev; i = i + 1u) {
        out[base + i] = acc[i] * inv;
    }
}
