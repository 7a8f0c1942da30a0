//! Adapter selection (`--backend`, `PT2WEB_ADAPTER`...) and the properties of an adapter
//! (`pt2web devices`, `gpuDeviceProperties()`).

use crate::error::{Error, Result};

/// Which wgpu backend to use (`--backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// Every backend wgpu was built with; the best adapter wins.
    #[default]
    Auto,
    Vulkan,
    Metal,
    Dx12,
    Gl,
    /// The browser's WebGPU (`navigator.gpu`); the only backend of the wasm32 build.
    WebGpu,
}

impl BackendChoice {
    pub fn parse(s: &str) -> Result<BackendChoice> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "auto" => BackendChoice::Auto,
            "vulkan" => BackendChoice::Vulkan,
            "metal" => BackendChoice::Metal,
            "dx12" => BackendChoice::Dx12,
            "gl" | "opengl" => BackendChoice::Gl,
            "webgpu" => BackendChoice::WebGpu,
            other => {
                return Err(Error::Gpu(format!(
                    "unknown backend '{other}' (expected auto, vulkan, metal, dx12, gl or webgpu)"
                )))
            }
        })
    }
    pub fn backends(self) -> wgpu::Backends {
        match self {
            BackendChoice::Auto if cfg!(target_arch = "wasm32") => wgpu::Backends::BROWSER_WEBGPU,
            BackendChoice::Auto => wgpu::Backends::PRIMARY,
            BackendChoice::Vulkan => wgpu::Backends::VULKAN,
            BackendChoice::Metal => wgpu::Backends::METAL,
            BackendChoice::Dx12 => wgpu::Backends::DX12,
            BackendChoice::Gl => wgpu::Backends::GL,
            BackendChoice::WebGpu => wgpu::Backends::BROWSER_WEBGPU,
        }
    }
}

/// Key limits of an adapter (the ones the kernels care about).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLimits {
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub min_uniform_buffer_offset_alignment: u32,
}

/// What `get_device_properties` reports (in the spirit of torch.cuda.get_device_properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProperties {
    pub name: String,
    /// `vulkan`, `metal`, `dx12`, `gl`, `webgpu`.
    pub backend: String,
    /// `discrete`, `integrated`, `virtual`, `cpu`, `other`.
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    pub vendor: u32,
    pub device_id: u32,
    pub limits: KeyLimits,
    /// WebGPU feature names the adapter offers among those pt2web can use
    /// (`shader-f16`, `timestamp-query`, `subgroups`, `shader-int64`).
    pub features: Vec<String>,
    /// The memory pt2web plans to use at most on this device (see [`recommended_max_memory`]).
    pub recommended_max_memory: u64,
}

fn backend_name(b: wgpu::Backend) -> &'static str {
    match b {
        wgpu::Backend::Vulkan => "vulkan",
        wgpu::Backend::Metal => "metal",
        wgpu::Backend::Dx12 => "dx12",
        wgpu::Backend::Gl => "gl",
        wgpu::Backend::BrowserWebGpu => "webgpu",
        _ => "other",
    }
}

fn type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

/// Physical memory of this machine (Linux), for adapters that share it.
#[cfg(target_arch = "wasm32")]
fn system_memory() -> Option<u64> {
    None
}
#[cfg(not(target_arch = "wasm32"))]
fn system_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// wgpu does not report how much memory a device has. pt2web's budget: 3/4 of system memory
/// for CPU and integrated adapters (which share it, as Apple's recommendedMaxWorkingSetSize
/// does), else the adapter's largest buffer size (a lower bound of its memory).
/// `PT2WEB_GPU_MEMORY` (bytes) overrides both.
fn recommended_max_memory(info: &wgpu::AdapterInfo, limits: &wgpu::Limits) -> u64 {
    if let Some(v) = std::env::var("PT2WEB_GPU_MEMORY")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return v;
    }
    match info.device_type {
        wgpu::DeviceType::Cpu | wgpu::DeviceType::IntegratedGpu => system_memory()
            .map(|m| m / 4 * 3)
            .unwrap_or(limits.max_buffer_size),
        _ => limits.max_buffer_size,
    }
}

/// The names of a table's flags that `has` accepts, in table order.
pub(super) fn names_where<T>(
    table: impl IntoIterator<Item = (T, &'static str)>,
    has: impl Fn(T) -> bool,
) -> impl Iterator<Item = &'static str> {
    table
        .into_iter()
        .filter_map(move |(flag, name)| has(flag).then_some(name))
}

/// The WebGPU names of the features in `f` that pt2web can use.
pub fn feature_names(f: wgpu::Features) -> Vec<String> {
    let table = [
        (wgpu::Features::SHADER_F16, "shader-f16"),
        (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
        (wgpu::Features::SUBGROUP, "subgroups"),
        (wgpu::Features::SHADER_INT64, "shader-int64"),
    ];
    names_where(table, |flag| f.contains(flag))
        .map(String::from)
        .collect()
}

pub fn properties_of(adapter: &wgpu::Adapter) -> DeviceProperties {
    let info = adapter.get_info();
    let l = adapter.limits();
    let features = feature_names(adapter.features());
    DeviceProperties {
        name: info.name.clone(),
        backend: backend_name(info.backend).to_string(),
        device_type: type_name(info.device_type).to_string(),
        driver: info.driver.clone(),
        driver_info: info.driver_info.clone(),
        vendor: info.vendor,
        device_id: info.device,
        limits: KeyLimits {
            max_buffer_size: l.max_buffer_size,
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            min_uniform_buffer_offset_alignment: l.min_uniform_buffer_offset_alignment,
        },
        features,
        recommended_max_memory: recommended_max_memory(&info, &l),
    }
}

pub(super) fn instance(backend: BackendChoice) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backend.backends();
    wgpu::Instance::new(desc)
}

/// Every adapter of the chosen backend(s), best first (discrete, integrated, virtual, cpu).
/// (Native only: a browser hands out one adapter, see [`GpuDevice::request`].)
#[cfg(not(target_arch = "wasm32"))]
pub fn adapters(backend: BackendChoice) -> Vec<wgpu::Adapter> {
    let mut v = if backend == BackendChoice::Auto {
        // GL only when no primary backend has an adapter (probing GL without a display is
        // slow and noisy).
        let primary = instance(backend).enumerate_adapters(wgpu::Backends::PRIMARY);
        let v = pollster::block_on(primary);
        if v.is_empty() {
            pollster::block_on(instance(BackendChoice::Gl).enumerate_adapters(wgpu::Backends::GL))
        } else {
            v
        }
    } else {
        pollster::block_on(instance(backend).enumerate_adapters(backend.backends()))
    };
    let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    // GL adapters last: compute on GL is the least capable path.
    v.sort_by_key(|a| (a.get_info().backend == wgpu::Backend::Gl, rank(a)));
    v
}
