//! DLPack: hand tensors to and take them from other frameworks (PyTorch, CuPy, JAX) through
//! the C ABI they share (issue 20; tests in tests/dlpack.rs), on the CPU on every target; CUDA device tensors with the
//! `cuda` feature ([`cuda`]), which copies them through host memory (the no-copy path over
//! Vulkan external memory is not built yet).
//!
//! Ownership follows dlpack.h: whoever holds a managed tensor calls its deleter exactly once.
//! [`OwnedDLPack`] is that holder in Rust: dropping it calls the deleter, [`OwnedDLPack::into_raw`]
//! hands the duty to C. An export keeps the tensor's storage alive (no copy) until its deleter
//! runs; the storage is immutable, so the consumer must not write through `data` (the v1.0
//! form says so with [`ffi::DLPACK_FLAG_BITMASK_READ_ONLY`]). An import copies the bytes its
//! view spans into a new storage, so the producer's memory can go as soon as the holder drops.

#[cfg(all(feature = "cuda", not(target_arch = "wasm32")))]
pub mod cuda;
pub mod ffi;
#[cfg(all(feature = "cuda", target_os = "linux"))]
pub mod interop;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::{checked_numel, HostTensor, Storage};
use ffi::*;
use std::borrow::Cow;
use std::ptr::NonNull;

/// The most dimensions an imported tensor may have (torch allows 64 too).
pub const MAX_NDIM: i32 = 64;

/// The DLPack type of a pt2web dtype: every [`DType`] has one (the float8 codes are v1.1's).
pub fn dl_dtype(dtype: DType) -> DLDataType {
    let code = match dtype {
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => K_DL_INT,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => K_DL_UINT,
        DType::F16 | DType::F32 | DType::F64 => K_DL_FLOAT,
        DType::BF16 => K_DL_BFLOAT,
        DType::ComplexHalf | DType::Complex64 | DType::Complex128 => K_DL_COMPLEX,
        DType::Bool => K_DL_BOOL,
        DType::F8E4M3FN => K_DL_FLOAT8_E4M3FN,
        DType::F8E4M3FNUZ => K_DL_FLOAT8_E4M3FNUZ,
        DType::F8E5M2 => K_DL_FLOAT8_E5M2,
        DType::F8E5M2FNUZ => K_DL_FLOAT8_E5M2FNUZ,
        DType::F8E8M0FNU => K_DL_FLOAT8_E8M0FNU,
    };
    DLDataType {
        code,
        bits: (dtype.size() * 8) as u8,
        lanes: 1,
    }
}

/// The pt2web dtype of a DLPack type; an error naming `dtype.lanes`, `dtype.code` or
/// `dtype.bits` for what pt2web does not hold (vector lanes, opaque handles, float4…).
pub fn dtype_of(dl: DLDataType) -> Result<DType> {
    if dl.lanes != 1 {
        return Err(Error::dlpack(
            "dtype.lanes",
            format!(
                "{} lanes: pt2web holds scalar elements only (lanes 1)",
                dl.lanes
            ),
        ));
    }
    DType::ALL
        .into_iter()
        .find(|&d| dl_dtype(d) == dl)
        .ok_or_else(|| {
            let field = if DType::ALL.iter().any(|&d| dl_dtype(d).code == dl.code) {
                "dtype.bits"
            } else {
                "dtype.code"
            };
            Error::dlpack(
                field,
                format!(
                    "unsupported type (code {}, {} bits): pt2web takes int/uint 8-64, float 16-64, bfloat16, complex 32-128, bool and the float8 kinds",
                    dl.code, dl.bits
                ),
            )
        })
}

/// A DLPack managed tensor in either form: what [`OwnedDLPack`] needs to read and free it.
pub trait ManagedTensor: Sized {
    fn dl_tensor(&self) -> &DLTensor;
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    /// Call the producer's deleter on `ptr` (a no-op when it has none).
    ///
    /// # Safety
    /// `ptr` points at a live managed tensor whose deleter was not called yet.
    unsafe fn delete(ptr: *mut Self) {
        // SAFETY: the caller's contract; the deleter is the producer's, called once.
        unsafe {
            if let Some(d) = (*ptr).deleter() {
                d(ptr)
            }
        }
    }
    /// The managed tensor of a pt2web export; `copied` when the bytes were read for it.
    fn exported(
        dl_tensor: DLTensor,
        deleter: unsafe extern "C" fn(*mut Self),
        copied: bool,
    ) -> Self;
}

impl ManagedTensor for DLManagedTensor {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn exported(dl_tensor: DLTensor, deleter: unsafe extern "C" fn(*mut Self), _: bool) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        }
    }
}

impl ManagedTensor for DLManagedTensorVersioned {
    fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn exported(
        dl_tensor: DLTensor,
        deleter: unsafe extern "C" fn(*mut Self),
        copied: bool,
    ) -> Self {
        let copied_flag = if copied {
            DLPACK_FLAG_BITMASK_IS_COPIED
        } else {
            0
        };
        DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
            flags: DLPACK_FLAG_BITMASK_READ_ONLY | copied_flag,
            dl_tensor,
        }
    }
}

