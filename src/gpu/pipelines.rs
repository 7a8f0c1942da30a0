//! Compute pipelines of the built-in shaders: explicit layouts, created ahead of time.
//!
//! # Layouts
//! Every pipeline has an explicit layout, not WebGPU's `layout: "auto"`: the bindings its
//! kernel binds, each read-only or read-write as the module declares it. A bind group then
//! needs only the layout, so a prepare pass can create every bind group before any pipeline
//! exists; and two pipelines of the same content have equal layouts, which lets a driver's
//! pipeline cache answer the second from the first (auto layouts are unique per pipeline,
//! so nothing made with one is ever shared). The declarations are read by a scan of the
//! module's `@group(0) @binding(n) var<...>` lines ([`scan_bindings`]), microseconds where
//! naga's parse and validation of a module takes milliseconds in WebAssembly (and would
//! stall the page); a test checks the scan against naga's reflection for every variant, and
//! wgpu validates every pipeline against its layout.
//!
//! # Creation
//! A run creates a pipeline the first time it dispatches its variant ([`GpuDevice::pipeline`]).
//! A prepare pass ([`super::exec::GpuSession::prepare_async`]) instead notes the variants it
//! would dispatch ([`GpuDevice::want_pipeline`]), and [`GpuDevice::create_wanted`] then
//! creates them all at once:
//! - natively on several threads (wgpu's device is shared between threads; each pipeline's
//!   translation and the driver's compilation run in parallel);
//! - in the browser through WebGPU's `createComputePipelineAsync`, every pipeline started
//!   before the first is awaited, so the browser compiles them off the page's thread and in
//!   parallel; wgpu (which has no async creation, gfx-rs/wgpu#3794) then creates the same
//!   pipelines, which the browser answers from its cache of what it just compiled (Dawn
//!   deduplicates shader modules, layouts and pipelines by content).

use super::device::GpuDevice;
use super::shaders::{Elems, Shader, Variant};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How an entry point binds one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BindingKind {
    /// `var<uniform>` (the kernel parameters).
    Uniform,
    /// `var<storage, read>`.
    ReadOnly,
    /// `var<storage, read_write>`.
    ReadWrite,
}

impl BindingKind {
    fn of(access: &str) -> Option<BindingKind> {
        match access {
            "uniform" => Some(BindingKind::Uniform),
            "storage, read" => Some(BindingKind::ReadOnly),
            "storage, read_write" => Some(BindingKind::ReadWrite),
            _ => None,
        }
    }

    fn wgpu(self) -> wgpu::BufferBindingType {
        match self {
            BindingKind::Uniform => wgpu::BufferBindingType::Uniform,
            BindingKind::ReadOnly => wgpu::BufferBindingType::Storage { read_only: true },
            BindingKind::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
        }
    }

    /// The `GPUBufferBindingType` wgpu's WebGPU backend gives [`BindingKind::wgpu`].
    #[cfg(target_arch = "wasm32")]
    fn webgpu(self) -> &'static str {
        match self {
            BindingKind::Uniform => "uniform",
            BindingKind::ReadOnly => "read-only-storage",
            BindingKind::ReadWrite => "storage",
        }
    }
}

/// The explicit layout of one entry point (bind group 0 only).
pub(crate) struct Layout {
    /// (binding, kind), in binding order.
    pub bindings: Bindings,
    pub bind_group: wgpu::BindGroupLayout,
    pub pipeline: wgpu::PipelineLayout,
}

