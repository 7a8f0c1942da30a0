// Resampling over planes of a 3-D (D, H, W) volume (1-D and 2-D ops have leading size-1
// dims), contiguous f32 input, one thread per output element.
//
// `upsample`: nearest, nearest-exact, (bi/tri)linear and bicubic interpolation. The source
// taps (index, weight) of every output index along each dim are computed on the host by the
// CPU kernel's own code (src/ops/pool/upsample.rs) and read from `tab`; the sum is
// separable, innermost dim first, as torch evaluates it.
// `grid_sample`: `grid_sampler_2d` (bilinear, nearest, bicubic; zeros, border, reflection
// padding), following torch's CPU kernel (GridSamplerKernel.cpp, src/ops/pool/grid.rs).
// f32, or f16 storage (src/gpu/shaders.rs `Elems`), computed in f32 as the CPU kernels do.
// `Meta` mirrors `ResampleMeta` in src/gpu/kernels/resample.rs.

struct Meta {
    numel: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // grid_sample: bits 0-1 interpolation (0 bilinear, 1 nearest, 2 bicubic), bits 2-3
    // padding (0 zeros, 1 border, 2 reflection), bit 4 align_corners.
    mode: u32,
    // grid_sample: channels.
    c: u32,
    // (d, h, w, d * h * w)
    ins: vec4<u32>,
    outs: vec4<u32>,
    // upsample: taps per output index along (d, h, w), and each dim's first word in `tab`.
    nt: vec4<u32>,
    off: vec4<u32>,
}

// Storage element types (see elementwise.wgsl).
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
// upsample: per dim and output index, 4 (index, weight) pairs.
@group(0) @binding(3) var<storage, read> tab: array<f32>;
// grid_sample: the grid [N, H_out, W_out, 2].
@group(0) @binding(4) var<storage, read> grid: array<TIn>;

// Tap `t` of output index `o` along dim `a`: (source index, weight).
fn tap(a: u32, o: u32, t: u32) -> vec2<f32> {
    let b = params.off[a] + (o * 4u + t) * 2u;
    return vec2<f32>(tab[b], tab[b + 1u]);
}

@compute @workgroup_size(64)
fn upsample(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let op = params.outs.w;
    let q = i % op;
    let plane = i / op;
    let oz = q / (params.outs.y * params.outs.z);
    let oy = (q / params.outs.z) % params.outs.y;
    let ox = q % params.outs.z;
    let base = plane * params.ins.w;
    var acc = 0.0;
    for (var tz = 0u; tz < params.nt.x; tz = tz + 1u) {
        let z = tap(0u, oz, tz);
        var pacc = 0.0;
        for (var ty = 0u; ty < params.nt.y; ty = ty + 1u) {
            let y = tap(1u, oy, ty);
            let row = base + (u32(z.x) * params.ins.y + u32(y.x)) * params.ins.z;
            var racc = 0.0;
            for (var tx = 0u; tx < params.nt.z; tx = tx + 1u) {
                let xt = tap(2u, ox, tx);
                let v = f32(x[row + u32(xt.x)]) * xt.y;
                if tx == 0u {
                    racc = v;
                } else {
                    racc = racc + v;
                }
            }
            if ty == 0u {
                pacc = racc * y.y;
            } else {
                pacc = pacc + racc * y.y;
            }
        }
        if tz == 0u {
            acc = pacc * z.y;
        } else {
            acc = acc + pacc * z.y;
        }
    }
    out[i] = to_out(acc);
}

fn is_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u;
}

fn unnormalize(c: f32, size: u32) -> f32 {
    if (params.mode & 16u) != 0u {
        return (c + 1.0) * ((f32(size) - 1.0) / 2.0);
    }
    return (c + 1.0) * (f32(size) / 2.0) - 0.5;
}

fn clip(c: f32, size: u32) -> f32 {
    let m = f32(size) - 1.0;
    var v = 0.0;
    if c > 0.0 {
        v = c;
    }
    if m < v {
        return m;
    }
    return v;
}

fn reflect(c: f32, size: u32) -> f32 {
    var low = -0.5;
    var twice = 2.0 * f32(size);
    if (params.mode & 16u) != 0u {
        low = 0.0;
        twice = 2.0 * (f32(size) - 1.0);
    }
    if !(twice > 0.0) {
        return 0.0;
    }
    let a = abs(c - low);
    let flips = floor(a / twice);
    let extra = a - flips * twice;
    let other = twice - extra;
    if other < extra {
        return other + low;
    }
    return extra + low;
}

// Padding applied to a pixel coordinate; non-finite or huge ones become -100 (torch's
// safe_downgrade_to_int_range).
fn coordinates(c0: f32, size: u32) -> f32 {
    let pad = (params.mode >> 2u) & 3u;
    var c = c0;
    if pad == 1u {
        c = clip(c, size);
    } else if pad == 2u {
        c = clip(reflect(c, size), size);
    }
    if !is_finite(c) || c > 2147483646.0 || c < -2147483648.0 {
        return -100.0;
    }
    return c;
}

fn at(base: u32, yi: i32, xi: i32) -> f32 {
    if xi >= 0 && xi < i32(params.ins.z) && yi >= 0 && yi < i32(params.ins.y) {
        return f32(x[base + u32(yi) * params.ins.z + u32(xi)]);
    }
    return 0.0;
}

