//! The CPU tensor: a strided view of shared, typed, mutable storage.
//!
//! Views (`view`, `permute`, `slice`, `expand`...) share the storage and differ in sizes,
//! strides and offset, as in torch, so in-place ops of the training IR write through to the
//! base tensor. Most kernels read their inputs as contiguous vectors of the compute type
//! ([`Tensor::to_vec`]) and build a fresh contiguous output.

use super::elem::{cast, Data, Elem};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{checked_numel, contiguous_strides, HostTensor};
use crate::with_dtype;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[derive(Clone, Debug)]
pub struct Tensor {
    pub dtype: DType,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
    pub data: Arc<RwLock<Data>>,
}

fn unsupported(dtype: DType) -> Error {
    let hint = if dtype == DType::ComplexHalf {
        " (complex32 / chalf: use complex64 in the model, `.to(torch.complex64)`)"
    } else {
        ""
    };
    Error::op(
        "cpu",
        format!("dtype {dtype} is not supported by the CPU backend{hint}"),
    )
}

impl Tensor {
    /// A contiguous tensor owning `v`.
    pub fn from_vec<T: Elem>(v: Vec<T>, sizes: &[usize]) -> Tensor {
        debug_assert_eq!(v.len(), sizes.iter().product::<usize>());
        Tensor {
            dtype: T::DTYPE,
            sizes: sizes.to_vec(),
            strides: contiguous_strides(sizes),
            offset: 0,
            data: Arc::new(RwLock::new(T::wrap(v))),
        }
    }
    pub fn from_data(data: Data, sizes: &[usize]) -> Tensor {
        Tensor {
            dtype: data.dtype(),
            sizes: sizes.to_vec(),
            strides: contiguous_strides(sizes),
            offset: 0,
            data: Arc::new(RwLock::new(data)),
        }
    }
    pub fn scalar<T: Elem>(v: T) -> Tensor {
        Tensor::from_vec(vec![v], &[])
    }
    pub fn zeros(dtype: DType, sizes: &[usize]) -> Result<Tensor> {
        let n = checked_numel(sizes)
            .ok_or_else(|| Error::op("cpu", format!("sizes {sizes:?} overflow")))?;
        let d = Data::zeros(dtype, n).ok_or_else(|| unsupported(dtype))?;
        Ok(Tensor::from_data(d, sizes))
    }
    /// A tensor filled with `value` (converted with torch's casting rules).
    pub fn full(dtype: DType, sizes: &[usize], value: f64) -> Result<Tensor> {
        let n = checked_numel(sizes)
            .ok_or_else(|| Error::op("cpu", format!("sizes {sizes:?} overflow")))?;
        with_dtype!(dtype, T => Ok(Tensor::from_vec(vec![cast::<f64, T>(value); n], sizes)), else Err(unsupported(dtype)))
    }

