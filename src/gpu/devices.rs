//! Which device work goes to, in the spirit of `torch.cuda` / `torch.xpu`: the current device
//! ([`current_device`], [`set_device`], the scoped [`device`] guard), lazy initialization
//! ([`init`], [`is_initialized`]), where a tensor lives ([`device_of`]), what a device can do
//! ([`get_device_capability`]) and which backends this build has ([`get_arch_list`]).
//!
//! Devices are numbered as `pt2web devices` lists them: [`adapters`](super::adapters) with
//! [`BackendChoice::Auto`] (discrete first, GL last). [`get_device`] opens device `i` on first
//! use and keeps it for the process, so every session asking for the same index shares one
//! device, its buffer pool and its pipelines. The current device is per thread (as torch's):
//! a new thread starts on device 0. In the browser there is one device, the WebGPU device of
//! the page, and its index is 0.
//!
//! Initialization is lazy as in torch: nothing enumerates adapters until the first call that
//! needs them ([`init`], [`set_device`], [`get_device`], [`get_device_capability`]);
//! [`is_initialized`] says whether that happened.

#[cfg(not(target_arch = "wasm32"))]
use super::device::GpuDevice;
use super::exec::{GpuInput, Slot};
use super::store::GTensor;
use crate::error::{Error, Result};
use crate::runtime::RValue;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

static INITIALIZED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's current device index.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// Note that the device layer was initialized (a device opened, or [`init`]).
pub(crate) fn mark_initialized() {
    INITIALIZED.store(true, Ordering::Relaxed);
}

/// Whether the devices were initialized: by [`init`] or by the first use of a device
/// (`torch.cuda.is_initialized`).
pub fn is_initialized() -> bool {
    INITIALIZED.load(Ordering::Relaxed)
}

/// The index of this thread's current device: the one sessions open when no index is given
/// (`torch.cuda.current_device`).
pub fn current_device() -> usize {
    CURRENT.with(Cell::get)
}

/// Make device `index` current if it is below `count`; the error names both.
pub(crate) fn select(index: usize, count: usize) -> Result<()> {
    if index >= count {
        return Err(Error::Input {
            input: "set_device".into(),
            msg: format!(
                "no device {index}: {count} GPU device(s), numbered from 0 (see `pt2web devices`)"
            ),
        });
    }
    CURRENT.with(|c| c.set(index));
    Ok(())
}

/// Make device `index` current for this thread (`torch.cuda.set_device`); an index past the
/// adapters found is an error naming it and the count.
#[cfg(not(target_arch = "wasm32"))]
pub fn set_device(index: usize) -> Result<()> {
    select(index, count()?)
}

/// Makes a device current until dropped, then restores the one before
/// (`with torch.cuda.device(i):`).
#[must_use = "the previous device is restored when the guard drops"]
#[derive(Debug)]
pub struct DeviceGuard {
    previous: usize,
}

impl DeviceGuard {
    /// The device that was current before the guard and comes back when it drops.
    pub fn previous(&self) -> usize {
        self.previous
    }
}

impl Drop for DeviceGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// Make device `index` current until the returned guard drops (`torch.cuda.device(i)`).
#[cfg(not(target_arch = "wasm32"))]
pub fn device(index: usize) -> Result<DeviceGuard> {
    let previous = current_device();
    set_device(index)?;
    Ok(DeviceGuard { previous })
}

/// Where a tensor lives: `cpu`, or the index of the GPU device holding its current copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorDevice {
    Cpu,
    Gpu(usize),
}

impl std::fmt::Display for TensorDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TensorDevice::Cpu => write!(f, "cpu"),
            TensorDevice::Gpu(i) => write!(f, "gpu:{i}"),
        }
    }
}

/// Values that live on a device ([`device_of`]).
pub trait OnDevice {
    fn tensor_device(&self) -> TensorDevice;
}

impl OnDevice for GTensor {
    /// The GPU device when the GPU copy is current, else the CPU (a store the CPU fallback
    /// wrote last, or a weight not uploaded yet).
    fn tensor_device(&self) -> TensorDevice {
        let s = super::store::lock(&self.cell);
        match &s.gpu {
            Some(b) if s.gpu_valid => TensorDevice::Gpu(b.device_index()),
            _ => TensorDevice::Cpu,
        }
    }
}

impl OnDevice for RValue {
    /// A runtime value is a CPU value (outputs read back, inputs given from the host).
    fn tensor_device(&self) -> TensorDevice {
        TensorDevice::Cpu
    }
}

impl OnDevice for Slot {
    fn tensor_device(&self) -> TensorDevice {
        match self {
            Slot::Tensor(t) => t.tensor_device(),
            _ => TensorDevice::Cpu,
        }
    }
}

impl OnDevice for GpuInput {
    fn tensor_device(&self) -> TensorDevice {
        match self {
            GpuInput::Gpu(t) => t.tensor_device(),
            GpuInput::Cpu(v) => v.tensor_device(),
        }
    }
}

/// Where `value` lives (`tensor.device` in torch).
pub fn device_of<T: OnDevice + ?Sized>(value: &T) -> TensorDevice {
    value.tensor_device()
}

/// What a device can do (`torch.xpu.get_device_capability`): the WebGPU features it offers
/// and its limits, by wgpu's names (`max_buffer_size`, `max_compute_workgroup_storage_size`,
/// ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    /// WebGPU feature names (`shader-f16`, `timestamp-query`, `subgroups`, `shader-int64`).
    pub features: Vec<String>,
    pub limits: BTreeMap<String, u64>,
}

