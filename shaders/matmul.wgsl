// Batched matrix multiply: out[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] + beta * C[b, m, n].
// A, B and the optional bias C are strided views (batch, row and column strides; a stride of
// 0 broadcasts), so transposed weights (`t`, `permute`) and expanded biases need no copy.
// The output is contiguous [batch, M, N].
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

// Register blocking: each invocation computes a 4x4 block of the output from direct loads,
// an 8x8 workgroup covers 32x32. No workgroup memory and no barriers: barriers dominate on
// software adapters (SwiftShader runs a workgroup's invocations as fibers), and caches serve
// the reuse on hardware.
const BLOCK: u32 = 4u;

// Storage element types (see elementwise.wgsl; src/gpu/shaders.rs `Elems`). `TAcc` is the
// accumulator: f32, or f16 in the variants `allow_f16_reduced_precision` selects.
alias TIn = f32;
alias TOut = f32;
alias TAcc = f32;
const OUT_F16: bool = false;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> a: array<TIn>;
@group(0) @binding(3) var<storage, read> b: array<TIn>;
@group(0) @binding(4) var<storage, read> c: array<TIn>;

var<private> INF_BITS: u32 = 0x7f800000u;

// A result in the output's type; past f16's range, inf as torch (see elementwise.wgsl).
fn to_out(x: f32) -> TOut {
    let u = bitcast<u32>(x);
    let nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
    if OUT_F16 && abs(x) >= 65520.0 && !nan {
        let inf = bitcast<f32>(INF_BITS);
        return TOut(select(-inf, inf, x > 0.0));
    }
    return TOut(x);
}

// The 4x4 block at (row0, col0): acc[i][j] = sum_k A[row0 + i, k] * B[k, col0 + j]. Rows and
// columns past the edge are clamped (computed, never stored). Scalars and vec4s only, no
// indexed arrays: compilers keep those in registers.
struct Block {
    r0: vec4<TAcc>,
    r1: vec4<TAcc>,
    r2: vec4<TAcc>,
    r3: vec4<TAcc>,
}

fn block(row0: u32, col0: u32, batch: u32) -> Block {
    let ab = params.a.w + batch * params.a.x;
    let a0 = ab + min(row0, params.m - 1u) * params.a.y;
    let a1 = ab + min(row0 + 1u, params.m - 1u) * params.a.y;
    let a2 = ab + min(row0 + 2u, params.m - 1u) * params.a.y;
    let a3 = ab + min(row0 + 3u, params.m - 1u) * params.a.y;
    let cb = params.b.w + batch * params.b.x;
    let c0 = cb + min(col0, params.n - 1u) * params.b.z;
    let c1 = cb + min(col0 + 1u, params.n - 1u) * params.b.z;
    let c2 = cb + min(col0 + 2u, params.n - 1u) * params.b.z;
    let c3 = cb + min(col0 + 3u, params.n - 1u) * params.b.z;
    var acc0 = vec4<TAcc>(0.0);
    var acc1 = vec4<TAcc>(0.0);
    var acc2 = vec4<TAcc>(0.0);
    var acc3 = vec4<TAcc>(0.0);
    var ka = 0u;
    var kb = 0u;
    for (var k = 0u; k < params.k; k = k + 1u) {
        let bv = vec4<TAcc>(TAcc(b[c0 + kb]), TAcc(b[c1 + kb]), TAcc(b[c2 + kb]), TAcc(b[c3 + kb]));
        acc0 = fma(vec4<TAcc>(TAcc(a[a0 + ka])), bv, acc0);
        acc1 = fma(vec4<TAcc>(TAcc(a[a1 + ka])), bv, acc1);
        acc2 = fma(vec4<TAcc>(TAcc(a[a2 + ka])), bv, acc2);
        acc3 = fma(vec4<TAcc>(TAcc(a[a3 + ka])), bv, acc3);
        ka = ka + params.a.z;
        kb = kb + params.b.y;
    }
    return Block(acc0, acc1, acc2, acc3);
}