    pub fn numel(&self) -> usize {
        self.sizes.iter().product()
    }
    pub fn rank(&self) -> usize {
        self.sizes.len()
    }
    pub fn read(&self) -> RwLockReadGuard<'_, Data> {
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }
    pub fn write(&self) -> RwLockWriteGuard<'_, Data> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for i in (0..self.sizes.len()).rev() {
            if self.sizes[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected *= self.sizes[i];
        }
        true
    }
    /// Elements of this tensor's dtype its storage holds (a real view of complex storage
    /// counts its parts, a complex view of real storage its pairs).
    pub fn storage_len(&self) -> usize {
        let d = self.read();
        with_dtype!(self.dtype, T => T::slice(&d).map_or(0, |s| s.len()), else d.len())
    }
    /// True when the elements are exactly `storage[offset..offset+numel]` in order.
    pub fn is_dense(&self) -> bool {
        self.is_contiguous()
    }

    /// Storage offsets of every element in row-major order.
    pub fn offsets(&self) -> Vec<usize> {
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return out;
        }
        if self.is_contiguous() {
            out.extend(self.offset..self.offset + n);
            return out;
        }
        let rank = self.sizes.len();
        // Innermost dimension as a run for speed.
        let (inner, inner_stride) = (self.sizes[rank - 1], self.strides[rank - 1]);
        let mut idx = vec![0usize; rank.saturating_sub(1)];
        let outer = n / inner.max(1);
        for _ in 0..outer {
            let base: usize = self.offset
                + idx
                    .iter()
                    .zip(&self.strides)
                    .map(|(i, s)| i * s)
                    .sum::<usize>();
            out.extend((0..inner).map(|j| base + j * inner_stride));
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                if idx[d] < self.sizes[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }

    /// The elements in row-major order, converted to `T`.
    pub fn to_vec<T: Elem>(&self) -> Vec<T> {
        let d = self.read();
        let n = self.numel();
        with_dtype!(self.dtype, S => {
            let src = S::slice(&d).expect("storage dtype matches tensor dtype");
            if self.is_contiguous() {
                let s = &src[self.offset..self.offset + n];
                if S::DTYPE == T::DTYPE {
                    // Same type: a plain copy.
                    let s: &[T] = unsafe { std::slice::from_raw_parts(s.as_ptr() as *const T, s.len()) };
                    s.to_vec()
                } else {
                    s.iter().map(|&x| cast::<S, T>(x)).collect()
                }
            } else {
                // Row by row of the innermost dim: whole slices when it is contiguous.
                let rank = self.sizes.len();
                let (inner, is) = (self.sizes[rank - 1], self.strides[rank - 1]);
                let mut out: Vec<T> = Vec::with_capacity(n);
                let mut idx = vec![0usize; rank - 1];
                let mut base = self.offset;
                for _ in 0..n / inner.max(1) {
                    if is == 1 {
                        let row = &src[base..base + inner];
                        if S::DTYPE == T::DTYPE {
                            // SAFETY: S and T are the same type (same dtype).
                            out.extend_from_slice(unsafe { std::slice::from_raw_parts(row.as_ptr() as *const T, inner) });
                        } else {
                            out.extend(row.iter().map(|&x| cast::<S, T>(x)));
                        }
                    } else {
                        out.extend((0..inner).map(|j| cast::<S, T>(src[base + j * is])));
                    }
                    // The next row's start: odometer over the outer dims.
                    for d in (0..rank - 1).rev() {
                        idx[d] += 1;
                        base += self.strides[d];
                        if idx[d] < self.sizes[d] {
                            break;
                        }
                        base -= self.strides[d] * self.sizes[d];
                        idx[d] = 0;
                    }
                }
                out
            }
        }, else Vec::new())
    }

    /// A contiguous copy (or `self` when already contiguous and starting at 0 of its storage).
    pub fn contiguous(&self) -> Tensor {
        if self.is_contiguous() && self.offset == 0 && self.read().len() == self.numel() {
            return self.clone();
        }
        self.to_dtype(self.dtype).unwrap_or_else(|_| self.clone())
    }

    /// A new contiguous tensor of `dtype` (always a copy).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        with_dtype!(dtype, T => Ok(Tensor::from_vec(self.to_vec::<T>(), &self.sizes)), else Err(unsupported(dtype)))
    }

    /// A view sharing storage.
    pub fn view_with(&self, sizes: Vec<usize>, strides: Vec<usize>, offset: usize) -> Tensor {
        Tensor {
            dtype: self.dtype,
            sizes,
            strides,
            offset,
            data: self.data.clone(),
        }
    }

    /// First element as f64 (for `item()`, scalars, predicates).
    pub fn item_f64(&self) -> f64 {
        self.to_vec::<f64>().first().copied().unwrap_or(0.0)
    }

    /// Copy `src` (broadcast already applied, same numel) into this view, converting dtype.
    pub fn copy_from(&self, src: &Tensor) -> Result<()> {
        // The same view of the same storage (a buffer updated in place): nothing to copy.
        if Arc::ptr_eq(&self.data, &src.data)
            && self.sizes == src.sizes
            && self.strides == src.strides
            && self.offset == src.offset
            && self.dtype == src.dtype
        {
            return Ok(());
        }
        if src.numel() != self.numel() {
            return Err(Error::op(
                "copy_",
                format!("cannot copy {} elements into {}", src.numel(), self.numel()),
            ));
        }
        let offs = self.offsets();
        with_dtype!(self.dtype, T => {
            let vals = src.to_vec::<T>();
            let mut d = self.write();
            let dst = T::slice_mut(&mut d).expect("storage dtype matches tensor dtype");
            for (o, v) in offs.into_iter().zip(vals) {
                dst[o] = v;
            }
            Ok(())
        }, else Err(unsupported(self.dtype)))
    }

    /// From a loaded archive tensor (copies into typed storage; keeps sizes/strides/offset).
    pub fn from_host(t: &HostTensor) -> Result<Tensor> {
        let data = match read_words(t)? {
            Some(d) => d,
            None => {
                let bytes = t.storage.load()?;
                Data::from_le_bytes(t.dtype, &bytes).ok_or_else(|| unsupported(t.dtype))?
            }
        };
        Ok(Tensor {
            dtype: t.dtype,
            sizes: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.storage_offset,
            data: Arc::new(RwLock::new(data)),
        })
    }

    /// To a contiguous host tensor (little-endian bytes).
    pub fn to_host(&self, name: &str) -> Result<HostTensor> {
        let c = self.to_dtype(self.dtype)?;
        let bytes = c.read().to_le_bytes();
        HostTensor::from_bytes(name, self.dtype, self.sizes.clone(), bytes)
    }
}

