// The scatter family, deterministic: one invocation per OUTPUT element, which starts from
// `self` and combines, in source order, every source entry that maps to it (no atomics, the
// same order of operations as torch's CPU loops). `Meta` mirrors `ScatterMeta` in
// src/gpu/kernels/scatter.rs.
//
// - `scatter`: scatter / scatter_add / scatter_reduce along dim `offs.w`, and index_add /
//   index_copy / index_fill (an index vector seen as an index tensor of stride 0 off `dim`).
// - `put_target`: index_put's flat target of every entry of the broadcast index shape B,
//   one index tensor per dispatch (see `put_target`).
// - `put`: index_put: out element c takes every entry b of B whose target is c's offset.
// - `put_owner` + `put_last`: index_put without accumulate in linear time: the last entry
//   per target (atomicMax over entry numbers, deterministic), then one read per element.
//
// Element words: f32 bits, int32/int64 held as i32, bool as 0/1.

struct Meta {
    numel: u32,
    rank: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // bits 0-3 the op (`ScatterOp_*`, generated from `ScatterOp` in src/gpu/kernels/scatter.rs), bit 4 include_self, bit 5 scalar value (value.x) instead of
    // `src`, bits 6-7 the element kind (0 f32, 1 int, 2 bool), bit 8 (put_target) first index,
    // bit 9 (scatter) negative indices count from the end (else they are out of range).
    flags: u32,
    // Output shape (contiguous output).
    shape: array<vec4<u32>, 2>,
    self_strides: array<vec4<u32>, 2>,
    // scatter: src strides per output dim (the dim's own stride steps through entries);
    // put: values strides of the non-indexed output dims (0 on the indexed ones).
    src_strides: array<vec4<u32>, 2>,
    // scatter: index strides per output dim.
    idx_strides: array<vec4<u32>, 2>,
    // scatter: the index sizes per output dim (an output element whose coordinate off
    // `dim` is past them receives nothing; on `dim`: the number of entries); put: the
    // contiguous output strides of the indexed dims (0 on the others).
    lim: array<vec4<u32>, 2>,
    // put / put_target: the broadcast index shape B.
    bshape: array<vec4<u32>, 2>,
    // put: values strides over B; put_target: this index tensor's strides over B.
    bstrides: array<vec4<u32>, 2>,
    // (self offset, src offset, index offset, dim); put_target: (_, _, index offset, _).
    offs: vec4<u32>,
    // (scalar value, alpha (f32 or i32 bits), rank of B, number of entries in B);
    // put_target: (size of the indexed dim, its output stride, rank of B, entries in B).
    value: vec4<u32>,
    // scatter, index_write, put_target: (fault site, _, _, _) for an invalid index.
    fault_site: vec4<u32>,
}

// An index outside its dimension (after counting negatives from the end).
const INVALID: i32 = -2147483647 - 1;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> self_: array<u32>;
@group(0) @binding(3) var<storage, read> src: array<u32>;
@group(0) @binding(4) var<storage, read> idx: array<i32>;
// put_target's output (the flat targets).
@group(0) @binding(5) var<storage, read_write> lin: array<i32>;
// put_owner / put_last: per flat target, the last entry of B writing it (-1: none).
@group(0) @binding(6) var<storage, read_write> owner: array<atomic<i32>>;


fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

fn is_nan(x: u32) -> bool {
    return (x & 0x7fffffffu) > 0x7f800000u;
}

fn kind() -> u32 {
    return (params.flags >> 6u) & 3u;
}

// `a` combined with `b` in the element kind's arithmetic (as the CPU's `combine`).
fn combine(a: u32, b: u32, op: u32) -> u32 {
    if op == ScatterOp_Assign {
        return b;
    }
    if kind() == 0u {
        let x = bitcast<f32>(a);
        let y = bitcast<f32>(b);
        switch op {
            case ScatterOp_Mul: {
                return bitcast<u32>(x * y);
            }
            case ScatterOp_Max, ScatterOp_Min: {
                // NaN wins, as torch's scatter amax / amin.
                if is_nan(a) {
                    return a;
                }
                if is_nan(b) {
                    return b;
                }
                if op == ScatterOp_Max {
                    return select(a, b, y > x);
                }
                return select(a, b, y < x);
            }
            case ScatterOp_AddAlpha: {
                return bitcast<u32>(x + bitcast<f32>(params.value.y) * y);
            }
            case ScatterOp_Add, ScatterOp_Mean, default: {
                return bitcast<u32>(x + y);
            }
        }
    }
    let x = bitcast<i32>(a);
    let y = bitcast<i32>(b);
    switch op {
        case ScatterOp_Mul: {
            return bitcast<u32>(x * y);
        }
        case ScatterOp_Max: {
            return bitcast<u32>(max(x, y));
        }
        case ScatterOp_Min: {
            return bitcast<u32>(min(x, y));
        }
        case ScatterOp_AddAlpha: {
            return bitcast<u32>(x + bitcast<i32>(params.value.y) * y);
        }
        case ScatterOp_Add, ScatterOp_Mean, default: {
            return bitcast<u32>(x + y);
        }
    }
}

