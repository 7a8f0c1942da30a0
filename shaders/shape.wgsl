// Gathers whose source index is a per-dimension function of the output index (pad in its
// four modes, roll, repeat/tile, repeat_interleave, flip, rot90) and the triangular masks
// tril/triu. They move 32-bit words without looking at them, so one pipeline serves f32,
// int32/int64 (held as i32) and bool alike. `Meta` mirrors `ShapeMeta` in
// src/gpu/kernels/shape.rs.

struct Meta {
    numel: u32,
    rank: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // The word written where a constant-mode dim falls outside the source.
    value: u32,
    out_shape: array<vec4<u32>, 2>,
    src_shape: array<vec4<u32>, 2>,
    src_strides: array<vec4<u32>, 2>,
    // Per dim: the padding before (i32 bits; the shift of roll, the repeat count of `div`).
    before: array<vec4<u32>, 2>,
    // Per dim: 0 constant, 1 reflect, 2 replicate, 3 circular, 4 divide, 5 reverse.
    modes: array<vec4<u32>, 2>,
    offset: u32,
    // tri: the diagonal (i32 bits) and 1 lower (tril) / 2 upper (triu).
    diag: u32,
    tri: u32,
    _p: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;


fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

@compute @workgroup_size(64)
fn map(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    var rem = i;
    var off = params.offset;
    var inside = true;
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let on = params.out_shape[d / 4u][d % 4u];
        let o = rem % on;
        rem = rem / on;
        let n = i32(params.src_shape[d / 4u][d % 4u]);
        let b = bitcast<i32>(params.before[d / 4u][d % 4u]);
        var c = i32(o) - b;
        switch params.modes[d / 4u][d % 4u] {
            case 1u: {
                if c < 0 {
                    c = -c;
                }
                if c >= n {
                    c = 2 * (n - 1) - c;
                }
            }
            case 2u: {
                c = clamp(c, 0, n - 1);
            }
            case 3u: {
                c = c % n;
                if c < 0 {
                    c = c + n;
                }
            }
            case 4u: {
                c = i32(o / u32(b));
            }
            case 5u: {
                c = n - 1 - i32(o);
            }
            default: {}
        }
        if c < 0 || c >= n {
            inside = false;
            c = 0;
        }
        off = off + u32(c) * params.src_strides[d / 4u][d % 4u];
    }
    if inside {
        out[i] = src[off];
    } else {
        out[i] = params.value;
    }
}

// tril (tri = 1) / triu (tri = 2) over the last two dims: out_shape = src_shape.
@compute @workgroup_size(64)
fn tri(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    var rem = i;
    var off = params.offset;
    var row = 0;
    var col = 0;
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.src_shape[d / 4u][d % 4u];
        let c = rem % n;
        rem = rem / n;
        if d == params.rank - 1u {
            col = i32(c);
        } else if d == params.rank - 2u {
            row = i32(c);
        }
        off = off + c * params.src_strides[d / 4u][d % 4u];
    }
    let k = col - row;
    let diag = bitcast<i32>(params.diag);
    var keep = k >= diag;
    if params.tri == 1u {
        keep = k <= diag;
    }
    out[i] = select(0u, src[off], keep);
}
