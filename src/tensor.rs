//! Host tensors as loaded from an archive: a shared untyped storage plus a strided view.
//!
//! Tensors that torch saved from one storage (tied weights, views of a buffer) keep sharing
//! one [`Storage`] after loading, each with its own sizes, strides and storage offset, exactly
//! as `torch.as_strided(storage, size, stride, offset)` would rebuild them.

use crate::archive::source::EntryBytes;
use crate::dtype::DType;
use crate::error::{Error, Result};
use std::sync::Arc;

/// An untyped, immutable, reference-counted byte buffer (torch's `UntypedStorage`).
///
/// A storage can be *released* ([`Storage::released`]): its bytes are gone (a session holds
/// the tensor in its own form, decoded on the CPU or uploaded to the GPU) but its length and
/// its sharing stay, for the memory estimate and for tensors that shared it.
///
/// A storage can be *deferred* ([`Storage::deferred`]): its bytes are still in the archive
/// (a file) and [`Storage::load`] reads them, so that a large archive's weights go to their
/// session one record at a time instead of all sitting in memory first.
#[derive(Clone)]
pub struct Storage {
    bytes: Arc<Vec<u8>>,
    len: usize,
    deferred: Option<Arc<EntryBytes>>,
}

impl Storage {
    pub fn new(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Storage {
            bytes: Arc::new(bytes),
            len,
            deferred: None,
        }
    }
    /// A storage of `len` bytes whose contents were dropped (see the type's doc).
    pub fn released(len: usize) -> Self {
        Storage {
            bytes: Arc::new(Vec::new()),
            len,
            deferred: None,
        }
    }
    /// A storage whose bytes stay in the archive until [`Storage::load`] (see the type's doc).
    /// Its length saturates at `usize::MAX` on a 32-bit target (loading it then fails).
    pub fn deferred(entry: Arc<EntryBytes>) -> Self {
        Storage {
            bytes: Arc::new(Vec::new()),
            len: usize::try_from(entry.len).unwrap_or(usize::MAX),
            deferred: Some(entry),
        }
    }
    /// The bytes held in memory; empty for a released or a deferred storage (use
    /// [`Storage::load`] to read those too).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The bytes, read from the archive when the storage is deferred; an error when they
    /// were released or cannot be read.
    pub fn load(&self) -> Result<std::borrow::Cow<'_, [u8]>> {
        match &self.deferred {
            Some(e) => Ok(std::borrow::Cow::Owned(e.read_all()?)),
            None if self.is_released() => Err(Error::Verify(
                "internal: a tensor's storage was released (its session holds it)".into(),
            )),
            None => Ok(std::borrow::Cow::Borrowed(&self.bytes)),
        }
    }
    /// The archive record a deferred storage reads from.
    pub fn deferred_entry(&self) -> Option<&Arc<EntryBytes>> {
        self.deferred.as_ref()
    }
    /// How many storages (clones, and DLPack exports until their deleter runs) hold these bytes.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.bytes)
    }
    /// Whether the bytes were dropped ([`Storage::released`]).
    pub fn is_released(&self) -> bool {
        self.deferred.is_none() && self.bytes.len() != self.len
    }
    /// The length in bytes (also of a released storage).
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// An identity for the allocation (equal for handles that share it).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.bytes) as *const u8 as usize
    }
    /// True when both handles point at the same allocation (shared storage).
    pub fn same(&self, other: &Storage) -> bool {
        Arc::ptr_eq(&self.bytes, &other.bytes)
    }
}

impl PartialEq for Storage {
    fn eq(&self, other: &Storage) -> bool {
        let same_entry = match (&self.deferred, &other.deferred) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        same_entry && self.len == other.len && self.bytes == other.bytes
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.deferred {
            Some(e) => write!(f, "Storage({} bytes in '{}')", self.len, e.entry),
            None => write!(f, "Storage({} bytes)", self.len),
        }
    }
}

/// A strided view of a [`Storage`]. Sizes, strides and the offset are in elements.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: DType,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub storage_offset: usize,
    pub storage: Storage,
    pub requires_grad: bool,
}

/// Row-major (contiguous) strides for `sizes`.
pub fn contiguous_strides(sizes: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; sizes.len()];
    let mut acc = 1usize;
    for i in (0..sizes.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(sizes[i].max(1));
    }
    strides
}

/// Number of elements, or `None` on overflow.
pub fn checked_numel(sizes: &[usize]) -> Option<usize> {
    sizes.iter().try_fold(1usize, |acc, &s| acc.checked_mul(s))
}

