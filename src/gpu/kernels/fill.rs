//! Kernels that write a scalar or another tensor's words over a tensor, on 32-bit words (so
//! every GPU dtype): masked_fill, the scalar forms of `where`, and the in-place fill_ /
//! zero_ / copy_.

use super::index::{copy_into, encode_fill, word};
use super::ints::{self, WOperand};
use super::{one, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::store::{gpu_dtype, lock, GTensor};
use crate::ops::Scalar;

/// masked_fill(self, mask, value): mask ? value : self, on words (every GPU dtype).
pub(super) fn masked_fill(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(mask)) = (k.t("self"), k.t("mask")) else {
        return Ok(None);
    };
    let dtype = x.dtype;
    if !gpu_dtype(dtype) || mask.dtype != DType::Bool || !k.out_is(dtype) {
        return Ok(None);
    }
    let b = if k.is_tensor_arg("value") {
        match k.t("value") {
            Some(v) if v.dtype == dtype && v.numel() == 1 => {
                WOperand::T(v.view(vec![], vec![], v.offset))
            }
            _ => return Ok(None),
        }
    } else {
        match word(dtype, k.op.scalar("value")?) {
            Some(w) => WOperand::W(w),
            None => return Ok(None),
        }
    };
    // Out of place, `self` broadcasts with the mask (the in-place form checks the shape).
    one(ints::encode(
        k,
        ints::WHERE_U,
        dtype,
        &x,
        Some(&b),
        Some(&mask),
        64,
        0,
    ))
}

/// where.ScalarSelf / ScalarOther / Scalar: a scalar side as a word.
pub(super) fn where_scalar(k: &mut KernelCtx) -> Out {
    let Some(c) = k.t("condition") else {
        return Ok(None);
    };
    let Some(dtype) = k.out_dtype(0).filter(|d| gpu_dtype(*d)) else {
        return Ok(None);
    };
    if c.dtype != DType::Bool {
        return Ok(None);
    }
    let side = |k: &mut KernelCtx, name: &str| -> crate::error::Result<Option<WOperand>> {
        if k.is_tensor_arg(name) {
            return Ok(match k.t(name) {
                Some(t) if t.dtype == dtype => Some(WOperand::T(t)),
                // An int or bool tensor with a float number: its f32 conversion.
                Some(t)
                    if dtype == DType::F32 && (ints::is_int(t.dtype) || t.dtype == DType::Bool) =>
                {
                    match ints::convert(k, &t, DType::F32)?.as_deref() {
                        Some([Slot::Tensor(f)]) => Some(WOperand::T(f.clone())),
                        _ => None,
                    }
                }
                _ => None,
            });
        }
        Ok(word(dtype, k.op.scalar(name)?).map(WOperand::W))
    };
    let (Some(a), Some(b)) = (side(k, "self")?, side(k, "other")?) else {
        return Ok(None);
    };
    // The kernel's `a` is a tensor: a scalar `self` swaps the sides and negates the condition.
    let (a, b, flags) = match (a, b) {
        (WOperand::T(a), b) => (a, b, 0),
        (WOperand::W(w), WOperand::T(b)) => (b, WOperand::W(w), 64),
        (WOperand::W(wa), WOperand::W(wb)) => {
            let Some(Some(Slot::Tensor(t))) =
                encode_fill(k, dtype, &[], 0, [wa, 0])?.map(|mut v: Vec<Slot>| v.pop())
            else {
                return Ok(None);
            };
            (t, WOperand::W(wb), 0)
        }
    };
    one(ints::encode(
        k,
        ints::WHERE_U,
        dtype,
        &a,
        Some(&b),
        Some(&c),
        flags,
        0,
    ))
}

/// `self` unless it is expanded (internal overlap, which torch rejects in place).
fn inplace_target(x: &GTensor) -> bool {
    !x.sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0)
}

/// fill_.Scalar: a fill, copied into `self`'s buffer.
pub(super) fn fill_(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !gpu_dtype(x.dtype) || !inplace_target(&x) || !k.fits(&x) {
        return Ok(None);
    }
    // zero_ is fill_ with 0.
    let value = if k.target().starts_with("aten.zero_.") {
        Scalar::Int(0)
    } else {
        k.op.scalar("value")?
    };
    let Some(w) = word(x.dtype, value) else {
        return Ok(None);
    };
    let Some(Some(Slot::Tensor(t))) =
        encode_fill(k, x.dtype, &x.sizes, 0, [w, 0])?.map(|mut v| v.pop())
    else {
        return Ok(None);
    };
    copy_into(k, &t, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// fill.Scalar(self, value): a new tensor of self's sizes and dtype holding `value` (the
/// functional fill that functionalization writes for a `fill_` through views).
pub(super) fn fill(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if !gpu_dtype(x.dtype) {
        return Ok(None);
    }
    let Some(w) = word(x.dtype, k.op.scalar("value")?) else {
        return Ok(None);
    };
    encode_fill(k, x.dtype, &x.sizes, 0, [w, 0])
}

/// copy_(self, src): `src` broadcast and converted to `self`'s dtype, copied into `self`.
pub(super) fn copy_(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(src)) = (k.t("self"), k.t("src")) else {
        return Ok(None);
    };
    if !gpu_dtype(x.dtype) || !gpu_dtype(src.dtype) || !inplace_target(&x) || !k.fits(&x) {
        return Ok(None);
    }
    let Some(s) = src.expand_to(&x.sizes) else {
        return Ok(None);
    };
    // A fresh converted copy first: `src` may alias `self`.
    let Some(Some(Slot::Tensor(t))) = ints::convert(k, &s, x.dtype)?.map(|mut v| v.pop()) else {
        return Ok(None);
    };
    copy_into(k, &t, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, f32, gpu_dtypes, On, F16};
    use crate::gpu::store::gpu_dtype;
    t.kernel(&["aten.masked_fill"], On::NotOut, masked_fill, |i, o| {
        i.len() >= 2
            && gpu_dtype(i[0])
            && i[1] == DType::Bool
            && all(&i[2..], |d| d == i[0])
            && o == [i[0]]
    });
    // The in-place form writes f32 only.
    t.kernel(
        &["aten.masked_fill_"],
        On::NotOut,
        super::elementwise::inplace,
        |i, o| {
            i.len() >= 2
                && f32(i[0])
                && i[1] == DType::Bool
                && all(&i[2..], f32)
                && o == [DType::F32]
        },
    );
    t.kernel(
        &["aten.where"],
        On::Prefix(&["Scalar"]),
        where_scalar,
        // A bool condition, a scalar and a tensor of any GPU dtype or two scalars: the
        // promoted result.
        |i, o| {
            i.first() == Some(&DType::Bool)
                && i.len() <= 2
                && all(&i[1..], gpu_dtype)
                && o.len() == 1
                && gpu_dtype(o[0])
        },
    )
    .f16(F16::Native);
    t.kernel(&["aten.fill_"], On::Only(&["Scalar"]), fill_, gpu_dtypes);
    t.kernel(&["aten.fill"], On::Only(&["Scalar"]), fill, gpu_dtypes);
    t.kernel(&["aten.zero_"], On::Only(&["default"]), fill_, gpu_dtypes);
    t.kernel(&["aten.copy_"], On::Only(&["default"]), copy_, gpu_dtypes);
}
