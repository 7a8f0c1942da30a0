// Discrete Fourier transforms of complex64 data (src/gpu/kernels/fft.rs), f32 throughout.
// The work tensor is contiguous, interleaved (re, im) pairs; a transform runs along one dim
// of it, seen as `outer` lines of `n` elements `inner` apart (no transposes).
//
// - `gather`: a strided read of the input (real or complex, zero past its sizes: torch's
//   padding to `n`) into a contiguous tensor, or of the work tensor into the output (the
//   one-sided crop of r2c, the real part of c2r), times `scale`, conjugated on request.
// - `stockham`: one radix-2 pass of a Stockham autosort FFT (lengths that are powers of
//   two): log2(n) passes, ping-ponging between two buffers, give the natural order.
// - `chirp_pre` / `chirp_filter` / `chirp_mul` / `chirp_post`: Bluestein's algorithm for any
//   other length n: X_k = c_k sum_j (x_j c_j) cconj(c_{k-j}) with the chirp
//   c_j = exp(-+ i pi j^2 / n), a circular convolution of length m >= 2n - 1 (a power of
//   two) computed with `stockham`: pre-multiply and pad, the filter cconj(c) and its FFT,
//   the pointwise product (scaled by 1/m), the inverse FFT, post-multiply and crop.
// - `hermitian`: the full spectrum of n bins from the one-sided half_n that c2r takes
//   (X_{n-k} = cconj(X_k); bins the input lacks are zero).

struct Meta {
    // Threads.
    count: u32,
    // Threads per row of the 2-D dispatch grid (x workgroups * 64).
    row: u32,
    // The transform length (stockham, chirp_*, hermitian) along the dim.
    n: u32,
    // The distance between consecutive elements of a line (the product of later sizes).
    inner: u32,
    // stockham: the size of the sub-transforms this pass merges (1, 2, 4... n/2).
    ns: u32,
    // chirp_*: the padded length m; hermitian: the one-sided length the input holds.
    m: u32,
    // Bit 0: inverse (exp(+i...)); bit 1 (gather): the source is complex; bit 2 (gather):
    // the destination is complex; bit 3 (gather): conjugate.
    flags: u32,
    // gather: the rank of `sizes`.
    rank: u32,
    scale: f32,
    src_offset: u32,
    _p0: u32,
    _p1: u32,
    // gather: the destination's sizes, the source's sizes (a read past them is 0) and word
    // strides.
    sizes: array<vec4<u32>, 2>,
    src_sizes: array<vec4<u32>, 2>,
    src_strides: array<vec4<u32>, 2>,
}

const INVERSE: u32 = 1u;
const SRC_COMPLEX: u32 = 2u;
const DST_COMPLEX: u32 = 4u;
const CONJ: u32 = 8u;
const PI: f32 = 3.141592653589793;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read> chirp_fft: array<f32>;

fn thread_id(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

fn load_c(i: u32) -> vec2<f32> {
    return vec2<f32>(src[2u * i], src[2u * i + 1u]);
}

fn store_c(i: u32, v: vec2<f32>) {
    dst[2u * i] = v.x;
    dst[2u * i + 1u] = v.y;
}

fn cmul(x: vec2<f32>, y: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(x.x * y.x - x.y * y.y, x.x * y.y + x.y * y.x);
}

// exp(i * angle), the sign of the transform's direction applied.
fn twiddle(angle: f32) -> vec2<f32> {
    let a = select(-angle, angle, (params.flags & INVERSE) != 0u);
    return vec2<f32>(sin_cos(a, true), sin_cos(a, false));
}

@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>) {
    let e = thread_id(gid);
    if e >= params.count {
        return;
    }
    var rem = e;
    var w = params.src_offset;
    var inside = true;
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.sizes[d / 4u][d % 4u];
        let k = rem % n;
        rem = rem / n;
        inside = inside && k < params.src_sizes[d / 4u][d % 4u];
        w = w + k * params.src_strides[d / 4u][d % 4u];
    }
    var v = vec2<f32>(0.0, 0.0);
    if inside {
        if (params.flags & SRC_COMPLEX) != 0u {
            v = vec2<f32>(src[w], src[w + 1u]);
        } else {
            v = vec2<f32>(src[w], 0.0);
        }
    }
    if (params.flags & CONJ) != 0u {
        v.y = -v.y;
    }
    v = v * params.scale;
    if (params.flags & DST_COMPLEX) != 0u {
        store_c(e, v);
    } else {
        dst[e] = v.x;
    }
}

