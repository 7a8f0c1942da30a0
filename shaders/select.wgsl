// Data-dependent sizes (src/gpu/kernels/select.rs): stream compaction of the nonzero
// elements of a strided tensor (masked_select, boolean-mask indexing) and the positions of
// repeat_interleave. Passes:
// - `count`: nonzero elements per block of 256 (row-major order over `shape`);
// - `scan`: one workgroup: exclusive prefix sums of `numel` counts (the block counts, or the
//   repeats) and their total (-1 when a count is negative), which the host reads back to
//   size the output;
// - `emit`: each block again, the position of its nonzero elements from a workgroup prefix
//   sum plus the block's offset, writing Σ coord[d] * weights[d] there (a flat offset the
//   host gathers with) when the position is below the output's length (nonzero_static
//   keeps the first `size`);
// - `repeat_index`: out[j] = the last i whose exclusive offset is <= j;
// - `scatter_ranked` (masked_scatter): each element again, the masked ones taking the source
//   element of their rank among the masked elements (the block's offset plus a workgroup
//   prefix sum, as `emit`), the others the base tensor's (at Σ coord[d] * weights[d]).
// `Meta` mirrors `SelectMeta` in src/gpu/kernels/select.rs.

struct Meta {
    numel: u32,
    rank: u32,
    // Threads per row of the 2-D dispatch grid (a multiple of 256).
    row: u32,
    // Bit 0: the words are f32 (-0.0 counts as zero).
    flags: u32,
    shape: array<vec4<u32>, 2>,
    strides: array<vec4<u32>, 2>,
    weights: array<vec4<u32>, 2>,
    // (source offset, source stride (scan), blocks (count, emit) or offsets (repeat_index),
    // output length (emit) or base offset (scatter_ranked))
    offs: vec4<u32>,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<i32>;
// scan: the total (one word); emit: the block offsets.
@group(0) @binding(3) var<storage, read_write> aux: array<i32>;
// scatter_ranked: the base tensor and the (contiguous) source whose elements are scattered.
@group(0) @binding(4) var<storage, read> base: array<u32>;
@group(0) @binding(5) var<storage, read> scattered: array<u32>;

const BLOCK: u32 = 256u;

var<workgroup> part: array<u32, 256>;
var<workgroup> negative: atomic<u32>;


// Inclusive prefix sum of `part` across the workgroup (Hillis-Steele).
fn scan_part(l: u32) {
    for (var s = 1u; s < BLOCK; s = s * 2u) {
        workgroupBarrier();
        var v = 0u;
        if l >= s {
            v = part[l - s];
        }
        workgroupBarrier();
        part[l] = part[l] + v;
    }
    workgroupBarrier();
}

// (offset in `src`, weighted flat offset) of element `i`, row-major over `shape`.
fn locate(i: u32) -> vec2<u32> {
    var rem = i;
    var o = vec2<u32>(params.offs.x, 0u);
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.shape[d / 4u][d % 4u];
        let k = rem % n;
        rem = rem / n;
        o = o + k * vec2<u32>(params.strides[d / 4u][d % 4u], params.weights[d / 4u][d % 4u]);
    }
    return o;
}

// 1 when element `i` exists and is nonzero.
fn flag(i: u32) -> u32 {
    if i >= params.numel {
        return 0u;
    }
    var w = src[locate(i).x];
    if (params.flags & 1u) != 0u {
        w = w & 0x7fffffffu;
    }
    return select(0u, 1u, w != 0u);
}

@compute @workgroup_size(256)
fn count(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) l: u32,
) {
    let i = gid.x + gid.y * params.row;
    part[l] = flag(i);
    scan_part(l);
    let b = i / BLOCK;
    if l == BLOCK - 1u && b < params.offs.z {
        out[b] = i32(part[l]);
    }
}

@compute @workgroup_size(256)
fn scan(@builtin(local_invocation_index) l: u32) {
    // Cleared explicitly: zero-initialized workgroup memory is a WebGPU guarantee that
    // native drivers do not always give (a stale flag read as a negative count on lavapipe).
    if l == 0u {
        atomicStore(&negative, 0u);
    }
    workgroupBarrier();
    let n = params.numel;
    let chunk = (n + BLOCK - 1u) / BLOCK;
    let lo = min(l * chunk, n);
    let hi = min(lo + chunk, n);
    var sum = 0u;
    for (var j = lo; j < hi; j = j + 1u) {
        let v = bitcast<i32>(src[params.offs.x + j * params.offs.y]);
        if v < 0 {
            atomicOr(&negative, 1u);
        }
        sum = sum + u32(max(v, 0));
    }
    part[l] = sum;
    scan_part(l);
    var run = part[l] - sum;
    for (var j = lo; j < hi; j = j + 1u) {
        out[j] = i32(run);
        run = run + u32(max(bitcast<i32>(src[params.offs.x + j * params.offs.y]), 0));
    }
    if l == BLOCK - 1u {
        aux[0] = select(i32(part[l]), -1, atomicLoad(&negative) != 0u);
    }
}

// The rank of element i among the nonzero ones (its block's offset in `aux` plus the
// workgroup's prefix sum), or -1 where it is zero. Every invocation of the workgroup calls it.
fn rank_of(i: u32, l: u32) -> i32 {
    let f = flag(i);
    part[l] = f;
    scan_part(l);
    return select(-1, aux[i / BLOCK] + i32(part[l]) - 1, f == 1u);
}

@compute @workgroup_size(256)
fn emit(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) l: u32,
) {
    let i = gid.x + gid.y * params.row;
    let r = rank_of(i, l);
    if r >= 0 && u32(r) < params.offs.w {
        out[r] = i32(locate(i).y);
    }
}

@compute @workgroup_size(256)
fn repeat_index(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x + gid.y * params.row;
    if j >= params.numel {
        return;
    }
    var lo = 0u;
    var hi = params.offs.z;
    loop {
        if lo >= hi {
            break;
        }
        let mid = (lo + hi) / 2u;
        if bitcast<i32>(src[mid]) <= i32(j) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    out[j] = i32(lo) - 1;
}

@compute @workgroup_size(256)
fn scatter_ranked(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) l: u32,
) {
    let i = gid.x + gid.y * params.row;
    let r = rank_of(i, l);
    if i >= params.numel {
        return;
    }
    if r >= 0 {
        out[i] = bitcast<i32>(scattered[params.offs.y + u32(r)]);
    } else {
        out[i] = bitcast<i32>(base[params.offs.w + locate(i).y]);
    }
}
