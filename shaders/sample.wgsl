// Picking the next token on the device, so a decode step reads back a token id instead of
// the logits (src/gpu/sample.rs).
// `argmax_row`: one workgroup finds the largest of `n` f32 values starting at `offset`, the
// first of equal maxima as torch.argmax; `out[0]` the index, `out[1]` 1 when a value is NaN
// (the caller refuses such logits, as the CPU sampler does). `Meta` mirrors `SampleMeta`.
// `sample_row`: one workgroup draws a token as `Sampler::pick` in src/generate.rs does
// (temperature, top-k and top-p cuts, then the first kept index whose cumulative
// probability passes `u`), with the same `out`.

struct Meta {
    n: u32,
    offset: u32,
    // top-k; 0 keeps all.
    top_k: u32,
    pad0: u32,
    temperature: f32,
    // top-p; 1 keeps all.
    top_p: f32,
    // The uniform draw in [0, 1).
    u: f32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;

var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;
var<workgroup> saw_nan: atomic<u32>;

// NaN by its bits: shader compilers may fold `v != v` to false.
fn is_nan(v: f32) -> bool {
    let b = bitcast<u32>(v);
    return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u;
}

// Whether (v, i) beats (bv, bi): a larger value, or an equal one at a smaller index.
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    if bi == NONE {
        return i != NONE;
    }
    if i == NONE {
        return false;
    }
    return v > bv || (v == bv && i < bi);
}

@compute @workgroup_size(256)
fn argmax_row(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    if t == 0u {
        atomicStore(&saw_nan, 0u);
    }
    workgroupBarrier();
    var bv = 0.0;
    var bi = NONE;
    var nan = false;
    for (var i = t; i < params.n; i += WG) {
        let v = x[params.offset + i];
        if is_nan(v) {
            nan = true;
        } else if better(v, i, bv, bi) {
            bv = v;
            bi = i;
        }
    }
    if nan {
        atomicStore(&saw_nan, 1u);
    }
    best_v[t] = bv;
    best_i[t] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if t < s && better(best_v[t + s], best_i[t + s], best_v[t], best_i[t]) {
            best_v[t] = best_v[t + s];
            best_i[t] = best_i[t + s];
        }
        workgroupBarrier();
    }
    if t == 0u {
        out[0] = best_i[0];
        out[1] = atomicLoad(&saw_nan);
    }
}

// Sampling: logits compare by an order-preserving u32 key, so a cut is found by setting
// its bits from the top (the largest key whose count / mass at or above it is enough).

var<workgroup> red_f: array<f32, 256>;
var<workgroup> red_u: array<u32, 256>;
var<workgroup> found: atomic<u32>;
var<workgroup> last_kept: atomic<u32>;

fn key_of(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (b & 0x80000000u) != 0u {
        return ~b;
    }
    return b | 0x80000000u;
}

fn sum_f(t: u32, v: f32) -> f32 {
    workgroupBarrier();
    red_f[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if t < s {
            red_f[t] = red_f[t] + red_f[t + s];
        }
        workgroupBarrier();
    }
    return red_f[0];
}

fn sum_u(t: u32, v: u32) -> u32 {
    workgroupBarrier();
    red_u[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if t < s {
            red_u[t] = red_u[t] + red_u[t + s];
        }
        workgroupBarrier();
    }
    return red_u[0];
}

fn max_f(t: u32, v: f32) -> f32 {
    workgroupBarrier();
    red_f[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if t < s {
            red_f[t] = max(red_f[t], red_f[t + s]);
        }
        workgroupBarrier();
    }
    return red_f[0];
}

// The weight of a logit at or above the cut `c` (a key), given the maximum `m`.
fn weight(v: f32, c: u32, m: f32) -> f32 {
    if key_of(v) >= c {
        return exp((v - m) / params.temperature);
    }
    return 0.0;
}

@compute @workgroup_size(256)
fn sample_row(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    let n = params.n;
    if t == 0u {
        atomicStore(&saw_nan, 0u);
        atomicStore(&found, NONE);
        atomicStore(&last_kept, 0u);
    }
    // The lowest finite f32 (by its bits: a literal of it is out of range for some compilers).
    var mx = -bitcast<f32>(0x7f7fffffu);
    var nan = false;
    for (var i = t; i < n; i += WG) {
        let v = x[params.offset + i];
        if is_nan(v) {
            nan = true;
        } else {
            mx = max(mx, v);
        }
    }
    workgroupBarrier();
    if nan {
        atomicStore(&saw_nan, 1u);
    }
    let m = max_f(t, mx);
    // top-k: the largest key with at least k logits at or above it.
    var cut = 0u;
    if params.top_k > 0u && params.top_k < n {
        for (var bit = 31; bit >= 0; bit--) {
            let c = cut | (1u << u32(bit));
            var cnt = 0u;
            for (var i = t; i < n; i += WG) {
                if key_of(x[params.offset + i]) >= c {
                    cnt += 1u;
                }
            }
            if sum_u(t, cnt) >= params.top_k {
                cut = c;
            }
        }
    }
    // top-p: the largest key whose mass at or above it is at least P of the kept mass.
    if params.top_p < 1.0 {
        var part = 0.0;
        for (var i = t; i < n; i += WG) {
            part += weight(x[params.offset + i], cut, m);
        }
        let need = params.top_p * sum_f(t, part);
        // From the top bit down over all keys, each tried key taken no lower than top-k's cut.
        let kcut = cut;
        var res = 0u;
        for (var bit = 31; bit >= 0; bit--) {
            let c = res | (1u << u32(bit));
            let cc = max(c, kcut);
            var mass = 0.0;
            for (var i = t; i < n; i += WG) {
                mass += weight(x[params.offset + i], cc, m);
            }
            if sum_f(t, mass) >= need {
                res = c;
            }
        }
        cut = max(res, kcut);
    }
    // The draw: each invocation sums a contiguous chunk, an exclusive scan places the chunks,
    // and the one holding the target walks its chunk in index order.
    let chunk = (n + WG - 1u) / WG;
    let lo = min(t * chunk, n);
    let hi = min(lo + chunk, n);
    var own = 0.0;
    var last = NONE;
    for (var i = lo; i < hi; i++) {
        let v = x[params.offset + i];
        if key_of(v) >= cut {
            own += weight(v, cut, m);
            last = i;
        }
    }
    if last != NONE {
        atomicMax(&last_kept, last);
    }
    workgroupBarrier();
    red_f[t] = own;
    workgroupBarrier();
    for (var s = 1u; s < WG; s = s * 2u) {
        var add = 0.0;
        if t >= s {
            add = red_f[t - s];
        }
        workgroupBarrier();
        red_f[t] = red_f[t] + add;
        workgroupBarrier();
    }
    let total = red_f[WG - 1u];
    let goal = params.u * total;
    let end = red_f[t];
    let start = end - own;
    if own > 0.0 && start <= goal && goal < end {
        var acc = start;
        var pick = last;
        for (var i = lo; i < hi; i++) {
            let w = weight(x[params.offset + i], cut, m);
            if w > 0.0 {
                acc += w;
                if acc > goal {
                    pick = i;
                    break;
                }
            }
        }
        atomicMin(&found, pick);
    }
    workgroupBarrier();
    if t == 0u {
        var r = atomicLoad(&found);
        if r == NONE {
            r = atomicLoad(&last_kept);
        }
        out[0] = r;
        out[1] = atomicLoad(&saw_nan);
    }
}
