// Batched matrix multiply: out[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * C[b, m, n].
// A, B and the optional bias C are strided views (batch, row and column strides; a stride of
// 0 broadcasts), so transposed weights (`t`, `permute`) and expanded biases need no copy.
// The output is contiguous [batch, M, N]. 16x16 tiles staged in workgroup memory.
// `Meta` mirrors `MatmulMeta` in src/gpu/kernels.rs.

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

const TILE: u32 = 16u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;

var<workgroup> ta: array<array<f32, 16>, 16>;
var<workgroup> tb: array<array<f32, 16>, 16>;

fn tiled(lid: vec3<u32>, wid: vec3<u32>) -> f32 {
    let batch = wid.z;
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    let tiles = (params.k + TILE - 1u) / TILE;
    for (var t = 0u; t < tiles; t = t + 1u) {
        let ka = t * TILE + lid.x;
        var va = 0.0;
        if row < params.m && ka < params.k {
            va = a[params.a.w + batch * params.a.x + row * params.a.y + ka * params.a.z];
        }
        ta[lid.y][lid.x] = va;
        let kb = t * TILE + lid.y;
        var vb = 0.0;
        if kb < params.k && col < params.n {
            vb = b[params.b.w + batch * params.b.x + kb * params.b.y + col * params.b.z];
        }
        tb[lid.y][lid.x] = vb;
        workgroupBarrier();
        for (var i = 0u; i < TILE; i = i + 1u) {
            acc = acc + ta[lid.y][i] * tb[i][lid.x];
        }
        workgroupBarrier();
    }
    return acc;
}

@compute @workgroup_size(16, 16)
fn matmul(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let acc = tiled(lid, wid);
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    if row < params.m && col < params.n {
        out[(wid.z * params.m + row) * params.n + col] = params.alpha * acc;
    }
}

@compute @workgroup_size(16, 16)
fn matmul_bias(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let acc = tiled(lid, wid);
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    if row < params.m && col < params.n {
        let bias = c[params.c.w + wid.z * params.c.x + row * params.c.y + col * params.c.z];
        // beta = 0 ignores C entirely (NaN and inf in C do not propagate), as torch.addmm.
        let c_term = select(params.beta * bias, 0.0, params.beta == 0.0);
        out[(wid.z * params.m + row) * params.n + col] = params.alpha * acc + c_term;
    }
}
