// Convolutions over a 3-D geometry (1-D and 2-D convolutions have leading size-1 spatial
// dims), input [N, C, D, H, W] and weight [O, C/groups, KD, KH, KW], both contiguous.
//
// `conv`: an implicit GEMM per (image, group): out[o, p] = sum_k W[o, k] * col[k, p] with
// k = (input channel, tap) and p an output pixel; `col` is never materialized, each
// invocation gathers its input values directly (zero outside the padding).
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
    // im2col: the columns' row length, kdim rounded up to a multiple of 4 (zeros past kdim).
    kpad: u32,
    _p1: u32,
    _p2: u32,
}


// Storage element types (see elementwise.wgsl; src/gpu/shaders.rs `Elems`): f32, or f16
// storage computed in f32 (as the CPU kernel computes f16 convolutions).
alias TIn = f32;
alias TOut = f32;
const OUT_F16: bool = false;

// +inf as a run-time value (see pool.wgsl).
var<private> INF_BITS: u32 = 0x7f800000u;

// A result in the output's type; past f16's range, inf as torch (see elementwise.wgsl).
fn to_out(v: f32) -> TOut {
    let u = bitcast<u32>(v);
    let nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
    if OUT_F16 && abs(v) >= 65520.0 && !nan {
        let inf = bitcast<f32>(INF_BITS);
        return TOut(select(-inf, inf, v > 0.0));
    }
    return TOut(v);
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> x: array<TIn>;
@group(0) @binding(3) var<storage, read> w: array<TIn>;
@group(0) @binding(4) var<storage, read> bias: array<TIn>;

// The ops of a fused epilogue on a result before it is stored, `i` its flat index in the
// output (src/gpu/kernels/epilogue.rs replaces this function; by default the result as is).
fn epilogue(v: f32, i: u32) -> f32 {
    return v;
}

// `conv_tiled`: 64 (output channels) x 64 (pixels) per workgroup, each thread 4 x 4 of it,
// with the weight and input tiles staged in workgroup memory (two barriers per K step). The
// better choice where barriers are cheap (GPUs, lavapipe); `conv` (below) avoids them.
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;

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

// The im2col column value of image `img`, row k = (input channel, tap), window position p:
// the input value the tap reads, zero in the padding.
fn column_value(img: u32, k: u32, p: u32) -> f32 {
    let taps = params.ks.w;
    let s = source(p, k % taps);
    if s < 0 {
        return 0.0;
    }
    return f32(x[(img * params.c + k / taps) * params.ins.w + u32(s)]);
}

@compute @workgroup_size(16, 16)
fn conv_tiled(
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
                v = f32(w[(w_base + o) * params.kdim + k]);
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
                    v = f32(x[x_base + ci * params.ins.w + u32(s)]);
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
            bv = f32(bias[oc]);
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let p = p0 + lid.x + 16u * j;
            if p < plane_out {
                let oi = (img * params.o + oc) * plane_out + p;
                out[oi] = to_out(epilogue(acc[i * 4u + j] + bv, oi));
            }
        }
    }
}

