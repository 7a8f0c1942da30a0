//! CUDA device tensors for [`super::from_dlpack`] and the interop of [`super::interop`]
//! (feature `cuda`): the CUDA driver API loaded at run time (libloading), so building needs no
//! CUDA and a machine without the driver gets an error naming libcuda. [`super::from_dlpack`]
//! reads through host memory (`cuMemcpyDtoH`, which waits for the copy); GPU tensors go to
//! and from CUDA without a host copy through Vulkan external memory
//! ([`CudaDriver::import_fd`], `cuImportExternalMemory`).
//!
//! Synchronisation: the producer's stream must have finished writing the tensor (torch's
//! `__dlpack__(stream=...)` or a `torch.cuda.synchronize()` before the legacy `to_dlpack`).

use crate::error::{Error, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Arc, OnceLock};

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuExternalMemory = *mut c_void;
/// `CUdeviceptr`: a device address (64 bits on every desktop target).
pub type CuDevicePtr = u64;

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD`.
const CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD: c_uint = 1;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// `CUDA_EXTERNAL_MEMORY_DEDICATED`: the memory is a dedicated allocation (Vulkan's
/// `VkMemoryDedicatedAllocateInfo`, as [`crate::gpu::external`] allocates).
const CUDA_EXTERNAL_MEMORY_DEDICATED: c_uint = 1;

// Fields read by the driver only.
#[allow(dead_code)]
/// `CUDA_EXTERNAL_MEMORY_HANDLE_DESC` (cuda.h): the handle union is 16 bytes (the win32
/// pair), 8-aligned, so `size` sits at offset 24; 104 bytes in all.
#[repr(C)]
struct ExternalMemoryHandleDesc {
    kind: c_uint,
    handle: ExternalMemoryHandle,
    size: u64,
    flags: c_uint,
    reserved: [c_uint; 16],
}

#[allow(dead_code)]
#[repr(C)]
union ExternalMemoryHandle {
    fd: c_int,
    win32: [*const c_void; 2],
}

#[allow(dead_code)]
/// `CUDA_EXTERNAL_MEMORY_BUFFER_DESC` (cuda.h): 88 bytes.
#[repr(C)]
struct ExternalMemoryBufferDesc {
    offset: u64,
    size: u64,
    flags: c_uint,
    reserved: [c_uint; 16],
}

const _: () = assert!(std::mem::size_of::<ExternalMemoryHandleDesc>() == 104);
const _: () = assert!(std::mem::offset_of!(ExternalMemoryHandleDesc, size) == 24);
const _: () = assert!(std::mem::size_of::<ExternalMemoryBufferDesc>() == 88);

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
    memcpy_htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    memcpy_dtod: unsafe extern "C" fn(u64, u64, usize) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    device_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_uuid: unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    import_external_memory:
        unsafe extern "C" fn(*mut CuExternalMemory, *const ExternalMemoryHandleDesc) -> CuResult,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    external_memory_mapped_buffer: unsafe extern "C" fn(
        *mut CuDevicePtr,
        CuExternalMemory,
        *const ExternalMemoryBufferDesc,
    ) -> CuResult,
    destroy_external_memory: unsafe extern "C" fn(CuExternalMemory) -> CuResult,
    error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    // Last: the function pointers above live as long as the library.
    _lib: Library,
}

/// The driver, loaded once per process (the error too, so a missing driver is not retried).
pub fn driver() -> Result<&'static CudaDriver> {
    static DRIVER: OnceLock<std::result::Result<CudaDriver, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            CudaDriver::load().map_err(|e| match e {
                Error::Gpu(msg) => msg,
                e => e.to_string(),
            })
        })
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
                memcpy_htod: sym(&lib, b"cuMemcpyHtoD_v2\0")?,
                memcpy_dtod: sym(&lib, b"cuMemcpyDtoD_v2\0")?,
                mem_alloc: sym(&lib, b"cuMemAlloc_v2\0")?,
                mem_free: sym(&lib, b"cuMemFree_v2\0")?,
                ctx_synchronize: sym(&lib, b"cuCtxSynchronize\0")?,
                device_count: sym(&lib, b"cuDeviceGetCount\0")?,
                device_uuid: sym(&lib, b"cuDeviceGetUuid_v2\0")
                    .or_else(|_| sym(&lib, b"cuDeviceGetUuid\0"))?,
                import_external_memory: sym(&lib, b"cuImportExternalMemory\0")?,
                external_memory_mapped_buffer: sym(&lib, b"cuExternalMemoryGetMappedBuffer\0")?,
                destroy_external_memory: sym(&lib, b"cuDestroyExternalMemory\0")?,
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
    pub fn copy_to_host(&'static self, device_id: i32, src: u64, dst: &mut [u8]) -> Result<()> {
        self.context(device_id)?.copy_dtoh(src, dst)
    }

    /// The primary context of CUDA device `ordinal` (the one PyTorch uses), retained until
    /// the returned value drops.
    pub fn context(&'static self, ordinal: i32) -> Result<Arc<CudaContext>> {
        let mut dev: CuDevice = 0;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: plain driver calls with valid out-pointers.
        unsafe {
            self.check("cuInit", (self.init)(0))?;
            self.check("cuDeviceGet", (self.device_get)(&mut dev, ordinal))?;
            self.check(
                "cuDevicePrimaryCtxRetain",
                (self.primary_ctx_retain)(&mut ctx, dev),
            )?;
        }
        Ok(Arc::new(CudaContext {
            drv: self,
            dev,
            ctx,
            ordinal,
        }))
    }

    /// The primary context of the CUDA device whose UUID is `uuid` (a Vulkan device's
    /// `deviceUUID`: the same GPU); an error listing the devices when none is.
    pub fn context_for_uuid(&'static self, uuid: [u8; 16]) -> Result<Arc<CudaContext>> {
        let mut n: c_int = 0;
        // SAFETY: plain driver calls with valid out-pointers.
        unsafe {
            self.check("cuInit", (self.init)(0))?;
            self.check("cuDeviceGetCount", (self.device_count)(&mut n))?;
        }
        let mut seen = Vec::new();
        for ordinal in 0..n {
            let ctx = self.context(ordinal)?;
            let id = ctx.uuid()?;
            if id == uuid {
                return Ok(ctx);
            }
            seen.push(format!("{ordinal}: {}", hex(&id)));
        }
        Err(Error::Gpu(format!(
            "cuda: no CUDA device is the Vulkan device {} (CUDA devices: {})",
            hex(&uuid),
            if seen.is_empty() {
                "none".into()
            } else {
                seen.join(", ")
            }
        )))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A CUDA device's primary context, retained while this lives; each call pushes it current
/// for its duration.
pub struct CudaContext {
    drv: &'static CudaDriver,
    dev: CuDevice,
    ctx: CuContext,
    ordinal: i32,
}

// SAFETY: a CUDA context may be made current on any thread (that is what push/pop do); the
// handle itself is an opaque pointer the driver owns.
unsafe impl Send for CudaContext {}
// SAFETY: as above; the driver serialises its own use of a context.
unsafe impl Sync for CudaContext {}

impl std::fmt::Debug for CudaContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaContext(device {})", self.ordinal)
    }
}

impl Drop for CudaContext {
    fn drop(&mut self) {
        // SAFETY: retained in `CudaDriver::context`, released once here.
        unsafe { (self.drv.primary_ctx_release)(self.dev) };
    }
}

impl CudaContext {
    /// The CUDA device ordinal (DLPack's `device_id` for kDLCUDA).
    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// `f` (which returns a CUresult) with the context current: an error naming `call`.
    fn run(&self, call: &str, f: impl FnOnce() -> CuResult) -> Result<()> {
        let d = self.drv;
        // SAFETY: a retained context pushed and popped around `f`.
        unsafe {
            d.check("cuCtxPushCurrent", (d.ctx_push)(self.ctx))?;
            let r = f();
            let mut popped: CuContext = std::ptr::null_mut();
            (d.ctx_pop)(&mut popped);
            d.check(call, r)
        }
    }

    /// The device's UUID (`cuDeviceGetUuid`).
    pub fn uuid(&self) -> Result<[u8; 16]> {
        let mut id = [0u8; 16];
        // SAFETY: a 16-byte out-buffer, as CUuuid is.
        let r = unsafe { (self.drv.device_uuid)(&mut id, self.dev) };
        self.drv.check("cuDeviceGetUuid", r)?;
        Ok(id)
    }

    /// `bytes` of device memory (`cuMemAlloc`), freed when the value drops.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> Result<CudaMemory> {
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: a valid out-pointer.
        self.run("cuMemAlloc", || unsafe {
            (self.drv.mem_alloc)(&mut ptr, bytes)
        })?;
        Ok(CudaMemory {
            ctx: self.clone(),
            ptr,
            bytes,
        })
    }

    /// Copy `src` to device address `dst` (`cuMemcpyHtoD`: done when it returns).
    pub fn copy_htod(&self, dst: CuDevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the caller's `dst` addresses `src.len()` bytes of device memory.
        self.run("cuMemcpyHtoD", || unsafe {
            (self.drv.memcpy_htod)(dst, src.as_ptr().cast(), src.len())
        })
    }

    /// Copy `dst.len()` bytes from device address `src` (`cuMemcpyDtoH`: done when it returns).
    pub fn copy_dtoh(&self, src: CuDevicePtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller's `src` addresses `dst.len()` bytes of device memory.
        self.run("cuMemcpyDtoH", || unsafe {
            (self.drv.memcpy_dtoh)(dst.as_mut_ptr().cast(), src, dst.len())
        })
    }

    /// Copy `bytes` between device addresses (`cuMemcpyDtoD`; asynchronous towards the host:
    /// [`CudaContext::synchronize`] before another API reads `dst`).
    pub fn copy_dtod(&self, dst: CuDevicePtr, src: CuDevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: the caller's addresses span `bytes` each.
        self.run("cuMemcpyDtoD", || unsafe {
            (self.drv.memcpy_dtod)(dst, src, bytes)
        })
    }

    /// Wait for all work of the context (`cuCtxSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.run("cuCtxSynchronize", || unsafe {
            (self.drv.ctx_synchronize)()
        })
    }

    /// Map a Vulkan allocation exported as an opaque fd ([`crate::gpu::external`]) of
    /// `allocation_size` bytes, a dedicated allocation, into this device's address space
    /// (`cuImportExternalMemory` + `cuExternalMemoryGetMappedBuffer` of the whole of it).
    /// CUDA owns the fd once the import succeeds; on failure it is closed.
    #[cfg(target_os = "linux")]
    pub fn import_fd(
        self: &Arc<Self>,
        fd: std::os::fd::OwnedFd,
        allocation_size: u64,
    ) -> Result<CudaExternalMemory> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        let raw = fd.into_raw_fd();
        let desc = ExternalMemoryHandleDesc {
            kind: CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            handle: ExternalMemoryHandle { fd: raw },
            size: allocation_size,
            flags: CUDA_EXTERNAL_MEMORY_DEDICATED,
            reserved: [0; 16],
        };
        let mut ext: CuExternalMemory = std::ptr::null_mut();
        // SAFETY: a valid descriptor; on success CUDA owns `raw`.
        let imported = self.run("cuImportExternalMemory", || unsafe {
            (self.drv.import_external_memory)(&mut ext, &desc)
        });
        if let Err(e) = imported {
            // SAFETY: the import failed, so the fd is still ours to close.
            drop(unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) });
            return Err(e);
        }
        let buf = ExternalMemoryBufferDesc {
            offset: 0,
            size: allocation_size,
            flags: 0,
            reserved: [0; 16],
        };
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: `ext` was just imported; a valid descriptor and out-pointer.
        let mapped = self.run("cuExternalMemoryGetMappedBuffer", || unsafe {
            (self.drv.external_memory_mapped_buffer)(&mut ptr, ext, &buf)
        });
        let out = CudaExternalMemory {
            ctx: self.clone(),
            ext,
            ptr,
            bytes: allocation_size,
        };
        mapped.map(|()| out)
    }
}

