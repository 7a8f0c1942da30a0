//! Int and bool math on the GPU (shaders/ints.wgsl): arithmetic, comparisons, `where`,
//! `neg`/`abs`/`sign`/`square`, logical and bitwise ops, dtype conversions between f32,
//! int32, int64, uint8, int8, int16 and bool. Every int dtype is held as i32 words, bool as
//! u32 0/1, so one kernel serves all int dtypes; arithmetic wraps in 32 bits, and an output
//! of a small int dtype (uint8, int8, int16) wraps to its dtype on store (flags bits 8-9),
//! which is torch's result (see src/gpu/store.rs). A Python int operand is converted to the
//! small dtype it is computed in first (torch: `u8 < -1` compares with 255).
//! Reached from the f32 kernels (kernels/elementwise.rs, reduce_ops.rs...) when an input is
//! not f32.

use super::{elementwise_args, grid, pad8, KernelCtx, Out, MAX_RANK};
use crate::cpu::broadcast_shapes;
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{gpu_dtype, GTensor, SmallInt};
use crate::ops::activation::ThresholdParams;
use crate::ops::elementwise::ternary::ClampBounds;
use crate::ops::Scalar;
use crate::program::Arg;

use super::{BinaryOp, CompareOp, ElemMeta, UnaryOp};

op_enum!(
    IntBinaryOp,
    Shader::Ints,
    "binary_i",
    "OP",
    [
        Add = 0,
        Sub = 1,
        Mul = 2,
        Maximum = 3,
        Minimum = 4,
        FloorDiv = 5,
        TruncDiv = 6,
        Remainder = 7,
        And = 8,
        Or = 9,
        Xor = 10,
        Rsub = 11,
        Fmod = 12,
        Pow = 13,
        Shl = 14,
        Shr = 15,
    ]
);
op_enum!(
    IntCompareOp,
    Shader::Ints,
    "compare_i",
    "OP",
    [Eq = 0, Ne = 1, Lt = 2, Le = 3, Gt = 4, Ge = 5]
);
op_enum!(
    IntUnaryOp,
    Shader::Ints,
    "unary_i",
    "OP",
    [
        Copy = 0,
        Neg = 1,
        Abs = 2,
        Not = 3,
        Sign = 4,
        Square = 5,
        Clamp = 6,
    ]
);
op_enum!(
    LogicalOp,
    Shader::Ints,
    "logical",
    "OP",
    [And = 0, Or = 1, Xor = 2, Not = 3]
);
op_enum!(
    ConvertTo,
    Shader::Ints,
    "convert",
    "OP",
    [F32 = 0, Int = 1, Bool = 2]
);
pub const WHERE_U: Variant = Variant::new(Shader::Ints, "where_u");

pub fn variants() -> Vec<Variant> {
    let mut v: Vec<Variant> = Vec::new();
    v.extend(IntBinaryOp::ALL.iter().map(|o| o.variant()));
    v.extend(IntCompareOp::ALL.iter().map(|o| o.variant()));
    v.extend(IntUnaryOp::ALL.iter().map(|o| o.variant()));
    v.extend(LogicalOp::ALL.iter().map(|o| o.variant()));
    v.extend(ConvertTo::ALL.iter().map(|o| o.variant()));
    v.push(WHERE_U);
    v
}

/// The int dtypes held on the GPU (as i32 words).
pub(super) fn is_int(d: DType) -> bool {
    matches!(
        d,
        DType::I32 | DType::I64 | DType::U8 | DType::I8 | DType::I16
    )
}

/// Bits of `flags` for the kind of a word: f32 (bit 1 for `a`, 2 for `b`), bool (bit 3, `a`).
fn kind_flags(d: DType, a: bool) -> u32 {
    match (d, a) {
        (DType::F32, true) => 2,
        (DType::F32, false) => 4,
        (DType::Bool, true) => 8,
        _ => 0,
    }
}

/// The second operand: a tensor or one 32-bit word.
pub(super) enum WOperand {
    T(GTensor),
    W(u32),
}

/// An i32 word for an integral Python number (None for a non-integral float or out of range).
fn int_word(s: Scalar) -> Option<u32> {
    let i = match s {
        Scalar::Int(i) => i,
        Scalar::Bool(b) => b as i64,
        Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 2147483648.0 => f as i64,
        Scalar::Float(_) => return None,
    };
    i32::try_from(i).ok().map(|i| i as u32)
}

