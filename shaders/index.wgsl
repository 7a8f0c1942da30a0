// Data movement that does not look at values, so every 32-bit GPU dtype (f32, int32/int64
// held as i32, bool as u32) shares one pipeline: gathers along one dimension (embedding,
// index_select, gather, index.Tensor), strided copies into a slice of the output (cat,
// stack) and fills (full, zeros, ones, arange, scalar_tensor).
// `Meta` mirrors `IndexMeta` in src/gpu/kernels/index.rs.

struct Meta {
    numel: u32,
    rank: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // fill: 0 constant `value.x`, 1 f32 arange (start, step in value.xy as f32 bits),
    // 2 int arange (start, step as i32 bits), 3 linspace, 4 logspace, 5 fractional f32
    // arange (see `fill`); gather: 1 when negative indices count from the end.
    flags: u32,
    shape: array<vec4<u32>, 2>,
    // Source strides per output dim (0 on the dims the index supplies).
    src_strides: array<vec4<u32>, 2>,
    // gather: index strides per output dim; copy: destination strides.
    idx_strides: array<vec4<u32>, 2>,
    // (source offset, index or destination offset, source stride of the indexed dim,
    //  size of the indexed dim)
    offs: vec4<u32>,
    // fill: the values (see `flags`); gather: (fault site, _, _, _).
    value: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> src: array<u32>;
@group(0) @binding(3) var<storage, read> idx: array<i32>;


fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

// Offsets of element `i` (row-major over `shape`) in the source and in the index (or the
// destination).
// The outermost dim needs no division (what is left of `i` is its index), and copies merge
// the dims walked as one on the host (a contiguous copy has rank 1).
fn offsets(i: u32) -> vec2<u32> {
    var rem = i;
    var o = params.offs.xy;
    var d = params.rank;
    loop {
        if d <= 1u {
            break;
        }
        d = d - 1u;
        let n = params.shape[d / 4u][d % 4u];
        let k = rem % n;
        rem = rem / n;
        o = o + k * vec2<u32>(params.src_strides[d / 4u][d % 4u], params.idx_strides[d / 4u][d % 4u]);
    }
    if d == 1u {
        o = o + rem * vec2<u32>(params.src_strides[0].x, params.idx_strides[0].x);
    }
    return o;
}

// out[i] = src[offset(i) + index * stride]; a negative index counts from the end where
// `flags` says so. An index outside the dimension is reported (fault.wgsl) and reads 0.
@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    let given = idx[o.y];
    var j = given;
    if j < 0 && params.flags == 1u {
        j = j + i32(params.offs.w);
    }
    if j < 0 || u32(j) >= params.offs.w {
        raise_index(params.value.x, given, params.offs.w);
        out[i] = 0u;
        return;
    }
    out[i] = src[o.x + u32(j) * params.offs.z];
}

// A strided copy: out[dst offset + strides . coords] = src[src offset + strides . coords].
@compute @workgroup_size(64)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[o.y] = src[o.x];
}

@compute @workgroup_size(64)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    switch params.flags {
        case 1u: {
            out[i] = bitcast<u32>(bitcast<f32>(params.value.x) + f32(i) * bitcast<f32>(params.value.y));
        }
        case 2u: {
            out[i] = bitcast<u32>(bitcast<i32>(params.value.x) + i32(i) * bitcast<i32>(params.value.y));
        }
        // linspace (3) / logspace (4): start, step, end as f32 bits in value.xyz, the first
        // index counted from the end in value.w, logspace's base in offs.x (f32 bits, > 0).
        case 3u, 4u: {
            let st = bitcast<f32>(params.value.y);
            var v = bitcast<f32>(params.value.x) + st * f32(i);
            if i >= params.value.w {
                v = bitcast<f32>(params.value.z) - st * f32(params.numel - 1u - i);
            }
            if params.flags == 4u {
                v = exp2(v * log2(bitcast<f32>(params.offs.x)));
            }
            out[i] = bitcast<u32>(v);
        }
        // Fractional f32 arange: start and step each as an f32 pair hi + lo (value.xy, .zw).
        case 5u: {
            let fi = f32(i);
            let s_hi = bitcast<f32>(params.value.x);
            let s_lo = bitcast<f32>(params.value.y);
            let v = s_hi + (fi * bitcast<f32>(params.value.z) + (s_lo + fi * bitcast<f32>(params.value.w)));
            out[i] = bitcast<u32>(v);
        }
        default: {
            out[i] = params.value.x;
        }
    }
}
