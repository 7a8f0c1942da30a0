// Elementwise kernels on int and bool tensors (int32 and int64 are held as i32 on the GPU,
// bool as u32 0/1; see src/gpu/store.rs for what happens to int64 values outside int32),
// plus dtype conversions and logical ops on any GPU dtype. Same strided broadcasting as
// elementwise.wgsl and the same `Meta` (`ElemMeta` in src/gpu/kernels.rs); an integer
// scalar `b` is `p0`, an integer `alpha` is `p1` (both as i32 bits). Integer arithmetic
// wraps around in 32 bits; an int output of uint8 / int8 / int16 then wraps to its dtype
// (flags bits 8-9, see `wrap_small`). `OP` codes: `IntBinaryOp_*`, `IntCompareOp_*`...,
// constants generated from the enums of src/gpu/kernels/ints.rs.

struct Meta {
    numel: u32,
    rank: u32,
    row: u32,
    // Bit 0: `b` is the scalar `p0`. logical / convert: bit 1 `a` is f32, bit 2 `b` is
    // f32, bit 3 `a` is bool. unary_i clamp: bit 4 min (`p0`), bit 5 max (`p1`). where_u:
    // bit 6 the condition negated. Bits 8-9: the small int dtype of an int output
    // (`wrap_small`).
    flags: u32,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
    c_strides: array<vec4<u32>, 2>,
    offsets: vec4<u32>,
    alpha: f32,
    beta: f32,
    p0: f32,
    p1: f32,
}

override OP: u32 = 0u;

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<u32>;
@group(0) @binding(3) var<storage, read> b: array<u32>;
@group(0) @binding(6) var<storage, read> cond: array<u32>;


fn offsets(i: u32) -> vec3<u32> {
    var rem = i;
    var o = params.offsets.xyz;
    var d = params.rank;
    loop {
        if d == 0u {
            break;
        }
        d = d - 1u;
        let n = params.shape[d / 4u][d % 4u];
        let k = rem % n;
        rem = rem / n;
        o = o + k * vec3<u32>(params.a_strides[d / 4u][d % 4u], params.b_strides[d / 4u][d % 4u], params.c_strides[d / 4u][d % 4u]);
    }
    return o;
}

fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

// An int result as its output dtype stores it: codes 1 uint8 (the low 8 bits), 2 int8,
// 3 int16 (the low 8 / 16 bits sign-extended), 0 as it is (int32, int64 held as int32).
// `SmallInt` in src/gpu/store.rs; also in reduce.wgsl.
fn wrap_small(r: i32, code: u32) -> i32 {
    switch code {
        case SmallInt_U8: { return r & 255; }
        case SmallInt_I8: { return (r << 24u) >> 24u; }
        case SmallInt_I16: { return (r << 16u) >> 16u; }
        default: { return r; }
    }
}

fn store_i(r: i32) -> u32 {
    return bitcast<u32>(wrap_small(r, (params.flags >> 8u) & 3u));
}

fn b_word(o: u32) -> u32 {
    if (params.flags & 1u) != 0u {
        return bitcast<u32>(params.p0);
    }
    return b[o];
}

// Python's floor division and modulo (torch's `floor_divide`, `remainder`); x / 0 gives 0
// here where torch raises.
fn floor_div(x: i32, y: i32) -> i32 {
    if y == 0 {
        return 0;
    }
    let q = x / y;
    return select(q, q - 1, (x % y != 0) && ((x < 0) != (y < 0)));
}

// torch's integer power, wrapping: a negative exponent gives 0 except for bases 1 and -1.
fn ipow(a: i32, b: i32) -> i32 {
    if b < 0 {
        if a == 1 {
            return 1;
        }
        if a == -1 {
            return select(1, -1, (b & 1) != 0);
        }
        return 0;
    }
    var base = a;
    var e = u32(b);
    var acc = 1;
    loop {
        if e == 0u {
            break;
        }
        if (e & 1u) != 0u {
            acc = acc * base;
        }
        base = base * base;
        e = e >> 1u;
    }
    return acc;
}