/// The capability of an adapter or device with these features and limits.
pub fn capability_of(features: wgpu::Features, l: &wgpu::Limits) -> Capability {
    let features = super::adapter::feature_names(features);
    // wgpu's field names are the keys.
    macro_rules! named {
        ($($name:ident),* $(,)?) => {
            [$((stringify!($name).to_string(), u64::from(l.$name))),*]
        };
    }
    let limits = named![
        max_buffer_size,
        max_storage_buffer_binding_size,
        max_uniform_buffer_binding_size,
        max_storage_buffers_per_shader_stage,
        max_bind_groups,
        max_bindings_per_bind_group,
        max_compute_workgroup_storage_size,
        max_compute_invocations_per_workgroup,
        max_compute_workgroup_size_x,
        max_compute_workgroup_size_y,
        max_compute_workgroup_size_z,
        max_compute_workgroups_per_dimension,
        min_storage_buffer_offset_alignment,
        min_uniform_buffer_offset_alignment,
    ]
    .into_iter()
    .collect();
    Capability { features, limits }
}

/// The features and limits of device `index` (no device is opened: the adapter's).
#[cfg(not(target_arch = "wasm32"))]
pub fn get_device_capability(index: usize) -> Result<Capability> {
    let a = adapter(index)?;
    Ok(capability_of(a.features(), &a.limits()))
}

/// The backends this build can run on (`torch.cuda.get_arch_list`): the wgpu backends
/// compiled in (`vulkan`, `metal`, `dx12`, `gl` natively as the platform has them; `webgpu`
/// in the browser build), then `cpu`, which every build has.
pub fn get_arch_list() -> Vec<&'static str> {
    let built = wgpu::Instance::enabled_backend_features();
    let backends = [
        (wgpu::Backends::VULKAN, "vulkan"),
        (wgpu::Backends::METAL, "metal"),
        (wgpu::Backends::DX12, "dx12"),
        (wgpu::Backends::GL, "gl"),
        (wgpu::Backends::BROWSER_WEBGPU, "webgpu"),
    ];
    let mut v: Vec<&'static str> =
        super::adapter::names_where(backends, |b| built.contains(b)).collect();
    v.push("cpu");
    v
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::*;
    use crate::gpu::device::BackendChoice;
    use std::sync::{Arc, Mutex, OnceLock};

    /// Adapters found at initialization (enumerating takes tens of milliseconds).
    static COUNT: OnceLock<usize> = OnceLock::new();
    /// Devices opened by index, shared by every session asking for that index.
    static OPENED: Mutex<BTreeMap<usize, Arc<GpuDevice>>> = Mutex::new(BTreeMap::new());

    /// The number of adapters, counted once.
    pub(super) fn count() -> Result<usize> {
        init()?;
        Ok(COUNT.get().copied().unwrap_or(0))
    }

    /// Adapter `index` in `pt2web devices` order.
    pub(super) fn adapter(index: usize) -> Result<wgpu::Adapter> {
        let n = count()?;
        let mut list = crate::gpu::adapters(BackendChoice::Auto);
        if index >= list.len() {
            return Err(Error::Input {
                input: "device".into(),
                msg: format!("no device {index}: {n} GPU device(s), numbered from 0"),
            });
        }
        Ok(list.swap_remove(index))
    }

    /// Initialize the devices (`torch.cuda.init`): count the adapters. An error when there
    /// is none, saying how to get one on Linux.
    pub fn init() -> Result<()> {
        let n = *COUNT.get_or_init(|| crate::gpu::adapters(BackendChoice::Auto).len());
        if n == 0 {
            return Err(Error::Gpu(
                "no GPU adapter found (on Linux without a GPU, install Mesa's lavapipe: apt-get \
                 install mesa-vulkan-drivers)"
                    .into(),
            ));
        }
        mark_initialized();
        Ok(())
    }

    /// Device `index` (the current device when `None`), opened on first use and shared
    /// from then on. A device that was lost or destroyed is opened again.
    pub fn get_device(index: Option<usize>) -> Result<Arc<GpuDevice>> {
        let i = index.unwrap_or_else(current_device);
        let n = count()?;
        if i >= n {
            return Err(Error::Input {
                input: "device".into(),
                msg: format!("no device {i}: {n} GPU device(s), numbered from 0"),
            });
        }
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = opened.get(&i).filter(|d| d.check_lost().is_ok()) {
            return Ok(d.clone());
        }
        let d = Arc::new(GpuDevice::open(BackendChoice::Auto, Some(i))?);
        opened.insert(i, d.clone());
        Ok(d)
    }
}

#[cfg(not(target_arch = "wasm32"))]
use native::{adapter, count};
#[cfg(not(target_arch = "wasm32"))]
pub use native::{get_device, init};

/// The current device, opened on first use ([`get_device`] with no index).
#[cfg(not(target_arch = "wasm32"))]
pub fn current_gpu_device() -> Result<std::sync::Arc<GpuDevice>> {
    get_device(None)
}

impl super::exec::GpuSession {
    /// A session on this thread's current device ([`current_device`], opened on first use).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn on_current_device(program: crate::program::Program) -> Result<Self> {
        Self::new(program, current_gpu_device()?)
    }
}