type ModuleKey = (Shader, Elems);
/// (binding, kind) of the buffers an entry point binds, or a module declares.
type Bindings = Vec<(u32, BindingKind)>;
/// naga's reflection of a module: each compute entry point with its bindings.
type Reflected = Arc<Vec<(String, Bindings)>>;
type EntryKey = (Shader, Elems, &'static str);

/// The device's modules, layouts and pipelines (each created once per device).
#[derive(Default)]
pub(crate) struct Pipelines {
    modules: Mutex<HashMap<ModuleKey, wgpu::ShaderModule>>,
    /// naga's reflection of each module: (entry point, its bindings).
    reflected: Mutex<HashMap<ModuleKey, Reflected>>,
    /// Each module's declared buffer bindings ([`scan_bindings`]).
    declared: Mutex<HashMap<Shader, Arc<Bindings>>>,
    layouts: Mutex<HashMap<EntryKey, Arc<Layout>>>,
    cache: Mutex<HashMap<Variant, wgpu::ComputePipeline>>,
    /// Variants a prepare pass needs that have no pipeline yet, in first-use order, each
    /// with the bind group of its first dispatch (for [`GpuDevice::first_dispatches`]).
    wanted: Mutex<Vec<(Variant, wgpu::BindGroup)>>,
    created: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GpuDevice {
    /// Compute pipelines created so far (each variant once per device).
    pub fn pipelines_created(&self) -> u64 {
        self.pipes.created.load(Ordering::Relaxed)
    }

    /// The pipeline of a shader variant, created on first use and cached by variant.
    pub fn pipeline(&self, v: &Variant) -> Result<wgpu::ComputePipeline> {
        let mut cache = lock(&self.pipes.cache);
        if let Some(p) = cache.get(v) {
            return Ok(p.clone());
        }
        let p = self.create_pipeline(v)?;
        cache.insert(*v, p.clone());
        Ok(p)
    }

    /// Note that a prepare pass dispatches `v` with bind group `bg`: [`GpuDevice::create_wanted`]
    /// creates its pipeline unless it exists by then.
    pub(crate) fn want_pipeline(&self, v: &Variant, bg: &wgpu::BindGroup) -> Result<()> {
        self.check_f16(v)?;
        if lock(&self.pipes.cache).contains_key(v) {
            return Ok(());
        }
        let mut wanted = lock(&self.pipes.wanted);
        if !wanted.iter().any(|(w, _)| w == v) {
            wanted.push((*v, bg.clone()));
        }
        Ok(())
    }

    /// Dispatch each pipeline `todo` lists once, one workgroup, on the bind group of its
    /// first use, in one submit (prepare's warm-up). A driver does work at a pipeline's first
    /// dispatch (llvmpipe generates its code then); this moves it before the first run. The
    /// dispatches write into the buffers their nodes write, which a prepare pass took from
    /// the pool: call it only for a program that writes no state in place.
    pub(crate) fn first_dispatches(&self, todo: &[(Variant, wgpu::BindGroup)]) -> Result<usize> {
        if todo.is_empty() {
            return Ok(0);
        }
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("prepare: first dispatches"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: None,
            });
            for (v, bg) in todo {
                pass.set_pipeline(&self.pipeline(v)?);
                pass.set_bind_group(0, bg, &[]);
                pass.dispatch_workgroups(1, 1, 1);
            }
        }
        self.queue.submit([enc.finish()]);
        Ok(todo.len())
    }

    /// Create every pipeline noted by [`GpuDevice::want_pipeline`] that does not exist yet
    /// (see the module doc for how); returns them with the bind group of their first use.
    pub(crate) async fn create_wanted(&self) -> Result<Vec<(Variant, wgpu::BindGroup)>> {
        let firsts: Vec<(Variant, wgpu::BindGroup)> = {
            let wanted = std::mem::take(&mut *lock(&self.pipes.wanted));
            let cache = lock(&self.pipes.cache);
            wanted
                .into_iter()
                .filter(|(v, _)| !cache.contains_key(v))
                .collect()
        };
        let todo: Vec<Variant> = firsts.iter().map(|(v, _)| *v).collect();
        if todo.is_empty() {
            return Ok(firsts);
        }
        #[cfg(target_arch = "wasm32")]
        {
            self.compile_in_browser(&todo).await?;
            for v in &todo {
                self.pipeline(v)?;
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            // The modules first (several variants share one), then the pipelines.
            let mut modules: Vec<Variant> = Vec::new();
            for v in &todo {
                if !modules
                    .iter()
                    .any(|m| (m.shader, m.elems) == (v.shader, v.elems))
                {
                    modules.push(*v);
                }
            }
            par_map(&modules, |v| self.module(v));
            let made = par_map(&todo, |v| self.create_pipeline(v));
            let mut cache = lock(&self.pipes.cache);
            for (v, p) in todo.iter().zip(made) {
                cache.entry(*v).or_insert(p?);
            }
        }
        Ok(firsts)
    }

    /// The layout of `v` binding `bound` (and the parameters at 0), created at the first
    /// bind group of `v` (see the module doc).
    pub(crate) fn layout_for(&self, v: &Variant, bound: &[u32]) -> Result<Arc<Layout>> {
        let key = (v.shader, v.elems, v.entry);
        if let Some(l) = lock(&self.pipes.layouts).get(&key) {
            let same = l.bindings.len() == bound.len()
                && bound.iter().all(|b| l.bindings.iter().any(|(x, _)| x == b));
            if !same {
                return Err(Error::Gpu(format!(
                    "internal: {} binds {bound:?}, its layout has {:?}",
                    v.label(),
                    l.bindings
                )));
            }
            return Ok(l.clone());
        }
        let declared = self.declared(v.shader)?;
        let mut bindings = Vec::with_capacity(bound.len());
        for b in bound {
            let kind = declared
                .iter()
                .find(|(x, _)| x == b)
                .map(|(_, k)| *k)
                .ok_or_else(|| {
                    Error::Gpu(format!(
                        "internal: {} binds {b}, which {} does not declare",
                        v.label(),
                        v.shader.name()
                    ))
                })?;
            bindings.push((*b, kind));
        }
        bindings.sort_by_key(|(b, _)| *b);
        Ok(self.make_layout(key, bindings))
    }

    /// The layout of `v` for its pipeline: the one its bind groups use, else (a pipeline
    /// created before any bind group) the bindings naga finds its entry point using.
    fn layout(&self, v: &Variant) -> Result<Arc<Layout>> {
        let key = (v.shader, v.elems, v.entry);
        if let Some(l) = lock(&self.pipes.layouts).get(&key) {
            return Ok(l.clone());
        }
        let bindings = self
            .reflect(v)?
            .iter()
            .find(|(name, _)| name == v.entry)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| {
                Error::Gpu(format!(
                    "internal: pipeline {}: the module has no compute entry point {}",
                    v.label(),
                    v.entry
                ))
            })?;
        Ok(self.make_layout(key, bindings))
    }

    fn make_layout(&self, key: EntryKey, bindings: Bindings) -> Arc<Layout> {
        let entries: Vec<wgpu::BindGroupLayoutEntry> = bindings
            .iter()
            .map(|&(binding, kind)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: kind.wgpu(),
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let bind_group = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(key.2),
                entries: &entries,
            });
        let pipeline = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(key.2),
                bind_group_layouts: &[Some(&bind_group)],
                immediate_size: 0,
            });
        let layout = Arc::new(Layout {
            bindings,
            bind_group,
            pipeline,
        });
        lock(&self.pipes.layouts)
            .entry(key)
            .or_insert(layout)
            .clone()
    }

    /// The buffer bindings `shader`'s module declares ([`scan_bindings`]; cached).
    fn declared(&self, shader: Shader) -> Result<Arc<Bindings>> {
        if let Some(d) = lock(&self.pipes.declared).get(&shader) {
            return Ok(d.clone());
        }
        let d = Arc::new(
            scan_bindings(shader.module())
                .map_err(|e| Error::Gpu(format!("internal: {}: {e}", shader.name())))?,
        );
        lock(&self.pipes.declared).insert(shader, d.clone());
        Ok(d)
    }

    /// naga's reflection of `v`'s module (cached per module).
    fn reflect(&self, v: &Variant) -> Result<Reflected> {
        let key = (v.shader, v.elems);
        if let Some(r) = lock(&self.pipes.reflected).get(&key) {
            return Ok(r.clone());
        }
        let what = format!("internal: shader {}", v.label());
        let mut out = Vec::new();
        for e in super::user_shader::reflect(
            &v.source(),
            v.elems.uses_f16(),
            v.shader.uses_subgroups(),
            &what,
        )? {
            let mut bindings = Vec::with_capacity(e.bindings.len());
            for b in &e.bindings {
                match (b.group, BindingKind::of(&b.access)) {
                    (0, Some(kind)) => bindings.push((b.binding, kind)),
                    _ => {
                        return Err(Error::Gpu(format!(
                            "{what}: binding {} of group {} ({}) is not a buffer of group 0",
                            b.binding, b.group, b.access
                        )))
                    }
                }
            }
            out.push((e.name, bindings));
        }
        let out = Arc::new(out);
        lock(&self.pipes.reflected).insert(key, out.clone());
        Ok(out)
    }

    fn check_f16(&self, v: &Variant) -> Result<()> {
        if v.elems.uses_f16() && !self.f16_enabled() {
            return Err(Error::Gpu(format!(
                "pipeline {}: the device was opened without shader-f16",
                v.label()
            )));
        }
        if v.shader.uses_subgroups() && !self.subgroups_enabled() {
            return Err(Error::Gpu(format!(
                "pipeline {}: the device was opened without subgroups",
                v.label()
            )));
        }
        Ok(())
    }

    fn module(&self, v: &Variant) -> wgpu::ShaderModule {
        let key = (v.shader, v.elems);
        if let Some(m) = lock(&self.pipes.modules).get(&key) {
            return m.clone();
        }
        let m = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(v.shader.name()),
                source: wgpu::ShaderSource::Wgsl(v.source()),
            });
        lock(&self.pipes.modules).entry(key).or_insert(m).clone()
    }

    /// Create `v`'s pipeline (not cached here).
    fn create_pipeline(&self, v: &Variant) -> Result<wgpu::ComputePipeline> {
        self.check_f16(v)?;
        let layout = self.layout(v)?;
        // Natively a bad pipeline is reported here; in the browser the error scope resolves
        // asynchronously, so errors arrive through the uncaptured-error handler instead
        // (every variant is validated by naga in tests either way).
        #[cfg(not(target_arch = "wasm32"))]
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.module(v);
        let constants: Vec<(&str, f64)> = v.constant.iter().map(|(n, x)| (*n, *x as f64)).collect();
        let p = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(v.entry),
                layout: Some(&layout.pipeline),
                module: &module,
                entry_point: Some(v.entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("pipeline {}: {e}", v.label())));
        }
        self.pipes.created.fetch_add(1, Ordering::Relaxed);
        Ok(p)
    }

    /// Compile `todo` with `createComputePipelineAsync` on the browser's device, with the
    /// modules and layouts wgpu gives the same pipelines (see the module doc).
    #[cfg(target_arch = "wasm32")]
    async fn compile_in_browser(&self, todo: &[Variant]) -> Result<()> {
        use js_sys::{Array, Function, Object, Promise, Reflect};
        use wasm_bindgen::{JsCast, JsValue};
        let Some(raw) = self.device.as_webgpu() else {
            return Ok(());
        };
        let raw: &JsValue = raw.as_ref();
        let set = |o: &Object, k: &str, v: &JsValue| {
            // Setting a property of a fresh plain object cannot fail.
            let _ = Reflect::set(o, &JsValue::from_str(k), v);
        };
        let call = |method: &str, arg: &JsValue| -> Result<JsValue> {
            let f = Reflect::get(raw, &JsValue::from_str(method))
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
                .ok_or_else(|| Error::Gpu(format!("GPUDevice.{method} is missing")))?;
            f.call1(raw, arg)
                .map_err(|e| Error::Gpu(format!("GPUDevice.{method}: {}", js_message(&e))))
        };
        let mut modules: HashMap<ModuleKey, JsValue> = HashMap::new();
        let mut pending = Vec::with_capacity(todo.len());
        for v in todo {
            self.check_f16(v)?;
            let layout = self.layout(v)?;
            let module = match modules.get(&(v.shader, v.elems)) {
                Some(m) => m.clone(),
                None => {
                    let d = Object::new();
                    set(&d, "label", &JsValue::from_str(v.shader.name()));
                    set(&d, "code", &JsValue::from_str(&v.source()));
                    let m = call("createShaderModule", &d)?;
                    modules.insert((v.shader, v.elems), m.clone());
                    m
                }
            };
            let entries = Array::new();
            for &(binding, kind) in &layout.bindings {
                let buffer = Object::new();
                set(&buffer, "type", &JsValue::from_str(kind.webgpu()));
                set(&buffer, "hasDynamicOffset", &JsValue::FALSE);
                let e = Object::new();
                set(&e, "binding", &JsValue::from(binding));
                set(
                    &e,
                    "visibility",
                    &JsValue::from(wgpu::ShaderStages::COMPUTE.bits()),
                );
                set(&e, "buffer", &buffer);
                entries.push(&e);
            }
            let d = Object::new();
            set(&d, "label", &JsValue::from_str(v.entry));
            set(&d, "entries", &entries);
            let bgl = call("createBindGroupLayout", &d)?;
            let d = Object::new();
            set(&d, "label", &JsValue::from_str(v.entry));
            set(&d, "bindGroupLayouts", &Array::of1(&bgl));
            let pl = call("createPipelineLayout", &d)?;
            let stage = Object::new();
            set(&stage, "module", &module);
            set(&stage, "entryPoint", &JsValue::from_str(v.entry));
            if let Some((name, x)) = v.constant {
                let c = Object::new();
                set(&c, name, &JsValue::from_f64(x as f64));
                set(&stage, "constants", &c);
            }
            let d = Object::new();
            set(&d, "label", &JsValue::from_str(v.entry));
            set(&d, "layout", &pl);
            set(&d, "compute", &stage);
            let p: Promise = call("createComputePipelineAsync", &d)?
                .dyn_into()
                .map_err(|_| Error::Gpu("createComputePipelineAsync gave no promise".into()))?;
            pending.push((v, p));
        }
        for (v, p) in pending {
            wasm_bindgen_futures::JsFuture::from(p)
                .await
                .map_err(|e| Error::Gpu(format!("pipeline {}: {}", v.label(), js_message(&e))))?;
        }
        Ok(())
    }
}

