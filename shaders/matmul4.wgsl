// Matrix multiply with vec4 loads, for f32 operands whose K runs contiguous in A (the
// usual row-major activations) and either
//   `mm_kk*`: in B as well (B = W^T of a linear layer, K^T in attention): 4-wide dot products;
//   `mm_kn*`: or N runs contiguous in B (a plain row-major B: attention's P V, mm):
// with every stride and offset a multiple of 4 (src/gpu/kernels.rs `encode_matmul` checks).
// Each invocation computes 8 rows x 8 columns from direct loads (no workgroup memory, no
// barriers; see matmul.wgsl), an 8x8 workgroup covers 64 x 64. Four k per loop step in
// vec4 registers give 256 multiply-adds per 16 vec4 loads (matmul.wgsl's scalar form: 16
// per 8 scalar loads). SwiftShader pays per load and per loop step, not per multiply-add:
// the 8x8 block runs [64,576]x[576,3136] (a resnet18 layer1 convolution) in 0.65x the time
// of the 8x4 block it replaced (bench/shader_micro.mjs).
// Same `Meta` as matmul.wgsl (`MatmulMeta`); out = alpha * A B (+ beta * C).

struct Meta {
    m: u32,
    n: u32,
    k: u32,
    flags: u32,
    a: vec4<u32>,
    b: vec4<u32>,
    c: vec4<u32>,
    alpha: f32,
    beta: f32,
    _p0: f32,
    _p1: f32,
}

const ROWS: u32 = 8u;
const COLS: u32 = 8u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> c: array<f32>;

// The 8x8 block's accumulators: row i's columns 0..3 in `lo[i]`, 4..7 in `hi[i]`.
struct Acc {
    lo: array<vec4<f32>, 8>,
    hi: array<vec4<f32>, 8>,
}

// Row i of A (clamped into the matrix: rows past M are computed and never stored), in
// vec4 units.
fn a_row(row0: u32, i: u32, batch: u32) -> u32 {
    return (params.a.w + batch * params.a.x + min(row0 + i, params.m - 1u) * params.a.y) / 4u;
}

// B k-contiguous: acc[i][j] = dot(A[row i, k..k+4], B[k..k+4, col j]).
fn block_kk(row0: u32, col0: u32, batch: u32) -> Acc {
    let ra0 = a_row(row0, 0u, batch);
    let ra1 = a_row(row0, 1u, batch);
    let ra2 = a_row(row0, 2u, batch);
    let ra3 = a_row(row0, 3u, batch);
    let ra4 = a_row(row0, 4u, batch);
    let ra5 = a_row(row0, 5u, batch);
    let ra6 = a_row(row0, 6u, batch);
    let ra7 = a_row(row0, 7u, batch);
    let cb = params.b.w + batch * params.b.x;
    let rc0 = (cb + min(col0 + 0u, params.n - 1u) * params.b.z) / 4u;
    let rc1 = (cb + min(col0 + 1u, params.n - 1u) * params.b.z) / 4u;
    let rc2 = (cb + min(col0 + 2u, params.n - 1u) * params.b.z) / 4u;
    let rc3 = (cb + min(col0 + 3u, params.n - 1u) * params.b.z) / 4u;
    let rc4 = (cb + min(col0 + 4u, params.n - 1u) * params.b.z) / 4u;
    let rc5 = (cb + min(col0 + 5u, params.n - 1u) * params.b.z) / 4u;
    let rc6 = (cb + min(col0 + 6u, params.n - 1u) * params.b.z) / 4u;
    let rc7 = (cb + min(col0 + 7u, params.n - 1u) * params.b.z) / 4u;
    var lo0 = vec4<f32>(0.0);
    var hi0 = vec4<f32>(0.0);
    var lo1 = vec4<f32>(0.0);
    var hi1 = vec4<f32>(0.0);
    var lo2 = vec4<f32>(0.0);
    var hi2 = vec4<f32>(0.0);
    var lo3 = vec4<f32>(0.0);
    var hi3 = vec4<f32>(0.0);
    var lo4 = vec4<f32>(0.0);
    var hi4 = vec4<f32>(0.0);
    var lo5 = vec4<f32>(0.0);
    var hi5 = vec4<f32>(0.0);
    var lo6 = vec4<f32>(0.0);
    var hi6 = vec4<f32>(0.0);
    var lo7 = vec4<f32>(0.0);
    var hi7 = vec4<f32>(0.0);
    for (var k = 0u; k < params.k / 4u; k = k + 1u) {
        let y0 = b[rc0 + k];
        let y1 = b[rc1 + k];
        let y2 = b[rc2 + k];
        let y3 = b[rc3 + k];
        let y4 = b[rc4 + k];
        let y5 = b[rc5 + k];
        let y6 = b[rc6 + k];
        let y7 = b[rc7 + k];
        let x0 = a[ra0 + k];
        lo0 = lo0 + vec4<f32>(dot(x0, y0), dot(x0, y1), dot(x0, y2), dot(x0, y3));
        hi0 = hi0 + vec4<f32>(dot(x0, y4), dot(x0, y5), dot(x0, y6), dot(x0, y7));
        let x1 = a[ra1 + k];
        lo1 = lo1 + vec4<f32>(dot(x1, y0), dot(x1, y1), dot(x1, y2), dot(x1, y3));
        hi1 = hi1 + vec4<f32>(dot(x1, y4), dot(x1, y5), dot(x1, y6), dot(x1, y7));
        let x2 = a[ra2 + k];
        lo2 = lo2 + vec4<f32>(dot(x2, y0), dot(x2, y1), dot(x2, y2), dot(x2, y3));
        hi2 = hi2 + vec4<f32>(dot(x2, y4), dot(x2, y5), dot(x2, y6), dot(x2, y7));
        let x3 = a[ra3 + k];
        lo3 = lo3 + vec4<f32>(dot(x3, y0), dot(x3, y1), dot(x3, y2), dot(x3, y3));
        hi3 = hi3 + vec4<f32>(dot(x3, y4), dot(x3, y5), dot(x3, y6), dot(x3, y7));
        let x4 = a[ra4 + k];
        lo4 = lo4 + vec4<f32>(dot(x4, y0), dot(x4, y1), dot(x4, y2), dot(x4, y3));
        hi4 = hi4 + vec4<f32>(dot(x4, y4), dot(x4, y5), dot(x4, y6), dot(x4, y7));
        let x5 = a[ra5 + k];
        lo5 = lo5 + vec4<f32>(dot(x5, y0), dot(x5, y1), dot(x5, y2), dot(x5, y3));
        hi5 = hi5 + vec4<f32>(dot(x5, y4), dot(x5, y5), dot(x5, y6), dot(x5, y7));
        let x6 = a[ra6 + k];
        lo6 = lo6 + vec4<f32>(dot(x6, y0), dot(x6, y1), dot(x6, y2), dot(x6, y3));
        hi6 = hi6 + vec4<f32>(dot(x6, y4), dot(x6, y5), dot(x6, y6), dot(x6, y7));
        let x7 = a[ra7 + k];
        lo7 = lo7 + vec4<f32>(dot(x7, y0), dot(x7, y1), dot(x7, y2), dot(x7, y3));
        hi7 = hi7 + vec4<f32>(dot(x7, y4), dot(x7, y5), dot(x7, y6), dot(x7, y7));
    }
    return Acc(array<vec4<f32>, 8>(lo0, lo1, lo2, lo3, lo4, lo5, lo6, lo7), array<vec4<f32>, 8>(hi0, hi1, hi2, hi3, hi4, hi5, hi6, hi7));
}

