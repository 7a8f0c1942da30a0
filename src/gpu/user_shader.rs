//! User WGSL kernels on pt2web tensors (`torch.mps.compile_shader`).
//!
//! [`GpuDevice::compile_shader`] parses and validates the source with naga (the same naga
//! wgpu uses), so a mistake comes back as naga's own message naming the line and column,
//! before wgpu sees the module; the device stays usable. The [`UserShader`] lists its
//! compute entry points with their workgroup size and bindings; [`UserShader::call`] binds
//! tensors to an entry point's storage buffers in binding order, dispatches, and returns the
//! new contents of every argument (read-write arguments are also written back into the
//! caller's tensors). Natively `compile_shader` and `call` block; the browser (JS
//! `gpu.compileShader`) uses the futures [`GpuDevice::compile_shader_async`] and
//! [`UserShader::call_async`], which the blocking calls wrap.
//!
//! Element types: `array<f32>` takes f32 tensors, `array<i32>` i32 or i64 tensors (stored as
//! i32, as the executor does), `array<u32>` bool tensors (0/1) or i32/i64 tensors (their i32
//! bits). Only bind group 0 and storage
//! buffers are supported: pass scalars in a one-element tensor.
//!
//! ```no_run
//! # use pt2web::gpu::{BackendChoice, GpuDevice};
//! # use pt2web::cpu::Tensor;
//! let dev = GpuDevice::open(BackendChoice::Auto, None)?;
//! let sh = dev.compile_shader(r#"
//!   @group(0) @binding(0) var<storage, read> a: array<f32>;
//!   @group(0) @binding(1) var<storage, read_write> out: array<f32>;
//!   @compute @workgroup_size(64) fn twice(@builtin(global_invocation_id) i: vec3<u32>) {
//!     if i.x < arrayLength(&out) { out[i.x] = 2.0 * a[i.x]; }
//!   }"#)?;
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
//! let out = Tensor::from_vec(vec![0.0f32; 3], &[3]);
//! sh.call(&dev, "twice", &[&a, &out], (1, 1, 1))?;
//! assert_eq!(out.to_vec::<f32>(), vec![2.0, 4.0, 6.0]);
//! # Ok::<(), pt2web::Error>(())
//! ```

use super::device::GpuDevice;
use super::store::{from_gpu_bytes, to_gpu_bytes};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::Mutex;

/// One binding an entry point uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShaderBinding {
    pub group: u32,
    pub binding: u32,
    /// The variable's name in the source.
    pub name: String,
    /// `storage, read`, `storage, read_write`, `uniform`, or another address space.
    pub access: String,
    /// Element type of a runtime-sized array (`f32`, `i32`, `u32`), else the WGSL type.
    pub elem: String,
}

impl ShaderBinding {
    /// Whether the shader may write this binding.
    pub fn writable(&self) -> bool {
        self.access == "storage, read_write"
    }
}

/// A compute entry point of a user shader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShaderEntry {
    pub name: String,
    pub workgroup_size: [u32; 3],
    /// The bindings it uses, by (group, binding).
    pub bindings: Vec<ShaderBinding>,
}

/// An argument of [`UserShader::call_args`].
#[derive(Debug, Clone, Copy)]
pub enum ShaderArg<'a> {
    /// A CPU tensor, uploaded (and downloaded afterwards).
    Tensor(&'a Tensor),
}

/// A validated user shader (see the module doc).
pub struct UserShader {
    source: String,
    module: wgpu::ShaderModule,
    entries: Vec<ShaderEntry>,
    pipelines: Mutex<HashMap<String, wgpu::ComputePipeline>>,
}

impl std::fmt::Debug for UserShader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserShader")
            .field("entries", &self.entries)
            .finish()
    }
}

