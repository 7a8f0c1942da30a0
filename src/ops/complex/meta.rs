//! Rules of the complex family: complex dtypes from their real parts and back.

use crate::cpu::complex::{complex_dtype, real_dtype};
use crate::dtype::DType;
use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::{broadcast, float_dtype};

fn t(dtype: DType, sizes: Vec<usize>) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Tensor(MetaTensor::new(dtype, sizes))])
}

pub(super) fn view_as_complex(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    if x.sizes.last() != Some(&2) {
        return Err(format!(
            "Tensor must have a last dimension of size 2 (shape {:?})",
            x.sizes
        ));
    }
    t(complex_dtype(x.dtype), x.sizes[..x.rank() - 1].to_vec())
}

pub(super) fn view_as_real(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    if !x.dtype.is_complex() {
        return Err(format!(
            "view_as_real is only supported for complex tensors, got {}",
            x.dtype
        ));
    }
    let mut sizes = x.sizes.clone();
    sizes.push(2);
    t(real_dtype(x.dtype), sizes)
}

/// `complex(real, imag)`, `polar(abs, angle)`: broadcast, complex of the parts' dtype.
pub(super) fn complex(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let names = if ctx.has("abs") {
        ["abs", "angle"]
    } else {
        ["real", "imag"]
    };
    let (a, b) = (ctx.tensor(names[0])?, ctx.tensor(names[1])?);
    t(complex_dtype(a.dtype), broadcast(&a.sizes, &b.sizes)?)
}

/// `real`, `imag`, `abs`-like: the parts' dtype, same shape.
pub(super) fn real(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    t(real_dtype(x.dtype), x.sizes)
}

/// `angle`: the parts' dtype of complex inputs, floating for real ones.
pub(super) fn angle(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    t(float_dtype(real_dtype(x.dtype)), x.sizes)
}

pub(super) fn isreal(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.first()?;
    t(DType::Bool, x.sizes)
}