// Register blocking, as in matmul.wgsl: each invocation computes 4 output channels x 4
// output pixels from direct loads, an 8x8 workgroup covers 32 x 32. No workgroup memory and
// no barriers (they dominate on software adapters); the loops run over input channels and
// taps, so the pixel coordinates are decomposed once per invocation, not per element.
@compute @workgroup_size(8, 8)
fn conv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let img = gid.z / params.groups;
    let g = gid.z % params.groups;
    let o0 = gid.y * 4u;
    let p0 = gid.x * 4u;
    let plane_out = params.outs.w;
    if o0 >= params.og || p0 >= plane_out {
        return;
    }
    // First input channel of this group in this image, and first weight row.
    let x_base = (img * params.c + g * params.cg) * params.ins.w;
    let w_base = g * params.og;
    // Origins (output position * stride - padding) of the 4 pixels; past the end the last
    // pixel is recomputed and not stored.
    var oz = vec4<i32>(0);
    var oy = vec4<i32>(0);
    var ox = vec4<i32>(0);
    let ohw = params.outs.y * params.outs.z;
    for (var j = 0u; j < 4u; j = j + 1u) {
        let p = min(p0 + j, plane_out - 1u);
        oz[j] = i32((p / ohw) * params.stride.x) - i32(params.pad.x);
        oy[j] = i32(((p / params.outs.z) % params.outs.y) * params.stride.y) - i32(params.pad.y);
        ox[j] = i32((p % params.outs.z) * params.stride.z) - i32(params.pad.z);
    }
    let r0 = (w_base + min(o0, params.og - 1u)) * params.kdim;
    let r1 = (w_base + min(o0 + 1u, params.og - 1u)) * params.kdim;
    let r2 = (w_base + min(o0 + 2u, params.og - 1u)) * params.kdim;
    let r3 = (w_base + min(o0 + 3u, params.og - 1u)) * params.kdim;
    let dims = vec3<i32>(i32(params.ins.x), i32(params.ins.y), i32(params.ins.z));
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    var t = 0u;
    for (var ci = 0u; ci < params.cg; ci = ci + 1u) {
        let xc = x_base + ci * params.ins.w;
        for (var kz = 0u; kz < params.ks.x; kz = kz + 1u) {
            let iz = oz + vec4<i32>(i32(kz * params.dil.x));
            let okz = (iz >= vec4<i32>(0)) & (iz < vec4<i32>(dims.x));
            for (var ky = 0u; ky < params.ks.y; ky = ky + 1u) {
                let iy = oy + vec4<i32>(i32(ky * params.dil.y));
                let oky = okz & (iy >= vec4<i32>(0)) & (iy < vec4<i32>(dims.y));
                let row = (iz * dims.y + iy) * dims.z;
                for (var kx = 0u; kx < params.ks.z; kx = kx + 1u) {
                    let ix = ox + vec4<i32>(i32(kx * params.dil.z));
                    let ok = oky & (ix >= vec4<i32>(0)) & (ix < vec4<i32>(dims.z));
                    let off = vec4<u32>(max(row + ix, vec4<i32>(0))) + vec4<u32>(xc);
                    let xv = select(
                        vec4<f32>(0.0),
                        vec4<f32>(f32(x[off.x]), f32(x[off.y]), f32(x[off.z]), f32(x[off.w])),
                        ok,
                    );
                    acc0 = fma(vec4<f32>(f32(w[r0 + t])), xv, acc0);
                    acc1 = fma(vec4<f32>(f32(w[r1 + t])), xv, acc1);
                    acc2 = fma(vec4<f32>(f32(w[r2 + t])), xv, acc2);
                    acc3 = fma(vec4<f32>(f32(w[r3 + t])), xv, acc3);
                    t = t + 1u;
                }
            }
        }
    }
    let accs = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
    for (var i = 0u; i < 4u; i = i + 1u) {
        let o = o0 + i;
        if o >= params.og {
            break;
        }
        let oc = w_base + o;
        var bv = 0.0;
        if (params.flags & 1u) != 0u {
            bv = f32(bias[oc]);
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let p = p0 + j;
            if p < plane_out {
                let oi = (img * params.o + oc) * plane_out + p;
                out[oi] = to_out(epilogue(accs[i][j] + bv, oi));
            }
        }
    }
}