/// A deferred f32 or int32 storage read from the archive straight into its words (on a
/// little-endian host the file's bytes are the words), with no byte copy beside them: a
/// streamed weight then needs its own size in memory, not twice that. `None` for the others.
fn read_words(t: &HostTensor) -> Result<Option<Data>> {
    let Some(e) = t.storage.deferred_entry() else {
        return Ok(None);
    };
    let words = usize::try_from(e.len / 4).ok().filter(|_| e.len % 4 == 0);
    let (Some(n), true) = (words, cfg!(target_endian = "little")) else {
        return Ok(None);
    };
    Ok(Some(match t.dtype {
        DType::F32 => {
            let mut v = vec![0f32; n];
            e.read_at(0, bytemuck::cast_slice_mut(&mut v))?;
            Data::F32(v)
        }
        DType::I32 => {
            let mut v = vec![0i32; n];
            e.read_at(0, bytemuck::cast_slice_mut(&mut v))?;
            Data::I32(v)
        }
        _ => return Ok(None),
    }))
}

/// The broadcast shape of two shapes (numpy/torch rules).
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let y = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

impl Tensor {
    /// A broadcast view to `sizes` (stride 0 on expanded dims).
    pub fn expand_to(&self, sizes: &[usize]) -> Result<Tensor> {
        let n = sizes.len();
        if self.rank() > n {
            return Err(Error::op(
                "expand",
                format!("cannot expand {:?} to {:?}", self.sizes, sizes),
            ));
        }
        let lead = n - self.rank();
        let mut strides = vec![0; n];
        for i in 0..n {
            if i < lead {
                continue;
            }
            let (s, st) = (self.sizes[i - lead], self.strides[i - lead]);
            if s == sizes[i] {
                strides[i] = st;
            } else if s == 1 {
                strides[i] = 0;
            } else {
                return Err(Error::op(
                    "expand",
                    format!("cannot expand {:?} to {:?}", self.sizes, sizes),
                ));
            }
        }
        Ok(self.view_with(sizes.to_vec(), strides, self.offset))
    }
}