// The mean of `count` combined values in `acc` (float division; ints round toward -inf).
fn mean(acc: u32, count: u32) -> u32 {
    if kind() == 0u {
        return bitcast<u32>(bitcast<f32>(acc) / f32(count));
    }
    let s = bitcast<i32>(acc);
    let n = i32(count);
    var q = s / n;
    if q * n != s && s < 0 {
        q = q - 1;
    }
    return bitcast<u32>(q);
}

struct Acc {
    v: u32,
    count: u32,
}

fn add_entry(acc: Acc, v: u32, op: u32, include_self: bool) -> Acc {
    var r = acc;
    if !include_self && acc.count == 0u {
        r.v = v;
    } else {
        r.v = combine(acc.v, v, op);
    }
    r.count = acc.count + 1u;
    return r;
}

fn finish(acc: Acc, op: u32, include_self: bool) -> u32 {
    if op == ScatterOp_Mean && acc.count > 0u {
        return mean(acc.v, acc.count + u32(include_self));
    }
    return acc.v;
}

@compute @workgroup_size(64)
fn scatter(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let d = params.offs.w;
    var rem = i;
    var so = params.offs.x;
    var sb = params.offs.y;
    var ib = params.offs.z;
    var cd = 0u;
    var valid = true;
    var k = params.rank;
    loop {
        if k == 0u {
            break;
        }
        k = k - 1u;
        let n = params.shape[k / 4u][k % 4u];
        let c = rem % n;
        rem = rem / n;
        so = so + c * params.self_strides[k / 4u][k % 4u];
        if k == d {
            cd = c;
        } else {
            sb = sb + c * params.src_strides[k / 4u][k % 4u];
            ib = ib + c * params.idx_strides[k / 4u][k % 4u];
            if c >= params.lim[k / 4u][k % 4u] {
                valid = false;
            }
        }
    }
    let op = params.flags & 15u;
    let include_self = (params.flags & 16u) != 0u;
    let scalar = (params.flags & 32u) != 0u;
    let wrap = (params.flags & 512u) != 0u;
    var acc = Acc(self_[so], 0u);
    if valid {
        let entries = params.lim[d / 4u][d % 4u];
        let size = i32(params.shape[d / 4u][d % 4u]);
        let is = params.idx_strides[d / 4u][d % 4u];
        let ss = params.src_strides[d / 4u][d % 4u];
        for (var j = 0u; j < entries; j = j + 1u) {
            let given = idx[ib + j * is];
            var t = given;
            if t < 0 && wrap {
                t = t + size;
            }
            // An index outside the dim (never equal to cd) is reported and skipped.
            if t < 0 || t >= size {
                raise_index(params.fault_site.x, given, u32(size));
            }
            if t != i32(cd) {
                continue;
            }
            var v = params.value.x;
            if !scalar {
                v = src[sb + j * ss];
            }
            acc = add_entry(acc, v, op, include_self);
        }
    }
    out[i] = finish(acc, op, include_self);
}

