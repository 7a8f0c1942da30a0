// Integer batched matrix multiply (src/gpu/kernels/linalg.rs): int32 and int64 held as i32
// words, arithmetic wrapping in 32 bits as the other int kernels (shaders/ints.wgsl):
// out[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] (+ beta * C[b, m, n]), A, B and C
// strided views, the output contiguous [batch, M, N]. One invocation per output element.
// `Meta` mirrors `MatmulMeta` in src/gpu/kernels.rs; alpha and beta hold i32 bits.

struct Meta {
    m: u32,
    n: u32,
    k: u32,
    // Bit 0: add beta * C.
    flags: u32,
    // (batch, row, col) strides and offset of A, B and C.
    a: vec4<u32>,
    b: vec4<u32>,
    c: vec4<u32>,
    alpha: f32,
    beta: f32,
    _p0: f32,
    _p1: f32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> a: array<i32>;
@group(0) @binding(3) var<storage, read> b: array<i32>;
@group(0) @binding(4) var<storage, read> c: array<i32>;

@compute @workgroup_size(8, 8)
fn matmul_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let col = gid.x;
    let row = gid.y;
    let bt = gid.z;
    if col >= params.n || row >= params.m {
        return;
    }
    let pa = params.a;
    let pb = params.b;
    var acc = 0i;
    for (var kk = 0u; kk < params.k; kk = kk + 1u) {
        acc = acc + a[pa.w + bt * pa.x + row * pa.y + kk * pa.z]
            * b[pb.w + bt * pb.x + kk * pb.y + col * pb.z];
    }
    acc = bitcast<i32>(params.alpha) * acc;
    if (params.flags & 1u) != 0u {
        let pc = params.c;
        acc = acc + bitcast<i32>(params.beta) * c[pc.w + bt * pc.x + row * pc.y + col * pc.z];
    }
    out[(bt * params.m + row) * params.n + col] = acc;
}
