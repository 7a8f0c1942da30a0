// Weights quantized at load (src/ops/matmul/quant.rs gives the format): `q` holds row j of
// the [n, k] weight in `words` 32-bit words, element i at word i * bits / 32, bits
// (i * bits) % 32 upwards, stored as q + 2^(bits-1); `scale` holds one f32 per `group`
// elements of each row. Dequantized here, never stored as f32 (but by `dequant`, for the
// products of many rows).
// `Meta` mirrors `QuantMeta` in src/gpu/kernels/quant.rs.

struct Meta {
    // Rows of x (linear), indices (embedding), or 0.
    m: u32,
    n: u32,
    k: u32,
    bits: u32,
    group: u32,
    // linear: 1 when `bias` holds n values to add.
    has_bias: u32,
    // Offsets (elements) of x / the indices and of the bias.
    x_off: u32,
    bias_off: u32,
    // Invocations per row of the 2-D dispatch grid.
    row: u32,
    // embedding: the fault site of an index outside the rows (fault.wgsl).
    fault_site: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<u32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
// linear: x, row-major [m, k]; embedding: the indices (i32 words).
@group(0) @binding(4) var<storage, read> x: array<u32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;

fn words_per_row() -> u32 {
    return params.k * params.bits / 32u;
}

// The values of word `w` (column `wi` of row j) times their scale: 4 at 8 bits, 8 at 4
// bits (`lo` the first 4, `hi` the last 4; `hi` is 0 at 8 bits).
struct Vals {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn unpack(w: u32, wi: u32, j: u32) -> Vals {
    let per_word = 32u / params.bits;
    let groups = params.k / params.group;
    return unpack_scaled(w, scale[j * groups + (wi * per_word) / params.group]);
}

// Word `w`'s values times the scale `s` of their group.
fn unpack_scaled(w: u32, s: f32) -> Vals {
    var r: Vals;
    if params.bits == 8u {
        let u = vec4<u32>(w & 255u, (w >> 8u) & 255u, (w >> 16u) & 255u, w >> 24u);
        r.lo = (vec4<f32>(u) - 128.0) * s;
        r.hi = vec4<f32>(0.0);
    } else {
        let a = vec4<u32>(w & 15u, (w >> 4u) & 15u, (w >> 8u) & 15u, (w >> 12u) & 15u);
        let b = vec4<u32>((w >> 16u) & 15u, (w >> 20u) & 15u, (w >> 24u) & 15u, w >> 28u);
        r.lo = (vec4<f32>(a) - 8.0) * s;
        r.hi = (vec4<f32>(b) - 8.0) * s;
    }
    return r;
}

fn xv(i: u32) -> f32 {
    return bitcast<f32>(x[params.x_off + i]);
}

fn x4(i: u32) -> vec4<f32> {
    return vec4<f32>(xv(i), xv(i + 1u), xv(i + 2u), xv(i + 3u));
}

// Output columns j0..j0+3, past n the last one (computed, never stored).
fn columns(j0: u32) -> array<u32, 4> {
    var cols: array<u32, 4>;
    for (var c = 0u; c < 4u; c = c + 1u) {
        cols[c] = min(j0 + c, params.n - 1u);
    }
    return cols;
}

// `linear_q`: out[r, j] = sum_i x[r, i] * W[j, i] (+ bias[j]) for r < m <= 4. One invocation
// per 4 adjacent output columns j0..j0+3 (past n: the last column's, computed, not stored): it
// streams their 4 weight rows once for every row of x, each 4 (or 8) values of x loaded once
// for the 4 columns. Group by group: each group's scale read once (no division per word).
@compute @workgroup_size(64)
fn linear_q(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j0 = (gid.x + gid.y * params.row) * 4u;
    if j0 >= params.n {
        return;
    }
    let wpr = words_per_row();
    let per_word = 32u / params.bits;
    let groups = params.k / params.group;
    let wpg = params.group / per_word;
    let cols = columns(j0);
    // acc[r][c]: row r of x against column j0 + c.
    var acc: array<vec4<f32>, 4>;
    var wi = 0u;
    for (var g = 0u; g < groups; g = g + 1u) {
        var s: array<f32, 4>;
        for (var c = 0u; c < 4u; c = c + 1u) {
            s[c] = scale[cols[c] * groups + g];
        }
        for (var e = 0u; e < wpg; e = e + 1u) {
            var v: array<Vals, 4>;
            for (var c = 0u; c < 4u; c = c + 1u) {
                v[c] = unpack_scaled(q[cols[c] * wpr + wi], s[c]);
            }
            accumulate(&acc, v, wi * per_word);
            wi = wi + 1u;
        }
    }
    store_cols(acc, j0);
}

// The 4 columns' values `v` of one word, at element `i` of the row, against every row of x.
fn accumulate(acc: ptr<function, array<vec4<f32>, 4>>, v: array<Vals, 4>, i: u32) {
    for (var r = 0u; r < params.m; r = r + 1u) {
        let xa = x4(r * params.k + i);
        var d = vec4<f32>(dot(xa, v[0].lo), dot(xa, v[1].lo), dot(xa, v[2].lo), dot(xa, v[3].lo));
        if params.bits == 4u {
            let xb = x4(r * params.k + i + 4u);
            d = d + vec4<f32>(dot(xb, v[0].hi), dot(xb, v[1].hi), dot(xb, v[2].hi), dot(xb, v[3].hi));
        }
        (*acc)[r] = (*acc)[r] + d;
    }
}

// Columns j0..j0+3 of every row (plus the bias), within the edge.
fn store_cols(acc: array<vec4<f32>, 4>, j0: u32) {
    for (var c = 0u; c < 4u; c = c + 1u) {
        let j = j0 + c;
        if j >= params.n {
            break;
        }
        var b = 0.0;
        if params.has_bias == 1u {
            b = bias[params.bias_off + j];
        }
        for (var r = 0u; r < params.m; r = r + 1u) {
            out[r * params.n + j] = acc[r][c] + b;
        }
    }
}

// `linear_q_split`: `linear_q` for GPUs (see `gemv_split` in matmul.wgsl): a 64-invocation
// workgroup per 4 output columns, invocation t taking words t, t + 64, ... of their rows
// (adjacent words across the workgroup at each step), the partial sums combined in
// workgroup memory. Each word looks its group's scale up (one division per word).
var<workgroup> q_sums: array<array<vec4<f32>, 4>, 64>;

@compute @workgroup_size(64)
fn linear_q_split(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let lid = lid3.x;
    // Uniform across the workgroup (the barriers below need it).
    let j0 = (wid.x + wid.y * params.row) * 4u;
    if j0 >= params.n {
        return;
    }
    let wpr = words_per_row();
    let per_word = 32u / params.bits;
    let groups = params.k / params.group;
    let cols = columns(j0);
    var acc: array<vec4<f32>, 4>;
    for (var wi = lid; wi < wpr; wi = wi + 64u) {
        let g = (wi * per_word) / params.group;
        var v: array<Vals, 4>;
        for (var c = 0u; c < 4u; c = c + 1u) {
            v[c] = unpack_scaled(q[cols[c] * wpr + wi], scale[cols[c] * groups + g]);
        }
        accumulate(&acc, v, wi * per_word);
    }
    q_sums[lid] = acc;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s >> 1u) {
        if lid < s {
            for (var r = 0u; r < 4u; r = r + 1u) {
                q_sums[lid][r] = q_sums[lid][r] + q_sums[lid + s][r];
            }
        }
        workgroupBarrier();
    }
    if lid == 0u {
        store_cols(q_sums[0], j0);
    }
}

// `dequant`: the whole weight as f32 [n, k], one invocation per word.
@compute @workgroup_size(64)
fn dequant(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    let wpr = words_per_row();
    if t >= params.n * wpr {
        return;
    }
    let j = t / wpr;
    let wi = t % wpr;
    let v = unpack(q[t], wi, j);
    let per_word = 32u / params.bits;
    let o = j * params.k + wi * per_word;
    for (var e = 0u; e < 4u; e = e + 1u) {
        out[o + e] = v.lo[e];
    }
    if params.bits == 4u {
        for (var e = 0u; e < 4u; e = e + 1u) {
            out[o + 4u + e] = v.hi[e];
        }
    }
}

// `embedding_q`: out[t, :] = W[idx[t], :] for t < m, one invocation per (t, word). An index
// out of range is reported (fault.wgsl) and gives zeros.
@compute @workgroup_size(64)
fn embedding_q(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = gid.x + gid.y * params.row;
    let wpr = words_per_row();
    if e >= params.m * wpr {
        return;
    }
    let t = e / wpr;
    let wi = e % wpr;
    let id = bitcast<i32>(x[params.x_off + t]);
    let per_word = 32u / params.bits;
    let o = t * params.k + wi * per_word;
    if id < 0 || u32(id) >= params.n {
        raise_index(params.fault_site, id, params.n);
        for (var i = 0u; i < per_word; i = i + 1u) {
            out[o + i] = 0.0;
        }
        return;
    }
    let j = u32(id);
    let v = unpack(q[j * wpr + wi], wi, j);
    for (var i = 0u; i < 4u; i = i + 1u) {
        out[o + i] = v.lo[i];
    }
    if params.bits == 4u {
        for (var i = 0u; i < 4u; i = i + 1u) {
            out[o + 4u + i] = v.hi[i];
        }
    }
}