/// Device memory from [`CudaContext::alloc`], freed on drop.
#[derive(Debug)]
pub struct CudaMemory {
    ctx: Arc<CudaContext>,
    ptr: CuDevicePtr,
    bytes: usize,
}

impl CudaMemory {
    pub fn ptr(&self) -> CuDevicePtr {
        self.ptr
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

impl Drop for CudaMemory {
    fn drop(&mut self) {
        let ptr = self.ptr;
        // SAFETY: allocated by cuMemAlloc, freed once.
        let _ = self
            .ctx
            .run("cuMemFree", || unsafe { (self.ctx.drv.mem_free)(ptr) });
    }
}

/// Vulkan memory mapped into CUDA ([`CudaContext::import_fd`]): the mapping is freed and the
/// import destroyed on drop (the Vulkan side keeps its own reference to the memory).
#[derive(Debug)]
pub struct CudaExternalMemory {
    ctx: Arc<CudaContext>,
    ext: CuExternalMemory,
    ptr: CuDevicePtr,
    bytes: u64,
}

// SAFETY: the handles are the driver's and usable from any thread with the context pushed,
// which every use does.
unsafe impl Send for CudaExternalMemory {}
// SAFETY: as above; no method mutates through `&self`.
unsafe impl Sync for CudaExternalMemory {}

impl CudaExternalMemory {
    /// The device address of the mapping's first byte.
    pub fn ptr(&self) -> CuDevicePtr {
        self.ptr
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

impl Drop for CudaExternalMemory {
    fn drop(&mut self) {
        let (ptr, ext) = (self.ptr, self.ext);
        let d = self.ctx.drv;
        // SAFETY: a mapping from cuExternalMemoryGetMappedBuffer (freed with cuMemFree, as
        // cuda.h says) and its import, each released once.
        let _ = self.ctx.run("cuDestroyExternalMemory", || unsafe {
            if ptr != 0 {
                (d.mem_free)(ptr);
            }
            (d.destroy_external_memory)(ext)
        });
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
