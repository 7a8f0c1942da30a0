// Pairwise distances (src/gpu/kernels/distance.rs), f32, one invocation per output element:
// `cdist` of contiguous x1 [B, P, M] and x2 [B, R, M] into [B, P, R]; `pdist` of a
// contiguous x [N, M] into the N (N - 1) / 2 distances of rows i < j, row-major (x is bound
// as both `a` and `b`). `kind` is the norm: 0 counts differing coordinates (p = 0), 1 sums
// them (p = 1), 2 is Euclidean, 3 takes the largest (p = inf), 4 any other p.

struct Meta {
    numel: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    kind: u32,
    m: u32,
    // P (cdist) or N (pdist).
    rows_a: u32,
    // R (cdist).
    rows_b: u32,
    p: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

fn dist(ia: u32, ib: u32) -> f32 {
    var acc = 0.0;
    for (var k = 0u; k < params.m; k = k + 1u) {
        let d = abs(a[ia + k] - b[ib + k]);
        switch params.kind {
            case 0u: {
                acc = acc + select(0.0, 1.0, d != 0.0);
            }
            case 1u: {
                acc = acc + d;
            }
            case 2u: {
                acc = acc + d * d;
            }
            case 3u: {
                acc = select(acc, d, d > acc || d != d);
            }
            default: {
                acc = acc + pow(d, params.p);
            }
        }
    }
    if params.kind == 2u {
        return sqrt(acc);
    }
    if params.kind == 4u {
        return pow(acc, 1.0 / params.p);
    }
    return acc;
}

@compute @workgroup_size(64)
fn cdist(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    let per = params.rows_a * params.rows_b;
    let bt = i / per;
    let q = i % per;
    let r = q / params.rows_b;
    let c = q % params.rows_b;
    out[i] = dist((bt * params.rows_a + r) * params.m, (bt * params.rows_b + c) * params.m);
}

@compute @workgroup_size(64)
fn pdist(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.numel {
        return;
    }
    // Row r holds the n - 1 - r pairs (r, r + 1..n).
    let n = params.rows_a;
    var r = 0u;
    var start = 0u;
    loop {
        let len = n - 1u - r;
        if i < start + len {
            break;
        }
        start = start + len;
        r = r + 1u;
    }
    let c = r + 1u + (i - start);
    out[i] = dist(r * params.m, c * params.m);
}
