// embedding_bag (src/gpu/kernels/bag.rs), as torch's CPU kernel gives it (the rules are in
// src/ops/index/bag.rs): bag b holds indices offsets[b]..offsets[b + 1], the last bag
// running to the end of `indices`; summed or averaged without a padding row (`flags` bit 3)
// a bag reduces offsets[b]..offsets[b + 1] only. Passes:
// - `pool`: one invocation per (bag, column): the sum (optionally weighted per sample), the
//   mean or the max over the bag's rows in index order (the first of equal maxima wins, as
//   torch's strict `>`), and max_indices: the max's row (max), the bag size (mean) or 0;
// - `bag_ids`: one invocation per index and per bag: the bag of each index (offset2bag)
//   and each bag's size (bag_size: its indices less the padding ones; 0 for sum).
// Offsets are clamped to [0, n] as the CPU kernel does; an index outside the weight's rows
// is reported (fault.wgsl) and its row skipped.
// `Meta` mirrors `BagMeta` in src/gpu/kernels/bag.rs.

struct Meta {
    // Bags reduced (offsets, less one with include_last_offset), columns, indices, offsets.
    bags: u32,
    dim: u32,
    n: u32,
    n_offsets: u32,
    // Weight rows; mode: 0 sum, 1 mean, 2 max.
    rows: u32,
    mode: u32,
    // Bit 0: per-sample weights; bit 1: a padding row (`padding`); bit 2: offset2bag wanted;
    // bit 3: bags reduced by their offsets alone.
    flags: u32,
    padding: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // Weight offset and strides (row, column).
    w_offset: u32,
    w_rows: u32,
    w_cols: u32,
    // (offset, stride) of indices, offsets and per-sample weights.
    idx: vec2<u32>,
    offs: vec2<u32>,
    psw: vec2<u32>,
    // Entries of bag_size (the bags, or the offsets: those past the bags are 0).
    sizes: u32,
    // The fault site of an index outside the weight's rows.
    fault_site: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read> indices: array<i32>;
@group(0) @binding(3) var<storage, read> offsets: array<i32>;
@group(0) @binding(4) var<storage, read> psw: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> max_idx: array<i32>;
@group(0) @binding(7) var<storage, read_write> offset2bag: array<i32>;
@group(0) @binding(8) var<storage, read_write> bag_size: array<i32>;

const MODE_SUM: u32 = 0u;
const MODE_MEAN: u32 = 1u;
const MODE_MAX: u32 = 2u;

fn index_at(k: u32) -> i32 {
    return indices[params.idx.x + k * params.idx.y];
}

// offsets[b] clamped to [0, n].
fn offset_at(b: u32) -> u32 {
    return u32(clamp(offsets[params.offs.x + b * params.offs.y], 0, i32(params.n)));
}

// The indices of bag b: offsets[b].. the next bag's offset, or the end for the last bag.
fn bag_range(b: u32) -> vec2<u32> {
    var end = params.n;
    if b + 1u < params.bags {
        end = offset_at(b + 1u);
    }
    return vec2<u32>(offset_at(b), end);
}

fn is_padding(id: i32) -> bool {
    return (params.flags & 2u) != 0u && id == i32(params.padding);
}

// The bag's indices less its padding entries (torch's bag size; mean divides by it).
fn bag_count(b: u32) -> i32 {
    let r = bag_range(b);
    var count = i32(r.y) - i32(r.x);
    if (params.flags & 2u) != 0u {
        for (var k = r.x; k < r.y; k = k + 1u) {
            if is_padding(index_at(k)) {
                count = count - 1;
            }
        }
    }
    return count;
}

@compute @workgroup_size(64)
fn pool(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.bags * params.dim {
        return;
    }
    let b = t / params.dim;
    let j = t % params.dim;
    var r = bag_range(b);
    if (params.flags & 8u) != 0u {
        r.y = params.n;
        if b + 1u < params.n_offsets {
            r.y = offset_at(b + 1u);
        }
    }
    var acc = 0.0;
    var best = 0;
    var first = true;
    for (var k = r.x; k < r.y; k = k + 1u) {
        let id = index_at(k);
        if is_padding(id) {
            continue;
        }
        if id < 0 || u32(id) >= params.rows {
            raise_index(params.fault_site, id, params.rows);
            continue;
        }
        let x = weight[params.w_offset + u32(id) * params.w_rows + j * params.w_cols];
        if params.mode == MODE_MAX {
            if first || x > acc {
                acc = x;
                best = id;
            }
        } else if (params.flags & 1u) != 0u {
            acc = acc + psw[params.psw.x + k * params.psw.y] * x;
        } else {
            acc = acc + x;
        }
        first = false;
    }
    var count = 0;
    if params.mode == MODE_MEAN {
        count = bag_count(b);
        if count > 0 {
            acc = acc / f32(count);
        }
    }
    out[t] = acc;
    if params.mode == MODE_MAX {
        max_idx[t] = best;
    } else if j == 0u {
        max_idx[b] = count;
    }
}

@compute @workgroup_size(64)
fn bag_ids(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t < params.n && (params.flags & 4u) != 0u {
        // The last bag starting at or before t (offsets do not decrease, the first is 0).
        var lo = 0u;
        var hi = params.bags;
        loop {
            if lo >= hi {
                break;
            }
            let mid = (lo + hi) / 2u;
            if offset_at(mid) <= t {
                lo = mid + 1u;
            } else {
                hi = mid;
            }
        }
        offset2bag[t] = i32(max(lo, 1u) - 1u);
    }
    if t < params.sizes {
        var size = 0;
        if t < params.bags && params.mode != MODE_SUM {
            size = bag_count(t);
        }
        bag_size[t] = size;
    }
}