/// The word of a Python number operand computed in the int dtype `dtype`: a small int
/// dtype converts it first, wrapping (torch converts the number to the common dtype).
pub(super) fn scalar_word(s: Scalar, dtype: DType) -> Option<u32> {
    match (SmallInt::of(dtype), s) {
        (Some(small), Scalar::Int(i)) => Some(small.wrap(i) as u32),
        _ => int_word(s),
    }
}

/// Operand `name`: a tensor, or a number computed in `dtype`.
fn woperand(k: &KernelCtx, name: &str, dtype: DType) -> Result<Option<WOperand>> {
    if k.is_tensor_arg(name) {
        return Ok(k.t(name).map(WOperand::T));
    }
    Ok(k.op
        .opt_scalar(name)?
        .and_then(|s| scalar_word(s, dtype))
        .map(WOperand::W))
}

/// Encode an ints.wgsl kernel over `a` (and `b`, `cond`) broadcast to the output shape.
#[allow(clippy::too_many_arguments)]
pub(super) fn encode(
    k: &mut KernelCtx,
    v: Variant,
    out_dtype: DType,
    a: &GTensor,
    b: Option<&WOperand>,
    cond: Option<&GTensor>,
    flags: u32,
    p1: u32,
) -> Result<Option<GTensor>> {
    let mut shape = a.sizes.clone();
    for s in [
        match b {
            Some(WOperand::T(t)) => Some(&t.sizes),
            _ => None,
        },
        cond.map(|c| &c.sizes),
    ]
    .into_iter()
    .flatten()
    {
        match broadcast_shapes(&shape, s) {
            Some(x) => shape = x,
            None => return Ok(None),
        }
    }
    let Some(a) = a.expand_to(&shape) else {
        return Ok(None);
    };
    let bt = match b {
        Some(WOperand::T(t)) => match t.expand_to(&shape) {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        _ => None,
    };
    let c = match cond {
        Some(c) => match c.expand_to(&shape) {
            Some(c) => Some(c),
            None => return Ok(None),
        },
        None => None,
    };
    let numel: usize = shape.iter().product();
    if shape.len() > MAX_RANK
        || numel >= u32::MAX as usize
        || !k.fits(&a)
        || bt.as_ref().is_some_and(|b| !k.fits(b))
        || c.as_ref().is_some_and(|c| !k.fits(c))
    {
        return Ok(None);
    }
    for t in [Some(&a), bt.as_ref(), c.as_ref()].into_iter().flatten() {
        k.ensure(t)?;
    }
    let out = k.new_out(out_dtype, &shape)?;
    if numel == 0 {
        return Ok(Some(out));
    }
    let (gx, gy, row) = grid(numel, 64);
    let mut m = ElemMeta {
        numel: numel as u32,
        rank: shape.len() as u32,
        row,
        flags: flags | SmallInt::code(out_dtype) << 8,
        shape: pad8(&shape),
        a_strides: pad8(&a.strides),
        p1: f32::from_bits(p1),
        ..Default::default()
    };
    m.offsets[0] = a.offset as u32;
    if let Some(b) = &bt {
        m.b_strides = pad8(&b.strides);
        m.offsets[1] = b.offset as u32;
    } else if let Some(WOperand::W(w)) = b {
        m.flags |= 1;
        m.p0 = f32::from_bits(*w);
    }
    if let Some(c) = &c {
        m.c_strides = pad8(&c.strides);
        m.offsets[2] = c.offset as u32;
    }
    let mut bufs: Vec<(u32, &GTensor)> = vec![(1, &out), (2, &a)];
    if matches!(v.entry, "binary_i" | "compare_i" | "logical" | "where_u") {
        bufs.push((3, bt.as_ref().unwrap_or(&a)));
    }
    if let Some(c) = &c {
        bufs.push((6, c));
    }
    k.dispatch(&v, bytemuck::bytes_of(&m), &bufs, (gx, gy, 1))?;
    Ok(Some(out))
}

fn one(r: Result<Option<GTensor>>) -> Out {
    Ok(r?.map(|t| vec![Slot::Tensor(t)]))
}

fn int_like(d: DType) -> bool {
    is_int(d) || d == DType::Bool
}

/// add/sub/mul/maximum/minimum/rsub/div(rounding) on int tensors (an int output).
pub(super) fn binary(k: &mut KernelCtx, op: BinaryOp) -> Out {
    let name = if k.op.arg("exponent").is_some() {
        "exponent"
    } else {
        "other"
    };
    let rounding = k.op.opt_str("rounding_mode")?;
    let iop = match (op, rounding.as_deref()) {
        (BinaryOp::Add, None) => IntBinaryOp::Add,
        (BinaryOp::Sub, None) => IntBinaryOp::Sub,
        (BinaryOp::Mul, None) => IntBinaryOp::Mul,
        (BinaryOp::Maximum, None) => IntBinaryOp::Maximum,
        (BinaryOp::Minimum, None) => IntBinaryOp::Minimum,
        (BinaryOp::Rsub, None) => IntBinaryOp::Rsub,
        (BinaryOp::Pow, None) => IntBinaryOp::Pow,
        (BinaryOp::Div, Some("floor")) => IntBinaryOp::FloorDiv,
        (BinaryOp::Div, Some("trunc")) => IntBinaryOp::TruncDiv,
        _ => return Ok(None),
    };
    int_binary(k, iop, name)
}

pub(super) fn int_binary(k: &mut KernelCtx, iop: IntBinaryOp, name: &str) -> Out {
    // remainder.Scalar_Tensor: an int number as `self`, filled as a 0-d tensor.
    if !k.is_tensor_arg("self") && iop == IntBinaryOp::Remainder {
        let (Some(b), Some(s)) = (k.t(name), k.op.opt_scalar("self")?) else {
            return Ok(None);
        };
        let Some(w) = scalar_word(s, b.dtype) else {
            return Ok(None);
        };
        if !is_int(b.dtype) || !k.out_is(b.dtype) || matches!(s, Scalar::Float(_)) {
            return Ok(None);
        }
        let Some(Some(Slot::Tensor(a))) =
            super::index::encode_fill(k, b.dtype, &[], 0, [w, 0])?.map(|mut v| v.pop())
        else {
            return Ok(None);
        };
        let d = b.dtype;
        return one(encode(
            k,
            iop.variant(),
            d,
            &a,
            Some(&WOperand::T(b)),
            None,
            0,
            1,
        ));
    }
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    let Some(out) = k.out_dtype(0).filter(|d| is_int(*d)) else {
        return Ok(None);
    };
    let Some(b) = woperand(k, name, out)? else {
        return Ok(None);
    };
    if !int_like(a.dtype) || matches!(&b, WOperand::T(t) if !int_like(t.dtype)) {
        return Ok(None);
    }
    let alpha = match k.op.opt_scalar("alpha")? {
        Some(s) => match int_word(s) {
            Some(w) => w,
            None => return Ok(None),
        },
        None => 1,
    };
    one(encode(k, iop.variant(), out, &a, Some(&b), None, 0, alpha))
}

/// floor_divide, remainder, bitwise_and/or/xor (bool operands: the logical op).
pub(super) fn int_target(k: &mut KernelCtx) -> Out {
    let op = match k.target().split('.').nth(1).unwrap_or("") {
        "__and__" => "bitwise_and",
        "__or__" => "bitwise_or",
        "__xor__" => "bitwise_xor",
        o => o,
    }
    .to_string();
    let bool_out = k.out_is(DType::Bool);
    let float_in = [k.t("self"), k.t("other")]
        .iter()
        .flatten()
        .any(|t| matches!(t.dtype, DType::F32 | DType::F16));
    match op.as_str() {
        "floor_divide" if float_in => elementwise_args::float_div_rem(k, BinaryOp::FloorDiv),
        "remainder" if float_in => elementwise_args::float_div_rem(k, BinaryOp::Remainder),
        "floor_divide" => int_binary(k, IntBinaryOp::FloorDiv, "other"),
        "remainder" => int_binary(k, IntBinaryOp::Remainder, "other"),
        "__lshift__" | "bitwise_left_shift" => int_binary(k, IntBinaryOp::Shl, "other"),
        "__rshift__" | "bitwise_right_shift" => int_binary(k, IntBinaryOp::Shr, "other"),
        "bitwise_and" | "bitwise_or" | "bitwise_xor" if bool_out => {
            let l = match op.as_str() {
                "bitwise_and" => LogicalOp::And,
                "bitwise_or" => LogicalOp::Or,
                _ => LogicalOp::Xor,
            };
            logical_op(k, l, true)
        }
        "bitwise_and" => int_binary(k, IntBinaryOp::And, "other"),
        "bitwise_or" => int_binary(k, IntBinaryOp::Or, "other"),
        "bitwise_xor" => int_binary(k, IntBinaryOp::Xor, "other"),
        "bitwise_not" if bool_out => logical_op(k, LogicalOp::Not, true),
        "bitwise_not" => unary(k, IntUnaryOp::Not),
        "logical_and" => logical_op(k, LogicalOp::And, false),
        "logical_or" => logical_op(k, LogicalOp::Or, false),
        "logical_xor" => logical_op(k, LogicalOp::Xor, false),
        "logical_not" => logical_op(k, LogicalOp::Not, false),
        _ => Ok(None),
    }
}

/// A logical op of two bool tensors `self` and `other` (bool add / mul).
pub(super) fn logical(k: &mut KernelCtx, op: LogicalOp) -> Out {
    logical_op(k, op, true)
}

/// logical_* on any GPU dtypes (a bool output); `bools_only` for bitwise ops on bools.
fn logical_op(k: &mut KernelCtx, op: LogicalOp, bools_only: bool) -> Out {
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    if !k.out_is(DType::Bool) || !gpu_dtype(a.dtype) || (bools_only && a.dtype != DType::Bool) {
        return Ok(None);
    }
    let mut flags = kind_flags(a.dtype, true) & 2;
    let b = if op == LogicalOp::Not {
        None
    } else {
        let b = if k.is_tensor_arg("other") {
            match k.t("other") {
                Some(t) => WOperand::T(t),
                None => return Ok(None),
            }
        } else {
            match k.op.opt_scalar("other")? {
                Some(Scalar::Bool(v)) => WOperand::W(v as u32),
                _ => return Ok(None),
            }
        };
        if let WOperand::T(t) = &b {
            if !gpu_dtype(t.dtype) || (bools_only && t.dtype != DType::Bool) {
                return Ok(None);
            }
            flags |= kind_flags(t.dtype, false);
        }
        Some(b)
    };
    one(encode(
        k,
        op.variant(),
        DType::Bool,
        &a,
        b.as_ref(),
        None,
        flags,
        0,
    ))
}

/// neg/abs/sign/square/bitwise_not of an int tensor.
fn unary(k: &mut KernelCtx, op: IntUnaryOp) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !is_int(x.dtype) || !k.out_is(x.dtype) {
        return Ok(None);
    }
    one(encode(k, op.variant(), x.dtype, &x, None, None, 0, 0))
}

