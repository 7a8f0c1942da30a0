//! CUDA device tensors for [`super::from_dlpack`] (feature `cuda`): the CUDA driver API loaded
//! at run time (libloading), so building needs no CUDA and a machine without the driver gets
//! an error naming libcuda. Reads go through host memory (`cuMemcpyDtoH`, which waits for
//! the copy); the no-copy path over Vulkan external memory (issue 20) is not built yet.
//!
//! Synchronisation: the producer's stream must have finished writing the tensor (torch's
//! `__dlpack__(stream=...)` or a `torch.cuda.synchronize()` before the legacy `to_dlpack`).

use crate::error::{Error, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;

/// The library names tried, in order.
#[cfg(windows)]
pub const LIBCUDA: &[&str] = &["nvcuda.dll"];
#[cfg(not(windows))]
pub const LIBCUDA: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// The driver entry points pt2web calls (their `_v2` ABI names, as cuda.h maps them).
pub struct CudaDriver {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    primary_ctx_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    ctx_push: unsafe extern "C" fn(CuContext) -> CuResult,
    ctx_pop: unsafe extern "C" fn(*mut CuContext) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    // Last: the function pointers above live as long as the library.
    _lib: Library,
}

/// The driver, loaded once per process (the error too, so a missing driver is not retried).
pub fn driver() -> Result<&'static CudaDriver> {
    static DRIVER: OnceLock<std::result::Result<CudaDriver, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| CudaDriver::load().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::Gpu(e.clone()))
}

impl CudaDriver {
    /// Open libcuda and resolve its entry points; an error naming libcuda when it is absent.
    pub fn load() -> Result<CudaDriver> {
        let mut tried = Vec::new();
        let lib = LIBCUDA
            .iter()
            .find_map(|name| {
                // SAFETY: loading the NVIDIA driver library runs its initialisers only.
                unsafe { Library::new(name) }
                    .map_err(|e| tried.push(format!("{name}: {e}")))
                    .ok()
            })
            .ok_or_else(|| {
                Error::Gpu(format!(
                    "cuda: the CUDA driver library (libcuda) could not be loaded ({}); install the NVIDIA driver, or build without the `cuda` feature",
                    tried.join("; ")
                ))
            })?;
        // SAFETY: each symbol has the signature cuda.h declares for it.
        unsafe {
            Ok(CudaDriver {
                init: sym(&lib, b"cuInit\0")?,
                device_get: sym(&lib, b"cuDeviceGet\0")?,
                primary_ctx_retain: sym(&lib, b"cuDevicePrimaryCtxRetain\0")?,
                primary_ctx_release: sym(&lib, b"cuDevicePrimaryCtxRelease_v2\0")?,
                ctx_push: sym(&lib, b"cuCtxPushCurrent_v2\0")?,
                ctx_pop: sym(&lib, b"cuCtxPopCurrent_v2\0")?,
                memcpy_dtoh: sym(&lib, b"cuMemcpyDtoH_v2\0")?,
                error_name: sym(&lib, b"cuGetErrorName\0")?,
                _lib: lib,
            })
        }
    }

    /// `call`'s CUresult as an error naming the call and CUDA's error name.
    fn check(&self, call: &str, r: CuResult) -> Result<()> {
        if r == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorName writes a static string or leaves null.
        let named = unsafe { (self.error_name)(r, &mut name) } == 0 && !name.is_null();
        let name = if named {
            // SAFETY: a NUL-terminated static string from the driver.
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        } else {
            "unknown".into()
        };
        Err(Error::Gpu(format!("cuda: {call} failed: {name} ({r})")))
    }

    /// Copy `dst.len()` bytes from device pointer `src` on CUDA device `device_id` (the
    /// DLPack `device_id`) into `dst`, in the device's primary context (the one PyTorch uses).
    pub fn copy_to_host(&self, device_id: i32, src: u64, dst: &mut [u8]) -> Result<()> {
        let mut dev: CuDevice = 0;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: plain driver calls with valid out-pointers; the context is pushed and popped
        // around the copy and the primary context released after.
        unsafe {
            self.check("cuInit", (self.init)(0))?;
            self.check("cuDeviceGet", (self.device_get)(&mut dev, device_id))?;
            self.check(
                "cuDevicePrimaryCtxRetain",
                (self.primary_ctx_retain)(&mut ctx, dev),
            )?;
            let copied = self
                .check("cuCtxPushCurrent", (self.ctx_push)(ctx))
                .and_then(|()| {
                    let r = (self.memcpy_dtoh)(dst.as_mut_ptr().cast(), src, dst.len());
                    let mut popped: CuContext = std::ptr::null_mut();
                    (self.ctx_pop)(&mut popped);
                    self.check("cuMemcpyDtoH", r)
                });
            (self.primary_ctx_release)(dev);
            copied
        }
    }
}

/// One entry point, copied out of the library (the caller keeps the library alive).
unsafe fn sym<T: Copy>(lib: &Library, name: &[u8]) -> Result<T> {
    // SAFETY: the caller's contract on T.
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
        let n = String::from_utf8_lossy(&name[..name.len() - 1]).into_owned();
        Error::Gpu(format!("cuda: libcuda has no {n}: {e} (driver too old?)"))
    })
}
