//! Op family: complex numbers on the CPU (complex64 and complex128; complex32 is refused).
//!
//! Complex tensors store interleaved (re, im) pairs ([`crate::cpu::complex`]). This family
//! owns the ops that make or take apart complex tensors (`view_as_complex`/`view_as_real`
//! as views sharing storage, `complex`, `polar`, `real`/`imag`, `angle`, `conj`...) and the
//! complex kernels of ops other families own for real tensors (`add`, `mul`, `abs`, `exp`,
//! `sum`...): the op table binds those where a node reads or writes a complex tensor
//! ([`crate::ops::OpTable::kernel_for`]). Ops that only move data (views, copies, `cat`,
//! padding, indexing) run their own generic kernels; every other op refuses complex tensors
//! with an error naming it. Arithmetic computes in complex128 and rounds once.
//!
//! `conj` is eager here (torch's conjugate bit is a lazy view): `conj`/`_conj` return the
//! conjugated values, `resolve_conj` is then an alias.

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

mod arith;

use super::{OpCtx, OpTable};
use crate::cpu::{Tensor, C128, C64};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::runtime::RValue;

pub(crate) fn register(r: &mut OpTable) {
    r.define_complex(
        "aten.view_as_complex.default",
        view_as_complex,
        meta::view_as_complex,
    );
    r.define_complex(
        "aten.view_as_real.default",
        view_as_real,
        meta::view_as_real,
    );
    r.define_complex("aten.complex.default", complex, meta::complex);
    r.define_complex("aten.polar.default", polar, meta::complex);
    r.define_complex("aten.real.default", real, meta::real);
    r.define_complex("aten.imag.default", imag, meta::real);
    r.define_complex("aten.isreal.default", isreal, meta::isreal);
    for t in [
        "aten.conj.default",
        "aten._conj.default",
        "aten.conj_physical.default",
        "aten._conj_physical.default",
    ] {
        r.define_complex(t, conj, crate::ops::elementwise::meta::same);
    }
    r.define_complex("aten.angle.default", arith::angle, meta::angle);
    arith::register(r);
    // `abs` of a complex tensor is real (the elementwise family's rule keeps the dtype).
    r.rule_op("aten.abs", meta::real);
    // Ops of other families whose kernels only move data: generic over the element type.
    for t in GENERIC {
        r.complex_same(t);
    }
}

/// Targets of other families that serve complex tensors with their own kernels (views,
/// copies, concatenation, padding, indexing: no arithmetic on the elements).
const GENERIC: &[&str] = &[
    "aten.view.default",
    "aten._unsafe_view.default",
    "aten.reshape.default",
    "aten.view_as.default",
    "aten.reshape_as.default",
    "aten.flatten.using_ints",
    "aten.unflatten.int",
    "aten.squeeze",
    "aten.unsqueeze.default",
    "aten.permute.default",
    "aten.transpose.int",
    "aten.swapaxes.default",
    "aten.swapdims.default",
    "aten.t.default",
    "aten.numpy_T.default",
    "aten.mT.default",
    "aten.movedim",
    "aten.moveaxis",
    "aten.expand.default",
    "aten.expand_as.default",
    "aten.slice.Tensor",
    "aten.select.int",
    "aten.narrow",
    "aten.unbind.int",
    "aten.split.Tensor",
    "aten.split.sizes",
    "aten.chunk.default",
    "aten.tensor_split",
    "aten.diagonal.default",
    "aten.unfold.default",
    "aten.as_strided.default",
    "aten.view_copy.default",
    "aten.t_copy.default",
    "aten.expand_copy.default",
    "aten.slice_copy.Tensor",
    "aten.select_copy.int",
    "aten.squeeze_copy",
    "aten.unsqueeze_copy.default",
    "aten.alias_copy.default",
    "aten.detach_copy.default",
    "aten.permute_copy.default",
    "aten.transpose_copy.int",
    "aten.cat.default",
    "aten.concat.default",
    "aten.concatenate.default",
    "aten.stack.default",
    "aten.hstack.default",
    "aten.vstack.default",
    "aten.roll.default",
    "aten.flip.default",
    "aten.repeat.default",
    "aten.tile.default",
    "aten.clone",
    "aten.lift_fresh_copy",
    "aten.contiguous",
    "aten.alias",
    "aten.detach",
    "aten.lift_fresh",
    "aten.resolve_conj",
    "aten.resolve_neg",
    "aten.copy.default",
    "aten.copy_.default",
    "aten.to",
    "aten._to_copy",
    "aten.type_as",
    "aten.fill",
    "aten.fill_",
    "aten.zero",
    "aten.zero_",
    "aten.constant_pad_nd.default",
    "aten.pad.default",
    "aten._pad_enum.default",
    "aten._pad_circular.default",
    "aten.reflection_pad1d.default",
    "aten.reflection_pad2d.default",
    "aten.reflection_pad3d.default",
    "aten.replication_pad1d.default",
    "aten.replication_pad2d.default",
    "aten.replication_pad3d.default",
    "aten.index_select.default",
    "aten.index.Tensor",
    "aten.gather.default",
    "aten.full_like",
    "aten.zeros_like",
    "aten.empty_like",
    "aten._assert_tensor_metadata.default",
];