/// The f32 unary ops that also exist for ints.
pub(super) fn unary_f32_op(k: &mut KernelCtx, u: UnaryOp) -> Out {
    let op = match u {
        // relu: clamp below at 0; rounding an int is a copy.
        UnaryOp::Relu => {
            let Some(x) = k.t("self") else {
                return Ok(None);
            };
            if !is_int(x.dtype) || !k.out_is(x.dtype) {
                return Ok(None);
            }
            let v = IntUnaryOp::Clamp.variant();
            return one(encode(
                k,
                v,
                x.dtype,
                &x,
                Some(&WOperand::W(0)),
                None,
                16,
                0,
            ));
        }
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Round => IntUnaryOp::Copy,
        UnaryOp::Neg => IntUnaryOp::Neg,
        UnaryOp::Abs => IntUnaryOp::Abs,
        UnaryOp::Sign => IntUnaryOp::Sign,
        UnaryOp::Square => IntUnaryOp::Square,
        _ => return Ok(None),
    };
    unary(k, op)
}

/// eq/ne/lt/le/gt/ge on int or bool tensors.
pub(super) fn compare(k: &mut KernelCtx, op: CompareOp) -> Out {
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    // A number is converted to the tensor's dtype (int numbers do not promote an int tensor).
    let Some(b) = woperand(k, "other", a.dtype)? else {
        return Ok(None);
    };
    if !int_like(a.dtype)
        || !k.out_is(DType::Bool)
        || matches!(&b, WOperand::T(t) if !int_like(t.dtype))
    {
        return Ok(None);
    }
    let iop = IntCompareOp::ALL[op as usize];
    one(encode(
        k,
        iop.variant(),
        DType::Bool,
        &a,
        Some(&b),
        None,
        0,
        0,
    ))
}

