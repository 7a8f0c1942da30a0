//! GPU tensors to and from CUDA through DLPack without a host copy (feature `cuda`, Linux;
//! issue 20): [`GTensor::to_dlpack`] and [`GTensor::from_dlpack`].
//!
//! Both go through a buffer in Vulkan external memory ([`crate::gpu::external`]) that CUDA
//! maps (`cuImportExternalMemory` of its opaque fd, `cuExternalMemoryGetMappedBuffer`):
//! - `to_dlpack` copies the tensor's store into a new exportable buffer on the GPU
//!   (`copy_buffer_to_buffer`: pt2web's pooled buffers are not exportable) and hands CUDA
//!   that buffer: a kDLCUDA tensor on the CUDA device whose UUID is the Vulkan device's. The
//!   buffer and the mapping live until the deleter runs.
//! - `from_dlpack` makes an exportable buffer, maps it into CUDA and copies the CUDA tensor
//!   into it there (`cuMemcpyDtoD`); the buffer then becomes the GPU tensor's storage, so a
//!   session reads it where CUDA wrote it.
//!
//! # Synchronisation (a documented synchronize, no shared semaphores)
//! - Vulkan to CUDA: `to_dlpack` waits for the Vulkan queue ([`GpuDevice::synchronize`])
//!   after its copy, so every write to the tensor, earlier runs included, is done before it
//!   returns; CUDA may read at once, on any stream.
//! - CUDA to Vulkan: the producer's stream must have finished writing the tensor before
//!   `from_dlpack` (torch: `__dlpack__(stream=...)`, or `torch.cuda.synchronize()` before the
//!   legacy `to_dlpack`); `from_dlpack` then waits for its own copy (`cuCtxSynchronize`)
//!   before it returns, so any later wgpu submit reads the data.
//! - Writes through an exported tensor's pointer after `to_dlpack` are not seen by pt2web:
//!   the export is a copy.
//!
//! # Dtypes
//! The GPU holds float32 and int32 as themselves and float16 packed (on devices with
//! `shader-f16`), which is DLPack's layout: those three go both ways. int64 lives on the GPU
//! as int32 words and bool as 32-bit words, so they are refused here with an error naming
//! the dtype (convert in torch, or go through the CPU: [`super::to_dlpack`]).

use super::cuda::{driver, CudaExternalMemory};
use super::ffi::*;
use super::{export_raw, foreign_view, DLPack, ManagedTensor, OwnedDLPack};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::external::{self, ExternalBuffer};
use crate::gpu::store::{gpu_bytes, gpu_elem_bytes, lock, Store};
use crate::gpu::{GTensor, GpuDevice};
use std::sync::{Arc, Mutex};

/// Whether `dtype` has the same bytes on pt2web's GPU as in a DLPack tensor.
fn shared_layout(dev: &GpuDevice, dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 | DType::I32 => Ok(()),
        DType::F16 if dev.f16_enabled() => Ok(()),
        DType::F16 => Err(Error::dlpack(
            "dtype",
            format!(
                "float16: '{}' has no shader-f16, so pt2web keeps float16 on the CPU",
                dev.properties.name
            ),
        )),
        other => Err(Error::dlpack(
            "dtype",
            format!(
                "{other}: the GPU holds it in another layout (int64 as int32 words, bool and \
                 small ints as 32-bit words, bf16/f64 on the CPU); CUDA interop takes float32, \
                 int32 and float16 (convert in torch, or go through the CPU with to_dlpack of a \
                 host tensor)"
            ),
        )),
    }
}

/// What a CUDA export keeps alive: the CUDA mapping first (dropped first), then the buffer.
struct Mapped {
    _cuda: CudaExternalMemory,
    _buffer: ExternalBuffer,
}

/// A new exportable buffer of `bytes` on `dev`, mapped into the CUDA device that is the same
/// GPU.
fn mapped(dev: &GpuDevice, bytes: u64) -> Result<Mapped> {
    let ctx = driver()?.context_for_uuid(external::device_uuid(dev)?)?;
    let buffer = ExternalBuffer::new(dev, bytes)?;
    let fd = buffer.export_fd(dev)?;
    let cuda = ctx.import_fd(fd, buffer.allocation_size())?;
    Ok(Mapped {
        _cuda: cuda,
        _buffer: buffer,
    })
}

