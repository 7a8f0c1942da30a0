//! GPU buffers in Vulkan external memory (feature `cuda`, Linux): memory another API or
//! another Vulkan device can map, the Vulkan half of the CUDA interop in
//! [`crate::dlpack::interop`] (issue 20; tests in tests/interop.rs).
//!
//! wgpu has no exportable buffers, so this module goes under it through wgpu-hal's Vulkan
//! backend: [`open`] asks for `VULKAN_EXTERNAL_MEMORY_FD` (wgpu-hal enables
//! `VK_KHR_external_memory_fd` where the driver has it), [`ExternalBuffer::new`] creates the
//! `VkBuffer` with `VkExternalMemoryBufferCreateInfo` and gives it a dedicated
//! `VkDeviceMemory` allocated with `VkExportMemoryAllocateInfo` (opaque fd), and wraps both as
//! a `wgpu::Buffer` (`create_buffer_from_hal`; wgpu frees buffer and memory when the last
//! handle drops, and treats the contents as initialized, so it never clears what another
//! API wrote). [`ExternalBuffer::export_fd`] is `vkGetMemoryFdKHR`;
//! [`ExternalBuffer::import_fd`] maps such an fd into a buffer of another device
//! (`VkImportMemoryFdInfoKHR`). Tested on Mesa lavapipe, which exports opaque fds as memfds.
//!
//! Synchronisation is the caller's: Vulkan and the other side share memory, not a queue.
//! Before another API reads what wgpu wrote, wait for the queue ([`GpuDevice::synchronize`]);
//! before wgpu reads what it wrote, wait for that API (for CUDA, `cuCtxSynchronize`).
//!
//! Windows (opaque win32 handles, `VK_KHR_external_memory_win32`) is not built: these
//! types exist on Linux only.

use super::device::{BackendChoice, GpuDevice};
use super::store::{gpu_bytes, gpu_dtype, GTensor, Store};
use crate::dtype::DType;
use crate::error::{Error, Result};
use ash::vk;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use wgpu::hal::api::Vulkan;

/// The handle type of every buffer here: an opaque POSIX fd (what CUDA imports as
/// `CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD`).
const HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// The wgpu usages of an external buffer: those of pt2web's pooled storage buffers, so a
/// tensor can live in one.
pub const USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// The Vulkan usages wgpu-hal gives [`USAGE`] (storage, transfer source and destination).
fn vk_usage() -> vk::BufferUsageFlags {
    vk::BufferUsageFlags::STORAGE_BUFFER
        | vk::BufferUsageFlags::TRANSFER_SRC
        | vk::BufferUsageFlags::TRANSFER_DST
}

/// The wgpu feature [`open`] asks for.
pub const FEATURE: wgpu::Features = wgpu::Features::VULKAN_EXTERNAL_MEMORY_FD;

fn err(msg: impl std::fmt::Display) -> Error {
    Error::Gpu(format!("external memory: {msg}"))
}

/// Open Vulkan adapter `index` (in [`super::adapters`] order of the Vulkan backend; `None`:
/// the best) with external memory: an error naming the adapter when its driver lacks
/// `VK_KHR_external_memory_fd`.
pub fn open(index: Option<usize>) -> Result<GpuDevice> {
    GpuDevice::open_with(BackendChoice::Vulkan, index, FEATURE)
}

/// Whether `dev` can make external buffers: a Vulkan device opened by [`open`].
pub fn check(dev: &GpuDevice) -> Result<()> {
    if dev.properties.backend != "vulkan" {
        return Err(err(format!(
            "'{}' runs on {}: external memory needs a Vulkan device (external::open)",
            dev.properties.name, dev.properties.backend
        )));
    }
    if !dev.device.features().contains(FEATURE) {
        return Err(err(format!(
            "'{}' was opened without VULKAN_EXTERNAL_MEMORY_FD: open it with gpu::external::open",
            dev.properties.name
        )));
    }
    Ok(())
}

/// The Vulkan handles of `dev` that external memory needs, with the device kept borrowed.
struct Raw<'a> {
    hal: Box<dyn std::ops::Deref<Target = wgpu::hal::vulkan::Device> + 'a>,
}