impl HostTensor {
    /// Build a view and check that every element it addresses lies inside the storage.
    pub fn new(
        name: &str,
        dtype: DType,
        sizes: Vec<usize>,
        strides: Vec<usize>,
        storage_offset: usize,
        storage: Storage,
    ) -> Result<Self> {
        let t = HostTensor {
            dtype,
            sizes,
            strides,
            storage_offset,
            storage,
            requires_grad: false,
        };
        t.check_bounds(name)?;
        Ok(t)
    }

    /// A contiguous tensor owning `bytes`.
    pub fn from_bytes(name: &str, dtype: DType, sizes: Vec<usize>, bytes: Vec<u8>) -> Result<Self> {
        let strides = contiguous_strides(&sizes);
        HostTensor::new(name, dtype, sizes, strides, 0, Storage::new(bytes))
    }

    pub fn numel(&self) -> usize {
        checked_numel(&self.sizes).unwrap_or(usize::MAX)
    }
    pub fn rank(&self) -> usize {
        self.sizes.len()
    }
    /// Bytes of the view's own elements (what `t.nbytes` reports in torch).
    pub fn nbytes(&self) -> usize {
        self.numel().saturating_mul(self.dtype.size())
    }

    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for i in (0..self.sizes.len()).rev() {
            if self.sizes[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected = expected.saturating_mul(self.sizes[i]);
        }
        true
    }

    /// Check that sizes, strides and the offset address only bytes inside the storage.
    pub fn check_bounds(&self, name: &str) -> Result<()> {
        if self.sizes.len() != self.strides.len() {
            return Err(Error::tensor(
                name,
                format!(
                    "{} sizes but {} strides",
                    self.sizes.len(),
                    self.strides.len()
                ),
            ));
        }
        let numel = checked_numel(&self.sizes).ok_or_else(|| {
            Error::tensor(
                name,
                format!("element count of sizes {:?} overflows", self.sizes),
            )
        })?;
        if numel == 0 {
            return Ok(());
        }
        // Highest element index addressed: offset + sum((size-1)*stride).
        let mut last = self.storage_offset as u128;
        for (&s, &st) in self.sizes.iter().zip(&self.strides) {
            last += (s as u128 - 1) * st as u128;
        }
        let need = (last + 1) * self.dtype.size() as u128;
        if need > self.storage.len() as u128 {
            return Err(Error::tensor(
                name,
                format!(
                    "sizes {:?}, strides {:?}, offset {} of {} need {} bytes but the storage has {}",
                    self.sizes,
                    self.strides,
                    self.storage_offset,
                    self.dtype,
                    need,
                    self.storage.len()
                ),
            ));
        }
        Ok(())
    }

    /// The elements in row-major order as little-endian bytes (copies when strided). The
    /// storage must not be released; a deferred one is read (empty when that read fails).
    pub fn contiguous_bytes(&self) -> Vec<u8> {
        let es = self.dtype.size();
        let n = self.numel();
        let Ok(src) = self.storage.load() else {
            return Vec::new();
        };
        if src.len() != self.storage.len() {
            return Vec::new();
        }
        if self.is_contiguous() {
            let start = self.storage_offset * es;
            return src[start..start + n * es].to_vec();
        }
        let mut out = Vec::with_capacity(n * es);
        let rank = self.sizes.len();
        let mut idx = vec![0usize; rank];
        for _ in 0..n {
            let off: usize = self.storage_offset
                + idx
                    .iter()
                    .zip(&self.strides)
                    .map(|(i, s)| i * s)
                    .sum::<usize>();
            out.extend_from_slice(&src[off * es..off * es + es]);
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < self.sizes[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        let st = Storage::new(vec![0u8; 24]);
        assert!(HostTensor::new("w", DType::F32, vec![2, 3], vec![3, 1], 0, st.clone()).is_ok());
        let e =
            HostTensor::new("w", DType::F32, vec![2, 3], vec![3, 1], 1, st.clone()).unwrap_err();
        assert!(e.to_string().contains("'w'"), "{e}");
        assert!(HostTensor::new(
            "w",
            DType::F32,
            vec![usize::MAX, 3],
            vec![3, 1],
            0,
            st.clone()
        )
        .is_err());
        assert!(HostTensor::new("w", DType::F32, vec![0, 3], vec![3, 1], 100, st).is_ok());
    }

    #[test]
    fn strided_copy() {
        let bytes: Vec<u8> = (0..6u8).collect();
        let t = HostTensor::new(
            "t",
            DType::U8,
            vec![3, 2],
            vec![1, 3],
            0,
            Storage::new(bytes),
        )
        .unwrap();
        assert!(!t.is_contiguous());
        assert_eq!(t.contiguous_bytes(), vec![0, 3, 1, 4, 2, 5]);
    }
}