fn type_name(m: &naga::Module, ty: naga::Handle<naga::Type>) -> String {
    let t = &m.types[ty];
    match &t.inner {
        naga::TypeInner::Array { base, .. } => type_name(m, *base),
        naga::TypeInner::Scalar(s) => match (s.kind, s.width) {
            (naga::ScalarKind::Float, 4) => "f32".into(),
            (naga::ScalarKind::Float, 2) => "f16".into(),
            (naga::ScalarKind::Sint, 4) => "i32".into(),
            (naga::ScalarKind::Uint, 4) => "u32".into(),
            (k, w) => format!("{k:?}{}", w * 8),
        },
        other => t.name.clone().unwrap_or_else(|| format!("{other:?}")),
    }
}

impl GpuDevice {
    /// Validate WGSL `src` with naga and compile it (`torch.mps.compile_shader`). A parse or
    /// validation error is returned as naga's message (with the line and column) in an
    /// [`Error::Gpu`]; the device stays usable. Blocks (native); in the browser use
    /// [`GpuDevice::compile_shader_async`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn compile_shader(&self, src: &str) -> Result<UserShader> {
        pollster::block_on(self.compile_shader_async(src))
    }

    /// Parse and validate `src` with naga (no device needed): its compute entry points.
    pub fn validate_shader(&self, src: &str) -> Result<Vec<ShaderEntry>> {
        reflect(
            src,
            self.f16_enabled(),
            self.subgroups_enabled(),
            "compile_shader",
        )
    }

    /// [`GpuDevice::compile_shader`] as a future (the WebGPU backend reports the driver's
    /// verdict asynchronously).
    pub async fn compile_shader_async(&self, src: &str) -> Result<UserShader> {
        let entries = reflect(
            src,
            self.f16_enabled(),
            self.subgroups_enabled(),
            "compile_shader",
        )?;
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let wmodule = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("pt2web user shader"),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu(format!("compile_shader: {e}")));
        }
        Ok(UserShader {
            source: src.to_string(),
            module: wmodule,
            entries,
            pipelines: Mutex::default(),
        })
    }
}

/// naga's parse and validation of `src`; the compute entry points with the bindings each
/// uses (what a pipeline layout needs). `what` names the caller in errors.
pub(crate) fn reflect(
    src: &str,
    f16: bool,
    subgroups: bool,
    what: &str,
) -> Result<Vec<ShaderEntry>> {
    let module = naga::front::wgsl::parse_str(src).map_err(|e| {
        let at = e
            .location(src)
            .map(|l| format!(" at line {}, column {}", l.line_number, l.line_position))
            .unwrap_or_default();
        Error::Gpu(format!(
            "{what}: WGSL parse error{at}:\n{}",
            e.emit_to_string(src)
        ))
    })?;
    let mut caps = naga::valid::Capabilities::empty();
    if f16 {
        caps |= naga::valid::Capabilities::SHADER_FLOAT16;
    }
    if subgroups {
        caps |= naga::valid::Capabilities::SUBGROUP;
    }
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
        .validate(&module)
        .map_err(|e| {
            let at = e
                .location(src)
                .map(|l| format!(" at line {}, column {}", l.line_number, l.line_position))
                .unwrap_or_default();
            Error::Gpu(format!(
                "{what}: WGSL validation error{at}:\n{}",
                e.emit_to_string(src)
            ))
        })?;
    let mut entries = Vec::new();
    for (i, ep) in module.entry_points.iter().enumerate() {
        if ep.stage != naga::ShaderStage::Compute {
            continue;
        }
        let fi = info.get_entry_point(i);
        let mut bindings = Vec::new();
        for (h, g) in module.global_variables.iter() {
            let Some(rb) = &g.binding else { continue };
            if fi[h].is_empty() {
                continue;
            }
            let access = match g.space {
                naga::AddressSpace::Storage { access } => {
                    if access.contains(naga::StorageAccess::STORE) {
                        "storage, read_write".to_string()
                    } else {
                        "storage, read".to_string()
                    }
                }
                naga::AddressSpace::Uniform => "uniform".to_string(),
                other => format!("{other:?}"),
            };
            bindings.push(ShaderBinding {
                group: rb.group,
                binding: rb.binding,
                name: g.name.clone().unwrap_or_default(),
                access,
                elem: type_name(&module, g.ty),
            });
        }
        bindings.sort_by_key(|b| (b.group, b.binding));
        entries.push(ShaderEntry {
            name: ep.name.clone(),
            workgroup_size: ep.workgroup_size,
            bindings,
        });
    }
    Ok(entries)
}