// Keys' cubic convolution weights, A = -0.75.
fn cubic(t: f32) -> vec4<f32> {
    let a = -0.75;
    let x1 = t + 1.0;
    let x2 = 1.0 - t;
    let x3 = x2 + 1.0;
    let c0 = ((a * x1 - 5.0 * a) * x1 + 8.0 * a) * x1 - 4.0 * a;
    let c1 = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
    let c2 = ((a + 2.0) * x2 - (a + 3.0)) * x2 * x2 + 1.0;
    let c3 = ((a * x3 - 5.0 * a) * x3 + 8.0 * a) * x3 - 4.0 * a;
    return vec4<f32>(c0, c1, c2, c3);
}

@compute @workgroup_size(64)
fn grid_sample(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let op = params.outs.w;
    let p = i % op;
    let plane = i / op;
    let b = plane / params.c;
    let base = plane * params.ins.w;
    let h = params.ins.y;
    let w = params.ins.z;
    let gx = f32(grid[(b * op + p) * 2u]);
    let gy = f32(grid[(b * op + p) * 2u + 1u]);
    let interp = params.mode & 3u;
    if interp == 0u {
        let fx = coordinates(unnormalize(gx, w), w);
        let fy = coordinates(unnormalize(gy, h), h);
        let x0 = floor(fx);
        let y0 = floor(fy);
        let we = fx - x0;
        let wn = fy - y0;
        let ww = 1.0 - we;
        let ws = 1.0 - wn;
        let xi = i32(x0);
        let yi = i32(y0);
        out[i] = to_out(at(base, yi, xi) * (ws * ww) + at(base, yi, xi + 1) * (ws * we)
            + at(base, yi + 1, xi) * (wn * ww) + at(base, yi + 1, xi + 1) * (wn * we));
    } else if interp == 1u {
        let fx = coordinates(unnormalize(gx, w), w);
        let fy = coordinates(unnormalize(gy, h), h);
        out[i] = to_out(at(base, i32(round(fy)), i32(round(fx))));
    } else {
        let fx = unnormalize(gx, w);
        let fy = unnormalize(gy, h);
        let x0 = floor(fx);
        let y0 = floor(fy);
        let cx = cubic(fx - x0);
        let cy = cubic(fy - y0);
        var acc = 0.0;
        for (var r = 0u; r < 4u; r = r + 1u) {
            let yc = coordinates(y0 + f32(r) - 1.0, h);
            var rowv = 0.0;
            for (var c = 0u; c < 4u; c = c + 1u) {
                let xc = coordinates(x0 + f32(c) - 1.0, w);
                rowv = rowv + cx[c] * at(base, i32(yc), i32(xc));
            }
            acc = acc + cy[r] * rowv;
        }
        out[i] = to_out(acc);
    }
}

fn at3(base: u32, zi: i32, yi: i32, xi: i32) -> f32 {
    if zi >= 0 && zi < i32(params.ins.x) && yi >= 0 && yi < i32(params.ins.y) && xi >= 0
        && xi < i32(params.ins.z) {
        return f32(x[base + (u32(zi) * params.ins.y + u32(yi)) * params.ins.z + u32(xi)]);
    }
    return 0.0;
}

// `grid_sampler_3d`: trilinear or nearest sampling of [N, C, D, H, W] at a grid
// [N, D', H', W', 3] of (x, y, z), the eight corners added in torch's CPU order (tnw, tne,
// tsw, tse, bnw, bne, bsw, bse) with the weights multiplied as it does.
@compute @workgroup_size(64)
fn grid_sample3d(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let op = params.outs.w;
    let p = i % op;
    let plane = i / op;
    let b = plane / params.c;
    let base = plane * params.ins.w;
    let g = (b * op + p) * 3u;
    let fx = coordinates(unnormalize(f32(grid[g]), params.ins.z), params.ins.z);
    let fy = coordinates(unnormalize(f32(grid[g + 1u]), params.ins.y), params.ins.y);
    let fz = coordinates(unnormalize(f32(grid[g + 2u]), params.ins.x), params.ins.x);
    if (params.mode & 3u) == 1u {
        out[i] = to_out(at3(base, i32(round(fz)), i32(round(fy)), i32(round(fx))));
        return;
    }
    let x0 = floor(fx);
    let y0 = floor(fy);
    let z0 = floor(fz);
    let dw = x0 + 1.0 - fx;
    let de = fx - x0;
    let dn = y0 + 1.0 - fy;
    let ds = fy - y0;
    let dt = z0 + 1.0 - fz;
    let db = fz - z0;
    let xi = i32(x0);
    let yi = i32(y0);
    let zi = i32(z0);
    var acc = at3(base, zi, yi, xi) * (dw * dn * dt);
    acc = acc + at3(base, zi, yi, xi + 1) * (de * dn * dt);
    acc = acc + at3(base, zi, yi + 1, xi) * (dw * ds * dt);
    acc = acc + at3(base, zi, yi + 1, xi + 1) * (de * ds * dt);
    acc = acc + at3(base, zi + 1, yi, xi) * (dw * dn * db);
    acc = acc + at3(base, zi + 1, yi, xi + 1) * (de * dn * db);
    acc = acc + at3(base, zi + 1, yi + 1, xi) * (dw * ds * db);
    acc = acc + at3(base, zi + 1, yi + 1, xi + 1) * (de * ds * db);
    out[i] = to_out(acc);
}
