//! Complex64 on the GPU (shaders/complex.wgsl): a complex64 tensor is interleaved f32
//! (re, im) pairs (`GTensor::as_pairs` is its real view), so copies, `cat` and the
//! reductions run the f32 kernels on that view; arithmetic (`add`/`sub`/`mul`/`div` with
//! complex, real or number operands, broadcast), `neg`, `conj`, `abs`, `angle`, `exp`,
//! `complex` and `polar` run one strided kernel; `constant_pad_nd` (zero fill) is the index
//! map of the pairs. Complex128 stays on the CPU: WGSL has no
//! f64.
//!
//! Nodes that read or write a complex tensor look their kernel up in [`complex_table`], not
//! in the real one: a real kernel never sees a complex tensor. Views are the real table's
//! metadata-only entries where the op table gives the target a complex kernel (the CPU
//! kernel on placeholders works out the view).

use super::table::{GpuTable, On};
use super::*;

op_enum!(
    ComplexOp,
    Shader::Complex,
    "elementwise",
    "OP",
    [
        Copy = 0,
        Add = 1,
        Sub = 2,
        RSub = 3,
        Mul = 4,
        Div = 5,
        Neg = 6,
        Conj = 7,
        Abs = 8,
        Angle = 9,
        Exp = 10,
        Polar = 11,
        Make = 12,
    ]
);

const A_COMPLEX: u32 = 1;
const B_COMPLEX: u32 = 2;
const B_TENSOR: u32 = 4;
const OUT_COMPLEX: u32 = 8;

/// The word strides and offset of `t` (complex64: twice its element ones), whether it is
/// complex; None for a dtype the kernel does not read.
fn words(t: &GTensor) -> Option<(Vec<usize>, usize, bool)> {
    match t.dtype {
        DType::Complex64 => Some((
            t.strides.iter().map(|s| 2 * s).collect(),
            2 * t.offset,
            true,
        )),
        DType::F32 => Some((t.strides.clone(), t.offset, false)),
        _ => None,
    }
}

/// `op(a, b)` (b a tensor, or the number `s` when None) broadcast, into a contiguous output
/// of `out` (complex64, or f32 for `abs` / `angle`). None for operands it does not read.
fn encode(
    k: &mut KernelCtx,
    op: ComplexOp,
    a: &GTensor,
    b: Option<&GTensor>,
    s: f32,
    alpha: f32,
    out: DType,
) -> Result<Option<GTensor>> {
    let sizes = match b {
        Some(b) => match broadcast_shapes(&a.sizes, &b.sizes) {
            Some(s) => s,
            None => return Ok(None),
        },
        None => a.sizes.clone(),
    };
    let numel: usize = sizes.iter().product();
    let (Some(av), Some(bv)) = (
        a.expand_to(&sizes),
        b.map_or(a.expand_to(&sizes), |b| b.expand_to(&sizes)),
    ) else {
        return Ok(None);
    };
    let (Some((sa, oa, ca)), Some((sb, ob, cb))) = (words(&av), words(&bv)) else {
        return Ok(None);
    };
    if sizes.len() > MAX_RANK
        || !k.fits(a)
        || b.is_some_and(|b| !k.fits(b))
        || 2 * numel >= u32::MAX as usize
    {
        return Ok(None);
    }
    k.ensure(a)?;
    if let Some(b) = b {
        k.ensure(b)?;
    }
    let o = k.new_out(out, &sizes)?;
    if numel == 0 {
        return Ok(Some(o));
    }
    let (shape, strides) = coalesce(&sizes, &[&sa, &sb]);
    let (gx, gy, row) = grid(numel, 64);
    let flags = (ca as u32 * A_COMPLEX)
        | (cb as u32 * B_COMPLEX)
        | (b.is_some() as u32 * B_TENSOR)
        | ((out == DType::Complex64) as u32 * OUT_COMPLEX);
    // The elementwise shader's parameters (shaders/complex.wgsl reads the same block).
    let meta = ElemMeta {
        numel: numel as u32,
        rank: shape.len() as u32,
        row,
        flags,
        shape: pad8(&shape),
        a_strides: pad8(&strides[0]),
        b_strides: pad8(&strides[1]),
        offsets: [oa as u32, ob as u32, 0, 0],
        alpha,
        p0: s,
        ..Default::default()
    };
    let bt = b.unwrap_or(a);
    k.dispatch(
        &op.variant(),
        bytemuck::bytes_of(&meta),
        &[(1, &o), (2, a), (3, bt)],
        (gx, gy, 1),
    )?;
    Ok(Some(o))
}