impl UserShader {
    /// The compute entry points, in source order.
    pub fn entries(&self) -> &[ShaderEntry] {
        &self.entries
    }

    /// The WGSL source.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn entry(&self, name: &str) -> Result<&ShaderEntry> {
        self.entries.iter().find(|e| e.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
            Error::Gpu(format!(
                "no compute entry point '{name}' (the shader has: {})",
                names.join(", ")
            ))
        })
    }

    async fn pipeline(&self, dev: &GpuDevice, entry: &str) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(entry)
        {
            return Ok(p.clone());
        }
        let scope = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let p = dev
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: None,
                module: &self.module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu(format!(
                "compile_shader: pipeline '{entry}': {e}"
            )));
        }
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(entry.to_string(), p.clone());
        Ok(p)
    }

    /// Run `entry` with `args` bound to its storage buffers in binding order, on
    /// `workgroups` (x, y, z) workgroups. Returns every argument's contents afterwards (new
    /// contiguous tensors); read-write arguments are also written into the given tensors.
    /// Blocks (native); in the browser use [`UserShader::call_async`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn call(
        &self,
        dev: &GpuDevice,
        entry: &str,
        args: &[&Tensor],
        workgroups: (u32, u32, u32),
    ) -> Result<Vec<Tensor>> {
        let a: Vec<ShaderArg> = args.iter().map(|t| ShaderArg::Tensor(t)).collect();
        self.call_args(dev, entry, &a, workgroups)
    }

    /// [`UserShader::call`] with [`ShaderArg`]s.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn call_args(
        &self,
        dev: &GpuDevice,
        entry: &str,
        args: &[ShaderArg<'_>],
        workgroups: (u32, u32, u32),
    ) -> Result<Vec<Tensor>> {
        pollster::block_on(self.call_args_async(dev, entry, args, workgroups))
    }

    /// [`UserShader::call`] as a future (the browser cannot block).
    pub async fn call_async(
        &self,
        dev: &GpuDevice,
        entry: &str,
        args: &[&Tensor],
        workgroups: (u32, u32, u32),
    ) -> Result<Vec<Tensor>> {
        let a: Vec<ShaderArg> = args.iter().map(|t| ShaderArg::Tensor(t)).collect();
        self.call_args_async(dev, entry, &a, workgroups).await
    }

    /// [`UserShader::call_args`] as a future.
    pub async fn call_args_async(
        &self,
        dev: &GpuDevice,
        entry: &str,
        args: &[ShaderArg<'_>],
        workgroups: (u32, u32, u32),
    ) -> Result<Vec<Tensor>> {
        let ep = self.entry(entry)?;
        if let Some(b) = ep.bindings.iter().find(|b| b.group != 0) {
            return Err(Error::Gpu(format!(
                "{entry}: binding '{}' is in group {}; only group 0 is supported",
                b.name, b.group
            )));
        }
        if let Some(b) = ep
            .bindings
            .iter()
            .find(|b| !b.access.starts_with("storage"))
        {
            return Err(Error::Gpu(format!(
                "{entry}: binding '{}' is {}; only storage buffers are supported (pass \
                 scalars in a one-element tensor)",
                b.name, b.access
            )));
        }
        if args.len() != ep.bindings.len() {
            let names: Vec<&str> = ep.bindings.iter().map(|b| b.name.as_str()).collect();
            return Err(Error::Gpu(format!(
                "{entry} takes {} tensors ({}), got {}",
                ep.bindings.len(),
                names.join(", "),
                args.len()
            )));
        }
        let max = dev.properties.limits.max_compute_workgroups_per_dimension;
        if workgroups.0 > max || workgroups.1 > max || workgroups.2 > max {
            return Err(Error::Gpu(format!(
                "{entry}: {workgroups:?} workgroups exceed the device's {max} per dimension"
            )));
        }
        let mut bufs = Vec::new();
        for (b, ShaderArg::Tensor(t)) in ep.bindings.iter().zip(args) {
            let ok = matches!(
                (b.elem.as_str(), t.dtype),
                ("f32", DType::F32)
                    | ("i32", DType::I32 | DType::I64)
                    | ("u32", DType::Bool | DType::I32 | DType::I64)
            );
            if !ok {
                return Err(Error::Gpu(format!(
                    "{entry}: binding '{}' is array<{}>, got a {} tensor",
                    b.name, b.elem, t.dtype
                )));
            }
            let c = t.contiguous();
            let bytes = to_gpu_bytes(&c.read(), &format!("argument '{}'", b.name))?;
            let size = (bytes.len() as u64).max(16).next_multiple_of(4);
            let buf = dev.alloc(size, &format!("argument '{}'", b.name))?;
            dev.queue.write_buffer(buf.buffer(), 0, &bytes);
            bufs.push((buf, t.numel(), size));
        }
        let pipeline = self.pipeline(dev, entry).await?;
        let layout = pipeline.get_bind_group_layout(0);
        let entries: Vec<wgpu::BindGroupEntry> = ep
            .bindings
            .iter()
            .zip(&bufs)
            .map(|(b, (buf, n, _))| wgpu::BindGroupEntry {
                binding: b.binding,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: buf.buffer(),
                    offset: 0,
                    // Exactly the tensor, so arrayLength() is its element count.
                    size: wgpu::BufferSize::new((*n as u64 * 4).max(4)),
                }),
            })
            .collect();
        let scope = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let bg = dev.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        });
        let total: u64 = bufs.iter().map(|b| b.2).sum();
        let staging = dev.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("pt2web user shader readback"),
            size: total.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(entry),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(workgroups.0, workgroups.1, workgroups.2);
        }
        let mut off = 0;
        for (buf, _, size) in &bufs {
            enc.copy_buffer_to_buffer(buf.buffer(), 0, &staging, off, *size);
            off += size;
        }
        dev.queue.submit([enc.finish()]);
        let popped = scope.pop();
        let (tx, rx) = super::wait::channel();
        staging
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
        #[cfg(not(target_arch = "wasm32"))]
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("{entry}: waiting for the GPU: {e}")))?;
        if let Some(e) = popped.await {
            return Err(Error::Gpu(format!("{entry}: {e}")));
        }
        rx.await
            .map_err(|e| Error::Gpu(format!("mapping a readback buffer: {e}")))?;
        let mut out = Vec::new();
        {
            let view = staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("reading a readback buffer: {e}")))?;
            let mut off = 0usize;
            for ((b, (_, n, size)), ShaderArg::Tensor(t)) in ep.bindings.iter().zip(&bufs).zip(args)
            {
                let data = from_gpu_bytes(t.dtype, &view[off..off + *size as usize], *n)?;
                let r = Tensor {
                    dtype: t.dtype,
                    sizes: t.sizes.clone(),
                    strides: crate::tensor::contiguous_strides(&t.sizes),
                    offset: 0,
                    data: std::sync::Arc::new(std::sync::RwLock::new(data)),
                };
                if b.writable() {
                    t.copy_from(&r)?;
                }
                out.push(r);
                off += *size as usize;
            }
        }
        staging.unmap();
        drop(bufs);
        dev.recycle();
        dev.take_error()?;
        Ok(out)
    }
}
