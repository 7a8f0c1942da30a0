// Picking the next token on the device, so a decode step reads back a token id instead of
// the logits (src/gpu/sample.rs).
// `argmax_row`: one workgroup finds the largest of `n` f32 values starting at `offset`, the
// first of equal maxima as torch.argmax; `out[0]` the index, `out[1]` 1 when a value is NaN
// (the caller refuses such logits, as the CPU sampler does). `Meta` mirrors `SampleMeta`.

struct Meta {
    n: u32,
    offset: u32,
    pad0: u32,
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
