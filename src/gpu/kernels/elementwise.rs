//! Elementwise kernels: unary, binary, comparison and `where` ops (broadcast, strided,
//! type-promoted, f16 forms) and their in-place forms.

use super::*;
use crate::ops::activation as act;
use crate::ops::elementwise::ternary::ClampBounds;

/// relu_, add_, hardswish_...: the elementwise kernels write into `self` directly (their
/// `_ip` entries read and write each element through the output binding); otherwise the
/// out-of-place kernel runs and its result is copied into `self`'s GPU buffer (a shader
/// cannot read and write one buffer through two bindings: `x.add_(x)`, other kernels).
/// Every view of `self`'s store sees the new values; its CPU copy becomes stale.
pub(super) fn inplace(k: &mut KernelCtx) -> Out {
    let Some(base) = inplace_base(k.target()) else {
        return Ok(None);
    };
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // An expanded `self` (internal overlap) is an error in torch: leave it to the CPU kernel.
    let overlap = x
        .sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0);
    // f32, or int tensors (num_batches_tracked += 1); comparisons write 0 / 1 in x's dtype.
    let word_ok = ints::is_int(x.dtype);
    // f16 only through the elementwise kernels' in-place entries (no f16 copy into self).
    let f16 = x.dtype == DType::F16 && k.r.dev.f16_enabled();
    if (x.dtype != DType::F32 && !word_ok && !f16) || !k.out_is(x.dtype) || overlap || !k.fits(&x) {
        return Ok(None);
    }
    let other = if k.op.arg("exponent").is_some() {
        "exponent"
    } else {
        "other"
    };
    if let Some(o) = k.t(other) {
        if broadcast_shapes(&x.sizes, &o.sizes).as_deref() != Some(&x.sizes[..]) {
            return Ok(None);
        }
    }
    k.into = Some(x.clone());
    let res = run(k, base);
    k.into = None;
    let Some(res) = res? else {
        return Ok(None);
    };
    let [Slot::Tensor(t)] = &res[..] else {
        return Ok(None);
    };
    if t.sizes != x.sizes {
        return Ok(None);
    }
    if Arc::ptr_eq(&t.cell, &x.cell) {
        // Written in place (the `_ip` entries).
        lock(&x.cell).cpu_valid = false;
        return Ok(Some(vec![Slot::Tensor(x)]));
    }
    if f16 {
        return Ok(None);
    }
    let t = if t.dtype == x.dtype {
        t.clone()
    } else if t.dtype == DType::Bool && matches!(base, GpuOp::Compare(_)) {
        match ints::convert(k, t, x.dtype)?.as_deref() {
            Some([Slot::Tensor(c)]) => c.clone(),
            _ => return Ok(None),
        }
    } else {
        return Ok(None);
    };
    let t = &t;
    index::copy_into(k, t, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// The `b` operand: a tensor or a Python number.
pub(super) enum Operand {
    T(GTensor),
    S(f32),
}

pub(super) fn operand(k: &KernelCtx, name: &str) -> Result<Option<Operand>> {
    if k.is_tensor_arg(name) {
        return Ok(k.t(name).map(Operand::T));
    }
    match k.op.opt_scalar(name)? {
        Some(s) => Ok(Some(Operand::S(s.as_f64() as f32))),
        None => Ok(None),
    }
}

/// Encode an elementwise kernel: `a` (and `b`, `cond`) broadcast to the output shape.
#[allow(clippy::too_many_arguments)]
pub(super) fn elementwise(
    k: &mut KernelCtx,
    v: Variant,
    out_dtype: DType,
    a: &GTensor,
    b: Option<&Operand>,
    cond: Option<&GTensor>,
    alpha: f32,
    beta: f32,
) -> Result<Option<GTensor>> {
    elementwise_p(k, v, out_dtype, a, b, cond, [alpha, beta, 0.0], 0)
}

/// `op(a, b)` of f32 tensors into an f32 output (broadcast as the strides say).
pub(super) fn binary_f32(
    k: &mut KernelCtx,
    op: BinaryOp,
    a: &GTensor,
    b: GTensor,
) -> Result<Option<GTensor>> {
    elementwise(
        k,
        op.variant(),
        DType::F32,
        a,
        Some(&Operand::T(b)),
        None,
        1.0,
        0.0,
    )
}

/// [`elementwise`] with the third parameter `p1` and extra `flags` bits.
#[allow(clippy::too_many_arguments)]
pub(super) fn elementwise_p(
    k: &mut KernelCtx,
    v: Variant,
    out_dtype: DType,
    a: &GTensor,
    b: Option<&Operand>,
    cond: Option<&GTensor>,
    params: [f32; 3],
    flags: u32,
) -> Result<Option<GTensor>> {
    let [alpha, beta, p1] = params;
    let mut shape = a.sizes.clone();
    if let Some(Operand::T(b)) = b {
        let Some(s) = broadcast_shapes(&shape, &b.sizes) else {
            return Ok(None);
        };
        shape = s;
    }
    if let Some(c) = cond {
        let Some(s) = broadcast_shapes(&shape, &c.sizes) else {
            return Ok(None);
        };
        shape = s;
    }
    let a = a.expand_to(&shape);
    let bt = match b {
        Some(Operand::T(b)) => Some(b.expand_to(&shape)),
        _ => None,
    };
    let c = cond.map(|c| c.expand_to(&shape));
    let (Some(a), Some(bt), Some(c)) = (
        a,
        bt.map_or(Some(None), |x| x.map(Some)),
        c.map_or(Some(None), |x| x.map(Some)),
    ) else {
        return Ok(None);
    };
    // f16 forms for float tensors: the float operands share `a`'s dtype; a comparison
    // writes bool words. Other dtypes move as 32-bit words (the f32 form).
    let v = if a.dtype == DType::F16 || out_dtype == DType::F16 {
        let out_d = if out_dtype == DType::Bool {
            a.dtype
        } else {
            out_dtype
        };
        let Some(e) = k.elems(a.dtype, out_d) else {
            return Ok(None);
        };
        if bt.as_ref().is_some_and(|b| b.dtype != a.dtype) {
            return Ok(None);
        }
        v.typed(e)
    } else {
        v
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
    k.ensure(&a)?;
    if let Some(b) = &bt {
        k.ensure(b)?;
    }
    if let Some(c) = &c {
        k.ensure(c)?;
    }
    // In place: `a` is the target itself and no other operand shares its buffer.
    let into = k.into.take().filter(|x| {
        matches!(v.entry, "unary" | "binary")
            && flags & 4 == 0
            && c.is_none()
            && x.dtype == out_dtype
            && x.sizes == shape
            && Arc::ptr_eq(&x.cell, &a.cell)
            && x.strides == a.strides
            && x.offset == a.offset
            && bt.as_ref().is_none_or(|b| !Arc::ptr_eq(&b.cell, &x.cell))
    });
    let out = match &into {
        Some(x) => x.clone(),
        None => k.new_out(out_dtype, &shape)?,
    };
    if numel == 0 {
        return Ok(Some(out));
    }
    let (gx, gy, row) = grid(numel, 64);
    let mut strides: Vec<&[usize]> = vec![&a.strides];
    strides.extend(bt.iter().map(|b| &b.strides[..]));
    strides.extend(c.iter().map(|c| &c.strides[..]));
    let (cshape, cstrides) = coalesce(&shape, &strides);
    let mut m = ElemMeta {
        numel: numel as u32,
        rank: cshape.len() as u32,
        row,
        shape: pad8(&cshape),
        a_strides: pad8(&cstrides[0]),
        alpha,
        beta,
        p1,
        flags,
        ..Default::default()
    };
    m.offsets[0] = a.offset as u32;
    match (&bt, b) {
        (Some(b), _) => {
            m.b_strides = pad8(&cstrides[1]);
            m.offsets[1] = b.offset as u32;
        }
        (None, Some(Operand::S(s))) => {
            m.flags |= 1;
            m.p0 = *s;
        }
        _ => {}
    }
    if let Some(c) = &c {
        m.c_strides = pad8(cstrides.last().unwrap());
        m.offsets[2] = c.offset as u32;
    }
    if into.is_some() {
        let entry = match (v.entry, &bt) {
            ("unary", _) => "unary_ip",
            (_, Some(_)) => "binary_ip",
            (_, None) => "binary_ip_s",
        };
        let vi = Variant { entry, ..v };
        let mut bufs: Vec<(u32, &GTensor)> = vec![(1, &out)];
        bufs.extend(bt.iter().map(|b| (3, b)));
        k.dispatch(&vi, bytemuck::bytes_of(&m), &bufs, (gx, gy, 1))?;
        return Ok(Some(out));
    }
    let out_binding = if v.entry == "compare" { 5 } else { 1 };
    let mut bufs: Vec<(u32, &GTensor)> = vec![(out_binding, &out), (2, &a)];
    if v.entry != "unary" {
        // A scalar `b` still needs a bound buffer: the shader reads it only when flagged.
        bufs.push((3, bt.as_ref().unwrap_or(&a)));
    }
    if let Some(c) = &c {
        let binding = if matches!(v.entry, "lerp3" | "clamp3") {
            4
        } else {
            6
        };
        bufs.push((binding, c));
    }
    k.dispatch(&v, bytemuck::bytes_of(&m), &bufs, (gx, gy, 1))?;
    Ok(Some(out))
}

pub(super) fn binary(k: &mut KernelCtx, op: BinaryOp) -> Out {
    let exp_name = if k.op.arg("exponent").is_some() {
        "exponent"
    } else {
        "other"
    };
    let Some(mut a) = k.t("self") else {
        return elementwise_args::scalar_self(k, op);
    };
    let Some(mut b) = operand(k, exp_name)? else {
        return Ok(None);
    };
    // torch's promotion to an f32 result: int and bool tensor operands (int / int true
    // division, int tensor times a float scalar, f32 minus int64...) are converted first.
    let b_dtype = match &b {
        Operand::T(t) => Some(t.dtype),
        Operand::S(_) => None,
    };
    let word = |d: DType| d == DType::Bool || ints::is_int(d);
    if k.out_is(DType::F32)
        && (word(a.dtype) || b_dtype.is_some_and(word))
        && [Some(a.dtype), b_dtype]
            .iter()
            .flatten()
            .all(|&d| d == DType::F32 || word(d))
        && k.op.opt_str("rounding_mode")?.is_none()
    {
        let Some(fa) = to_f32(k, &a)? else {
            return Ok(None);
        };
        a = fa;
        if let Operand::T(t) = &b {
            let Some(fb) = to_f32(k, t)? else {
                return Ok(None);
            };
            b = Operand::T(fb);
        }
    }
    // bool + bool is `or`, bool * bool is `and` (torch's bool arithmetic).
    if a.dtype == DType::Bool
        && matches!(&b, Operand::T(t) if t.dtype == DType::Bool)
        && k.out_is(DType::Bool)
        && k.op.opt_scalar("alpha")?.is_none_or(|s| s.as_f64() == 1.0)
    {
        match op {
            BinaryOp::Add => return ints::logical(k, ints::LogicalOp::Or),
            BinaryOp::Mul => return ints::logical(k, ints::LogicalOp::And),
            _ => {}
        }
    }
    if !is_float(a.dtype) {
        return ints::binary(k, op);
    }
    let d = a.dtype;
    if !k.out_is(d) {
        return Ok(None);
    }
    if let Operand::T(b) = &b {
        if b.dtype != d {
            return Ok(None);
        }
    }
    let alpha = match k.op.opt_scalar("alpha")? {
        Some(s) => s.as_f64() as f32,
        None => 1.0,
    };
    let op = match k.op.opt_str("rounding_mode")?.as_deref() {
        None => op,
        Some("floor") if op == BinaryOp::Div => BinaryOp::FloorDiv,
        Some("trunc") if op == BinaryOp::Div => BinaryOp::DivTrunc,
        Some(_) => return Ok(None),
    };
    one(elementwise(
        k,
        op.variant(),
        d,
        &a,
        Some(&b),
        None,
        alpha,
        0.0,
    ))
}

/// `t` as f32 (itself when it already is), converted on the GPU.
pub(super) fn to_f32(k: &mut KernelCtx, t: &GTensor) -> Result<Option<GTensor>> {
    if t.dtype == DType::F32 {
        return Ok(Some(t.clone()));
    }
    Ok(match ints::convert(k, t, DType::F32)?.as_deref() {
        Some([Slot::Tensor(x)]) => Some(x.clone()),
        _ => None,
    })
}

pub(super) fn compare(k: &mut KernelCtx, op: CompareOp) -> Out {
    let Some(a) = k.t("self") else {
        return Ok(None);
    };
    // An int tensor against a float number: torch compares in f32 (the promoted dtype).
    let a = if ints::is_int(a.dtype)
        && !k.is_tensor_arg("other")
        && matches!(k.op.opt_scalar("other")?, Some(Scalar::Float(_)))
    {
        match to_f32(k, &a)? {
            Some(af) => af,
            None => return Ok(None),
        }
    } else {
        a
    };
    if !is_float(a.dtype) {
        return ints::compare(k, op);
    }
    let Some(b) = operand(k, "other")? else {
        return Ok(None);
    };
    // lt_ and the other in-place comparisons (through `inplace`) declare self's dtype.
    let inplace = k
        .target()
        .split('.')
        .nth(1)
        .is_some_and(|o| o.ends_with('_'));
    if !k.out_is(DType::Bool) && !inplace {
        return Ok(None);
    }
    if let Operand::T(b) = &b {
        if b.dtype != a.dtype {
            return Ok(None);
        }
    }
    one(elementwise(
        k,
        op.variant(),
        DType::Bool,
        &a,
        Some(&b),
        None,
        1.0,
        0.0,
    ))
}

pub(super) fn where_(k: &mut KernelCtx) -> Out {
    let (Some(c), Some(a)) = (k.t("condition"), k.t("self")) else {
        return Ok(None);
    };
    if !is_float(a.dtype) {
        return ints::where_(k);
    }
    let Some(b) = operand(k, "other")? else {
        return Ok(None);
    };
    let d = a.dtype;
    if c.dtype != DType::Bool || !k.out_is(d) {
        return Ok(None);
    }
    if matches!(&b, Operand::T(b) if b.dtype != d) {
        return Ok(None);
    }
    one(elementwise(k, WHERE, d, &a, Some(&b), Some(&c), 1.0, 0.0))
}

pub(super) fn unary_with_args(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // The in-place forms (relu6_, elu_...) come here through `inplace`; clip is clamp.
    let op = k
        .target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .trim_end_matches('_')
        .replace("aten.clip", "aten.clamp");
    let bounds = match op.as_str() {
        "aten.clamp" => Some(ClampBounds::parse(&k.op)?),
        _ => None,
    };
    if bounds == Some(ClampBounds::Tensors) {
        return elementwise_args::clamp_tensor(k);
    }
    // relu6 / hardtanh of ints: a clamp with int bounds.
    if ints::is_int(x.dtype) && k.out_is(x.dtype) {
        let int = |v: i64| Some(Scalar::Int(v));
        match op.as_str() {
            "aten.relu6" => return ints::clamp_to(k, [int(0), int(6)]),
            "aten.hardtanh" => {
                let b = act::Bounds::parse(&k.op)?;
                return ints::clamp_to(k, [Some(b.lo), Some(b.hi)]);
            }
            _ => {}
        }
    }
    // An int tensor clamped to float bounds: torch clamps its f32 conversion.
    let x = if op == "aten.clamp"
        && (ints::is_int(x.dtype) || x.dtype == DType::Bool)
        && k.out_is(DType::F32)
    {
        match to_f32(k, &x)? {
            Some(xf) => xf,
            None => return Ok(None),
        }
    } else {
        x
    };
    let int_clamp = ints::is_int(x.dtype) && op == "aten.clamp";
    if (!is_float(x.dtype) || !k.out_is(x.dtype)) && !int_clamp {
        return Ok(None);
    }
    let d = x.dtype;
    let f = |s: Option<Scalar>, d: f64| s.map_or(d, Scalar::as_f64) as f32;
    let (u, alpha, beta) = match op.as_str() {
        "aten.gelu" => match act::params::gelu_tanh(&k.op)? {
            false => (UnaryOp::Gelu, 1.0, 0.0),
            true => (UnaryOp::GeluTanh, 1.0, 0.0),
        },
        "aten.clamp" if !is_float(x.dtype) => return ints::clamp(k),
        "aten.clamp" => match bounds {
            Some(ClampBounds::Numbers { lo, hi }) => (
                UnaryOp::Clamp,
                f(lo, f64::NEG_INFINITY),
                f(hi, f64::INFINITY),
            ),
            _ => return Ok(None),
        },
        "aten.hardtanh" | "aten.relu6" => {
            let b = act::Bounds::parse(&k.op)?;
            (UnaryOp::Clamp, b.lo.as_f64() as f32, b.hi.as_f64() as f32)
        }
        "aten.leaky_relu" => (
            UnaryOp::LeakyRelu,
            act::LeakyRelu::parse(&k.op)?.slope as f32,
            0.0,
        ),
        "aten.elu" => {
            let p = elu_params(&act::Elu::parse(&k.op)?);
            return one(elementwise_p(
                k,
                UnaryOp::Elu.variant(),
                d,
                &x,
                None,
                None,
                p,
                0,
            ));
        }
        "aten.softplus" => {
            let s = act::Softplus::parse(&k.op)?;
            (UnaryOp::Softplus, s.beta as f32, s.threshold as f32)
        }
        _ => return Ok(None),
    };
    one(elementwise(k, u.variant(), d, &x, None, None, alpha, beta))
}

/// The shader parameters of the elu formula (elu, selu, celu): `alpha * scale`,
/// `input_scale`, `scale`.
pub(super) fn elu_params(e: &act::Elu) -> [f32; 3] {
    [
        (e.alpha * e.scale) as f32,
        e.input_scale as f32,
        e.scale as f32,
    ]
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, all_f32, f32, f32_or_same_int, int, int_like, On, F16};
    use GpuOp::{Binary, Compare, Unary};
    for (names, u) in [
        (&["aten.relu"][..], UnaryOp::Relu),
        (&["aten.sigmoid"], UnaryOp::Sigmoid),
        (&["aten.tanh"], UnaryOp::Tanh),
        (&["aten.exp"], UnaryOp::Exp),
        (&["aten.log"], UnaryOp::Log),
        (&["aten.sqrt"], UnaryOp::Sqrt),
        (&["aten.rsqrt"], UnaryOp::Rsqrt),
        (&["aten.abs"], UnaryOp::Abs),
        (&["aten.neg"], UnaryOp::Neg),
        (&["aten.silu"], UnaryOp::Silu),
        (&["aten.sin"], UnaryOp::Sin),
        (&["aten.cos"], UnaryOp::Cos),
        (&["aten.reciprocal"], UnaryOp::Reciprocal),
        (&["aten.erf"], UnaryOp::Erf),
        (&["aten.floor"], UnaryOp::Floor),
        (&["aten.ceil"], UnaryOp::Ceil),
        (&["aten.hardsigmoid"], UnaryOp::Hardsigmoid),
        (&["aten.hardswish"], UnaryOp::Hardswish),
        (&["aten.sign", "aten.sgn"], UnaryOp::Sign),
        (&["aten.square"], UnaryOp::Square),
        (&["aten.log1p", "aten.special_log1p"], UnaryOp::Log1p),
        (&["aten.expm1", "aten.special_expm1"], UnaryOp::Expm1),
        (&["aten.trunc", "aten.fix"], UnaryOp::Trunc),
        (&["aten.frac"], UnaryOp::Frac),
        (&["aten.atan", "aten.arctan"], UnaryOp::Atan),
        (&["aten.tan"], UnaryOp::Tan),
        (&["aten.sinh"], UnaryOp::Sinh),
        (&["aten.cosh"], UnaryOp::Cosh),
        (&["aten.asin", "aten.arcsin"], UnaryOp::Asin),
        (&["aten.acos", "aten.arccos"], UnaryOp::Acos),
        (&["aten.asinh", "aten.arcsinh"], UnaryOp::Asinh),
        (&["aten.acosh", "aten.arccosh"], UnaryOp::Acosh),
        (&["aten.atanh", "aten.arctanh"], UnaryOp::Atanh),
        (&["aten.erfc", "aten.special_erfc"], UnaryOp::Erfc),
        (&["aten.erfinv", "aten.special_erfinv"], UnaryOp::Erfinv),
        (&["aten.log10"], UnaryOp::Log10),
        (&["aten.log2"], UnaryOp::Log2),
        (&["aten.exp2"], UnaryOp::Exp2),
        (&["aten.mish"], UnaryOp::Mish),
        (&["aten.log_sigmoid"], UnaryOp::LogSigmoid),
        (&["aten.lgamma", "aten.special_gammaln"], UnaryOp::Lgamma),
        (
            &["aten.digamma", "aten.special_digamma", "aten.special_psi"],
            UnaryOp::Digamma,
        ),
        (&["aten.i0", "aten.special_i0"], UnaryOp::I0),
        (&["aten.special_i0e"], UnaryOp::I0e),
        (&["aten.special_i1"], UnaryOp::I1),
        (&["aten.special_i1e"], UnaryOp::I1e),
        (&["aten.special_ndtri"], UnaryOp::Ndtri),
        (&["aten.special_ndtr"], UnaryOp::Ndtr),
        (&["aten.special_log_ndtr"], UnaryOp::LogNdtr),
        (&["aten.special_erfcx"], UnaryOp::Erfcx),
        (&["aten.special_entr"], UnaryOp::Entr),
    ] {
        // The ops that keep an int tensor int.
        let on_ints = matches!(
            u,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Square
                | UnaryOp::Relu
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Trunc
        );
        let serves: super::table::Serves = if on_ints {
            |i, o| to_float(i, o) || (all(i, int) && o.first() == i.first())
        } else {
            to_float
        };
        t.add(names, On::All, Unary(u), serves);
    }
    t.kernel(
        &["aten.gelu", "aten.leaky_relu", "aten.elu", "aten.softplus"],
        On::All,
        unary_with_args,
        all_f32,
    )
    .f16(F16::Native);
    // relu6 / hardtanh of ints: a clamp with int bounds.
    t.kernel(
        &["aten.hardtanh", "aten.relu6"],
        On::All,
        unary_with_args,
        f32_or_same_int,
    )
    .f16(F16::Native);
    // An int tensor clamped to float bounds is clamped as f32.
    t.kernel(
        &["aten.clamp", "aten.clip"],
        On::All,
        unary_with_args,
        |i, o| f32_or_same_int(i, o) || to_float(i, o),
    )
    .f16(F16::Native);
    // f32 results (int and bool operands promoted), or int results of int operands for the
    // ops with int forms.
    fn floats(i: &[DType], o: &[DType]) -> bool {
        all_f32(i, o) || (o == [DType::F32] && all(i, |d| f32(d) || int_like(d)))
    }
    fn with_ints(i: &[DType], o: &[DType]) -> bool {
        floats(i, o) || (i.first().is_some_and(|&d| int_like(d)) && all(i, int_like) && all(o, int))
    }
    // bool + bool and bool * bool are bools (or, and).
    fn with_bools(i: &[DType], o: &[DType]) -> bool {
        with_ints(i, o) || (all(i, |d| d == DType::Bool) && o == [DType::Bool])
    }
    t.add(&["aten.add"], On::NotOut, Binary(BinaryOp::Add), with_bools);
    t.add(&["aten.sub"], On::NotOut, Binary(BinaryOp::Sub), with_ints);
    t.add(&["aten.mul"], On::NotOut, Binary(BinaryOp::Mul), with_bools);
    t.add(
        &["aten.div"],
        On::Only(&["Tensor", "Scalar"]),
        Binary(BinaryOp::Div),
        floats,
    );
    t.add(
        &["aten.div"],
        On::Only(&["Tensor_mode", "Scalar_mode"]),
        Binary(BinaryOp::Div),
        with_ints,
    );
    t.add(
        &["aten.maximum"],
        On::All,
        Binary(BinaryOp::Maximum),
        with_ints,
    );
    t.add(
        &["aten.minimum"],
        On::All,
        Binary(BinaryOp::Minimum),
        with_ints,
    );
    t.add(
        &["aten.max"],
        On::Only(&["other"]),
        Binary(BinaryOp::Maximum),
        with_ints,
    );
    t.add(
        &["aten.min"],
        On::Only(&["other"]),
        Binary(BinaryOp::Minimum),
        with_ints,
    );
    t.add(
        &["aten.pow"],
        On::Except(&["Scalar"]),
        Binary(BinaryOp::Pow),
        with_ints,
    );
    t.add(&["aten.rsub"], On::All, Binary(BinaryOp::Rsub), with_ints);
    fn compares(i: &[DType], o: &[DType]) -> bool {
        all(o, |d| d == DType::Bool)
            && (all(i, f32) || (i.first().is_some_and(|&d| int_like(d)) && all(i, int_like)))
    }
    for (name, c) in [
        ("aten.eq", CompareOp::Eq),
        ("aten.ne", CompareOp::Ne),
        ("aten.lt", CompareOp::Lt),
        ("aten.le", CompareOp::Le),
        ("aten.gt", CompareOp::Gt),
        ("aten.ge", CompareOp::Ge),
    ] {
        t.add(&[name], On::All, Compare(c), compares);
    }
    t.kernel(&["aten.where"], On::Only(&["self"]), where_, where_dtypes)
        .f16(F16::Native);
}

/// `where(cond, a, b)`: a bool condition, values and result of one GPU dtype.
pub(super) fn where_dtypes(i: &[DType], o: &[DType]) -> bool {
    i.first() == Some(&DType::Bool)
        && o.len() == 1
        && crate::gpu::store::gpu_dtype(o[0])
        && i[1..].iter().all(|&d| d == o[0])
}

/// f32 in and out, or one int or bool tensor into an f32 result (torch computes a float op
/// of ints on their f32 conversion).
pub(super) fn to_float(i: &[DType], o: &[DType]) -> bool {
    use super::table::{all_f32, int_like};
    all_f32(i, o) || (o == [DType::F32] && i.len() == 1 && int_like(i[0]))
}

/// A comparison written into `self` (`lt_`): `self`'s dtype keeps, 0 or 1.
pub(super) fn compares_in_place(i: &[DType], o: &[DType]) -> bool {
    use super::table::{all_f32, int};
    all_f32(i, o)
        || (i.first().is_some_and(|&d| int(d)) && i.iter().all(|&d| d == i[0]) && o == [i[0]])
}