impl Raw<'_> {
    fn of(dev: &GpuDevice) -> Result<Raw<'_>> {
        check(dev)?;
        // SAFETY: the raw handles are used only for objects this module creates and hands
        // to wgpu (or destroys itself on failure).
        let hal = unsafe { dev.device.as_hal::<Vulkan>() }.ok_or_else(|| {
            err(format!(
                "'{}' is not a wgpu-core Vulkan device",
                dev.properties.name
            ))
        })?;
        Ok(Raw { hal: Box::new(hal) })
    }
    fn device(&self) -> &ash::Device {
        self.hal.raw_device()
    }
    fn instance(&self) -> &ash::Instance {
        self.hal.shared_instance().raw_instance()
    }
    fn physical(&self) -> vk::PhysicalDevice {
        self.hal.raw_physical_device()
    }
    /// An error unless the device and the instance have Vulkan 1.1 (the core queries below).
    fn api_1_1(&self) -> Result<()> {
        // SAFETY: a Vulkan 1.0 query on a live physical device.
        let api = unsafe {
            self.instance()
                .get_physical_device_properties(self.physical())
        }
        .api_version
        .min(self.hal.shared_instance().instance_api_version());
        if api < vk::API_VERSION_1_1 {
            return Err(err(format!(
                "the Vulkan device or instance has API {}.{}: external memory needs 1.1",
                vk::api_version_major(api),
                vk::api_version_minor(api)
            )));
        }
        Ok(())
    }

    /// What the driver allows for buffers of [`vk_usage`] in opaque-fd memory.
    fn handle_features(&self) -> Result<vk::ExternalMemoryProperties> {
        self.api_1_1()?;
        // SAFETY: a Vulkan 1.1 query (checked above) with valid structures.
        unsafe {
            let info = vk::PhysicalDeviceExternalBufferInfo::default()
                .usage(vk_usage())
                .handle_type(HANDLE);
            let mut out = vk::ExternalBufferProperties::default();
            self.instance()
                .get_physical_device_external_buffer_properties(self.physical(), &info, &mut out);
            Ok(out.external_memory_properties)
        }
    }
}

/// The device UUID of a Vulkan device (`VkPhysicalDeviceIDProperties::deviceUUID`): what
/// CUDA's `cuDeviceGetUuid` reports for the same GPU, so the two can be matched.
pub fn device_uuid(dev: &GpuDevice) -> Result<[u8; 16]> {
    let raw = Raw::of(dev)?;
    raw.api_1_1()?;
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    // SAFETY: a Vulkan 1.1 query (checked above) with valid structures.
    unsafe {
        raw.instance()
            .get_physical_device_properties2(raw.physical(), &mut props)
    };
    Ok(id.device_uuid)
}

/// A `wgpu::Buffer` whose memory is a dedicated, exportable (or imported) Vulkan allocation.
#[derive(Debug, Clone)]
pub struct ExternalBuffer {
    buffer: wgpu::Buffer,
    size: u64,
    allocation_size: u64,
    /// The memory, where it was allocated exportable (wgpu-hal does not tell a buffer's
    /// memory); it lives as long as `buffer`, which frees it.
    exportable: Option<vk::DeviceMemory>,
    /// The `VkDevice` it belongs to (its memory handle means nothing on another; wgpu's
    /// `Device` equality compares ids, which repeat across instances).
    device: vk::Device,
}

impl ExternalBuffer {
    /// A new buffer of `size` bytes (a positive multiple of 4, as wgpu's copies need) whose
    /// memory can be exported ([`ExternalBuffer::export_fd`]); contents undefined.
    pub fn new(dev: &GpuDevice, size: u64) -> Result<ExternalBuffer> {
        Self::make(dev, size, None)
    }

    /// A buffer of `size` bytes over the memory of `fd` (exported by
    /// [`ExternalBuffer::export_fd`] or another API as an opaque fd, of `allocation_size`
    /// bytes: what the exporter allocated). On success Vulkan owns the fd; on failure it is
    /// closed.
    pub fn import_fd(
        dev: &GpuDevice,
        fd: OwnedFd,
        size: u64,
        allocation_size: u64,
    ) -> Result<ExternalBuffer> {
        Self::make(dev, size, Some((fd, allocation_size)))
    }