// B n-contiguous (N a multiple of 4): acc[i] += sum over 4 k of A[row i, k] * B[k, cols].
// The second four columns are clamped into the row (N - 4 at most: read, never stored).
fn block_kn(row0: u32, col0: u32, batch: u32) -> Acc {
    let ra0 = a_row(row0, 0u, batch);
    let ra1 = a_row(row0, 1u, batch);
    let ra2 = a_row(row0, 2u, batch);
    let ra3 = a_row(row0, 3u, batch);
    let ra4 = a_row(row0, 4u, batch);
    let ra5 = a_row(row0, 5u, batch);
    let ra6 = a_row(row0, 6u, batch);
    let ra7 = a_row(row0, 7u, batch);
    let bb = params.b.w + batch * params.b.x;
    var kl = (bb + col0) / 4u;
    var kh = (bb + min(col0 + 4u, params.n - 4u)) / 4u;
    let step = params.b.y / 4u;
    var lo0 = vec4<f32>(0.0);
    var hi0 = vec4<f32>(0.0);
    var lo1 = vec4<f32>(0.0);
    var hi1 = vec4<f32>(0.0);
    var lo2 = vec4<f32>(0.0);
    var hi2 = vec4<f32>(0.0);
    var lo3 = vec4<f32>(0.0);
    var hi3 = vec4<f32>(0.0);
    var lo4 = vec4<f32>(0.0);
    var hi4 = vec4<f32>(0.0);
    var lo5 = vec4<f32>(0.0);
    var hi5 = vec4<f32>(0.0);
    var lo6 = vec4<f32>(0.0);
    var hi6 = vec4<f32>(0.0);
    var lo7 = vec4<f32>(0.0);
    var hi7 = vec4<f32>(0.0);
    for (var k = 0u; k < params.k / 4u; k = k + 1u) {
        let l0 = b[kl + 0u * step];
        let h0 = b[kh + 0u * step];
        let l1 = b[kl + 1u * step];
        let h1 = b[kh + 1u * step];
        let l2 = b[kl + 2u * step];
        let h2 = b[kh + 2u * step];
        let l3 = b[kl + 3u * step];
        let h3 = b[kh + 3u * step];
        kl = kl + 4u * step;
        kh = kh + 4u * step;
        let x0 = a[ra0 + k];
        lo0 = lo0 + x0.x * l0 + x0.y * l1 + x0.z * l2 + x0.w * l3;
        hi0 = hi0 + x0.x * h0 + x0.y * h1 + x0.z * h2 + x0.w * h3;
        let x1 = a[ra1 + k];
        lo1 = lo1 + x1.x * l0 + x1.y * l1 + x1.z * l2 + x1.w * l3;
        hi1 = hi1 + x1.x * h0 + x1.y * h1 + x1.z * h2 + x1.w * h3;
        let x2 = a[ra2 + k];
        lo2 = lo2 + x2.x * l0 + x2.y * l1 + x2.z * l2 + x2.w * l3;
        hi2 = hi2 + x2.x * h0 + x2.y * h1 + x2.z * h2 + x2.w * h3;
        let x3 = a[ra3 + k];
        lo3 = lo3 + x3.x * l0 + x3.y * l1 + x3.z * l2 + x3.w * l3;
        hi3 = hi3 + x3.x * h0 + x3.y * h1 + x3.z * h2 + x3.w * h3;
        let x4 = a[ra4 + k];
        lo4 = lo4 + x4.x * l0 + x4.y * l1 + x4.z * l2 + x4.w * l3;
        hi4 = hi4 + x4.x * h0 + x4.y * h1 + x4.z * h2 + x4.w * h3;
        let x5 = a[ra5 + k];
        lo5 = lo5 + x5.x * l0 + x5.y * l1 + x5.z * l2 + x5.w * l3;
        hi5 = hi5 + x5.x * h0 + x5.y * h1 + x5.z * h2 + x5.w * h3;
        let x6 = a[ra6 + k];
        lo6 = lo6 + x6.x * l0 + x6.y * l1 + x6.z * l2 + x6.w * l3;
        hi6 = hi6 + x6.x * h0 + x6.y * h1 + x6.z * h2 + x6.w * h3;
        let x7 = a[ra7 + k];
        lo7 = lo7 + x7.x * l0 + x7.y * l1 + x7.z * l2 + x7.w * l3;
        hi7 = hi7 + x7.x * h0 + x7.y * h1 + x7.z * h2 + x7.w * h3;
    }
    return Acc(array<vec4<f32>, 8>(lo0, lo1, lo2, lo3, lo4, lo5, lo6, lo7), array<vec4<f32>, 8>(hi0, hi1, hi2, hi3, hi4, hi5, hi6, hi7));
}