// Bias terms are read in `matmul_bias` only: an entry point's layout has exactly the
// bindings it uses, and `matmul` binds no C.
fn bias_term(row: u32, col: u32, batch: u32) -> f32 {
    let cv = f32(c[params.c.w + batch * params.c.x + row * params.c.y + col * params.c.z]);
    // beta = 0 ignores C entirely (NaN and inf in C do not propagate), as torch.addmm.
    return select(params.beta * cv, 0.0, params.beta == 0.0);
}

// The ops of a fused epilogue on a result before it is stored, `i` its flat index in the
// output (src/gpu/kernels/epilogue.rs replaces this function; by default the result as is).
fn epilogue(v: f32, i: u32) -> f32 {
    return v;
}

// Store a block (rows row0.., columns col0..) of output `batch`, within the edges.
fn store(acc: Block, row0: u32, col0: u32, batch: u32) {
    let rows = array<vec4<f32>, 4>(vec4<f32>(acc.r0), vec4<f32>(acc.r1), vec4<f32>(acc.r2), vec4<f32>(acc.r3));
    for (var i = 0u; i < BLOCK; i = i + 1u) {
        let row = row0 + i;
        for (var j = 0u; j < BLOCK; j = j + 1u) {
            let col = col0 + j;
            if row < params.m && col < params.n {
                let o = (batch * params.m + row) * params.n + col;
                out[o] = to_out(epilogue(params.alpha * rows[i][j], o));
            }
        }
    }
}

// `store` plus the bias (a separate function: only the bias entry points bind C).
fn store_bias(acc: Block, row0: u32, col0: u32, batch: u32) {
    let rows = array<vec4<f32>, 4>(vec4<f32>(acc.r0), vec4<f32>(acc.r1), vec4<f32>(acc.r2), vec4<f32>(acc.r3));
    for (var i = 0u; i < BLOCK; i = i + 1u) {
        let row = row0 + i;
        for (var j = 0u; j < BLOCK; j = j + 1u) {
            let col = col0 + j;
            if row < params.m && col < params.n {
                let o = (batch * params.m + row) * params.n + col;
                out[o] = to_out(epilogue(params.alpha * rows[i][j] + bias_term(row, col, batch), o));
            }
        }
    }
}

@compute @workgroup_size(8, 8)
fn matmul(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * BLOCK;
    let col0 = gid.x * BLOCK;
    if row0 >= params.m || col0 >= params.n {
        return;
    }
    store(block(row0, col0, gid.z), row0, col0, gid.z);
}

@compute @workgroup_size(8, 8)
fn matmul_bias(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * BLOCK;
    let col0 = gid.x * BLOCK;
    if row0 >= params.m || col0 >= params.n {
        return;
    }
    store_bias(block(row0, col0, gid.z), row0, col0, gid.z);
}

// `gemv` / `gemv_bias`: few rows (a decode step's single token). Each invocation computes 4
// adjacent outputs of one row, 64 invocations along N per workgroup, rows and batches across
// the grid's y and z: no work goes to the rows past M that the 4x4 and 8x8 blocks clamp and
// compute again (8x the arithmetic for M = 1).
// `gemv_acc` sums k = k0, k0 + step, ... (the whole of K in `gemv`, one invocation's share of
// it in `gemv_split`).
fn gemv_acc(row: u32, col0: u32, batch: u32, k0: u32, step: u32) -> vec4<f32> {
    let ar = params.a.w + batch * params.a.x + row * params.a.y;
    let cb = params.b.w + batch * params.b.x;
    let c0 = cb + min(col0, params.n - 1u) * params.b.z;
    let c1 = cb + min(col0 + 1u, params.n - 1u) * params.b.z;
    let c2 = cb + min(col0 + 2u, params.n - 1u) * params.b.z;
    let c3 = cb + min(col0 + 3u, params.n - 1u) * params.b.z;
    var acc = vec4<TAcc>(0.0);
    var ka = k0 * params.a.z;
    var kb = k0 * params.b.y;
    for (var k = k0; k < params.k; k = k + step) {
        let bv = vec4<TAcc>(TAcc(b[c0 + kb]), TAcc(b[c1 + kb]), TAcc(b[c2 + kb]), TAcc(b[c3 + kb]));
        acc = fma(vec4<TAcc>(TAcc(a[ar + ka])), bv, acc);
        ka = ka + step * params.a.z;
        kb = kb + step * params.b.y;
    }
    return vec4<f32>(acc);
}