    fn make(
        dev: &GpuDevice,
        size: u64,
        mut import: Option<(OwnedFd, u64)>,
    ) -> Result<ExternalBuffer> {
        if size == 0 || !size.is_multiple_of(4) {
            return Err(err(format!(
                "buffer size {size}: must be a positive multiple of 4 bytes"
            )));
        }
        let max = dev.properties.limits.max_buffer_size;
        if size > max {
            return Err(Error::Limit {
                what: "external buffer bytes (the device's max_buffer_size)".into(),
                value: size,
                limit: max,
            });
        }
        let raw = Raw::of(dev)?;
        let features = raw.handle_features()?.external_memory_features;
        let needed = match import {
            None => vk::ExternalMemoryFeatureFlags::EXPORTABLE,
            Some(_) => vk::ExternalMemoryFeatureFlags::IMPORTABLE,
        };
        if !features.contains(needed) {
            return Err(err(format!(
                "'{}' cannot {} storage buffers as opaque fds (external memory features {features:?})",
                dev.properties.name,
                if import.is_none() { "export" } else { "import" }
            )));
        }
        let d = raw.device();
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(vk_usage())
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info; the buffer is destroyed below on every failure, else
        // handed to wgpu, which destroys it.
        let buf = unsafe { d.create_buffer(&info, None) }
            .map_err(|e| err(format!("vkCreateBuffer of {size} bytes: {e}")))?;
        // SAFETY: `buf` is a live buffer of `d`.
        let reqs = unsafe { d.get_buffer_memory_requirements(buf) };
        let importing = import.is_some();
        let memory = Self::allocate(&raw, buf, reqs, &mut import);
        let memory = match memory {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: nothing else knows `buf`.
                unsafe { d.destroy_buffer(buf, None) };
                return Err(e);
            }
        };
        // SAFETY: a fresh buffer and a dedicated allocation of its required size.
        if let Err(e) = unsafe { d.bind_buffer_memory(buf, memory.0, 0) } {
            // SAFETY: nothing else knows them.
            unsafe {
                d.destroy_buffer(buf, None);
                d.free_memory(memory.0, None);
            }
            return Err(err(format!("vkBindBufferMemory: {e}")));
        }
        let device = d.handle();
        drop(raw);
        let exportable = (!importing).then_some(memory.0);
        // SAFETY: wgpu takes the buffer and its memory (freed when the buffer is destroyed);
        // nobody else uses them through Vulkan; wgpu never maps it (no MAP usage).
        let hal = unsafe { wgpu::hal::vulkan::Buffer::from_raw_managed(buf, memory.0, 0, size) };
        // SAFETY: `hal` was created on this device with the usages USAGE maps to.
        let buffer = unsafe {
            dev.device.create_buffer_from_hal::<Vulkan>(
                hal,
                &wgpu::BufferDescriptor {
                    label: Some("pt2web external memory"),
                    size,
                    usage: USAGE,
                    mapped_at_creation: false,
                },
            )
        };
        Ok(ExternalBuffer {
            buffer,
            size,
            allocation_size: memory.1,
            exportable,
            device,
        })
    }

    /// A dedicated allocation for `buf`, exportable or imported from `import`: the memory and
    /// its size.
    fn allocate(
        raw: &Raw<'_>,
        buf: vk::Buffer,
        reqs: vk::MemoryRequirements,
        import: &mut Option<(OwnedFd, u64)>,
    ) -> Result<(vk::DeviceMemory, u64)> {
        let d = raw.device();
        let mut type_bits = reqs.memory_type_bits;
        let mut size = reqs.size;
        if let Some((fd, allocation_size)) = &import {
            if *allocation_size < reqs.size {
                return Err(err(format!(
                    "imported allocation of {allocation_size} bytes: the buffer needs {}",
                    reqs.size
                )));
            }
            size = *allocation_size;
            let ext = ash::khr::external_memory_fd::Device::new(raw.instance(), d);
            let mut props = vk::MemoryFdPropertiesKHR::default();
            // SAFETY: a live fd; the query does not take it.
            unsafe { ext.get_memory_fd_properties(HANDLE, fd.as_raw_fd(), &mut props) }
                .map_err(|e| err(format!("vkGetMemoryFdPropertiesKHR: {e}")))?;
            // Some drivers report 0 for opaque fds (the spec only requires it of others).
            if props.memory_type_bits != 0 {
                type_bits &= props.memory_type_bits;
            }
        }
        // SAFETY: a plain query on a live physical device.
        let mem = unsafe {
            raw.instance()
                .get_physical_device_memory_properties(raw.physical())
        };
        let types = &mem.memory_types[..mem.memory_type_count as usize];
        let pick = |want: vk::MemoryPropertyFlags| {
            (0..types.len())
                .find(|&i| type_bits & (1 << i) != 0 && types[i].property_flags.contains(want))
        };
        let index = pick(vk::MemoryPropertyFlags::DEVICE_LOCAL)
            .or_else(|| pick(vk::MemoryPropertyFlags::empty()))
            .ok_or_else(|| {
                err(format!(
                    "no memory type for an external buffer (allowed types {type_bits:#x})"
                ))
            })? as u32;
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buf);
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(size)
            .memory_type_index(index)
            .push_next(&mut dedicated);
        let (r, what) = match import.take() {
            None => {
                let info = info.push_next(&mut export);
                // SAFETY: valid allocate info chain.
                (unsafe { d.allocate_memory(&info, None) }, "export")
            }
            Some((fd, _)) => {
                let raw_fd = fd.into_raw_fd();
                let mut from = vk::ImportMemoryFdInfoKHR::default()
                    .handle_type(HANDLE)
                    .fd(raw_fd);
                let info = info.push_next(&mut from);
                // SAFETY: valid allocate info chain; on success Vulkan owns `raw_fd`.
                let r = unsafe { d.allocate_memory(&info, None) };
                if r.is_err() {
                    // SAFETY: the import failed, so the fd is still ours.
                    drop(unsafe { OwnedFd::from_raw_fd(raw_fd) });
                }
                (r, "import")
            }
        };
        r.map(|m| (m, size))
            .map_err(|e| err(format!("vkAllocateMemory ({what}, {size} bytes): {e}")))
    }

    /// An opaque fd of the buffer's memory (`vkGetMemoryFdKHR`): a new reference each call,
    /// which the receiver owns (CUDA's import takes it; [`ExternalBuffer::import_fd`] too).
    /// Only buffers made by [`ExternalBuffer::new`] can be exported.
    pub fn export_fd(&self, dev: &GpuDevice) -> Result<OwnedFd> {
        let raw = Raw::of(dev)?;
        let memory = self.exportable.ok_or_else(|| {
            err("an imported buffer cannot be exported again (export the original)")
        })?;
        self.check_device(&raw, dev)?;
        let ext = ash::khr::external_memory_fd::Device::new(raw.instance(), raw.device());
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(memory)
            .handle_type(HANDLE);
        // SAFETY: memory allocated exportable as an opaque fd by `make`.
        let fd = unsafe { ext.get_memory_fd(&info) }
            .map_err(|e| err(format!("vkGetMemoryFdKHR: {e}")))?;
        // SAFETY: a new fd the caller owns (vkGetMemoryFdKHR's contract).
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn check_device(&self, raw: &Raw<'_>, dev: &GpuDevice) -> Result<()> {
        if raw.device().handle() != self.device {
            return Err(err(format!(
                "the buffer belongs to another device than '{}'",
                dev.properties.name
            )));
        }
        Ok(())
    }

    pub fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }
    /// Bytes of the buffer.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Bytes of its memory allocation (at least [`ExternalBuffer::size`]): what an importer
    /// of [`ExternalBuffer::export_fd`]'s fd must be told (CUDA's `size`).
    pub fn allocation_size(&self) -> u64 {
        self.allocation_size
    }

    /// A GPU tensor on `dev` whose storage is this buffer: `sizes` contiguous elements of
    /// `dtype` from byte 0, in the GPU's layout of that dtype (`store.rs`: float32 and int32
    /// as themselves, int64 as int32 words...). Another device or API sharing the memory
    /// sees what a session writes into it and the reverse, synchronised as the module doc
    /// says.
    pub fn tensor(&self, dev: &GpuDevice, dtype: DType, sizes: Vec<usize>) -> Result<GTensor> {
        if !(gpu_dtype(dtype) || dtype == DType::F16 && dev.f16_enabled()) {
            return Err(err(format!("a {dtype} tensor does not live on this GPU")));
        }
        self.check_device(&Raw::of(dev)?, dev)?;
        let len = crate::tensor::checked_numel(&sizes)
            .ok_or_else(|| err(format!("tensor of {sizes:?}: the element count overflows")))?;
        let bytes = gpu_bytes(dtype, len);
        if bytes > self.size {
            return Err(err(format!(
                "a {dtype} tensor of {sizes:?} needs {bytes} bytes, the buffer has {}",
                self.size
            )));
        }
        let store = Store {
            dtype,
            len,
            gpu: Some(dev.adopt_external(self.buffer.clone(), self.size)),
            gpu_valid: true,
            cpu: None,
            cpu_valid: false,
        };
        let strides = crate::tensor::contiguous_strides(&sizes);
        Ok(GTensor {
            cell: Arc::new(Mutex::new(store)),
            dtype,
            sizes,
            strides,
            offset: 0,
        })
    }
}