fn binary_op(x: i32, y: i32) -> i32 {
    let alpha = bitcast<i32>(params.p1);
    switch OP {
        case IntBinaryOp_Add: { return x + alpha * y; }
        case IntBinaryOp_Sub: { return x - alpha * y; }
        case IntBinaryOp_Mul: { return x * y; }
        case IntBinaryOp_Maximum: { return max(x, y); }
        case IntBinaryOp_Minimum: { return min(x, y); }
        case IntBinaryOp_FloorDiv: { return floor_div(x, y); }
        case IntBinaryOp_TruncDiv: { return select(x / y, 0, y == 0); }
        case IntBinaryOp_Remainder: { return select(x - floor_div(x, y) * y, 0, y == 0); }
        case IntBinaryOp_And: { return x & y; }
        case IntBinaryOp_Or: { return x | y; }
        case IntBinaryOp_Xor: { return x ^ y; }
        case IntBinaryOp_Rsub: { return y - alpha * x; }
        // fmod (C remainder, the sign of x), pow, <<, >> (an out-of-range shift gives 0 /
        // fills with the sign, as torch)
        case IntBinaryOp_Fmod: { return select(x % y, 0, y == 0); }
        case IntBinaryOp_Pow: { return ipow(x, y); }
        case IntBinaryOp_Shl: { return select(x << u32(y), 0, y < 0 || y >= 32); }
        case IntBinaryOp_Shr: { return select(x >> u32(y), x >> 31u, y < 0 || y >= 32); }
        default: { return x; }
    }
}

@compute @workgroup_size(64)
fn binary_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[i] = store_i(binary_op(bitcast<i32>(a[o.x]), bitcast<i32>(b_word(o.y))));
}

fn compare_op(x: i32, y: i32) -> bool {
    switch OP {
        case IntCompareOp_Eq: { return x == y; }
        case IntCompareOp_Ne: { return x != y; }
        case IntCompareOp_Lt: { return x < y; }
        case IntCompareOp_Le: { return x <= y; }
        case IntCompareOp_Gt: { return x > y; }
        case IntCompareOp_Ge: { return x >= y; }
        default: { return false; }
    }
}

@compute @workgroup_size(64)
fn compare_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    out[i] = select(0u, 1u, compare_op(bitcast<i32>(a[o.x]), bitcast<i32>(b_word(o.y))));
}

@compute @workgroup_size(64)
fn unary_i(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let x = bitcast<i32>(a[offsets(i).x]);
    var r = x;
    switch OP {
        case IntUnaryOp_Neg: { r = -x; }
        case IntUnaryOp_Abs: { r = abs(x); }
        case IntUnaryOp_Not: { r = ~x; }
        case IntUnaryOp_Sign: { r = sign(x); }
        case IntUnaryOp_Square: { r = x * x; }
        // clamp: min `p0` if flags bit 4, max `p1` if flags bit 5 (max wins, as torch)
        case IntUnaryOp_Clamp: {
            if (params.flags & 16u) != 0u {
                r = max(r, bitcast<i32>(params.p0));
            }
            if (params.flags & 32u) != 0u {
                r = min(r, bitcast<i32>(params.p1));
            }
        }
        case IntUnaryOp_Copy, default: {}
    }
    out[i] = store_i(r);
}

// Truth of a word: f32 compares as a number (-0.0 is false, NaN true), other dtypes by bits.
fn truth(w: u32, is_float: bool) -> bool {
    if is_float {
        return bitcast<f32>(w) != 0.0 || (w & 0x7fffffffu) > 0x7f800000u;
    }
    return w != 0u;
}

@compute @workgroup_size(64)
fn logical(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    let x = truth(a[o.x], (params.flags & 2u) != 0u);
    var r = false;
    if OP == LogicalOp_Not {
        r = !x;
    } else {
        let y = truth(b_word(o.y), (params.flags & 4u) != 0u);
        switch OP {
            case LogicalOp_And: { r = x && y; }
            case LogicalOp_Or: { r = x || y; }
            case LogicalOp_Xor, default: { r = x != y; }
        }
    }
    out[i] = select(0u, 1u, r);
}

// where(cond, a, b) on 32-bit words of any dtype.
@compute @workgroup_size(64)
fn where_u(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let o = offsets(i);
    // flags bit 6: the condition negated (masked_fill: cond ? b : a).
    let c = (cond[o.z] != 0u) != ((params.flags & 64u) != 0u);
    out[i] = select(b_word(o.y), a[o.x], c);
}

// Conversion to `OP` (`ConvertTo_*`) from the kind in flags (bit 1 f32, bit 3 bool,
// neither: int). f32 to int truncates toward zero (saturating at the i32 range).
@compute @workgroup_size(64)
fn convert(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let w = a[offsets(i).x];
    let from_float = (params.flags & 2u) != 0u;
    let from_bool = (params.flags & 8u) != 0u;
    var r = w;
    switch OP {
        case ConvertTo_F32: {
            if from_bool {
                r = bitcast<u32>(f32(w));
            } else if !from_float {
                r = bitcast<u32>(f32(bitcast<i32>(w)));
            }
        }
        case ConvertTo_Int: {
            if from_float {
                r = bitcast<u32>(i32(bitcast<f32>(w)));
            }
            r = store_i(bitcast<i32>(r));
        }
        case ConvertTo_Bool, default: {
            r = select(0u, 1u, truth(w, from_float));
        }
    }
    out[i] = r;
}