fn one(t: Tensor) -> Result<Vec<RValue>> {
    Ok(vec![RValue::Tensor(t)])
}

/// Complex128 values as a contiguous tensor of the complex `dtype` (rounded once).
pub(crate) fn complex_tensor(dtype: DType, v: Vec<C128>, sizes: &[usize]) -> Result<Tensor> {
    match dtype {
        DType::Complex128 => Ok(Tensor::from_vec(v, sizes)),
        DType::Complex64 => Ok(Tensor::from_vec(
            v.into_iter()
                .map(|c| C64::new(c.re as f32, c.im as f32))
                .collect::<Vec<_>>(),
            sizes,
        )),
        other => Err(Error::op(
            "cpu",
            format!("dtype {other} is not a complex dtype the CPU backend stores (complex64, complex128)"),
        )),
    }
}

/// f64 values as a contiguous tensor of the real `dtype`.
pub(crate) fn real_tensor(dtype: DType, v: Vec<f64>, sizes: &[usize]) -> Result<Tensor> {
    let t = Tensor::from_vec(v, sizes);
    if dtype == DType::F64 {
        Ok(t)
    } else {
        t.to_dtype(dtype)
    }
}

/// Refuse complex32 (chalf) with a clear error.
pub(crate) fn check_stored(ctx: &OpCtx, t: &Tensor, what: &str) -> Result<()> {
    if t.dtype == DType::ComplexHalf {
        return Err(ctx.err(format!(
            "{what} is complex32 (chalf), which the CPU backend does not store: convert it to \
             complex64 in the model (`.to(torch.complex64)`)"
        )));
    }
    Ok(())
}

impl Tensor {
    /// torch's `view_as_real`: the real view `[..., 2]` sharing this complex tensor's storage.
    pub fn view_as_real(&self) -> Result<Tensor> {
        let real = crate::cpu::complex::real_dtype(self.dtype);
        if !crate::cpu::complex::is_cpu_complex(self.dtype) {
            return Err(Error::op(
                "view_as_real",
                format!(
                    "view_as_real is only supported for complex tensors, got {}",
                    self.dtype
                ),
            ));
        }
        let mut sizes = self.sizes.clone();
        sizes.push(2);
        let mut strides: Vec<usize> = self.strides.iter().map(|s| s * 2).collect();
        strides.push(1);
        Ok(Tensor {
            dtype: real,
            sizes,
            strides,
            offset: self.offset * 2,
            data: self.data.clone(),
        })
    }

    /// torch's `view_as_complex`: the complex view of a float tensor whose last dimension
    /// is 2 with stride 1, sharing its storage.
    pub fn view_as_complex(&self) -> Result<Tensor> {
        let dtype = match self.dtype {
            DType::F32 => DType::Complex64,
            DType::F64 => DType::Complex128,
            other => {
                return Err(Error::op(
                    "view_as_complex",
                    format!("view_as_complex is only supported for float32 and float64 tensors, but got a tensor of scalar type: {other}"),
                ))
            }
        };
        let r = self.rank();
        if r == 0 || self.sizes[r - 1] != 2 {
            return Err(Error::op(
                "view_as_complex",
                format!(
                    "Tensor must have a last dimension of size 2 (shape {:?})",
                    self.sizes
                ),
            ));
        }
        if self.strides[r - 1] != 1 {
            return Err(Error::op(
                "view_as_complex",
                format!(
                    "Tensor must have a last dimension with stride 1 (strides {:?})",
                    self.strides
                ),
            ));
        }
        if self.strides[..r - 1]
            .iter()
            .zip(&self.sizes)
            .any(|(s, &n)| s % 2 != 0 && n > 1)
        {
            return Err(Error::op(
                "view_as_complex",
                format!("Tensor must have a stride divisible by 2 for all but last dimension (strides {:?})", self.strides),
            ));
        }
        if !self.offset.is_multiple_of(2) {
            return Err(Error::op(
                "view_as_complex",
                format!(
                    "Tensor must have a storage_offset divisible by 2 (offset {})",
                    self.offset
                ),
            ));
        }
        Ok(Tensor {
            dtype,
            sizes: self.sizes[..r - 1].to_vec(),
            strides: self.strides[..r - 1].iter().map(|s| s / 2).collect(),
            offset: self.offset / 2,
            data: self.data.clone(),
        })
    }
}