/// A managed tensor this side holds: dropping it calls the deleter once.
pub struct OwnedDLPack<M: ManagedTensor> {
    ptr: NonNull<M>,
}

impl<M: ManagedTensor> OwnedDLPack<M> {
    /// Take ownership of a managed tensor from C (its deleter will be called on drop).
    ///
    /// # Safety
    /// `ptr` is null or points at a live managed tensor that nobody else will delete, whose
    /// `data`, `shape` and `strides` are valid as dlpack.h says, until the deleter runs.
    pub unsafe fn from_raw(ptr: *mut M) -> Result<Self> {
        NonNull::new(ptr)
            .map(|ptr| OwnedDLPack { ptr })
            .ok_or_else(|| Error::dlpack("managed tensor", "null pointer"))
    }
    /// Give the managed tensor to C: the receiver calls its deleter.
    pub fn into_raw(self) -> *mut M {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }
    pub fn dl_tensor(&self) -> &DLTensor {
        // SAFETY: live until drop (from_raw's contract, or our own export).
        unsafe { self.ptr.as_ref() }.dl_tensor()
    }
}

impl<M: ManagedTensor> Drop for OwnedDLPack<M> {
    fn drop(&mut self) {
        // SAFETY: we own it and drop runs once.
        unsafe { M::delete(self.ptr.as_ptr()) }
    }
}

/// The pre-1.0 form (`torch.utils.dlpack`'s capsule "dltensor").
pub type DLPack = OwnedDLPack<DLManagedTensor>;
/// The v1.0 form (capsule "dltensor_versioned").
pub type DLPackVersioned = OwnedDLPack<DLManagedTensorVersioned>;

/// What an export keeps alive until its deleter runs: the shape and strides it points at
/// and `K`, what holds the data (a CPU storage; for a GPU tensor, its CUDA mapping and
/// buffer). `managed` comes first so the deleter finds the whole allocation from the pointer
/// it is given.
#[repr(C)]
struct Export<M, K> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    _keep: K,
}

unsafe extern "C" fn delete_export<M, K>(ptr: *mut M) {
    if !ptr.is_null() {
        // SAFETY: `ptr` is the first field of a boxed Export<M, K> made by `export_raw`.
        drop(unsafe { Box::from_raw(ptr.cast::<Export<M, K>>()) });
    }
}

/// A managed tensor over `data` (on `device`) that keeps `keep` alive until its deleter.
#[allow(clippy::too_many_arguments)]
pub(crate) fn export_raw<M: ManagedTensor, K>(
    data: *mut std::ffi::c_void,
    device: DLDevice,
    dtype: DType,
    sizes: &[usize],
    strides: &[usize],
    byte_offset: u64,
    copied: bool,
    keep: K,
) -> Result<OwnedDLPack<M>> {
    let mut shape = dims_i64("shape", sizes)?;
    let mut strides = dims_i64("strides", strides)?;
    let dl_tensor = DLTensor {
        data,
        device,
        // Callers hold sizes to MAX_NDIM, far below i32::MAX.
        ndim: i32::try_from(shape.len()).map_err(|_| Error::dlpack("ndim", "too many dims"))?,
        dtype: dl_dtype(dtype),
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset,
    };
    let boxed = Box::new(Export {
        managed: M::exported(dl_tensor, delete_export::<M, K>, copied),
        shape,
        strides,
        _keep: keep,
    });
    // The Vecs' heap buffers do not move with the Box: shape/strides stay valid.
    let ptr = Box::into_raw(boxed).cast::<M>();
    // SAFETY: just allocated; our deleter frees it.
    unsafe { OwnedDLPack::from_raw(ptr) }
}

/// Export a CPU tensor (no copy; a deferred storage is read first) in the pre-1.0 form.
pub fn to_dlpack(t: &HostTensor) -> Result<DLPack> {
    export(t)
}

/// Export a CPU tensor in the v1.0 form (flagged read-only).
pub fn to_dlpack_versioned(t: &HostTensor) -> Result<DLPackVersioned> {
    export(t)
}

fn dims_i64(what: &str, v: &[usize]) -> Result<Vec<i64>> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            i64::try_from(x)
                .map_err(|_| Error::dlpack(format!("{what}[{i}]"), "does not fit int64"))
        })
        .collect()
}

fn export<M: ManagedTensor>(t: &HostTensor) -> Result<OwnedDLPack<M>> {
    t.check_bounds("dlpack export")?;
    let (storage, copied) = match t.storage.load().map_err(|e| Error::dlpack("data", e))? {
        Cow::Borrowed(_) => (t.storage.clone(), false),
        Cow::Owned(bytes) => (Storage::new(bytes), true),
    };
    let byte_offset = (t.storage_offset as u64).saturating_mul(t.dtype.size() as u64);
    let data = storage.bytes().as_ptr().cast_mut().cast();
    let cpu = DLDevice {
        device_type: K_DL_CPU,
        device_id: 0,
    };
    export_raw(
        data,
        cpu,
        t.dtype,
        &t.sizes,
        &t.strides,
        byte_offset,
        copied,
        storage,
    )
}