/// The op name of the node's target (`aten.add` of `aten.add.Tensor`).
fn op_name(k: &KernelCtx) -> String {
    k.target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .to_string()
}

/// add / sub / rsub / mul / div of complex64 with complex64, f32 or a real number.
fn arith(k: &mut KernelCtx) -> Out {
    let op = match op_name(k).as_str() {
        "aten.add" => ComplexOp::Add,
        "aten.sub" => ComplexOp::Sub,
        "aten.rsub" => ComplexOp::RSub,
        "aten.mul" => ComplexOp::Mul,
        "aten.div" => ComplexOp::Div,
        _ => return Ok(None),
    };
    if !k.out_is(DType::Complex64) || k.op.opt_str("rounding_mode")?.is_some() {
        return Ok(None);
    }
    let alpha = k.op.opt_scalar("alpha")?.map_or(1.0, |s| s.as_f64() as f32);
    let Some(a) = k.t("self") else {
        // A number and a tensor (core ATen's `2 - z` is `sub.Tensor(2, z)`).
        let op = match op {
            ComplexOp::Sub => ComplexOp::RSub,
            ComplexOp::Add | ComplexOp::Mul => op,
            _ => return Ok(None),
        };
        let (Some(s), Some(Operand::T(b))) = (k.op.opt_scalar("self")?, operand(k, "other")?)
        else {
            return Ok(None);
        };
        // RSub computes s - alpha * b as `b` (the tensor) minus; Add / Mul commute.
        let s = s.as_f64() as f32;
        return one(encode(k, op, &b, None, s, alpha, DType::Complex64));
    };
    match operand(k, "other")? {
        Some(Operand::T(b)) => one(encode(k, op, &a, Some(&b), 0.0, alpha, DType::Complex64)),
        Some(Operand::S(s)) => one(encode(k, op, &a, None, s, alpha, DType::Complex64)),
        None => Ok(None),
    }
}

/// neg, conj (eager, as the CPU kernels), exp, sgn into complex64; abs, angle into f32.
fn unary(k: &mut KernelCtx) -> Out {
    let (op, out) = match op_name(k).as_str() {
        "aten.neg" => (ComplexOp::Neg, DType::Complex64),
        "aten.conj" | "aten._conj" | "aten.conj_physical" | "aten._conj_physical" => {
            (ComplexOp::Conj, DType::Complex64)
        }
        "aten.exp" => (ComplexOp::Exp, DType::Complex64),
        "aten.abs" => (ComplexOp::Abs, DType::F32),
        "aten.angle" => (ComplexOp::Angle, DType::F32),
        _ => return Ok(None),
    };
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if x.dtype != DType::Complex64 || !k.out_is(out) {
        return Ok(None);
    }
    one(encode(k, op, &x, None, 0.0, 1.0, out))
}

/// complex(real, imag) and polar(abs, angle) of f32 tensors.
fn make(k: &mut KernelCtx) -> Out {
    let (op, a, b) = match op_name(k).as_str() {
        "aten.complex" => (ComplexOp::Make, k.t("real"), k.t("imag")),
        "aten.polar" => (ComplexOp::Polar, k.t("abs"), k.t("angle")),
        _ => return Ok(None),
    };
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(None);
    };
    if a.dtype != DType::F32 || b.dtype != DType::F32 || !k.out_is(DType::Complex64) {
        return Ok(None);
    }
    one(encode(k, op, &a, Some(&b), 0.0, 1.0, DType::Complex64))
}

/// clone, _to_copy, copy, lift_fresh_copy, detach_copy, alias_copy into complex64: a
/// strided copy of the pairs, or an f32 tensor made complex.
fn copy(k: &mut KernelCtx) -> Out {
    if !k.out_is(DType::Complex64) {
        return Ok(None);
    }
    let src = if op_name(k) == "aten.copy" {
        let (Some(dst), Some(src)) = (k.t("self"), k.t("src")) else {
            return Ok(None);
        };
        match src.expand_to(&dst.sizes) {
            Some(s) => s,
            None => return Ok(None),
        }
    } else {
        match k.t("self") {
            Some(x) => x,
            None => return Ok(None),
        }
    };
    match src.dtype {
        DType::Complex64 => {
            if !k.fits(&src) {
                return Ok(None);
            }
            let out = k.new_out(DType::Complex64, &src.sizes)?;
            index::encode_copy(k, &src.as_pairs(), &out.as_pairs())?;
            Ok(Some(vec![Slot::Tensor(out)]))
        }
        DType::F32 => one(encode(
            k,
            ComplexOp::Copy,
            &src,
            None,
            0.0,
            1.0,
            DType::Complex64,
        )),
        _ => Ok(None),
    }
}