// `im2col`: the implicit GEMM's columns written out, pixel-major: col[img, p, k] for output
// pixel p and k = (input channel, tap) (zero in the padding, and in the kdim..kpad tail),
// groups = 1. A matrix multiply (matmul4.wgsl, `mm_kk`: K contiguous on both sides) then
// computes out[img] = W [O, K] x col[img]^T. One invocation per (image, pixel, channel)
// writes that channel's taps: software adapters pay per invocation and per loop step
// (SwiftShader: 3x fewer invocations' time than one per element), so 3x3 windows at
// dilation 1 take an unrolled row of three.
@compute @workgroup_size(64)
fn im2col(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    let plane_out = params.outs.w;
    if i >= params.n * plane_out * params.c {
        return;
    }
    let c = i % params.c;
    let p = (i / params.c) % plane_out;
    let img = i / (params.c * plane_out);
    let ohw = params.outs.y * params.outs.z;
    let oz = i32((p / ohw) * params.stride.x) - i32(params.pad.x);
    let oy = i32(((p / params.outs.z) % params.outs.y) * params.stride.y) - i32(params.pad.y);
    let ox = i32((p % params.outs.z) * params.stride.z) - i32(params.pad.z);
    let base = (img * params.c + c) * params.ins.w;
    let row0 = (img * plane_out + p) * params.kpad;
    var o = row0 + c * params.ks.w;
    let id = i32(params.ins.x);
    let ih = i32(params.ins.y);
    let iw = i32(params.ins.z);
    if params.ks.x == 1u && params.ks.y == 3u && params.ks.z == 3u && params.dil.y == 1u
        && params.dil.z == 1u {
        let zok = oz >= 0 && oz < id;
        let plane = base + u32(clamp(oz, 0, id - 1) * ih * iw);
        for (var ky = 0; ky < 3; ky = ky + 1) {
            let iy = oy + ky;
            let yok = zok && iy >= 0 && iy < ih;
            let row = plane + u32(clamp(iy, 0, ih - 1) * iw);
            out[o] = to_out(input_at(row, ox, iw, yok));
            out[o + 1u] = to_out(input_at(row, ox + 1, iw, yok));
            out[o + 2u] = to_out(input_at(row, ox + 2, iw, yok));
            o = o + 3u;
        }
    } else {
        for (var kz = 0u; kz < params.ks.x; kz = kz + 1u) {
            let iz = oz + i32(kz * params.dil.x);
            let zok = iz >= 0 && iz < id;
            let plane = base + u32(clamp(iz, 0, id - 1) * ih * iw);
            for (var ky = 0u; ky < params.ks.y; ky = ky + 1u) {
                let iy = oy + i32(ky * params.dil.y);
                let yok = zok && iy >= 0 && iy < ih;
                let row = plane + u32(clamp(iy, 0, ih - 1) * iw);
                for (var kx = 0u; kx < params.ks.z; kx = kx + 1u) {
                    out[o] = to_out(input_at(row, ox + i32(kx * params.dil.z), iw, yok));
                    o = o + 1u;
                }
            }
        }
    }
    // The last channel also zeroes the row's kdim..kpad tail.
    if c + 1u == params.c {
        for (var k = params.kdim; k < params.kpad; k = k + 1u) {
            out[row0 + k] = to_out(0.0);
        }
    }
}

// Input `ix` of the row starting at `row` (width `iw`; `ok`: the row is inside the image),
// zero outside the image. The read is clamped into the row and the zero chosen by
// `select`: no divergent branch around the load.
fn input_at(row: u32, ix: i32, iw: i32, ok: bool) -> f32 {
    let v = f32(x[row + u32(clamp(ix, 0, iw - 1))]);
    return select(0.0, v, ok && ix >= 0 && ix < iw);
}

// `aten.im2col` (F.unfold): out[img, k, p] with k = (input channel, tap) over c * taps
// (`kdim`) and p a window position: the input value tap k % taps of channel k / taps reads
// at p (zero in the padding). Torch's column layout [N, C * taps, L].
@compute @workgroup_size(64)
fn unfold(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    let plane_out = params.outs.w;
    if i >= params.n * params.kdim * plane_out {
        return;
    }
    let p = i % plane_out;
    let k = (i / plane_out) % params.kdim;
    let img = i / (plane_out * params.kdim);
    out[i] = to_out(column_value(img, k, p));
}