fn view_as_complex(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    one(t.view_as_complex().map_err(|e| ctx.err(e))?)
}

fn view_as_real(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    check_stored(ctx, &t, "the input")?;
    one(t.view_as_real().map_err(|e| ctx.err(e))?)
}

/// `real`: the real parts as a view (a real tensor is returned as is).
fn real(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    part(ctx, 0)
}

/// `imag`: the imaginary parts as a view (torch refuses real tensors).
fn imag(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    part(ctx, 1)
}

fn part(ctx: &mut OpCtx, which: usize) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    check_stored(ctx, &t, "the input")?;
    if !t.dtype.is_complex() {
        if which == 1 {
            return Err(ctx.err("imag is not implemented for tensors with non-complex dtypes."));
        }
        return one(t);
    }
    let v = t.view_as_real()?;
    let r = v.rank();
    Ok(vec![RValue::Tensor(v.view_with(
        v.sizes[..r - 1].to_vec(),
        v.strides[..r - 1].to_vec(),
        v.offset + which,
    ))])
}

/// `complex(real, imag)`: broadcast, both float32 or both float64.
fn complex(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (re, im) = (ctx.tensor("real")?, ctx.tensor("imag")?);
    make_complex(ctx, &re, &im, C128::new)
}

/// `polar(abs, angle)`: `abs * (cos(angle) + i sin(angle))`.
fn polar(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (r, th) = (ctx.tensor("abs")?, ctx.tensor("angle")?);
    make_complex(ctx, &r, &th, C128::polar)
}

fn make_complex(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(f64, f64) -> C128,
) -> Result<Vec<RValue>> {
    if a.dtype != b.dtype || !matches!(a.dtype, DType::F32 | DType::F64) {
        return Err(ctx.err(format!(
            "Expected both inputs to be Float or Double tensors of the same dtype, got {} and {}",
            a.dtype, b.dtype
        )));
    }
    let sizes = crate::cpu::broadcast_shapes(&a.sizes, &b.sizes).ok_or_else(|| {
        ctx.err(format!(
            "shapes {:?} and {:?} cannot be broadcast together",
            a.sizes, b.sizes
        ))
    })?;
    let x = a.expand_to(&sizes)?.to_vec::<f64>();
    let y = b.expand_to(&sizes)?.to_vec::<f64>();
    let v = x.into_iter().zip(y).map(|(x, y)| f(x, y)).collect();
    one(complex_tensor(
        crate::cpu::complex::complex_dtype(a.dtype),
        v,
        &sizes,
    )?)
}

/// `isreal`: true where the imaginary part is 0 (everywhere for real tensors).
fn isreal(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    check_stored(ctx, &t, "the input")?;
    let v: Vec<bool> = if t.dtype.is_complex() {
        t.to_vec::<C128>().iter().map(|c| c.im == 0.0).collect()
    } else {
        vec![true; t.numel()]
    };
    one(Tensor::from_vec(v, &t.sizes))
}

/// `conj`, `_conj`, `conj_physical`: negated imaginary parts (real tensors as they are).
fn conj(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    check_stored(ctx, &t, "the input")?;
    if !t.dtype.is_complex() {
        return one(t);
    }
    let v = t.to_vec::<C128>().into_iter().map(C128::conj).collect();
    one(complex_tensor(t.dtype, v, &t.sizes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_share_storage_and_check_their_layout() {
        let x = Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[3, 2, 2]);
        let z = x.view_as_complex().unwrap();
        assert_eq!((z.dtype, z.sizes.clone()), (DType::Complex64, vec![3, 2]));
        assert_eq!(z.to_vec::<C128>()[3], C128::new(6.0, 7.0));
        // Writes through the complex view reach the real tensor.
        z.copy_from(&Tensor::full(DType::Complex64, &[3, 2], 1.0).unwrap())
            .unwrap();
        assert_eq!(x.to_vec::<f32>()[..4], [1.0, 0.0, 1.0, 0.0]);
        let r = z.view_as_real().unwrap();
        assert_eq!(
            (r.sizes.clone(), r.strides.clone()),
            (vec![3, 2, 2], vec![4, 2, 1])
        );
        // Layouts torch refuses are errors, not panics.
        let odd = x.view_with(vec![2, 2], vec![2, 1], 1);
        assert!(odd.view_as_complex().is_err());
        let last3 = Tensor::from_vec(vec![0f32; 6], &[2, 3]);
        assert!(last3.view_as_complex().is_err());
        assert!(Tensor::scalar(1f32).view_as_complex().is_err());
        assert!(x.view_as_real().is_err());
    }
}
