// Reductions along any set of dimensions (f32: `reduce`; int and bool: `reduce_i`, which
// wraps around in 32 bits, then to a small int output dtype): the input is viewed as
// [kept..., reduced...] (strides permuted on the host, no copy); one thread per output
// element loops over the reduced elements. `OP`: `ReduceOp_*` (sum times `scale`, so mean
// is sum * 1/n; max; min); `reduce_i`: `ReduceIntOp_*` (also prod). The `OP` constants of
// this file are generated from the enums in src/gpu/kernels/params.rs and reduce.rs.
// `Meta` mirrors `ReduceMeta` in src/gpu/kernels.rs.

struct Meta {
    n_out: u32,
    n_red: u32,
    kept_rank: u32,
    red_rank: u32,
    kept_shape: array<vec4<u32>, 2>,
    kept_strides: array<vec4<u32>, 2>,
    red_shape: array<vec4<u32>, 2>,
    red_strides: array<vec4<u32>, 2>,
    offset: u32,
    row: u32,
    scale: f32,
    // `norm`: the order p. The int entry points (`reduce_i`, `arg_reduce_i`, `scan_i`):
    // the small int dtype of the int output, as bits (see `wrap_small`).
    p: f32,
    // `reduce` / `reduce_i` in parts (`chunks` > 1): thread t reduces run t % chunks, of
    // `chunk_len` elements, of output t / chunks into out[t]; a second dispatch reduces the
    // runs. (lavapipe ends a shader's loops after 65,535 iterations in all; long rows also
    // want more threads than outputs on any GPU.)
    chunks: u32,
    chunk_len: u32,
    // 1: the second pass of `arg_reduce(_i)` / `scan(_i)` in parts (see each); 0 otherwise.
    // `arg_reduce(_i)` and `scan(_i)` in parts take thread t's part as `reduce` does.
    join: u32,
}

// The output and the range of reduced elements of thread `t` of `reduce` / `reduce_i`.
struct Part {
    out: u32,
    first: u32,
    end: u32,
}

fn part_of(t: u32) -> Part {
    if params.chunks <= 1u {
        return Part(t, 0u, params.n_red);
    }
    let first = (t % params.chunks) * params.chunk_len;
    return Part(t / params.chunks, first, min(params.n_red, first + params.chunk_len));
}

override OP: u32 = 0u;

// +inf and NaN as run-time values: WGSL forbids them in constant expressions (Chrome's
// Tint rejects `bitcast<f32>(0x7f800000u)`), a private variable's value is not one.
var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;

// Storage element types of `reduce` (see elementwise.wgsl; src/gpu/shaders.rs `Elems`).
alias TIn = f32;
alias TOut = f32;
const OUT_F16: bool = false;