/// sum / mean of complex64 over dims: the f32 reduction of the pairs, the pair dim kept.
fn reduce(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let op = op_name(k);
    let scale_by_count = match op.as_str() {
        "aten.sum" => false,
        "aten.mean" => true,
        _ => return Ok(None),
    };
    if x.dtype != DType::Complex64
        || !k.out_is(DType::Complex64)
        || k.op
            .opt_dtype("dtype")?
            .is_some_and(|d| d != DType::Complex64)
        || !k.fits(&x)
    {
        return Ok(None);
    }
    let crate::ops::reduce::Reduction { mask, keepdim } =
        crate::ops::reduce::Reduction::parse(&k.op, x.rank())?;
    let n_red: usize = (0..x.rank())
        .filter(|&d| mask[d])
        .map(|d| x.sizes[d])
        .product();
    let scale = if scale_by_count {
        1.0 / n_red as f32
    } else {
        1.0
    };
    let mut red = mask;
    red.push(false);
    let pairs = x.as_pairs();
    let out = encode_reduce(
        k,
        &pairs,
        &red,
        keepdim,
        ReduceOp::Sum,
        scale,
        DType::F32,
        false,
    )?;
    Ok(Some(vec![Slot::Tensor(out.from_pairs())]))
}

/// Complex64 tensors in and out (f32 ones mixed in where the op takes them).
fn c64_or_f32(inputs: &[DType], outputs: &[DType]) -> bool {
    let ok = |d: &DType| matches!(d, DType::Complex64 | DType::F32);
    inputs.iter().chain(outputs).all(ok)
}

/// The GPU kernels of nodes that read or write complex tensors (see the module doc).
pub fn complex_table() -> &'static GpuTable {
    static TABLE: std::sync::OnceLock<GpuTable> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = GpuTable::default();
        // Views between complex and real storage, and the parts (views of the pairs).
        t.views(
            &[
                "aten.view_as_real",
                "aten.view_as_complex",
                "aten.real",
                "aten.imag",
                // conj is eager here: resolving it is an alias.
                "aten.resolve_conj",
                "aten.resolve_neg",
            ],
            On::All,
        );
        t.kernel(
            &["aten.add", "aten.sub", "aten.rsub", "aten.mul", "aten.div"],
            On::Only(&["Tensor", "Scalar"]),
            arith,
            c64_or_f32,
        );
        t.kernel(
            &[
                "aten.neg",
                "aten.conj",
                "aten._conj",
                "aten.conj_physical",
                "aten._conj_physical",
                "aten.exp",
                "aten.abs",
                "aten.angle",
            ],
            On::Only(&["default"]),
            unary,
            c64_or_f32,
        );
        t.kernel(
            &["aten.complex", "aten.polar"],
            On::Only(&["default"]),
            make,
            c64_or_f32,
        );
        t.kernel(
            &[
                "aten.clone",
                "aten.lift_fresh_copy",
                "aten._to_copy",
                "aten.copy",
                "aten.detach_copy",
                "aten.alias_copy",
            ],
            On::Only(&["default"]),
            copy,
            c64_or_f32,
        );
        t.kernel(&["aten.to"], On::Only(&["dtype"]), copy, c64_or_f32);
        t.kernel(
            &["aten.constant_pad_nd"],
            On::Only(&["default"]),
            shape::pad,
            |i, o| i == [DType::Complex64] && o == [DType::Complex64],
        );
        t.kernel(
            &["aten.sum", "aten.mean"],
            On::Only(&["dim_IntList", "dim", "default"]),
            reduce,
            |i, o| i == [DType::Complex64] && o == [DType::Complex64],
        );
        t.kernel(
            &["aten.cat", "aten.concat", "aten.concatenate", "aten.stack"],
            On::NotOut,
            index::cat,
            |i, o| i.iter().chain(o).all(|&d| d == DType::Complex64),
        );
        super::fft::register(&mut t);
        t.variants(
            &ComplexOp::ALL
                .iter()
                .map(|op| op.variant())
                .collect::<Vec<_>>(),
        );
        t
    })
}

/// The entry of a node that reads or writes complex tensors: the complex table's, or a view
/// of the real table where the op table gives the target a complex kernel.
pub(crate) fn complex_entry(target: &str) -> Option<super::table::GpuEntry> {
    if let Some(e) = complex_table().get(target) {
        return Some(*e);
    }
    let e = super::table::gpu_table().get(target)?;
    (matches!(e.op, GpuOp::View) && table().complex_kernel(target).is_some()).then_some(*e)
}