/// The buffer bindings a WGSL module declares: `@group(0) @binding(n) var<uniform>`,
/// `var<storage, read>` (or `var<storage>`) and `var<storage, read_write>`, by binding
/// number. An error for another group or address space, or a number declared twice (the
/// built-in shaders declare each binding once; a test holds them to it).
pub(crate) fn scan_bindings(src: &str) -> std::result::Result<Bindings, String> {
    fn number(s: &str) -> std::result::Result<(u32, &str), String> {
        let end = s.find(')').ok_or("an unclosed attribute")?;
        let n = s[..end]
            .trim()
            .parse()
            .map_err(|_| format!("a bad attribute value {:?}", &s[..end]))?;
        Ok((n, &s[end + 1..]))
    }
    let mut out: Bindings = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find("@group(") {
        let (group, r) = number(&rest[i + "@group(".len()..])?;
        let r = r
            .trim_start()
            .strip_prefix("@binding(")
            .ok_or("@group not followed by @binding")?;
        let (binding, r) = number(r)?;
        let r = r
            .trim_start()
            .strip_prefix("var")
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix('<'))
            .ok_or_else(|| format!("binding {binding} is not a var<...>"))?;
        let end = r.find('>').ok_or("an unclosed var<...>")?;
        let access: Vec<&str> = r[..end].split(',').map(str::trim).collect();
        let kind = match access.as_slice() {
            ["uniform"] => BindingKind::Uniform,
            ["storage"] | ["storage", "read"] => BindingKind::ReadOnly,
            ["storage", "read_write"] => BindingKind::ReadWrite,
            _ => return Err(format!("binding {binding}: var<{}>", &r[..end])),
        };
        if group != 0 {
            return Err(format!("binding {binding} is in group {group}, not 0"));
        }
        if out.iter().any(|(b, _)| *b == binding) {
            return Err(format!("binding {binding} is declared twice"));
        }
        out.push((binding, kind));
        rest = &r[end..];
    }
    Ok(out)
}

