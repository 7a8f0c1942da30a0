//! The GPU backend: wgpu (Vulkan, Metal, DX12, GL on the desktop; tested on Mesa lavapipe).
//!
//! - [`device`]: adapters, device properties, the buffer pool and its memory statistics.
//! - [`shaders`]: the WGSL files in `shaders/` and every variant (validated by naga in tests).
//! - [`kernels`]: which `aten.*` targets run on the GPU and how.
//! - [`exec`]: [`GpuSession`], the executor (GPU kernels plus CPU fallback per node).
//! - `dynamic`: control flow, `item` and data-dependent sizes on the GPU (with readbacks).
//!
//! # Dtypes on the GPU
//! Float kernels compute in f32. On the GPU a tensor's storage holds 32-bit words: f32 as f32,
//! i64 and i32 as i32 (uploading an i64 outside the i32 range is an error naming the tensor,
//! never a silent wrap; int64 arithmetic wraps in 32 bits, see [`store`]), uint8 / int8 /
//! int16 as i32 holding a value of their range (kernels that can leave it wrap on store, as
//! torch), bool as u32 0/1. Data movement (gathers, cat, fills, views) works on words of any
//! of these dtypes. f16 is held packed for the kernels with f16 forms; bf16 and f64 stay on
//! the CPU: their nodes run through the CPU fallback.
//! A node runs on the GPU only when its kernel accepts every input and output dtype.
//!
//! # Device API
//! In the spirit of `torch.mps` / `torch.xpu`: [`device_count`], [`is_available`],
//! [`get_device_name`], [`get_device_properties`], and per device ([`GpuDevice`])
//! `synchronize`, `empty_cache`, `current_allocated_memory`, `max_memory_allocated`,
//! `reset_peak_memory_stats`, `driver_allocated_memory`, `recommended_max_memory`,
//! `set_per_process_memory_fraction`; torch.cuda.memory's `mem_get_info`, `memory_reserved`,
//! `memory_stats_map`, memory history and snapshots: [`memory`]. [`devices`]: the current
//! device ([`current_device`], [`set_device`], the `device(i)` guard), [`device_of`],
//! [`get_device_capability`], [`get_arch_list`], [`init`] / [`is_initialized`]. `stream.rs`:
//! streams and what WebGPU's single queue allows ([`Stream`], [`current_stream`],
//! [`set_stream`], [`default_stream`], [`get_stream_from_external`]).

mod adapter;
pub mod device;
pub mod devices;
mod dynamic;
pub mod event;
pub mod exec;
#[cfg(all(feature = "cuda", target_os = "linux"))]
pub mod external;
pub mod fault;
mod graph;
pub mod kernels;
mod lost;
pub mod memory;
mod pipelines;
pub mod random;
mod runner;
pub mod sample;
pub mod shaders;
mod stats;
pub mod store;
pub mod stream;
pub(crate) mod tape;
pub mod timing;
pub mod tune;
pub mod user_shader;
mod verbose;
pub mod wait;

#[cfg(not(target_arch = "wasm32"))]
pub use device::adapters;
pub use device::{BackendChoice, DeviceProperties, GpuDevice, KeyLimits, MemoryStats};
pub use devices::{
    current_device, device_of, get_arch_list, is_initialized, Capability, DeviceGuard, TensorDevice,
};
#[cfg(not(target_arch = "wasm32"))]
pub use devices::{
    current_gpu_device, device, get_device, get_device_capability, init, set_device,
};
pub use event::{Event, Timing};
pub use exec::{read_tensor, GpuInput, GpuSession, PrepareStats, RunStats, Slot};
pub use memory::MemorySnapshot;
pub use store::GTensor;
pub use stream::{
    current_stream, default_stream, get_stream_from_external, set_stream, stream, Stream,
    StreamContext,
};
pub use user_shader::{ShaderArg, ShaderBinding, ShaderEntry, UserShader};

#[cfg(not(target_arch = "wasm32"))]
use crate::error::{Error, Result};

#[cfg(not(target_arch = "wasm32"))]
/// Number of adapters wgpu finds (all backends).
pub fn device_count() -> usize {
    adapters(BackendChoice::Auto).len()
}

#[cfg(not(target_arch = "wasm32"))]
/// Whether any GPU adapter (including a software one such as lavapipe) is present.
pub fn is_available() -> bool {
    device_count() > 0
}

#[cfg(not(target_arch = "wasm32"))]
/// Properties of adapter `index` (in [`adapters`] order: discrete first, GL last).
pub fn get_device_properties(index: usize) -> Result<DeviceProperties> {
    let list = adapters(BackendChoice::Auto);
    let n = list.len();
    list.get(index)
        .map(device::properties_of)
        .ok_or_else(|| Error::Gpu(format!("no GPU adapter {index} (found {n})")))
}

#[cfg(not(target_arch = "wasm32"))]
/// Name of adapter `index`.
pub fn get_device_name(index: usize) -> Result<String> {
    get_device_properties(index).map(|p| p.name)
}

/// Whether an adapter renders in software (a CPU adapter such as lavapipe, or SwiftShader,
/// Chrome's software WebGPU, which reports itself by name): such adapters run a workgroup's
/// invocations as fibers, so barrier-free kernels beat workgroup-tiled ones there.
pub fn is_software(p: &DeviceProperties) -> bool {
    p.device_type == "cpu" || p.name.to_ascii_lowercase().contains("swiftshader")
}