// A result in the output's type; past f16's range, inf as torch (see elementwise.wgsl).
fn to_out(v: f32) -> TOut {
    if OUT_F16 && abs(v) >= 65520.0 && !is_nan(v) {
        let inf = bitcast<f32>(INF_BITS);
        return TOut(select(-inf, inf, v > 0.0));
    }
    return TOut(v);
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<TOut>;
@group(0) @binding(2) var<storage, read> x: array<TIn>;
// `reduce_i`: int and bool inputs (i32 / u32 0-1 words), an int output.
@group(0) @binding(3) var<storage, read_write> out_i: array<i32>;
@group(0) @binding(4) var<storage, read> x_i: array<i32>;
// The int64 indices of `arg_reduce_i` and of `scan_i`'s cummax / cummin.
@group(0) @binding(5) var<storage, read_write> idx_i: array<i32>;
// The second pass (`join`) of `arg_reduce(_i)` and `scan(_i)` in parts: the indices the first
// pass found (a 1-word stand-in where there are none).
@group(0) @binding(6) var<storage, read> part_i: array<i32>;

// An int result as its output dtype stores it (as in ints.wgsl): code 1 uint8 (the low 8
// bits), 2 int8, 3 int16 (the low 8 / 16 bits sign-extended), 0 as it is. The code is the
// bits of `params.p` (`SmallInt` in src/gpu/store.rs).
fn wrap_small(r: i32) -> i32 {
    switch bitcast<u32>(params.p) {
        case SmallInt_U8: { return r & 255; }
        case SmallInt_I8: { return (r << 24u) >> 24u; }
        case SmallInt_I16: { return (r << 16u) >> 16u; }
        default: { return r; }
    }
}


fn is_nan(v: f32) -> bool {
    let u = bitcast<u32>(v);
    return (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u;
}

@compute @workgroup_size(64)
fn reduce(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.n_out * max(params.chunks, 1u) {
        return;
    }
    let part = part_of(t);
    var rem = part.out;
    var base = params.offset;
    var d = params.kept_rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.kept_shape[d / 4u][d % 4u];
        base = base + (rem % n) * params.kept_strides[d / 4u][d % 4u];
        rem = rem / n;
    }
    var acc = 0.0;
    if OP == ReduceOp_Max {
        acc = -bitcast<f32>(INF_BITS);
    } else if OP == ReduceOp_Min {
        acc = bitcast<f32>(INF_BITS);
    }
    var nan = false;
    for (var j = part.first; j < part.end; j = j + 1u) {
        var r = j;
        var o = base;
        var e = params.red_rank;
        loop {
            if e == 0u {
                break;
            }
            e = e - 1u;
            let n = params.red_shape[e / 4u][e % 4u];
            o = o + (r % n) * params.red_strides[e / 4u][e % 4u];
            r = r / n;
        }
        let v = f32(x[o]);
        nan = nan || is_nan(v);
        if OP == ReduceOp_Sum {
            acc = acc + v;
        } else if OP == ReduceOp_Max {
            acc = max(acc, v);
        } else {
            acc = min(acc, v);
        }
    }
    if OP == ReduceOp_Sum {
        out[t] = to_out(acc * params.scale);
    } else {
        out[t] = to_out(select(acc, bitcast<f32>(NAN_BITS), nan));
    }
}

// Storage offset of the first reduced element of output `i`.
fn base_of(i: u32) -> u32 {
    var rem = i;
    var base = params.offset;
    var d = params.kept_rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.kept_shape[d / 4u][d % 4u];
        base = base + (rem % n) * params.kept_strides[d / 4u][d % 4u];
        rem = rem / n;
    }
    return base;
}

// Offset of reduced element `j` relative to its output's base.
fn red_offset(j: u32) -> u32 {
    var r = j;
    var o = 0u;
    var e = params.red_rank;
    loop {
        if e == 0u {
            break;
        }
        e = e - 1u;
        let n = params.red_shape[e / 4u][e % 4u];
        o = o + (r % n) * params.red_strides[e / 4u][e % 4u];
        r = r / n;
    }
    return o;
}

@compute @workgroup_size(64)
fn reduce_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.n_out * max(params.chunks, 1u) {
        return;
    }
    let part = part_of(t);
    let base = base_of(part.out);
    var acc = 0;
    if OP == ReduceIntOp_Max {
        acc = -2147483647 - 1;
    } else if OP == ReduceIntOp_Min {
        acc = 2147483647;
    } else if OP == ReduceIntOp_Prod {
        acc = 1;
    }
    for (var j = part.first; j < part.end; j = j + 1u) {
        let v = x_i[base + red_offset(j)];
        if OP == ReduceIntOp_Sum {
            acc = acc + v;
        } else if OP == ReduceIntOp_Max {
            acc = max(acc, v);
        } else if OP == ReduceIntOp_Min {
            acc = min(acc, v);
        } else {
            acc = acc * v;
        }
    }
    out_i[t] = wrap_small(acc);
}

fn inf_() -> f32 {
    return bitcast<f32>(INF_BITS);
}

fn nan_() -> f32 {
    return bitcast<f32>(NAN_BITS);
}