// beta * C[row, col] (beta = 0 ignores C: NaN and inf in C do not propagate, as torch).
fn bias_term(row: u32, col: u32, batch: u32) -> f32 {
    let cv = c[params.c.w + batch * params.c.x + row * params.c.y + col * params.c.z];
    return select(params.beta * cv, 0.0, params.beta == 0.0);
}

// The ops of a fused epilogue on a result before it is stored, `i` its flat index in the
// output (src/gpu/kernels/epilogue.rs replaces this function; by default the result as is).
fn epilogue(v: f32, i: u32) -> f32 {
    return v;
}

// Stores alpha * acc (+ beta * C) at (row, col) of the batch's output, inside the matrix.
fn store(row: u32, col: u32, batch: u32, acc: f32) {
    if col < params.n {
        var v = params.alpha * acc;
        if (params.flags & 1u) != 0u {
            v = v + bias_term(row, col, batch);
        }
        let o = (batch * params.m + row) * params.n + col;
        out[o] = epilogue(v, o);
    }
}

// `FORM` 0: B contiguous along K (`block_kk`); 1: along N (`block_kn`). Bit 0 of `flags`
// adds beta * C; without C the host binds A in its place (never read).
override FORM: u32 = 0u;

@compute @workgroup_size(8, 8)
fn mm4(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * ROWS;
    let col0 = gid.x * COLS;
    if row0 >= params.m || col0 >= params.n {
        return;
    }
    var acc: Acc;
    if FORM == 0u {
        acc = block_kk(row0, col0, gid.z);
    } else {
        acc = block_kn(row0, col0, gid.z);
    }
    // A row per step, its eight columns unrolled (software adapters pay per loop step).
    for (var i = 0u; i < ROWS; i = i + 1u) {
        let row = row0 + i;
        if row >= params.m {
            break;
        }
        let lo = acc.lo[i];
        let hi = acc.hi[i];
        store(row, col0, gid.z, lo.x);
        store(row, col0 + 1u, gid.z, lo.y);
        store(row, col0 + 2u, gid.z, lo.z);
        store(row, col0 + 3u, gid.z, lo.w);
        store(row, col0 + 4u, gid.z, hi.x);
        store(row, col0 + 5u, gid.z, hi.y);
        store(row, col0 + 6u, gid.z, hi.z);
        store(row, col0 + 7u, gid.z, hi.w);
    }
}