/// where(cond, a, b) with a and b of one non-f32 dtype (words selected as they are).
pub(super) fn where_(k: &mut KernelCtx) -> Out {
    let (Some(c), Some(a)) = (k.t("condition"), k.t("self")) else {
        return Ok(None);
    };
    let dtype = a.dtype;
    if c.dtype != DType::Bool || !gpu_dtype(dtype) || !k.out_is(dtype) {
        return Ok(None);
    }
    let b = if k.is_tensor_arg("other") {
        match k.t("other") {
            Some(t) if t.dtype == dtype => WOperand::T(t),
            _ => return Ok(None),
        }
    } else {
        let Some(s) = k.op.opt_scalar("other")? else {
            return Ok(None);
        };
        let w = match dtype {
            DType::F32 => (s.as_f64() as f32).to_bits(),
            DType::Bool => match s {
                Scalar::Bool(v) => v as u32,
                _ => return Ok(None),
            },
            _ => match scalar_word(s, dtype) {
                Some(w) => w,
                None => return Ok(None),
            },
        };
        WOperand::W(w)
    };
    one(encode(k, WHERE_U, dtype, &a, Some(&b), Some(&c), 0, 0))
}

/// A copy of `src` as `to` (clone, _to_copy, copy): a word copy or a conversion.
pub(super) fn convert(k: &mut KernelCtx, src: &GTensor, to: DType) -> Out {
    let from = src.dtype;
    if !gpu_dtype(from) || !gpu_dtype(to) {
        return Ok(None);
    }
    let same_words = from == to || (is_int(from) && is_int(to));
    let (v, flags) = if same_words {
        (IntUnaryOp::Copy.variant(), 0)
    } else {
        let op = match to {
            DType::F32 => ConvertTo::F32,
            DType::Bool => ConvertTo::Bool,
            _ => ConvertTo::Int,
        };
        (op.variant(), kind_flags(from, true))
    };
    one(encode(k, v, to, src, None, None, flags, 0))
}

