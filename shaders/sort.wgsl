// Sorting and order statistics. `Meta` mirrors `SortMeta` in src/gpu/kernels/sort.rs.
//
// - `sort`: one invocation per lane (the elements along the sorted dim of a contiguous
//   input): a stable bottom-up merge sort of (key, index) pairs in a scratch buffer, then
//   the sorted positions [start, start + keep) written out (sort, argsort, msort, topk,
//   kthvalue), or the (nan)median's position. NaN sorts above every number, as torch's.
// - `search`: one invocation per value: searchsorted / bucketize's binary search.
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
    // 1 median, 2 nanmedian), bit 4 (search) a sorter is given, bit 5 (search) 1-d sequence.
    flags: u32,
    // sort: the first sorted position written and how many (range mode);
    // search: the sequence offset and the sorter offset.
    start: u32,
    keep: u32,
    // The input's offset (search: the values').
    x_off: u32,
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
    for (var t = 0u; t < keep; t = t + 1u) {
        let at = (o * keep + t) * inner + ii;
        vals[at] = scratch[src + start + t];
        inds[at] = i32(scratch[src + region + start + t]);
    }
}

// The sequence element j of row `row` (through the sorter when there is one).
fn seq_at(rbase: u32, j: u32) -> u32 {
    var p = j;
    if (params.flags & 16u) != 0u {
        // A sorter index outside the row cannot raise here: it is clamped (see sort.rs).
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