// Store the results `v` of columns col0..col0+3 of `row` in output `batch`, within the edge.
fn gemv_store(v: vec4<f32>, row: u32, col0: u32, batch: u32) {
    for (var j = 0u; j < 4u; j = j + 1u) {
        let col = col0 + j;
        if col < params.n {
            let o = (batch * params.m + row) * params.n + col;
            out[o] = to_out(epilogue(v[j], o));
        }
    }
}

@compute @workgroup_size(64)
fn gemv(@builtin(global_invocation_id) gid: vec3<u32>) {
    let col0 = gid.x * 4u;
    let row = gid.y;
    if row >= params.m || col0 >= params.n {
        return;
    }
    gemv_store(params.alpha * gemv_acc(row, col0, gid.z, 0u, 1u), row, col0, gid.z);
}

// `gemv` plus the bias (columns past the edge read the last one's, never stored).
@compute @workgroup_size(64)
fn gemv_bias(@builtin(global_invocation_id) gid: vec3<u32>) {
    let col0 = gid.x * 4u;
    let row = gid.y;
    if row >= params.m || col0 >= params.n {
        return;
    }
    gemv_store(params.alpha * gemv_acc(row, col0, gid.z, 0u, 1u) + gemv_bias4(row, col0, gid.z), row, col0, gid.z);
}

// The bias of columns col0..col0+3 of `row` (columns past the edge read the last one's).
fn gemv_bias4(row: u32, col0: u32, batch: u32) -> vec4<f32> {
    let last = params.n - 1u;
    return vec4<f32>(
        bias_term(row, col0, batch),
        bias_term(row, min(col0 + 1u, last), batch),
        bias_term(row, min(col0 + 2u, last), batch),
        bias_term(row, min(col0 + 3u, last), batch),
    );
}

// `gemv_split` / `gemv_split_bias`: the few-row product for GPUs, where `gemv`'s one
// invocation per 4 outputs leaves most of the chip idle (a 512-wide layer is 128
// invocations) and, for a linear layer's weight (K contiguous), its neighbouring invocations
// read addresses K apart. Here a 64-invocation workgroup computes 4 adjacent outputs of one
// row, splitting K: invocation t takes k = t, t + 64, ... (adjacent addresses across the
// workgroup at each step), and the 64 partial sums are combined in workgroup memory.
// Summation order differs from `gemv` (within f32 rounding).
const SPLIT: u32 = 64u;
var<workgroup> split_sums: array<vec4<f32>, 64>;

// The workgroup's 4 sums. Every invocation of the workgroup calls it: its callers' early exit
// depends on the workgroup id only, so the barriers stay in uniform control flow.
fn gemv_split_acc(lid: u32, row: u32, col0: u32, batch: u32) -> vec4<f32> {
    split_sums[lid] = gemv_acc(row, col0, batch, lid, SPLIT);
    workgroupBarrier();
    for (var s = SPLIT / 2u; s > 0u; s = s >> 1u) {
        if lid < s {
            split_sums[lid] = split_sums[lid] + split_sums[lid + s];
        }
        workgroupBarrier();
    }
    return split_sums[0];
}

@compute @workgroup_size(64)
fn gemv_split(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let col0 = wid.x * 4u;
    let row = wid.y;
    if row >= params.m || col0 >= params.n {
        return;
    }
    let v = params.alpha * gemv_split_acc(lid.x, row, col0, wid.z);
    if lid.x == 0u {
        gemv_store(v, row, col0, wid.z);
    }
}

// `gemv_split` plus the bias.
@compute @workgroup_size(64)
fn gemv_split_bias(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let col0 = wid.x * 4u;
    let row = wid.y;
    if row >= params.m || col0 >= params.n {
        return;
    }
    let v = params.alpha * gemv_split_acc(lid.x, row, col0, wid.z);
    if lid.x == 0u {
        gemv_store(v + gemv_bias4(row, col0, wid.z), row, col0, wid.z);
    }
}