impl GTensor {
    /// This GPU tensor (on `dev`, a device from [`external::open`]) as a CUDA DLPack tensor
    /// (kDLCUDA, the pre-1.0 form torch's `from_dlpack` takes): one GPU-to-GPU copy, no host
    /// copy; the Vulkan queue is waited for before it returns (see the module doc).
    pub fn to_dlpack(&self, dev: &GpuDevice) -> Result<DLPack> {
        shared_layout(dev, self.dtype)?;
        external::check(dev)?;
        if self.rank() > super::MAX_NDIM as usize {
            return Err(Error::dlpack("ndim", format!("{} dimensions", self.rank())));
        }
        crate::gpu::exec::upload_tensor(dev, self, "a DLPack export")?;
        let (len, src) = {
            let s = lock(&self.cell);
            let src = s
                .gpu
                .as_ref()
                .map(|b| b.buffer().clone())
                .filter(|_| s.gpu_valid)
                .ok_or_else(|| Error::Gpu("internal: an uploaded tensor has no buffer".into()))?;
            (s.len, src)
        };
        let bytes = gpu_bytes(self.dtype, len);
        let m = mapped(dev, bytes)?;
        let mut enc = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("dlpack export"),
            });
        enc.copy_buffer_to_buffer(&src, 0, m._buffer.buffer(), 0, bytes);
        dev.queue.submit([enc.finish()]);
        dev.take_error()?;
        dev.synchronize()?;
        let device = DLDevice {
            device_type: K_DL_CUDA,
            device_id: m._cuda.context().ordinal(),
        };
        let data = m._cuda.ptr() as usize as *mut std::ffi::c_void;
        let byte_offset = self.offset as u64 * gpu_elem_bytes(self.dtype);
        export_raw(
            data,
            device,
            self.dtype,
            &self.sizes,
            &self.strides,
            byte_offset,
            true,
            m,
        )
    }

    /// A GPU tensor on `dev` (from [`external::open`]) holding a CUDA DLPack tensor's
    /// values: copied on the GPU by CUDA into Vulkan external memory that becomes the
    /// tensor's storage (no host copy), with the tensor's sizes and strides. The producer
    /// must have finished writing it (see the module doc); the DLPack tensor may be dropped
    /// as soon as this returns.
    pub fn from_dlpack<M: ManagedTensor>(dev: &GpuDevice, t: &OwnedDLPack<M>) -> Result<GTensor> {
        let dl = t.dl_tensor();
        // SAFETY: OwnedDLPack's contract covers shape/strides.
        let view = unsafe { foreign_view(dl) }?;
        if !matches!(dl.device.device_type, K_DL_CUDA | K_DL_CUDA_MANAGED) {
            return Err(Error::dlpack(
                "device.device_type",
                format!(
                    "device type {}: GTensor::from_dlpack takes CUDA tensors (kDLCUDA 2, \
                     kDLCUDAManaged 13); host tensors go through dlpack::from_dlpack",
                    dl.device.device_type
                ),
            ));
        }
        shared_layout(dev, view.dtype)?;
        external::check(dev)?;
        let elem = view.dtype.size();
        // Whole elements from data + byte_offset: the store starts at the view's origin.
        let len = view.span_bytes / elem;
        let bytes = gpu_bytes(view.dtype, len);
        let uuid = external::device_uuid(dev)?;
        let ctx = driver()?.context(dl.device.device_id)?;
        if ctx.uuid()? != uuid {
            return Err(Error::dlpack(
                "device.device_id",
                format!(
                    "CUDA device {} is not the GPU of '{}': open the Vulkan adapter of the \
                     same GPU (pt2web devices lists them)",
                    dl.device.device_id, dev.properties.name
                ),
            ));
        }
        let buffer = ExternalBuffer::new(dev, bytes)?;
        let cuda = ctx.import_fd(buffer.export_fd(dev)?, buffer.allocation_size())?;
        if view.span_bytes > 0 {
            let src = (dl.data as u64).wrapping_add(dl.byte_offset);
            ctx.copy_dtod(cuda.ptr(), src, view.span_bytes)?;
            ctx.synchronize()?;
        }
        drop(cuda);
        let store = Store {
            dtype: view.dtype,
            len,
            gpu: Some(dev.adopt_external(buffer.buffer().clone(), bytes)),
            gpu_valid: true,
            cpu: None,
            cpu_valid: false,
        };
        Ok(GTensor {
            cell: Arc::new(Mutex::new(store)),
            dtype: view.dtype,
            sizes: view.sizes,
            strides: view.strides,
            offset: 0,
        })
    }
}