/// The message of a JS error (a `GPUPipelineError`, a `TypeError`), else its debug form.
#[cfg(target_arch = "wasm32")]
fn js_message(e: &wasm_bindgen::JsValue) -> String {
    js_sys::Reflect::get(e, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// `f` over `items` on up to 8 threads; results in item order.
#[cfg(not(target_arch = "wasm32"))]
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8)
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (t..items.len())
                        .step_by(threads)
                        .map(|i| (i, f(&items[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for w in workers {
            match w.join() {
                Ok(done) => {
                    for (i, r) in done {
                        out[i] = Some(r);
                    }
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_reads_declarations() {
        let src = "@group(0) @binding(0) var<uniform> p: P;\n\
                   @group(0)\n  @binding(2) var<storage, read_write> o: array<f32>;\n\
                   @group(0) @binding(1) var<storage,read> a: array<f32>;\n\
                   @group(0) @binding(3) var<storage> b: array<u32>;";
        assert_eq!(
            scan_bindings(src).unwrap(),
            vec![
                (0, BindingKind::Uniform),
                (2, BindingKind::ReadWrite),
                (1, BindingKind::ReadOnly),
                (3, BindingKind::ReadOnly)
            ]
        );
        let twice = "@group(0) @binding(1) var<storage, read> a: array<f32>;\n\
                     @group(0) @binding(1) var<storage, read_write> b: array<f32>;";
        assert!(scan_bindings(twice).unwrap_err().contains("twice"));
        let group1 = "@group(1) @binding(0) var<uniform> p: P;";
        assert!(scan_bindings(group1).unwrap_err().contains("group 1"));
    }

    /// The scan agrees with naga: every binding each entry point of each built-in variant
    /// uses is declared with the access naga reports.
    #[test]
    fn scan_matches_naga_for_every_variant() {
        let mut seen = std::collections::HashSet::new();
        for v in crate::gpu::shaders::all_variants() {
            if !seen.insert((v.shader, v.elems)) {
                continue;
            }
            let declared = scan_bindings(v.shader.module()).unwrap();
            let what = v.label();
            for e in crate::gpu::user_shader::reflect(&v.source(), true, true, &what).unwrap() {
                for b in &e.bindings {
                    let kind = BindingKind::of(&b.access);
                    assert_eq!(b.group, 0, "{what}:{} binding {}", e.name, b.binding);
                    assert!(
                        declared.contains(&(b.binding, kind.unwrap())),
                        "{what}:{} binding {} ({}) vs scan {declared:?}",
                        e.name,
                        b.binding,
                        b.access
                    );
                }
            }
        }
    }
}
