// Histograms (src/gpu/kernels/histogram.rs), f32, one invocation per bin, no atomics: each
// bin reads every element and counts those whose bin is its own, in torch's arithmetic
// (HistogramKernel.cpp, src/ops/reduce/histogram.rs): `histc` over [lo, hi] given by the
// caller (the host declines data-dependent ranges), bin = trunc((x - lo) * bins / (hi - lo))
// in f32, the top edge counted in the last bin, elements outside (and NaN) ignored.

struct Meta {
    numel: u32,
    bins: u32,
    lo: f32,
    hi: f32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

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