// `index_write`: index_copy_ in place, one invocation per SOURCE element, written into `out`
// (self itself) at its coordinates with the one along `dim` replaced by its index entry: no
// pass over the rest of self (a decode step's cache update writes only the new positions).
// `shape` is the source's, `self_strides` self's, `src_strides` the source's, `idx_strides`
// the index's along `dim` (0 elsewhere), `offs` (self, src, index offsets, dim), `value.x`
// self's size along `dim`. Duplicate indices keep one of their values (torch: undefined).
@compute @workgroup_size(64)
fn index_write(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let d = params.offs.w;
    var rem = i;
    var so = params.offs.x;
    var sb = params.offs.y;
    var valid = true;
    var k = params.rank;
    loop {
        if k == 0u {
            break;
        }
        k = k - 1u;
        let n = params.shape[k / 4u][k % 4u];
        let c = rem % n;
        rem = rem / n;
        sb = sb + c * params.src_strides[k / 4u][k % 4u];
        var at = c;
        if k == d {
            let t = idx[params.offs.z + c * params.idx_strides[k / 4u][k % 4u]];
            if t < 0 || u32(t) >= params.value.x {
                raise_index(params.fault_site.x, t, params.value.x);
                valid = false;
            }
            at = u32(t);
        }
        so = so + at * params.self_strides[k / 4u][k % 4u];
    }
    if valid {
        out[so] = src[sb];
    }
}

// Entry b of B: lin[b] = (first ? 0 : lin[b]) + wrap(index[b]) * stride, or INVALID when the
// index is outside the dim (or an earlier one was).
@compute @workgroup_size(64)
fn put_target(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = index(gid);
    if b >= params.value.w {
        return;
    }
    var rem = b;
    var io = params.offs.z;
    var k = params.value.z;
    loop {
        if k == 0u {
            break;
        }
        k = k - 1u;
        let n = params.bshape[k / 4u][k % 4u];
        io = io + (rem % n) * params.bstrides[k / 4u][k % 4u];
        rem = rem / n;
    }
    let size = i32(params.value.x);
    var t = idx[io];
    if t < 0 {
        t = t + size;
    }
    var prev = 0;
    if (params.flags & 256u) == 0u {
        prev = lin[b];
    }
    if t < 0 || t >= size {
        raise_index(params.fault_site.x, idx[io], params.value.x);
    }
    if t < 0 || t >= size || prev == INVALID {
        lin[b] = INVALID;
    } else {
        lin[b] = prev + t * i32(params.value.y);
    }
}

// The offset in `src` of entry b of B's value, from the output element's part `vb`.
fn value_offset(vb: u32, b: u32) -> u32 {
    var r = b;
    var vo = vb;
    var m = params.value.z;
    loop {
        if m == 0u {
            break;
        }
        m = m - 1u;
        let n = params.bshape[m / 4u][m % 4u];
        vo = vo + (r % n) * params.bstrides[m / 4u][m % 4u];
        r = r / n;
    }
    return vo;
}

// Plain index_put in linear time: owner[target] = the last entry b writing it.
@compute @workgroup_size(64)
fn put_owner(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = index(gid);
    if b >= params.value.w {
        return;
    }
    let t = idx[b];
    if t != INVALID {
        atomicMax(&owner[t], i32(b));
    }
}

// Plain index_put: out element c takes the value of its owner entry, if any.
@compute @workgroup_size(64)
fn put_last(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    var rem = i;
    var so = params.offs.x;
    var vb = params.offs.y;
    var tgt = 0u;
    var k = params.rank;
    loop {
        if k == 0u {
            break;
        }
        k = k - 1u;
        let n = params.shape[k / 4u][k % 4u];
        let c = rem % n;
        rem = rem / n;
        so = so + c * params.self_strides[k / 4u][k % 4u];
        vb = vb + c * params.src_strides[k / 4u][k % 4u];
        tgt = tgt + c * params.lim[k / 4u][k % 4u];
    }
    let b = atomicLoad(&owner[tgt]);
    if b < 0 {
        out[i] = self_[so];
    } else {
        out[i] = src[value_offset(vb, u32(b))];
    }
}

@compute @workgroup_size(64)
fn put(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    var rem = i;
    var so = params.offs.x;
    var vb = params.offs.y;
    var tgt = 0u;
    var k = params.rank;
    loop {
        if k == 0u {
            break;
        }
        k = k - 1u;
        let n = params.shape[k / 4u][k % 4u];
        let c = rem % n;
        rem = rem / n;
        so = so + c * params.self_strides[k / 4u][k % 4u];
        vb = vb + c * params.src_strides[k / 4u][k % 4u];
        tgt = tgt + c * params.lim[k / 4u][k % 4u];
    }
    let op = params.flags & 15u;
    var acc = Acc(self_[so], 0u);
    let entries = params.value.w;
    for (var b = 0u; b < entries; b = b + 1u) {
        if idx[b] != i32(tgt) {
            continue;
        }
        acc = add_entry(acc, src[value_offset(vb, b)], op, true);
    }
    out[i] = acc.v;
}