// Statistics in two passes over each output's reduced elements. `OP` (`StatsOp_*`): prod,
// logsumexp, var (sum of squared deviations times `scale` = 1 / max(0, n - correction)),
// std, vector norm of order `p`, mean (for var_mean: the same summation as var).
@compute @workgroup_size(64)
fn stats(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.n_out {
        return;
    }
    let base = base_of(i);
    let n = params.n_red;
    var nan = false;
    if OP == StatsOp_Prod {
        var acc = 1.0;
        for (var j = 0u; j < n; j = j + 1u) {
            acc = acc * f32(x[base + red_offset(j)]);
        }
        out[i] = to_out(acc);
        return;
    }
    if OP == StatsOp_LogSumExp {
        var m = -inf_();
        for (var j = 0u; j < n; j = j + 1u) {
            let v = f32(x[base + red_offset(j)]);
            nan = nan || is_nan(v);
            m = max(m, v);
        }
        if nan {
            out[i] = to_out(nan_());
            return;
        }
        // An infinite max is not subtracted (as torch): all -inf gives -inf, any +inf +inf.
        if abs(m) == inf_() {
            m = 0.0;
        }
        var s = 0.0;
        for (var j = 0u; j < n; j = j + 1u) {
            s = s + exp(f32(x[base + red_offset(j)]) - m);
        }
        if s == 0.0 {
            out[i] = to_out(-inf_());
        } else {
            out[i] = to_out(log(s) + m);
        }
        return;
    }
    if OP == StatsOp_Norm {
        let p = params.p;
        var acc = 0.0;
        if p == -inf_() {
            acc = inf_();
        }
        for (var j = 0u; j < n; j = j + 1u) {
            let v = f32(x[base + red_offset(j)]);
            nan = nan || is_nan(v);
            let a = abs(v);
            if p == inf_() {
                acc = max(acc, a);
            } else if p == -inf_() {
                acc = min(acc, a);
            } else if p == 0.0 {
                acc = acc + select(0.0, 1.0, a != 0.0);
            } else if p == 1.0 {
                acc = acc + a;
            } else if p == 2.0 {
                acc = acc + a * a;
            } else if a != 0.0 {
                acc = acc + pow(a, p);
            }
        }
        if nan {
            out[i] = to_out(nan_());
        } else if p == 2.0 {
            out[i] = to_out(sqrt(acc));
        } else if p == inf_() || p == -inf_() || p == 0.0 || p == 1.0 {
            out[i] = to_out(acc);
        } else if acc == 0.0 || acc == inf_() {
            out[i] = to_out(acc);
        } else {
            out[i] = to_out(pow(acc, 1.0 / p));
        }
        return;
    }
    // var / std / mean
    var s = 0.0;
    for (var j = 0u; j < n; j = j + 1u) {
        s = s + f32(x[base + red_offset(j)]);
    }
    let mean = s / f32(n);
    if OP == StatsOp_Mean {
        out[i] = to_out(mean);
        return;
    }
    var ss = 0.0;
    for (var j = 0u; j < n; j = j + 1u) {
        let d = f32(x[base + red_offset(j)]) - mean;
        ss = ss + d * d;
    }
    var v = ss * params.scale;
    if is_nan(mean) {
        v = nan_();
    }
    switch OP {
        case StatsOp_Std: { v = select(sqrt(v), v, is_nan(v)); }
        case StatsOp_Var, default: {}
    }
    out[i] = to_out(v);
}

// max / min with the index of the first extreme (a NaN counts as the extreme, the first
// one wins), as torch's max.dim / argmax. `OP`: `ArgOp_*` / `ArgIntOp_*`. Values to `out`, indices to
// `out_i`. In parts (`chunks` > 1): thread t takes part t % chunks of output t / chunks
// (its value and index to out[t], out_i[t]); then `join` reduces each output's parts (x, and
// their indices in `part_i`) in order, so the first extreme of the first part that holds one
// wins, as in one pass.

// Does `v` take over from `best` (reached first)?
fn arg_takes(v: f32, best: f32) -> bool {
    return is_nan(v) || (OP == ArgOp_Max && v > best) || (OP == ArgOp_Min && v < best);
}