// (line start, position along the line) of thread `t` over lines of `len` elements.
fn line_at(t: u32, len: u32) -> vec2<u32> {
    let i = t % params.inner;
    let q = t / params.inner;
    let j = q % len;
    let o = q / len;
    return vec2<u32>(o * len * params.inner + i, j);
}

// The start of the same line in a tensor whose lines hold `to_len` elements, for the start
// `start` of a line of `from_len` elements.
fn rebase(start: u32, from_len: u32, to_len: u32) -> u32 {
    return (start / (from_len * params.inner)) * to_len * params.inner + start % params.inner;
}

@compute @workgroup_size(64)
fn stockham(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = thread_id(gid);
    if t >= params.count {
        return;
    }
    // One butterfly: elements j and j + n/2 of a line.
    let half_n = params.n / 2u;
    let i = t % params.inner;
    let q = t / params.inner;
    let j = q % half_n;
    let base = (q / half_n) * params.n * params.inner + i;
    let k = j % params.ns;
    let x = load_c(base + j * params.inner);
    let y = cmul(load_c(base + (j + half_n) * params.inner), twiddle(PI * f32(k) / f32(params.ns)));
    let to = (j / params.ns) * params.ns * 2u + k;
    store_c(base + to * params.inner, (x + y) * params.scale);
    store_c(base + (to + params.ns) * params.inner, (x - y) * params.scale);
}

// j^2 mod m without overflow (m < 2^31).
fn square_mod(j: u32, m: u32) -> u32 {
    if j < 65536u {
        return (j * j) % m;
    }
    var r = 0u;
    var x = j % m;
    var y = j;
    loop {
        if y == 0u {
            break;
        }
        if (y & 1u) != 0u {
            r = (r + x) % m;
        }
        x = (2u * x) % m;
        y = y >> 1u;
    }
    return r;
}

// The chirp c_j = exp(-+ i pi j^2 / n), its angle reduced exactly (j^2 mod 2n).
fn chirp(j: u32) -> vec2<f32> {
    let n = params.n;
    return twiddle(PI * f32(square_mod(j, 2u * n)) / f32(n));
}

fn cconj(x: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(x.x, -x.y);
}

@compute @workgroup_size(64)
fn chirp_pre(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = thread_id(gid);
    if t >= params.count {
        return;
    }
    // Over the padded lines (m); the source lines hold n.
    let p = line_at(t, params.m);
    var v = vec2<f32>(0.0, 0.0);
    if p.y < params.n {
        let src_base = rebase(p.x, params.m, params.n);
        v = cmul(load_c(src_base + p.y * params.inner), chirp(p.y));
    }
    store_c(p.x + p.y * params.inner, v);
}

@compute @workgroup_size(64)
fn chirp_filter(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = thread_id(gid);
    if j >= params.count {
        return;
    }
    // cconj(c) at j and at -j (mod m), 1/m folded in (the inverse FFT is unnormalized).
    var v = vec2<f32>(0.0, 0.0);
    if j < params.n {
        v = cconj(chirp(j));
    } else if j > params.m - params.n {
        v = cconj(chirp(params.m - j));
    }
    store_c(j, v * params.scale);
}

@compute @workgroup_size(64)
fn chirp_mul(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = thread_id(gid);
    if t >= params.count {
        return;
    }
    let p = line_at(t, params.m);
    let e = p.x + p.y * params.inner;
    store_c(e, cmul(load_c(e), vec2<f32>(chirp_fft[2u * p.y], chirp_fft[2u * p.y + 1u])));
}

@compute @workgroup_size(64)
fn chirp_post(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = thread_id(gid);
    if t >= params.count {
        return;
    }
    // Over the result lines (n); the source lines hold m.
    let p = line_at(t, params.n);
    let src_base = rebase(p.x, params.n, params.m);
    store_c(p.x + p.y * params.inner, cmul(load_c(src_base + p.y * params.inner), chirp(p.y)));
}

@compute @workgroup_size(64)
fn hermitian(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = thread_id(gid);
    if t >= params.count {
        return;
    }
    // Over the full lines (n); the source lines hold m (the one-sided length).
    let p = line_at(t, params.n);
    let src_base = rebase(p.x, params.n, params.m);
    var v = vec2<f32>(0.0, 0.0);
    if p.y <= params.n / 2u {
        if p.y < params.m {
            v = load_c(src_base + p.y * params.inner);
        }
    } else if params.n - p.y < params.m {
        v = cconj(load_c(src_base + (params.n - p.y) * params.inner));
    }
    store_c(p.x + p.y * params.inner, v);
}
