// Histograms (src/gpu/kernels/histogram.rs), f32, one invocation per bin, no atomics: each
// bin reads every element and counts those whose bin is its own, in torch's arithmetic
// (HistogramKernel.cpp, src/ops/reduce/histogram.rs): `histc` over [lo, hi] given by the
// caller (the host declines data-dependent ranges), bin = trunc((x - lo) * bins / (hi - lo))
// in f32, the top edge counted in the last bin, elements outside (and NaN) ignored.
//
// Data-dependent sizes and ranges (the executor reads back `extrema`'s four words, see
// src/gpu/dynamic.rs):
// - `extrema`: one workgroup over a strided 1-D view of 32-bit words (f32 or int): the
//   smallest and largest as order-preserving keys, whether a special element was seen (a
//   NaN for floats, a negative value for ints) and the first special element's word;
// - `bincount`: one invocation per element, atomics on the bins (zeroed by the host's fill):
//   +1 on the u32 count, or the element's f32 weight added by a compare-exchange loop on
//   the bin's bits (the order of the adds differs from torch's serial loop: rounding only).

struct Meta {
    numel: u32,
    bins: u32,
    lo: f32,
    hi: f32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // Bit 0: the words are f32 (`extrema`); bit 1: weighted (`bincount`).
    flags: u32,
    // The strided 1-D views `extrema` and `bincount` read: (offset, stride) of the words and
    // of the weights.
    x_offset: u32,
    x_stride: u32,
    w_offset: u32,
    w_stride: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> words: array<u32>;
@group(0) @binding(4) var<storage, read> weights: array<f32>;
// extrema: (min key, max key, 1 when a special element was seen, the first one's word).
@group(0) @binding(5) var<storage, read_write> found: array<u32>;
// bincount: the bins (int64 counts as their low words, or f32 bits).
@group(0) @binding(6) var<storage, read_write> bins: array<atomic<u32>>;

@compute @workgroup_size(64)
fn histc(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x + gid.y * params.row;
    if b >= params.bins {
        return;
    }
    let lo = params.lo;
    let hi = params.hi;
    let last = i32(params.bins);
    var count = 0.0;
    for (var i = 0u; i < params.numel; i = i + 1u) {
        let v = x[i];
        if !(v >= lo && v <= hi) {
            continue;
        }
        var pos = i32(((v - lo) * f32(params.bins)) / (hi - lo));
        if pos == last {
            pos = pos - 1;
        }
        if u32(clamp(pos, 0, last - 1)) == b {
            count = count + 1.0;
        }
    }
    out[b] = count;
}

const GROUP: u32 = 256u;
// No special element in a chunk.
const NONE: u32 = 0xffffffffu;

var<workgroup> key_lo: array<u32, 256>;
var<workgroup> key_hi: array<u32, 256>;
// The lowest thread whose chunk holds a special element (chunks are in element order).
var<workgroup> first: array<u32, 256>;
// Each thread's first special word.
var<workgroup> special: array<u32, 256>;

// A key whose unsigned order is the value's order: f32 (no NaN) or i32.
fn order_key(w: u32, float: bool) -> u32 {
    if !float {
        return w ^ 0x80000000u;
    }
    return select(w | 0x80000000u, ~w, (w & 0x80000000u) != 0u);
}

@compute @workgroup_size(256)
fn extrema(@builtin(local_invocation_index) l: u32) {
    let float = (params.flags & 1u) != 0u;
    let n = params.numel;
    let chunk = (n + GROUP - 1u) / GROUP;
    let start = min(l * chunk, n);
    let end = min(start + chunk, n);
    var lo = 0xffffffffu;
    var hi = 0u;
    var own = NONE;
    var word = 0u;
    for (var i = start; i < end; i = i + 1u) {
        let w = words[params.x_offset + i * params.x_stride];
        // NaN by its bits: `v != v` may be folded away by a driver's fast math.
        var is_special = bitcast<i32>(w) < 0;
        if float {
            is_special = (w & 0x7fffffffu) > 0x7f800000u;
        }
        if is_special {
            if own == NONE {
                own = l;
                word = w;
            }
            // A NaN has no place in the order.
            if float {
                continue;
            }
        }
        let k = order_key(w, float);
        lo = min(lo, k);
        hi = max(hi, k);
    }
    key_lo[l] = lo;
    key_hi[l] = hi;
    first[l] = own;
    special[l] = word;
    for (var s = GROUP / 2u; s > 0u; s = s / 2u) {
        workgroupBarrier();
        if l < s {
            key_lo[l] = min(key_lo[l], key_lo[l + s]);
            key_hi[l] = max(key_hi[l], key_hi[l + s]);
            first[l] = min(first[l], first[l + s]);
        }
    }
    workgroupBarrier();
    if l == 0u {
        found[0] = key_lo[0];
        found[1] = key_hi[0];
        found[2] = select(1u, 0u, first[0] == NONE);
        found[3] = select(special[min(first[0], GROUP - 1u)], 0u, first[0] == NONE);
    }
}

@compute @workgroup_size(256)
fn bincount(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    // The host read the largest value back and sized the bins for it; negatives raised.
    let b = words[params.x_offset + i * params.x_stride];
    if b >= params.bins {
        return;
    }
    if (params.flags & 2u) == 0u {
        atomicAdd(&bins[b], 1u);
        return;
    }
    let w = weights[params.w_offset + i * params.w_stride];
    var old = atomicLoad(&bins[b]);
    loop {
        let r = atomicCompareExchangeWeak(&bins[b], old, bitcast<u32>(bitcast<f32>(old) + w));
        if r.exchanged {
            break;
        }
        old = r.old_value;
    }
}