// `aten.col2im` (F.fold): one thread per output element (image, channel, pixel) summing the
// column entries whose window covers the pixel, taps in order (the order torch's CPU kernel
// adds them in). The columns `x` are [N, C * taps, L]; here `ins` is the output image,
// `outs` the grid of window positions.
@compute @workgroup_size(64)
fn fold(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    let plane = params.ins.w;
    if i >= params.n * params.c * plane {
        return;
    }
    let pix = i % plane;
    let ch = i / plane;
    let y = pix / params.ins.z;
    let xx = pix % params.ins.z;
    let taps = params.ks.w;
    var acc = 0.0;
    for (var t = 0u; t < taps; t = t + 1u) {
        let ky = t / params.ks.z;
        let kx = t % params.ks.z;
        let ny = i32(y + params.pad.y) - i32(ky * params.dil.y);
        let nx = i32(xx + params.pad.z) - i32(kx * params.dil.z);
        if ny < 0 || nx < 0 || u32(ny) % params.stride.y != 0u || u32(nx) % params.stride.z != 0u {
            continue;
        }
        let by = u32(ny) / params.stride.y;
        let bx = u32(nx) / params.stride.z;
        if by >= params.outs.y || bx >= params.outs.z {
            continue;
        }
        acc = acc + f32(x[(ch * taps + t) * params.outs.w + by * params.outs.z + bx]);
    }
    out[i] = to_out(acc);
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
    // The pixel's origin once, then the taps by their three coordinates.
    let ohw = params.outs.y * params.outs.z;
    let oz = i32((p / ohw) * params.stride.x) - i32(params.pad.x);
    let oy = i32(((p / params.outs.z) % params.outs.y) * params.stride.y) - i32(params.pad.y);
    let ox = i32((p % params.outs.z) * params.stride.z) - i32(params.pad.z);
    var acc = 0.0;
    var t = 0u;
    for (var kz = 0u; kz < params.ks.x; kz = kz + 1u) {
        let iz = oz + i32(kz * params.dil.x);
        for (var ky = 0u; ky < params.ks.y; ky = ky + 1u) {
            let iy = oy + i32(ky * params.dil.y);
            let row_ok = iz >= 0 && iz < i32(params.ins.x) && iy >= 0 && iy < i32(params.ins.y);
            let row = (iz * i32(params.ins.y) + iy) * i32(params.ins.z);
            for (var kx = 0u; kx < params.ks.z; kx = kx + 1u) {
                let ix = ox + i32(kx * params.dil.z);
                if row_ok && ix >= 0 && ix < i32(params.ins.z) {
                    acc = acc + f32(x[x_base + u32(row + ix)]) * f32(w[w_base + t]);
                }
                t = t + 1u;
            }
        }
    }
    if (params.flags & 1u) != 0u {
        acc = acc + f32(bias[oc]);
    }
    out[i] = to_out(epilogue(acc, i));
}

// `depthwise2d`: a 2-D depthwise convolution (one input channel per group, no depth), one
// thread per four consecutive output pixels of a row. Each tap's weight is read once for
// the four; at stride 1 and dilation 1 the four inputs a tap reads slide along the row,
// one new load per tap. Reads in the padding are clamped into the row and replaced by zero
// with `select` (no divergent branch around the loads: software adapters run those masked).
@compute @workgroup_size(64)
fn depthwise2d(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    let ow = params.outs.z;
    let blocks = (ow + 3u) / 4u;
    let oh = params.outs.y;
    if i >= params.n * params.o * oh * blocks {
        return;
    }
    let ox0 = (i % blocks) * 4u;
    let oy = (i / blocks) % oh;
    let plane = i / (blocks * oh);
    let oc = plane % params.o;
    let img = plane / params.o;
    let ci = oc / params.og;
    let x_base = (img * params.c + ci) * params.ins.w;
    let w_base = oc * params.ks.w;
    let ih = i32(params.ins.y);
    let iw = i32(params.ins.z);
    let sx = i32(params.stride.z);
    let dx = i32(params.dil.z);
    let oy0 = i32(oy * params.stride.y) - i32(params.pad.y);
    let ix0 = i32(ox0) * sx - i32(params.pad.z);
    let sliding = sx == 1 && dx == 1;
    var acc = vec4<f32>(0.0);
    var t = 0u;
    for (var ky = 0u; ky < params.ks.y; ky = ky + 1u) {
        let iy = oy0 + i32(ky * params.dil.y);
        let yok = iy >= 0 && iy < ih;
        let row = x_base + u32(clamp(iy, 0, ih - 1) * iw);
        if sliding {
            // Inputs ix0 + kx + q: the window moves one element per tap.
            var v = vec4<f32>(
                input_at(row, ix0, iw, yok),
                input_at(row, ix0 + 1, iw, yok),
                input_at(row, ix0 + 2, iw, yok),
                input_at(row, ix0 + 3, iw, yok),
            );
            for (var kx = 0u; kx < params.ks.z; kx = kx + 1u) {
                if kx > 0u {
                    v = vec4<f32>(v.yzw, input_at(row, ix0 + i32(kx) + 3, iw, yok));
                }
                acc = acc + v * f32(w[w_base + t]);
                t = t + 1u;
            }
        } else {
            for (var kx = 0u; kx < params.ks.z; kx = kx + 1u) {
                let ix = ix0 + i32(kx) * dx;
                let v = vec4<f32>(
                    input_at(row, ix, iw, yok),
                    input_at(row, ix + sx, iw, yok),
                    input_at(row, ix + 2 * sx, iw, yok),
                    input_at(row, ix + 3 * sx, iw, yok),
                );
                acc = acc + v * f32(w[w_base + t]);
                t = t + 1u;
            }
        }
    }
    if (params.flags & 1u) != 0u {
        acc = acc + f32(bias[oc]);
    }
    let o0 = (plane * oh + oy) * ow + ox0;
    for (var q = 0u; q < 4u; q = q + 1u) {
        if ox0 + q < ow {
            out[o0 + q] = to_out(epilogue(acc[q], o0 + q));
        }
    }
}