// `matmul_tiled` / `matmul_tiled_bias`: a 64x64 output tile per 16x16 workgroup, each
// invocation a 4x4 block of it, with A's and B's tiles staged through workgroup memory 16
// along K at a time (two barriers per step). Each value loaded from memory is read by 16
// invocations from workgroup memory, so GPUs (where barriers are cheap and memory bandwidth
// is the limit) take this form; software adapters keep the barrier-free `matmul` above and
// the vec4 forms of matmul4.wgsl (src/gpu/kernels/matmul.rs chooses).
const TILE_M: u32 = 64u;
const TILE_N: u32 = 64u;
const TILE_K: u32 = 16u;

// ta[k * 16 + r] holds rows 4r..4r+3 of A's tile at depth k, tb[k * 16 + c] columns
// 4c..4c+3 of B's: each step of the inner loop reads one vec4 of each.
var<workgroup> ta: array<vec4<TAcc>, 256>;
var<workgroup> tb: array<vec4<TAcc>, 256>;

// Stage the tiles at depth k0: 4 elements of each per invocation, consecutive invocations
// on consecutive addresses of whichever stride of the operand is 1 (coalesced loads for
// row-major and for transposed operands alike). Past the edges: zeros.
fn stage(flat: u32, row0: u32, col0: u32, k0: u32, batch: u32) {
    let ab = params.a.w + batch * params.a.x;
    let bb = params.b.w + batch * params.b.x;
    let a_k_major = params.a.z == 1u;
    let b_k_major = params.b.y == 1u;
    for (var r = 0u; r < 4u; r = r + 1u) {
        let e = flat + 256u * r;
        var row = e % TILE_M;
        var ka = e / TILE_M;
        if a_k_major {
            row = e / TILE_K;
            ka = e % TILE_K;
        }
        var av = TAcc(0.0);
        if row0 + row < params.m && k0 + ka < params.k {
            av = TAcc(a[ab + (row0 + row) * params.a.y + (k0 + ka) * params.a.z]);
        }
        ta[ka * 16u + row / 4u][row % 4u] = av;
        var col = e % TILE_N;
        var kb = e / TILE_N;
        if b_k_major {
            col = e / TILE_K;
            kb = e % TILE_K;
        }
        var bv = TAcc(0.0);
        if col0 + col < params.n && k0 + kb < params.k {
            bv = TAcc(b[bb + (k0 + kb) * params.b.y + (col0 + col) * params.b.z]);
        }
        tb[kb * 16u + col / 4u][col % 4u] = bv;
    }
}

// The invocation's 4x4 block (rows 4 * lid.y.., columns 4 * lid.x.. of the workgroup's tile).
fn tiled_block(lid: vec3<u32>, wid: vec3<u32>) -> Block {
    let flat = lid.y * 16u + lid.x;
    var acc0 = vec4<TAcc>(0.0);
    var acc1 = vec4<TAcc>(0.0);
    var acc2 = vec4<TAcc>(0.0);
    var acc3 = vec4<TAcc>(0.0);
    for (var k0 = 0u; k0 < params.k; k0 = k0 + TILE_K) {
        stage(flat, wid.y * TILE_M, wid.x * TILE_N, k0, wid.z);
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_K; kk = kk + 1u) {
            let av = ta[kk * 16u + lid.y];
            let bv = tb[kk * 16u + lid.x];
            acc0 = fma(vec4<TAcc>(av.x), bv, acc0);
            acc1 = fma(vec4<TAcc>(av.y), bv, acc1);
            acc2 = fma(vec4<TAcc>(av.z), bv, acc2);
            acc3 = fma(vec4<TAcc>(av.w), bv, acc3);
        }
        workgroupBarrier();
    }
    return Block(acc0, acc1, acc2, acc3);
}

@compute @workgroup_size(16, 16)
fn matmul_tiled(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let acc = tiled_block(lid, wid);
    store(acc, wid.y * TILE_M + lid.y * BLOCK, wid.x * TILE_N + lid.x * BLOCK, wid.z);
}

@compute @workgroup_size(16, 16)
fn matmul_tiled_bias(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let acc = tiled_block(lid, wid);
    store_bias(acc, wid.y * TILE_M + lid.y * BLOCK, wid.x * TILE_N + lid.x * BLOCK, wid.z);
}