@compute @workgroup_size(64)
fn arg_reduce(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.n_out * max(params.chunks, 1u) {
        return;
    }
    let part = part_of(t);
    let base = base_of(part.out);
    var best = f32(x[base + red_offset(part.first)]);
    var bi = part.first;
    if !is_nan(best) {
        for (var j = part.first + 1u; j < part.end; j = j + 1u) {
            let v = f32(x[base + red_offset(j)]);
            if arg_takes(v, best) {
                best = v;
                bi = j;
                if is_nan(v) {
                    break;
                }
            }
        }
    }
    out[t] = to_out(best);
    if params.join != 0u {
        out_i[t] = part_i[base + red_offset(bi)];
    } else {
        out_i[t] = i32(bi);
    }
}

// arg_reduce of int words: values to `out_i`, indices to `idx_i` (the first extreme); in
// parts as `arg_reduce`.
@compute @workgroup_size(64)
fn arg_reduce_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if t >= params.n_out * max(params.chunks, 1u) {
        return;
    }
    let part = part_of(t);
    let base = base_of(part.out);
    var best = x_i[base + red_offset(part.first)];
    var bi = part.first;
    for (var j = part.first + 1u; j < part.end; j = j + 1u) {
        let v = x_i[base + red_offset(j)];
        if (OP == ArgIntOp_Max && v > best) || (OP == ArgIntOp_Min && v < best) {
            best = v;
            bi = j;
        }
    }
    out_i[t] = best;
    if params.join != 0u {
        idx_i[t] = part_i[base + red_offset(bi)];
    } else {
        idx_i[t] = i32(bi);
    }
}

// count_nonzero of f32 elements (an int output).
@compute @workgroup_size(64)
fn count_nz(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * params.row;
    if i >= params.n_out {
        return;
    }
    let base = base_of(i);
    var c = 0;
    for (var j = 0u; j < params.n_red; j = j + 1u) {
        if f32(x[base + red_offset(j)]) != 0.0 {
            c = c + 1;
        }
    }
    out_i[i] = c;
}

// Scans along one dim (red_shape[0] elements, stride red_strides[0]) of a contiguous input
// (the output has its layout): `OP` (`ScanOp_*`) cumsum, cumprod, cummax, cummin (with indices
// to `out_i`: a NaN takes over and each later NaN moves the index; ties take the later
// index, as torch), logcumsumexp.
//
// In parts (`chunks` > 1; lavapipe ends an invocation's loops after 65,535 iterations): thread
// t scans part t % chunks of line t / chunks on its own; then `join` (a thread per element,
// the first pass's output as `x` / `x_i` and its indices as `part_i`) folds the last elements
// of the parts before the element's own into a carry and applies it to the element.

// A scan's running value and, for cummax / cummin, the index it came from.
struct Acc {
    v: f32,
    i: i32,
}

// The running value before the first element: 1 for cumprod, 0 otherwise.
fn scan_start() -> Acc {
    return Acc(select(0.0, 1.0, OP == ScanOp_Prod), 0);
}

// The scan after `acc` takes `v` (from index `i`; `first`: nothing before it).
fn scan_step(acc: Acc, v: f32, i: i32, first: bool) -> Acc {
    if OP == ScanOp_Sum {
        return Acc(acc.v + v, 0);
    } else if OP == ScanOp_Prod {
        return Acc(acc.v * v, 0);
    } else if OP == ScanOp_LogSumExp {
        // logcumsumexp: log(exp(acc) + exp(v)), NaN kept, equal infinities kept.
        if first || is_nan(acc.v) || is_nan(v) {
            return Acc(v, 0);
        }
        let m = max(acc.v, v);
        if !(abs(m) == inf_() && acc.v == v) && m != -inf_() {
            return Acc(m + log(1.0 + exp(-abs(acc.v - v))), 0);
        }
        return Acc(m, 0);
    }
    let better = (OP == ScanOp_Max && v >= acc.v) || (OP == ScanOp_Min && v <= acc.v);
    if first || is_nan(v) || (!is_nan(acc.v) && better) {
        return Acc(v, i);
    }
    return acc;
}

// The element and the line (`base`) of `join`'s thread t, and the index of its part.
struct JoinAt {
    o: u32,
    base: u32,
    part: u32,
}

