//! torch's type promotion (`torch.result_type`): categories bool < integer < floating <
//! complex; tensors
//! with dimensions decide within a category, zero-dim tensors only when they raise the
//! category, and Python scalars only when they raise it (taking the default dtype).

use crate::dtype::DType;

/// One operand of an elementwise op.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// A tensor; `zero_dim` for 0-d tensors.
    Tensor {
        dtype: DType,
        zero_dim: bool,
    },
    /// A Python bool/int/float argument.
    Bool,
    Int,
    Float,
}

fn category(d: DType) -> u8 {
    if d == DType::Bool {
        0
    } else if d.is_complex() {
        3
    } else if d.is_float() {
        2
    } else {
        1
    }
}

/// Promote two dtypes (torch.promote_types).
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    if a.is_complex() || b.is_complex() {
        // The complex type whose parts are the promoted float parts (complex64 with
        // float64 is complex128; with an integer, complex64).
        let part = |d: DType| {
            if d.is_complex() {
                Some(super::complex::real_dtype(d))
            } else if d.is_float() {
                Some(d)
            } else {
                None
            }
        };
        let p = match (part(a), part(b)) {
            (Some(x), Some(y)) => promote_types(x, y),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => DType::F32,
        };
        return super::complex::complex_dtype(p);
    }
    match (category(a), category(b)) {
        (0, _) => b,
        (_, 0) => a,
        (1, 2) => b,
        (2, 1) => a,
        (1, 1) => {
            let rank = |d: DType| match d {
                U8 => 0,
                I8 => 1,
                I16 => 2,
                I32 => 3,
                I64 => 4,
                _ => 4,
            };
            // u8 with a signed type needs the next wider signed type.
            match (a, b) {
                (U8, I8) | (I8, U8) => I16,
                _ => {
                    if rank(a) >= rank(b) {
                        a
                    } else {
                        b
                    }
                }
            }
        }
        _ => match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ => {
                let rank = |d: DType| match d {
                    F16 | BF16 => 0,
                    F32 => 1,
                    F64 => 2,
                    _ => 1,
                };
                if rank(a) >= rank(b) {
                    a
                } else {
                    b
                }
            }
        },
    }
}

/// `torch.result_type` over operands, with `default_float` for float scalars (float32).
pub fn result_type(ops: &[Operand]) -> DType {
    let mut dim: Option<DType> = None;
    let mut zero: Option<DType> = None;
    let mut scalar: Option<DType> = None;
    let merge =
        |slot: &mut Option<DType>, d: DType| *slot = Some(slot.map_or(d, |s| promote_types(s, d)));
    for o in ops {
        match *o {
            Operand::Tensor {
                dtype,
                zero_dim: false,
            } => merge(&mut dim, dtype),
            Operand::Tensor {
                dtype,
                zero_dim: true,
            } => merge(&mut zero, dtype),
            Operand::Bool => merge(&mut scalar, DType::Bool),
            Operand::Int => merge(&mut scalar, DType::I64),
            Operand::Float => merge(&mut scalar, DType::F32),
        }
    }
    let mut out = dim.or(zero).or(scalar).unwrap_or(DType::F32);
    for cand in [zero, scalar].into_iter().flatten() {
        if category(cand) > category(out) {
            // A higher category from a lower-priority operand: its own dtype when it is a
            // 0-d tensor, the default dtype of the category for a scalar.
            out = if category(cand) == 3 && category(out) == 2 {
                // A complex 0-d tensor over float tensors keeps their precision.
                super::complex::complex_dtype(out)
            } else if Some(cand) == zero {
                cand
            } else if category(cand) == 2 {
                DType::F32
            } else {
                DType::I64
            };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;
    fn t(d: DType) -> Operand {
        Operand::Tensor {
            dtype: d,
            zero_dim: false,
        }
    }
    fn z(d: DType) -> Operand {
        Operand::Tensor {
            dtype: d,
            zero_dim: true,
        }
    }
    // Cases from torch's type promotion docs.
    #[test]
    fn torch_examples() {
        assert_eq!(result_type(&[t(I32), Operand::Int]), I32);
        assert_eq!(result_type(&[t(I32), Operand::Float]), F32);
        assert_eq!(result_type(&[t(U8), t(I8)]), I16);
        assert_eq!(result_type(&[t(I64), z(F64)]), F64);
        assert_eq!(result_type(&[t(F16), z(F64)]), F16);
        assert_eq!(result_type(&[t(F16), t(BF16)]), F32);
        assert_eq!(result_type(&[t(Bool), Operand::Int]), I64);
        assert_eq!(result_type(&[t(Bool), t(Bool)]), Bool);
        assert_eq!(result_type(&[t(I32), z(I64)]), I32);
        assert_eq!(result_type(&[z(I32), z(I64)]), I64);
        assert_eq!(promote_types(Complex64, F64), Complex128);
        assert_eq!(promote_types(I64, Complex64), Complex64);
        assert_eq!(promote_types(Complex128, F32), Complex128);
        assert_eq!(result_type(&[t(F64), z(Complex64)]), Complex128);
        assert_eq!(result_type(&[t(Complex64), Operand::Float]), Complex64);
        assert_eq!(result_type(&[t(I32), z(Complex128)]), Complex128);
    }
}
