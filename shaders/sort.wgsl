// Sorting and order statistics. `Meta` mirrors `SortMeta` in src/gpu/kernels/sort.rs.
//
// - `sort`: one invocation per lane (the elements along the sorted dim of a contiguous
//   input): a stable bottom-up merge sort of (key, index) pairs in a scratch buffer, then
//   the sorted positions [start, start + keep) written out (sort, argsort, msort, topk,
//   kthvalue), or the (nan)median's position. NaN sorts above every number, as torch's.
// - `sort_wg`: the same for long lanes, one workgroup per lane (a bitonic sort whose ties
//   break by input index, so the order is the stable sort's).
// - `search`: one invocation per value: searchsorted / bucketize's binary search.
// - `unique_column`, `unique_flag`, `unique_finish`: the passes of unique
//   (src/gpu/kernels/unique.rs), over `rows` units of `n` words each (an element, or a slice
//   of unique_dim), visited in the order of a permutation (`sorter`, bit 6 of `flags`) or in
//   input order: one element of each unit gathered (the key of a lexicographic sort's pass),
//   a flag where a unit differs from the previous one, and the segments' outputs.
//
// Element words: f32 bits, int32/int64 held as i32, bool as 0/1.

struct Meta {
    // sort: lanes; search: values.
    rows: u32,
    // Lane (sorted sequence row) length.
    n: u32,
    // sort: the stride of the sorted dim (elements after it); search: values per sequence
    // row (all of them for a 1-d sequence).
    inner: u32,
    // Threads per row of the 2-D dispatch grid.
    row: u32,
    // bit 0 descending (search: right), bit 1 integer keys, bits 2-3 sort mode (0 range,
    // 1 median, 2 nanmedian), bit 4 (search) a sorter is given, bit 5 (search) 1-d sequence,
    // bit 6 (unique) units in the order of `sorter`.
    flags: u32,
    // sort: the first sorted position written and how many (range mode);
    // search: the sequence offset and the sorter offset;
    // unique: the element of each unit gathered (`unique_column`) or the number of segments
    // (`unique_finish`), and the sorter offset.
    start: u32,
    keep: u32,
    // The input's offset (search: the values').
    x_off: u32,
    // search: the fault site of a sorter index outside the row (fault.wgsl).
    fault_site: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> vals: array<u32>;
@group(0) @binding(2) var<storage, read_write> inds: array<i32>;
// Four regions of rows * n words: keys and indices, twice (ping-pong).
@group(0) @binding(3) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(4) var<storage, read> x: array<u32>;
@group(0) @binding(5) var<storage, read> seq: array<u32>;
@group(0) @binding(6) var<storage, read> sorter: array<i32>;

fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

fn is_nan(a: u32) -> bool {
    return (params.flags & 2u) == 0u && (a & 0x7fffffffu) > 0x7f800000u;
}

// a < b with NaN above every number (and NaNs equal).
fn less(a: u32, b: u32) -> bool {
    if (params.flags & 2u) != 0u {
        return bitcast<i32>(a) < bitcast<i32>(b);
    }
    if is_nan(a) {
        return false;
    }
    if is_nan(b) {
        return true;
    }
    return bitcast<f32>(a) < bitcast<f32>(b);
}

// Whether `b` (from the right run) goes before `a` (from the left run): strictly earlier in
// the order, so equal keys keep their input order (stable).
fn before(b: u32, a: u32) -> bool {
    if (params.flags & 1u) != 0u {
        return less(a, b);
    }
    return less(b, a);
}

@compute @workgroup_size(64)
fn sort(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = index(gid);
    if r >= params.rows {
        return;
    }
    let n = params.n;
    let inner = params.inner;
    let o = r / inner;
    let ii = r % inner;
    let base = params.x_off + o * n * inner + ii;
    let region = params.rows * n;
    // Keys at k0, indices at k0 + region; the other buffer 2 * region further.
    var src = r * n;
    var dst = src + 2u * region;
    var nans = 0u;
    for (var j = 0u; j < n; j = j + 1u) {
        let v = x[base + j * inner];
        scratch[src + j] = v;
        scratch[src + region + j] = j;
        nans = nans + u32(is_nan(v));
    }
    for (var w = 1u; w < n; w = w * 2u) {
        for (var lo = 0u; lo < n; lo = lo + 2u * w) {
            let mid = min(lo + w, n);
            let hi = min(lo + 2u * w, n);
            var a = lo;
            var b = mid;
            for (var t = lo; t < hi; t = t + 1u) {
                var take_b = a >= mid;
                if !take_b && b < hi {
                    take_b = before(scratch[src + b], scratch[src + a]);
                }
                var pick = a;
                if take_b {
                    pick = b;
                    b = b + 1u;
                } else {
                    a = a + 1u;
                }
                scratch[dst + t] = scratch[src + pick];
                scratch[dst + region + t] = scratch[src + region + pick];
            }
        }
        let s = src;
        src = dst;
        dst = s;
    }
    write_out(src, region, o, ii, nans, 0u, 1u);
}

// The sorted lane's selected positions written out (`src`: the keys, indices `region`
// words further), for lanes of `n` with `nans` NaNs. Threads `t0, t0 + step, ..` share it.
fn write_out(src: u32, region: u32, o: u32, ii: u32, nans: u32, t0: u32, step: u32) {
    let n = params.n;
    let mode = (params.flags >> 2u) & 3u;
    var start = params.start;
    var keep = params.keep;
    if mode == 1u {
        // median: the lower median, or the first NaN (at its input index) when there is one.
        keep = 1u;
        start = (n - 1u) / 2u;
        if nans > 0u {
            start = n - nans;
        }
    } else if mode == 2u {
        // nanmedian: the lower median of the numbers (all NaN: the first element).
        keep = 1u;
        start = 0u;
        if nans < n {
            start = (n - nans - 1u) / 2u;
        }
    }
    for (var t = t0; t < keep; t = t + step) {
        let at = (o * keep + t) * params.inner + ii;
        vals[at] = scratch[src + start + t];
        inds[at] = i32(scratch[src + region + start + t]);
    }
}

const WG: u32 = 256u;
var<workgroup> wg_nans: atomic<u32>;

// Whether (key a, index ia) goes after (key b, index ib) in the lane's order: keys in the
// order, equal keys by input index (= a stable sort); indices >= n are padding, last.
fn after(a: u32, ia: u32, b: u32, ib: u32) -> bool {
    let n = params.n;
    if ia >= n || ib >= n {
        return ia > ib;
    }
    if before(b, a) {
        return true;
    }
    if before(a, b) {
        return false;
    }
    return ia > ib;
}

// One workgroup per lane (long lanes): a bitonic sort of (key, index) pairs padded to a
// power of two, ordered as the stable merge sort of `sort` orders them (ties by index).
@compute @workgroup_size(256)
fn sort_wg(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = wid.x + wid.y * params.row;
    // Uniform control flow: every thread of the group takes the same branch.
    if r >= params.rows {
        return;
    }
    let l = lid.x;
    let n = params.n;
    let inner = params.inner;
    let o = r / inner;
    let ii = r % inner;
    let base = params.x_off + o * n * inner + ii;
    var p = 1u;
    loop {
        if p >= n {
            break;
        }
        p = p * 2u;
    }
    // Keys at kb, indices p words further.
    let kb = r * 2u * p;
    if l == 0u {
        atomicStore(&wg_nans, 0u);
    }
    var nans = 0u;
    for (var t = l; t < p; t = t + WG) {
        var v = 0u;
        if t < n {
            v = x[base + t * inner];
            nans = nans + u32(is_nan(v));
        }
        scratch[kb + t] = v;
        scratch[kb + p + t] = t;
    }
    workgroupBarrier();
    atomicAdd(&wg_nans, nans);
    storageBarrier();
    workgroupBarrier();
    for (var k = 2u; k <= p; k = k * 2u) {
        for (var j = k / 2u; j > 0u; j = j / 2u) {
            for (var t = l; t < p / 2u; t = t + WG) {
                let i = (t / j) * 2u * j + (t % j);
                let m = i + j;
                let a = scratch[kb + i];
                let b = scratch[kb + m];
                let ia = scratch[kb + p + i];
                let ib = scratch[kb + p + m];
                var swap = after(a, ia, b, ib);
                if (i & k) != 0u {
                    swap = after(b, ib, a, ia);
                }
                if swap {
                    scratch[kb + i] = b;
                    scratch[kb + m] = a;
                    scratch[kb + p + i] = ib;
                    scratch[kb + p + m] = ia;
                }
            }
            storageBarrier();
            workgroupBarrier();
        }
    }
    let total = atomicLoad(&wg_nans);
    write_out(kb, p, o, ii, total, l, WG);
}

// The sequence element j of row `row` (through the sorter when there is one).
fn seq_at(rbase: u32, j: u32) -> u32 {
    var p = j;
    if (params.flags & 16u) != 0u {
        // A sorter index outside the row is clamped (`search` reports it).
        p = u32(clamp(sorter[params.keep + rbase + j], 0, i32(params.n) - 1));
    }
    return seq[params.start + rbase + p];
}

@compute @workgroup_size(64)
fn search(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.rows {
        return;
    }
    let v = x[params.x_off + i];
    var rbase = 0u;
    if (params.flags & 32u) == 0u {
        rbase = (i / params.inner) * params.n;
    }
    // Every sorter entry is checked (as torch does), each by one invocation: i, i + rows...
    if (params.flags & 16u) != 0u {
        var entries = params.n;
        if (params.flags & 32u) == 0u {
            entries = params.rows / params.inner * params.n;
        }
        for (var e = i; e < entries; e = e + params.rows) {
            let s = sorter[params.keep + e];
            if s < 0 || u32(s) >= params.n {
                raise_index(params.fault_site, s, params.n);
            }
        }
    }
    let right = (params.flags & 1u) != 0u;
    var lo = 0u;
    var hi = params.n;
    loop {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2u;
        let m = seq_at(rbase, mid);
        // Lower bound moves right past m < v, upper bound also past m == v; a NaN on
        // either side moves right (a NaN value lands after every number).
        var go_right = false;
        if (params.flags & 2u) != 0u {
            let a = bitcast<i32>(m);
            let b = bitcast<i32>(v);
            go_right = a < b || (right && a == b);
        } else if is_nan(m) || is_nan(v) {
            go_right = true;
        } else {
            let a = bitcast<f32>(m);
            let b = bitcast<f32>(v);
            go_right = a < b || (right && a == b);
        }
        if go_right {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    inds[i] = i32(lo);
}

// unique: the unit at position i (of the permutation, or i itself).
fn unit_at(i: u32) -> u32 {
    if (params.flags & 64u) != 0u {
        return u32(sorter[params.keep + i]);
    }
    return i;
}

// unique: element `start` of the unit at each position (`vals`).
@compute @workgroup_size(64)
fn unique_column(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.rows {
        return;
    }
    vals[i] = x[params.x_off + unit_at(i) * params.n + params.start];
}

// unique: 1 where the unit at position i differs from the one before it (or i is 0), else 0
// (`inds`). Floats compare as numbers: NaN differs from everything, itself included, and
// -0.0 equals 0.0, as torch's unique.
@compute @workgroup_size(64)
fn unique_flag(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.rows {
        return;
    }
    var differs = i == 0u;
    if !differs {
        let a = params.x_off + unit_at(i) * params.n;
        let b = params.x_off + unit_at(i - 1u) * params.n;
        for (var t = 0u; t < params.n; t = t + 1u) {
            let u = x[a + t];
            let v = x[b + t];
            if (params.flags & 2u) != 0u {
                differs = u != v;
            } else {
                // NaN tested on the bits: drivers may fold float comparisons with NaN.
                differs = is_nan(u) || is_nan(v) || bitcast<f32>(u) != bitcast<f32>(v);
            }
            if differs {
                break;
            }
        }
    }
    inds[i] = i32(differs);
}

// unique: with `seq` the first position of each of the `start` segments (ascending), the
// unit at position i gets its segment in `inds` (the inverse); segment i, where there is
// one, its length in `vals` (the counts) and its first unit in `scratch`.
@compute @workgroup_size(64)
fn unique_finish(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.rows {
        return;
    }
    let segments = params.start;
    // The last segment starting at or before i.
    var lo = 0u;
    var hi = segments;
    loop {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2u;
        if seq[mid] <= i {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    inds[unit_at(i)] = i32(lo) - 1;
    if i < segments {
        var end = params.rows;
        if i + 1u < segments {
            end = seq[i + 1u];
        }
        vals[i] = end - seq[i];
        scratch[i] = unit_at(seq[i]);
    }
}