/// clone / _to_copy / copy / lift_fresh_copy for every GPU dtype pair.
pub(super) fn copy_any(k: &mut KernelCtx) -> Out {
    let op = k.target().split('.').nth(1).unwrap_or("").to_string();
    let Some(to) = k.out_dtype(0) else {
        return Ok(None);
    };
    let src = if op == "copy" {
        let (Some(dst), Some(src)) = (k.t("self"), k.t("src")) else {
            return Ok(None);
        };
        if dst.dtype != to {
            return Ok(None);
        }
        match src.expand_to(&dst.sizes) {
            Some(s) => s,
            None => return Ok(None),
        }
    } else {
        let Some(x) = k.t("self") else {
            return Ok(None);
        };
        if let Some(d) = k.op.opt_dtype("dtype")? {
            if d != to {
                return Ok(None);
            }
        }
        x
    };
    convert(k, &src, to)
}

/// `to` (dtype / other / dtype_layout / device overloads): `self` itself when nothing
/// changes (torch returns an alias, as the CPU kernel), else a converted copy.
pub(super) fn to(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let Some(to) = k.out_dtype(0) else {
        return Ok(None);
    };
    // channels_last (2) and channels_last_3d (3) keep their CPU layout rules.
    if matches!(k.op.arg("memory_format"), Some(Arg::MemoryFormat(2 | 3))) {
        return Ok(None);
    }
    if to == x.dtype && !k.op.bool_or("copy", false)? {
        return Ok(Some(vec![Slot::Tensor(x)]));
    }
    if (x.dtype == DType::F16 || to == DType::F16)
        && super::is_float(x.dtype)
        && super::is_float(to)
    {
        return super::one(super::elementwise(
            k,
            super::UnaryOp::Copy.variant(),
            to,
            &x,
            None,
            None,
            1.0,
            0.0,
        ));
    }
    convert(k, &x, to)
}

/// clamp(self, min, max) of an int tensor with integer (or absent) bounds.
pub(super) fn clamp(k: &mut KernelCtx) -> Out {
    match ClampBounds::parse(&k.op)? {
        ClampBounds::Numbers { lo, hi } => clamp_to(k, [lo, hi]),
        ClampBounds::Tensors => Ok(None),
    }
}