/// A view of foreign memory read from a `DLTensor`, checked field by field.
pub(crate) struct ForeignView {
    pub dtype: DType,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    /// Bytes from `data + byte_offset` that the view addresses.
    pub span_bytes: usize,
}

/// Read and check a `DLTensor`'s shape, strides and type (not its device).
///
/// # Safety
/// `shape` and `strides` (when not null) point at `ndim` int64s, as dlpack.h says.
pub(crate) unsafe fn foreign_view(t: &DLTensor) -> Result<ForeignView> {
    let dtype = dtype_of(t.dtype)?;
    if !(0..=MAX_NDIM).contains(&t.ndim) {
        return Err(Error::dlpack(
            "ndim",
            format!("{} dimensions: pt2web takes 0 to {MAX_NDIM}", t.ndim),
        ));
    }
    let ndim = t.ndim as usize;
    let read = |p: *mut i64, what: &str| -> Result<Option<Vec<usize>>> {
        if p.is_null() {
            return Ok(None);
        }
        // SAFETY: the caller's contract; ndim is checked above.
        let raw = unsafe { std::slice::from_raw_parts(p, ndim) };
        raw.iter()
            .enumerate()
            .map(|(i, &x)| {
                usize::try_from(x).map_err(|_| {
                    Error::dlpack(format!("{what}[{i}]"), format!("{x}: must not be negative"))
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    };
    let sizes = match read(t.shape, "shape")? {
        Some(s) => s,
        None if ndim == 0 => Vec::new(),
        None => return Err(Error::dlpack("shape", "null pointer")),
    };
    // Null strides: compact row-major (allowed by dlpack.h).
    let strides =
        read(t.strides, "strides")?.unwrap_or_else(|| crate::tensor::contiguous_strides(&sizes));
    let numel = checked_numel(&sizes)
        .ok_or_else(|| Error::dlpack("shape", format!("element count of {sizes:?} overflows")))?;
    let span_bytes = if numel == 0 {
        0
    } else {
        let last = sizes
            .iter()
            .zip(&strides)
            .try_fold(0usize, |acc, (&s, &st)| {
                (s - 1).checked_mul(st).and_then(|x| acc.checked_add(x))
            });
        last.and_then(|l| l.checked_add(1))
            .and_then(|n| n.checked_mul(dtype.size()))
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| Error::dlpack("strides", "the addressed span overflows"))?
    };
    if span_bytes > 0 && t.data.is_null() {
        return Err(Error::dlpack("data", "null pointer for a non-empty tensor"));
    }
    Ok(ForeignView {
        dtype,
        sizes,
        strides,
        span_bytes,
    })
}

/// Copy a DLPack tensor into a CPU tensor: the bytes its view spans, with its sizes and
/// strides. CPU (and CUDA pinned host) memory everywhere; CUDA device memory with the `cuda`
/// feature. Anything else is an error naming `device.device_type`.
pub fn from_dlpack<M: ManagedTensor>(t: &OwnedDLPack<M>) -> Result<HostTensor> {
    let dl = t.dl_tensor();
    // SAFETY: OwnedDLPack's contract covers shape/strides.
    let view = unsafe { foreign_view(dl) }?;
    let offset = usize::try_from(dl.byte_offset)
        .map_err(|_| Error::dlpack("byte_offset", "does not fit this target's pointers"))?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(view.span_bytes).map_err(|_| {
        Error::dlpack(
            "shape",
            format!("cannot allocate {} bytes", view.span_bytes),
        )
    })?;
    if view.span_bytes > 0 {
        match dl.device.device_type {
            K_DL_CPU | K_DL_CUDA_HOST => {
                // SAFETY: the producer guarantees data+byte_offset addresses the view.
                let src = unsafe {
                    std::slice::from_raw_parts(
                        dl.data.cast::<u8>().cast_const().wrapping_add(offset),
                        view.span_bytes,
                    )
                };
                bytes.extend_from_slice(src);
            }
            #[cfg(all(feature = "cuda", not(target_arch = "wasm32")))]
            K_DL_CUDA | K_DL_CUDA_MANAGED => {
                bytes.resize(view.span_bytes, 0);
                let src = (dl.data as u64).wrapping_add(dl.byte_offset);
                cuda::driver()?.copy_to_host(dl.device.device_id, src, &mut bytes)?;
            }
            other => return Err(unsupported_device(other)),
        }
    }
    HostTensor::new(
        "dlpack import",
        view.dtype,
        view.sizes,
        view.strides,
        0,
        Storage::new(bytes),
    )
}

fn unsupported_device(device_type: DLDeviceType) -> Error {
    let hint = match device_type {
        K_DL_CUDA | K_DL_CUDA_MANAGED if cfg!(feature = "cuda") => {
            "CUDA tensors are read with libcuda on desktop targets only"
        }
        K_DL_CUDA | K_DL_CUDA_MANAGED => "CUDA tensors need pt2web built with the `cuda` feature",
        _ => "pt2web takes kDLCPU (1) and kDLCUDAHost (3), and kDLCUDA (2) with the `cuda` feature",
    };
    Error::dlpack(
        "device.device_type",
        format!("device type {device_type}: {hint}"),
    )
}