fn join_at(t: u32) -> JoinAt {
    let j = t % params.n_red;
    let base = base_of(t / params.n_red);
    return JoinAt(base + j * params.red_strides[0].x, base, j / params.chunk_len);
}

// Offset of the last element of part `p` of the line at `base`.
fn part_last(base: u32, p: u32) -> u32 {
    return base + ((p + 1u) * params.chunk_len - 1u) * params.red_strides[0].x;
}

@compute @workgroup_size(64)
fn scan(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if params.join != 0u {
        if t >= params.n_out * params.n_red {
            return;
        }
        let at = join_at(t);
        var acc = scan_start();
        for (var p = 0u; p < at.part; p = p + 1u) {
            let l = part_last(at.base, p);
            acc = scan_step(acc, f32(x[l]), part_i[l], p == 0u);
        }
        let own = scan_step(acc, f32(x[at.o]), part_i[at.o], at.part == 0u);
        out[at.o] = to_out(own.v);
        if OP == ScanOp_Max || OP == ScanOp_Min {
            out_i[at.o] = own.i;
        }
        return;
    }
    if t >= params.n_out * max(params.chunks, 1u) {
        return;
    }
    let part = part_of(t);
    let base = base_of(part.out);
    let st = params.red_strides[0].x;
    var acc = scan_start();
    for (var j = part.first; j < part.end; j = j + 1u) {
        let o = base + j * st;
        acc = scan_step(acc, f32(x[o]), i32(j), j == part.first);
        if OP == ScanOp_Max || OP == ScanOp_Min {
            out_i[o - params.offset] = acc.i;
        }
        out[o - params.offset] = to_out(acc.v);
    }
}

// Scans of int and bool words (an int output, wrapping in 32 bits, then to a small int
// output dtype): `OP` (`ScanIntOp_*`) cumsum, cumprod, cummax, cummin (indices to `idx_i`,
// ties take the later index, as torch); in parts as `scan` (wrapping is modular, so the
// parts' wrapped results combine to the wrapped whole).

// The running value before the first element: 1 for cumprod, 0 otherwise.
fn scan_start_i() -> vec2<i32> {
    return vec2<i32>(select(0, 1, OP == ScanIntOp_Prod), 0);
}

// The int scan after `acc` takes `v` (from index `i`; `first`: nothing before it).
fn scan_step_i(acc: vec2<i32>, v: i32, i: i32, first: bool) -> vec2<i32> {
    if OP == ScanIntOp_Sum {
        return vec2<i32>(acc.x + v, 0);
    } else if OP == ScanIntOp_Prod {
        return vec2<i32>(acc.x * v, 0);
    }
    if first || (OP == ScanIntOp_Max && v >= acc.x) || (OP == ScanIntOp_Min && v <= acc.x) {
        return vec2<i32>(v, i);
    }
    return acc;
}

@compute @workgroup_size(64)
fn scan_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * params.row;
    if params.join != 0u {
        if t >= params.n_out * params.n_red {
            return;
        }
        let at = join_at(t);
        var acc = scan_start_i();
        for (var p = 0u; p < at.part; p = p + 1u) {
            let l = part_last(at.base, p);
            acc = scan_step_i(acc, x_i[l], part_i[l], p == 0u);
        }
        let own = scan_step_i(acc, x_i[at.o], part_i[at.o], at.part == 0u);
        out_i[at.o] = wrap_small(own.x);
        if OP == ScanIntOp_Max || OP == ScanIntOp_Min {
            idx_i[at.o] = own.y;
        }
        return;
    }
    if t >= params.n_out * max(params.chunks, 1u) {
        return;
    }
    let part = part_of(t);
    let base = base_of(part.out);
    let st = params.red_strides[0].x;
    var acc = scan_start_i();
    for (var j = part.first; j < part.end; j = j + 1u) {
        let o = base + j * st;
        acc = scan_step_i(acc, x_i[o], i32(j), j == part.first);
        if OP == ScanIntOp_Max || OP == ScanIntOp_Min {
            idx_i[o - params.offset] = acc.y;
        }
        out_i[o - params.offset] = wrap_small(acc.x);
    }
}