/// Clamp an int tensor to int number bounds (clamp, relu6, hardtanh of ints).
pub(super) fn clamp_to(k: &mut KernelCtx, bounds: [Option<Scalar>; 2]) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !is_int(x.dtype) || !k.out_is(x.dtype) {
        return Ok(None);
    }
    let mut flags = 0;
    let mut words = [0u32; 2];
    for (i, b) in bounds.iter().enumerate() {
        if let Some(s) = *b {
            match s {
                Scalar::Int(_) | Scalar::Bool(_) => {}
                Scalar::Float(_) => return Ok(None),
            }
            let Some(w) = int_word(s) else {
                return Ok(None);
            };
            words[i] = w;
            flags |= 16 << i;
        }
    }
    let m = bounds[0].is_some();
    let out = encode(
        k,
        IntUnaryOp::Clamp.variant(),
        x.dtype,
        &x,
        m.then_some(&WOperand::W(words[0])),
        None,
        flags,
        words[1],
    );
    one(out)
}

/// isnan / isinf / isfinite / signbit of an int tensor: comparisons of the words.
pub(super) fn predicate(k: &mut KernelCtx, op: &str) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !is_int(x.dtype) || !k.out_is(DType::Bool) {
        return Ok(None);
    }
    let (c, b) = match op {
        "isnan" | "isinf" | "isposinf" | "isneginf" => (IntCompareOp::Ne, WOperand::T(x.clone())),
        "isfinite" => (IntCompareOp::Eq, WOperand::T(x.clone())),
        "signbit" => (IntCompareOp::Lt, WOperand::W(0)),
        _ => return Ok(None),
    };
    one(encode(
        k,
        c.variant(),
        DType::Bool,
        &x,
        Some(&b),
        None,
        0,
        0,
    ))
}

/// threshold of an int tensor: x > threshold ? x : value (int numbers).
pub(super) fn threshold(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !is_int(x.dtype) || !k.out_is(x.dtype) {
        return Ok(None);
    }
    // A small int dtype takes the numbers torch accepts for it (else its error, on the CPU).
    let num = |s: Scalar| match (SmallInt::of(x.dtype), s) {
        (Some(_), Scalar::Float(_)) => None,
        (Some(_), _) => SmallInt::fill_word(x.dtype, s),
        (None, _) => int_word(s),
    };
    let p = ThresholdParams::parse(&k.op)?;
    let (Some(th), Some(v)) = (num(p.threshold), num(p.value)) else {
        return Ok(None);
    };
    let Some(c) = encode(
        k,
        IntCompareOp::Gt.variant(),
        DType::Bool,
        &x,
        Some(&WOperand::W(th)),
        None,
        0,
        0,
    )?
    else {
        return Ok(None);
    };
    let d = x.dtype;
    one(encode(
        k,
        WHERE_U,
        d,
        &x,
        Some(&WOperand::W(v)),
        Some(&c),
        0,
        0,
    ))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, gpu_dtypes, ints, On, F16};
    use crate::gpu::store::gpu_dtype;
    t.kernel(&["aten.to"], On::All, to, gpu_dtypes)
        .f16(F16::Mixed);
    t.kernel(
        &[
            "aten.__lshift__",
            "aten.__rshift__",
            "aten.bitwise_left_shift",
            "aten.bitwise_right_shift",
        ],
        On::NotOut,
        int_target,
        ints,
    );
    t.kernel(
        &["aten.floor_divide", "aten.remainder"],
        On::NotOut,
        int_target,
        |i, o| ints(i, o) || super::table::all_f32(i, o),
    );
    t.kernel(
        &[
            "aten.__and__",
            "aten.__or__",
            "aten.__xor__",
            "aten.bitwise_and",
            "aten.bitwise_or",
            "aten.bitwise_xor",
            "aten.bitwise_not",
        ],
        On::NotOut,
        int_target,
        |i, o| (all(i, |d| d == DType::Bool) && o == [DType::Bool]) || ints(i, o),
    );
    t.kernel(
        &[
            "aten.logical_and",
            "aten.logical_or",
            "aten.logical_xor",
            "aten.logical_not",
        ],
        On::NotOut,
        int_target,
        |i, o| all(i, gpu_dtype) && o == [DType::Bool],
    );
}
