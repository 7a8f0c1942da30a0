// Convolutions over a 3-D geometry (1-D and 2-D convolutions have leading size-1 spatial
// dims), input [N, C, D, H, W] and weight [O, C/groups, KD, KH, KW], both contiguous.
//
// `conv`: an implicit GEMM per (image, group): out[o, p] = sum_k W[o, k] * col[k, p] with
// k = (input channel, tap) and p an output pixel; `col` is never materialized, its 16 x 64
// tile is gathered from the input (zero outside the padding) into workgroup memory. A
// workgroup computes a 64 (output channels) x 64 (pixels) tile, each thread 4 x 4 of it.
// `depthwise`: one input channel per group (mobilenet's depthwise layers), where a GEMM
// would waste the tile: one thread per output, a direct loop over the taps.
// `Meta` mirrors `ConvMeta` in src/gpu/kernels/conv.rs.

struct Meta {
    n: u32,
    c: u32,
    o: u32,
    groups: u32,
    // (d, h, w, d * h * w)
    ins: vec4<u32>,
    ks: vec4<u32>,
    outs: vec4<u32>,
    stride: vec4<u32>,
    pad: vec4<u32>,
    dil: vec4<u32>,
    // Input channels per group, output channels per group, cg * taps.
    cg: u32,
    og: u32,
    kdim: u32,
    // Bit 0: add bias.
    flags: u32,
    // Threads per row of the 2-D dispatch grid (depthwise).
    row: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

var<workgroup> ta: array<array<f32, 16>, 64>;
var<workgroup> tb: array<array<f32, 64>, 16>;

// The input element read by tap `t` (within one channel) for output pixel `p`, or -1 in
// the padding. Returns the offset within the channel's plane.
fn source(p: u32, t: u32) -> i32 {
    let ohw = params.outs.y * params.outs.z;
    let oz = p / ohw;
    let oy = (p / params.outs.z) % params.outs.y;
    let ox = p % params.outs.z;
    let khw = params.ks.y * params.ks.z;
    let kz = t / khw;
    let ky = (t / params.ks.z) % params.ks.y;
    let kx = t % params.ks.z;
    let iz = i32(oz * params.stride.x + kz * params.dil.x) - i32(params.pad.x);
    let iy = i32(oy * params.stride.y + ky * params.dil.y) - i32(params.pad.y);
    let ix = i32(ox * params.stride.z + kx * params.dil.z) - i32(params.pad.z);
    if iz < 0 || iy < 0 || ix < 0 || iz >= i32(params.ins.x) || iy >= i32(params.ins.y)
        || ix >= i32(params.ins.z) {
        return -1;
    }
    return (iz * i32(params.ins.y) + iy) * i32(params.ins.z) + ix;
}

@compute @workgroup_size(16, 16)
fn conv(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let img = wid.z / params.groups;
    let g = wid.z % params.groups;
    let o0 = wid.y * BM;
    let p0 = wid.x * BN;
    let plane_out = params.outs.w;
    let taps = params.ks.w;
    let flat = lid.y * 16u + lid.x;
    // First input channel of this group in this image, and first weight row.
    let x_base = (img * params.c + g * params.cg) * params.ins.w;
    let w_base = g * params.og;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i = i + 1u) {
        acc[i] = 0.0;
    }
    let tiles = (params.kdim + BK - 1u) / BK;
    for (var t = 0u; t < tiles; t = t + 1u) {
        let k0 = t * BK;
        // Weight tile [64][16]: four elements per thread, consecutive k (coalesced).
        for (var r = 0u; r < 4u; r = r + 1u) {
            let e = flat + 256u * r;
            let row = e / BK;
            let kk = e % BK;
            let o = o0 + row;
            let k = k0 + kk;
            var v = 0.0;
            if o < params.og && k < params.kdim {
                v = w[(w_base + o) * params.kdim + k];
            }
            ta[row][kk] = v;
        }
        // Input tile [16][64]: four elements per thread, consecutive pixels.
        for (var r = 0u; r < 4u; r = r + 1u) {
            let e = flat + 256u * r;
            let kk = e / BN;
            let col = e % BN;
            let k = k0 + kk;
            let p = p0 + col;
            var v = 0.0;
            if k < params.kdim && p < plane_out {
                let ci = k / taps;
                let s = source(p, k % taps);
                if s >= 0 {
                    v = x[x_base + ci * params.ins.w + u32(s)];
                }
            }
            tb[kk][col] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk = kk + 1u) {
            var a: array<f32, 4>;
            var b: array<f32, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                a[i] = ta[lid.y + 16u * i][kk];
                b[i] = tb[kk][lid.x + 16u * i];
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i * 4u + j] = acc[i * 4u + j] + a[i] * b[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        let o = o0 + lid.y + 16u * i;
        if o >= params.og {
            continue;
        }
        let oc = w_base + o;
        var bv = 0.0;
        if (params.flags & 1u) != 0u {
            bv = bias[oc];
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let p = p0 + lid.x + 16u * j;
            if p < plane_out {
                out[(img * params.o + oc) * plane_out + p] = acc[i * 4u + j] + bv;
            }
        }
    }
}

@compute @workgroup_size(64)
fn depthwise(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    let plane_out = params.outs.w;
    if i >= params.n * params.o * plane_out {
        return;
    }
    let p = i % plane_out;
    let oc = (i / plane_out) % params.o;
    let img = i / (plane_out * params.o);
    // One input channel per group: channel g feeds output channels g*og .. (g+1)*og.
    let ci = oc / params.og;
    let x_base = (img * params.c + ci) * params.ins.w;
    let w_base = oc * params.ks.w;
    var acc = 0.0;
    for (var t = 0u; t < params.ks.w; t = t + 1u) {
        let s = source(p, t);
        if s >= 0 {
            acc = acc + x[x_base + u32(s)] * w[w_base + t];
        }
    }
    if (params.flags & 1u) != 0u {
        acc = acc + bias[oc];
    }
    out[i] = acc;
}