// `conv_transpose`: a transposed convolution (the gradient of `conv` w.r.t. its input), one
// thread per output element gathering every (input channel of its group, tap) whose
// strided position lands on it. Here `c` / `cg` are the input channels (in total and per
// group), `o` / `og` the output channels, the weight is [C, O/groups, KD, KH, KW], and
// `pad` is the padding cropped from the full output's start.
@compute @workgroup_size(64)
fn conv_transpose(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    let plane_out = params.outs.w;
    if i >= params.n * params.o * plane_out {
        return;
    }
    let p = i % plane_out;
    let oc = (i / plane_out) % params.o;
    let img = i / (plane_out * params.o);
    let g = oc / params.og;
    let ocg = oc % params.og;
    let oz = i32(p / (params.outs.y * params.outs.z)) + i32(params.pad.x);
    let oy = i32((p / params.outs.z) % params.outs.y) + i32(params.pad.y);
    let ox = i32(p % params.outs.z) + i32(params.pad.z);
    let taps = params.ks.w;
    var acc = 0.0;
    for (var t = 0u; t < taps; t = t + 1u) {
        let kz = i32(t / (params.ks.y * params.ks.z));
        let ky = i32((t / params.ks.z) % params.ks.y);
        let kx = i32(t % params.ks.z);
        let nz = oz - kz * i32(params.dil.x);
        let ny = oy - ky * i32(params.dil.y);
        let nx = ox - kx * i32(params.dil.z);
        if nz < 0 || ny < 0 || nx < 0 {
            continue;
        }
        if u32(nz) % params.stride.x != 0u || u32(ny) % params.stride.y != 0u
            || u32(nx) % params.stride.z != 0u {
            continue;
        }
        let iz = u32(nz) / params.stride.x;
        let iy = u32(ny) / params.stride.y;
        let ix = u32(nx) / params.stride.z;
        if iz >= params.ins.x || iy >= params.ins.y || ix >= params.ins.z {
            continue;
        }
        let s = (iz * params.ins.y + iy) * params.ins.z + ix;
        for (var ci = 0u; ci < params.cg; ci = ci + 1u) {
            let c = g * params.cg + ci;
            acc = acc + f32(x[(img * params.c + c) * params.ins.w + s])
                * f32(w[(c * params.og + ocg) * taps + t]);
        }
    }
    if (params.flags & 1u) != 0u {
        acc = acc + f32(bias[oc]);
    }
    out[i] = to_out(acc);
}
