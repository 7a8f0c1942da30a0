//! The device layer: a buffer pool with torch.cuda/torch.mps-style memory statistics and a
//! per-process memory limit (adapter selection and device properties: `adapter.rs`).
//!
//! # Memory plan
//! A run frees each intermediate right after its last use (the executor computes every
//! value's last reader once per graph). A buffer freed since the last submit is "pending":
//! encoded but not yet executed work may still read it. It is handed out again at once for
//! a kernel's output ([`GpuDevice::alloc_output`]): commands of a queue run in order, so the
//! new writer runs after the old readers (wgpu puts a barrier between the dispatches). It
//! is not given to an upload ([`GpuDevice::alloc`]): `Queue::write_buffer` lands before
//! every command of the next submit and would overwrite data that earlier commands read.
//! Because a run allocates and frees in the same order every time, a warm run of a
//! fixed-shape program reuses the same buffers in the same places, which is what a static
//! liveness plan would give, and keeps the bind-group cache hitting (below).
//! In place is not used: WebGPU forbids binding one buffer as both the read-only input and
//! the writable output of a dispatch.
//!
//! # Bind groups
//! Bind groups are cached by (shader variant, kernel parameters, buffers bound): a warm run
//! creates none, and its parameters live in immutable uniform buffers owned by the cache
//! (so they need no upload either). [`GpuDevice::empty_cache`] drops the cache.

use super::shaders::Variant;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(target_arch = "wasm32"))]
pub use super::adapter::adapters;
use super::adapter::instance;
pub use super::adapter::{properties_of, BackendChoice, DeviceProperties, KeyLimits};

/// Memory statistics of one device (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in buffers that hold live tensors (torch's `memory_allocated`).
    pub allocated: u64,
    /// Highest `allocated` since the device was made or `reset_peak_memory_stats`.
    pub peak: u64,
    /// Bytes in every buffer pt2web holds from the driver: live plus cached for reuse.
    pub driver_allocated: u64,
    /// Buffers created from the driver (pool misses) since the device was made.
    pub buffers_created: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Storage,
    /// Mappable staging buffers that outputs are copied into for reading back.
    Readback,
    /// A buffer the pool did not make (Vulkan external memory, `external.rs`): never
    /// counted, pooled or reused; dropping it drops the buffer.
    External,
}

/// Entries of the bind-group cache before it starts over.
const BIND_GROUP_CACHE_ENTRIES: usize = 1 << 14;

#[derive(PartialEq, Eq, Hash)]
struct BindKey {
    variant: Variant,
    meta: Vec<u8>,
    bufs: Vec<(u32, wgpu::Buffer, u64)>,
}

#[derive(Default)]
struct BindGroups {
    map: HashMap<BindKey, (wgpu::BindGroup, wgpu::Buffer)>,
    uniform_bytes: u64,
}

#[derive(Default)]
struct Pool {
    free: HashMap<(Kind, u64), Vec<wgpu::Buffer>>,
    /// Freed since the last submit (see the module doc).
    pending: HashMap<(Kind, u64), Vec<wgpu::Buffer>>,
    stats: MemoryStats,
    /// Peak of `stats.allocated` since [`GpuDevice::start_peak_window`].
    window_peak: u64,
    /// Changes to the pool so far: buffers handed out (created or reused) or released to
    /// the driver.
    changes: u64,
    limit: Option<u64>,
    /// The device's index in `pt2web devices` order (`devices.rs`; 0 in the browser).
    device_index: usize,
    /// torch-style statistics, segments and history (`memory.rs`).
    track: super::memory::Tracker,
}

/// A pooled GPU buffer; dropping it returns the buffer to the pool.
pub struct GpuBuffer {
    buf: Option<wgpu::Buffer>,
    kind: Kind,
    size: u64,
    pool: Arc<Mutex<Pool>>,
}

impl GpuBuffer {
    pub fn buffer(&self) -> &wgpu::Buffer {
        self.buf.as_ref().expect("buffer present until drop")
    }
    /// Size in bytes (rounded up to the pool's size class).
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The index of the device the buffer belongs to ([`GpuDevice::index`]).
    pub fn device_index(&self) -> usize {
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .device_index
    }
}

impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuBuffer({} bytes)", self.size)
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if self.kind == Kind::External {
            return;
        }
        if let Some(b) = self.buf.take() {
            let mut p = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            p.stats.allocated = p.stats.allocated.saturating_sub(self.size);
            p.track.returned(&b, self.size);
            p.pending.entry((self.kind, self.size)).or_default().push(b);
        }
    }
}

/// The buffer of a free list that the pool hands out: the one with the largest id, so the
/// choice depends on which buffers are free, not on the order they came back in. A warm run
/// starts from the same free set as the one before, so it gets the same buffers in the same
/// places, and the bind-group cache hits.
fn take_canonical(v: &mut Vec<wgpu::Buffer>) -> Option<wgpu::Buffer> {
    let (i, _) = v.iter().enumerate().max_by(|a, b| a.1.cmp(b.1))?;
    Some(v.swap_remove(i))
}

/// Size classes: powers of two up to 1 MiB, then multiples of 1 MiB (at least 16 bytes,
/// as a binding may not be empty).
fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(16);
    if b <= 1 << 20 {
        b.next_power_of_two()
    } else {
        b.div_ceil(1 << 20) << 20
    }
}

/// How `on_uncaptured_error` marks the driver's out-of-memory errors.
const DRIVER_OOM: &str = "the GPU driver is out of memory: ";

/// One wgpu device and queue with its buffer pool.
pub struct GpuDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub properties: DeviceProperties,
    /// Whether the device was opened with `timestamp-query` (GPU times for events and the
    /// profiler).
    timestamps: bool,
    /// Whether the device was opened with `shader-f16`.
    f16: bool,
    /// Whether the device was opened with `subgroups` (the subgroup kernel forms).
    subgroups: bool,
    /// Nanoseconds per timestamp tick.
    timestamp_period: f32,
    pool: Arc<Mutex<Pool>>,
    /// Shader modules, layouts and compute pipelines (`pipelines.rs`).
    pub(super) pipes: super::pipelines::Pipelines,
    bind_groups: Mutex<BindGroups>,
    bind_groups_created: std::sync::atomic::AtomicU64,
    /// Validation errors wgpu reported outside an error scope (checked after each submit).
    errors: Arc<Mutex<Vec<String>>>,
    /// Set by wgpu's device-lost callback or [`GpuDevice::destroy`] (`lost.rs`).
    lost: Arc<super::lost::Lost>,
    /// Kernel choices timed per shape on this adapter (`tune.rs`).
    pub tuner: super::tune::Tuner,
    /// The index fault record kernels write and its sites (`fault.rs`).
    pub(crate) faults: super::fault::Faults,
    /// The device's default generator ([`crate::random`]).
    pub(crate) generator: Arc<crate::random::DeviceGenerator>,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuDevice({} on {})",
            self.properties.name, self.properties.backend
        )
    }
}

impl GpuDevice {
    /// Open the best adapter of `backend` (or adapter `index` in [`adapters`] order).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(backend: BackendChoice, index: Option<usize>) -> Result<GpuDevice> {
        Self::open_with(backend, index, wgpu::Features::empty())
    }

    /// [`GpuDevice::open`] with `extra` features required too (e.g. Vulkan external memory,
    /// `external.rs`): an error naming the adapter when it lacks one.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_with(
        backend: BackendChoice,
        index: Option<usize>,
        extra: wgpu::Features,
    ) -> Result<GpuDevice> {
        let list = adapters(backend);
        let adapter = match index {
            Some(i) => list.into_iter().nth(i),
            None => list.into_iter().next(),
        }
        .ok_or_else(|| {
            Error::Gpu(format!(
                "no GPU adapter found for backend {backend:?} (on Linux without a GPU, install \
                 Mesa's lavapipe: apt-get install mesa-vulkan-drivers)"
            ))
        })?;
        // Its number in `pt2web devices` (all backends), which `device_of` reports.
        let info = adapter.get_info();
        let at = match backend {
            BackendChoice::Auto => index.unwrap_or(0),
            _ => adapters(BackendChoice::Auto)
                .iter()
                .position(|a| a.get_info() == info)
                .unwrap_or(index.unwrap_or(0)),
        };
        let dev = pollster::block_on(Self::from_adapter_with(adapter, extra))?;
        dev.pool().device_index = at;
        Ok(dev)
    }

    /// The device's index in `pt2web devices` order (0 in the browser, which gives one).
    pub fn index(&self) -> usize {
        self.pool().device_index
    }

    /// Ask the platform for its preferred adapter (the browser's `navigator.gpu.requestAdapter`
    /// on wasm32) and open it.
    pub async fn request(backend: BackendChoice) -> Result<GpuDevice> {
        let inst = instance(backend);
        let adapter = inst
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                compatible_surface: None,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("no GPU adapter for backend {backend:?}: {e}")))?;
        Self::from_adapter(adapter).await
    }

    /// Open a device on `adapter` with every limit it offers.
    pub async fn from_adapter(adapter: wgpu::Adapter) -> Result<GpuDevice> {
        Self::from_adapter_with(adapter, wgpu::Features::empty()).await
    }

    /// [`GpuDevice::from_adapter`] with `extra` features required too.
    pub async fn from_adapter_with(
        adapter: wgpu::Adapter,
        extra: wgpu::Features,
    ) -> Result<GpuDevice> {
        let properties = properties_of(&adapter);
        let missing = extra - adapter.features();
        if !missing.is_empty() {
            return Err(Error::Gpu(format!(
                "{} ({}): the adapter lacks {missing:?}",
                properties.name, properties.backend
            )));
        }
        // Timestamps for events and the profiler, shader-f16 for the f16 kernels and
        // subgroups for the subgroup reductions, whenever the adapter has them.
        let wanted =
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP;
        let features = adapter.features() & wanted;
        let desc = wgpu::DeviceDescriptor {
            label: Some("pt2web"),
            required_features: features | extra,
            // Everything the adapter offers: models need large storage buffers.
            required_limits: adapter.limits(),
            ..Default::default()
        };
        let (device, queue) = adapter
            .request_device(&desc)
            .await
            .map_err(|e| Error::Gpu(format!("{}: request_device: {e}", properties.name)))?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = errors.clone();
        // wgpu's default handler panics; keep the error and return it from the next submit.
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            // The driver's out-of-memory is told apart (`take_error`).
            let text = match e {
                wgpu::Error::OutOfMemory { .. } => format!("{DRIVER_OOM}{e}"),
                e => e.to_string(),
            };
            sink.lock().unwrap_or_else(|e| e.into_inner()).push(text);
        }));
        let lost: Arc<super::lost::Lost> = Arc::default();
        let mark = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            mark.mark(format!("{reason:?}: {msg}"));
        });
        let timestamp_period = queue.get_timestamp_period();
        let tuner = super::tune::Tuner::new(format!(
            "{} ({} {:04x}:{:04x}, {} {})",
            properties.name,
            properties.backend,
            properties.vendor,
            properties.device_id,
            properties.driver,
            properties.driver_info
        ));
        let faults = super::fault::Faults::new(&device);
        super::devices::mark_initialized();
        Ok(GpuDevice {
            generator: crate::random::register(&properties.name),
            faults,
            device,
            queue,
            properties,
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            f16: features.contains(wgpu::Features::SHADER_F16),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            timestamp_period,
            pool: Arc::new(Mutex::new(Pool {
                track: super::memory::Tracker::on_open(),
                ..Default::default()
            })),
            pipes: Default::default(),
            bind_groups: Mutex::default(),
            bind_groups_created: Default::default(),
            errors,
            lost,
            tuner,
        })
    }

    /// Destroy the device now (WebGPU's `GPUDevice.destroy()`): its memory goes back to the
    /// driver at once, and every session on it fails from now on with
    /// [`Error::DeviceLost`], as after a loss the driver or the browser caused. Open a new
    /// device to go on.
    pub fn destroy(&self) {
        self.lost.mark("destroyed");
        self.device.destroy();
    }

    /// `Err(DeviceLost)` once the device is lost.
    pub fn check_lost(&self) -> Result<()> {
        self.lost.check()
    }

    /// `fut`'s output, or `Err(DeviceLost)` as soon as the device is lost: for waits on the
    /// device's callbacks, which a lost device may never make.
    pub fn until_lost<'a, F: std::future::Future + 'a>(
        &'a self,
        fut: F,
    ) -> impl std::future::Future<Output = Result<F::Output>> + 'a {
        self.lost.until(fut)
    }

    /// What an error of work on this device means: [`Error::DeviceLost`] when the device is
    /// lost (what failed is then a consequence), else the error itself. The loss may be
    /// reported after the failure it caused: natively the callback comes from a poll, in
    /// the browser from the event loop, so both get a turn first.
    pub async fn lost_or(&self, e: Error) -> Error {
        if matches!(e, Error::DeviceLost { .. }) {
            return e;
        }
        if self.check_lost().is_ok() {
            #[cfg(not(target_arch = "wasm32"))]
            let _ = self.device.poll(wgpu::PollType::Poll);
            #[cfg(target_arch = "wasm32")]
            super::wait::yield_to_page().await;
        }
        self.check_lost().err().unwrap_or(e)
    }

    /// Whether GPU timestamps are available (the adapter offers `timestamp-query`).
    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// Whether `shader-f16` is enabled (the adapter offers it): f16 tensors then live on the
    /// GPU and the f16 kernels run.
    pub fn f16_enabled(&self) -> bool {
        self.f16
    }

    /// Whether `subgroups` is enabled (natively, where the adapter offers it; wgpu's browser
    /// backend does not pass the feature through): the subgroup kernel forms run.
    pub fn subgroups_enabled(&self) -> bool {
        self.subgroups
    }

    /// Nanoseconds per GPU timestamp tick (`Queue::get_timestamp_period`).
    pub fn timestamp_period(&self) -> f32 {
        self.timestamp_period
    }

    /// The errors wgpu reported since the last call, as an [`Error::Gpu`], or as an
    /// [`Error::OutOfMemory`] of [`crate::error::GPU_MEMORY`] when the driver ran out of
    /// memory (a buffer it could not create).
    pub fn take_error(&self) -> Result<()> {
        let mut e = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if e.is_empty() {
            return Ok(());
        }
        let all = std::mem::take(&mut *e);
        let text = all.join("; ");
        if all.iter().any(|m| m.starts_with(DRIVER_OOM)) {
            drop(e);
            let allocated = self.pool().stats.allocated;
            return Err(Error::OutOfMemory {
                memory: crate::error::GPU_MEMORY,
                what: text,
                requested: 0,
                allocated,
                limit: allocated,
            });
        }
        Err(Error::Gpu(text))
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` on the pool's torch-style bookkeeping (`memory.rs`), under the pool's lock.
    pub(super) fn memory<R>(&self, f: impl FnOnce(&mut super::memory::Tracker) -> R) -> R {
        f(&mut self.pool().track)
    }

    fn alloc_kind(
        &self,
        kind: Kind,
        bytes: u64,
        what: &str,
        gpu_written: bool,
    ) -> Result<GpuBuffer> {
        let size = size_class(bytes);
        let max = self.properties.limits.max_buffer_size;
        if size > max {
            return Err(Error::Limit {
                what: format!(
                    "{what}: GPU buffer bytes (the device's max_buffer_size; run it on the CPU)"
                ),
                value: bytes,
                limit: max,
            });
        }
        let mut p = self.pool();
        if let Some(limit) = p.limit {
            if p.stats.allocated + size > limit {
                let left = limit.saturating_sub(p.stats.allocated);
                p.track.oom(size, left, what);
                return Err(Error::OutOfMemory {
                    memory: crate::error::GPU_MEMORY,
                    what: what.to_string(),
                    requested: size,
                    allocated: p.stats.allocated,
                    limit,
                });
            }
        }
        // Deterministic mode zero-fills with a queue write, which must not hit a pending buffer.
        let reuse_pending = gpu_written && !crate::backends::deterministic();
        let pending = match reuse_pending {
            true => p.pending.get_mut(&(kind, size)).and_then(take_canonical),
            false => None,
        };
        let buf = match pending.or_else(|| p.free.get_mut(&(kind, size)).and_then(take_canonical)) {
            Some(b) => b,
            None => {
                p.stats.buffers_created += 1;
                p.stats.driver_allocated += size;
                let usage = match kind {
                    Kind::Storage | Kind::External => {
                        wgpu::BufferUsages::STORAGE
                            | wgpu::BufferUsages::COPY_SRC
                            | wgpu::BufferUsages::COPY_DST
                    }
                    Kind::Readback => wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                };
                let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size,
                    usage,
                    mapped_at_creation: false,
                });
                p.track.created(&b, size);
                b
            }
        };
        p.track.taken(&buf, size, bytes, what);
        p.stats.allocated += size;
        p.changes += 1;
        p.stats.peak = p.stats.peak.max(p.stats.allocated);
        p.window_peak = p.window_peak.max(p.stats.allocated);
        if kind == Kind::Storage && crate::backends::deterministic() {
            // Deterministic mode: no tensor sees what the buffer's previous user left. The
            // buffer is free (no encoded work uses it), so a queue write cannot race.
            self.queue.write_buffer(&buf, 0, &vec![0u8; size as usize]);
        }
        Ok(GpuBuffer {
            buf: Some(buf),
            kind,
            size,
            pool: self.pool.clone(),
        })
    }

    /// A storage buffer of at least `bytes` (contents undefined). `what` names the tensor
    /// in an out-of-memory error.
    pub fn alloc(&self, bytes: u64, what: &str) -> Result<GpuBuffer> {
        self.alloc_kind(Kind::Storage, bytes, what, false)
    }

    /// A storage buffer that only GPU commands encoded from now on will write (a kernel's
    /// output): it may be one freed since the last submit (see the module doc). Never
    /// `write_buffer` into it before the next submit.
    pub fn alloc_output(&self, bytes: u64, what: &str) -> Result<GpuBuffer> {
        self.alloc_kind(Kind::Storage, bytes, what, true)
    }

    /// Take these storage buffers (each with its size class, [`GpuBuffer::size`]) out of
    /// the pool for one replayed run (see `super::tape`): `None`, with nothing taken, when
    /// any of them is not free (someone else holds it, or `empty_cache` released it) or the
    /// memory limit would be passed. Nothing encoded uses a free buffer, so the caller may
    /// write into them at once.
    pub(crate) fn take_free(&self, bufs: &[(wgpu::Buffer, u64)]) -> Option<Vec<GpuBuffer>> {
        let mut p = self.pool();
        let total: u64 = bufs.iter().map(|(_, s)| *s).sum();
        if p.limit.is_some_and(|l| p.stats.allocated + total > l) {
            return None;
        }
        let pool = &mut *p;
        let mut taken: Vec<(wgpu::Buffer, u64)> = Vec::with_capacity(bufs.len());
        for (b, size) in bufs {
            let key = (Kind::Storage, *size);
            let mut found = None;
            for list in [pool.pending.get_mut(&key), pool.free.get_mut(&key)]
                .into_iter()
                .flatten()
            {
                if let Some(i) = list.iter().position(|x| x == b) {
                    found = Some(list.swap_remove(i));
                    break;
                }
            }
            match found {
                Some(buf) => {
                    pool.track
                        .taken(&buf, *size, *size, "a replayed run's buffer");
                    taken.push((buf, *size))
                }
                None => {
                    // Back where nothing encoded can be using them (pending is the safe list).
                    for (buf, size) in taken {
                        pool.track.returned(&buf, size);
                        pool.pending
                            .entry((Kind::Storage, size))
                            .or_default()
                            .push(buf);
                    }
                    return None;
                }
            }
        }
        p.stats.allocated += total;
        p.stats.peak = p.stats.peak.max(p.stats.allocated);
        p.window_peak = p.window_peak.max(p.stats.allocated);
        Some(
            taken
                .into_iter()
                .map(|(buf, size)| GpuBuffer {
                    buf: Some(buf),
                    kind: Kind::Storage,
                    size,
                    pool: self.pool.clone(),
                })
                .collect(),
        )
    }

    /// A storage buffer made outside the pool (external memory, of `bytes`, a multiple of
    /// 4) held as a tensor's buffer: outside the memory statistics, released when dropped.
    pub fn adopt_external(&self, buf: wgpu::Buffer, bytes: u64) -> GpuBuffer {
        GpuBuffer {
            buf: Some(buf),
            kind: Kind::External,
            size: bytes,
            pool: self.pool.clone(),
        }
    }

    /// A mappable staging buffer of at least `bytes` (unmap it before dropping it).
    pub fn alloc_readback(&self, bytes: u64) -> Result<GpuBuffer> {
        self.alloc_kind(Kind::Readback, bytes, "a readback buffer", false)
    }

    /// Bind groups created so far (cache misses of [`GpuDevice::bind_group`]).
    pub fn bind_groups_created(&self) -> u64 {
        self.bind_groups_created
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The bind group of variant `v` (its explicit layout: `pipelines.rs`) with the kernel
    /// parameters `meta` at binding 0 and `bufs` ((binding, buffer, bytes bound from offset
    /// 0)), from the cache when the same variant, parameters and buffers were bound before
    /// (see the module doc).
    pub fn bind_group(
        &self,
        v: &Variant,
        meta: &[u8],
        bufs: Vec<(u32, wgpu::Buffer, u64)>,
    ) -> Result<wgpu::BindGroup> {
        let key = BindKey {
            variant: *v,
            meta: meta.to_vec(),
            bufs,
        };
        let mut cache = self.bind_groups.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((bg, _)) = cache.map.get(&key) {
            return Ok(bg.clone());
        }
        if cache.map.len() >= BIND_GROUP_CACHE_ENTRIES {
            // Bounded: a program whose shapes change every run must not grow it forever.
            cache.map.clear();
            cache.uniform_bytes = 0;
        }
        let size = size_class(meta.len() as u64);
        let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kernel parameters"),
            size,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // A fresh buffer that nothing reads yet: the write lands before the next submit.
        self.queue.write_buffer(&uniform, 0, meta);
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: uniform.as_entire_binding(),
        }];
        for (b, buf, bytes) in &key.bufs {
            entries.push(wgpu::BindGroupEntry {
                binding: *b,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: buf,
                    offset: 0,
                    size: wgpu::BufferSize::new(*bytes),
                }),
            });
        }
        let bound: Vec<u32> = entries.iter().map(|e| e.binding).collect();
        let layout = self.layout_for(v, &bound)?;
        let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(v.entry),
            layout: &layout.bind_group,
            entries: &entries,
        });
        self.bind_groups_created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        cache.uniform_bytes += size;
        cache.map.insert(key, (bg.clone(), uniform));
        Ok(bg)
    }

    /// Bytes of kernel-parameter buffers held by the bind-group cache.
    pub fn bind_group_cache_bytes(&self) -> u64 {
        self.bind_groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .uniform_bytes
    }

    /// Drop every cached bind group (and its parameter buffer).
    pub fn clear_bind_groups(&self) {
        let mut c = self.bind_groups.lock().unwrap_or_else(|e| e.into_inner());
        c.map.clear();
        c.uniform_bytes = 0;
    }

    /// Make buffers freed before the last submit reusable (call after each submit).
    pub fn recycle(&self) {
        let mut p = self.pool();
        let pending = std::mem::take(&mut p.pending);
        for (k, mut bufs) in pending {
            p.free.entry(k).or_default().append(&mut bufs);
        }
    }

    /// Changes to the pool so far: unchanged between two calls when nothing took a buffer
    /// or released the cache in between (another session, in the browser, while a prepare
    /// awaits).
    pub(crate) fn pool_changes(&self) -> u64 {
        self.pool().changes
    }

    /// Clear every free pooled buffer in one submit. At the end of `prepare` every buffer a
    /// run uses is free, and a buffer's first use costs more than the ones after it: wgpu
    /// zero-fills a buffer before its first read (WebGPU's lazy initialization) and the
    /// driver backs its memory on first touch. Both happen here, so the first run finds its
    /// buffers as a warm run does. Returns the bytes cleared.
    pub fn touch_free_buffers(&self) -> u64 {
        let p = self.pool();
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("prepare: first touch"),
            });
        let mut bytes = 0;
        // Storage buffers only: a staging buffer is written by a copy before it is read.
        for ((kind, size), bufs) in &p.free {
            if *kind != Kind::Storage {
                continue;
            }
            for b in bufs {
                enc.clear_buffer(b, 0, None);
                bytes += size;
            }
        }
        drop(p);
        if bytes > 0 {
            self.queue.submit([enc.finish()]);
        }
        bytes
    }

    /// Wait for all submitted work, then recycle freed buffers (torch.cuda.synchronize).
    pub fn synchronize(&self) -> Result<()> {
        self.check_lost()?;
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("synchronize: {e}")))?;
        self.recycle();
        Ok(())
    }

    /// [`GpuDevice::synchronize`] as a future (the browser cannot block): resolves when
    /// the work submitted so far is done.
    pub async fn synchronize_async(&self) -> Result<()> {
        self.check_lost()?;
        let (tx, rx) = super::wait::channel();
        self.queue.on_submitted_work_done(move || tx.send(()));
        #[cfg(not(target_arch = "wasm32"))]
        if let Err(e) = self.device.poll(wgpu::PollType::wait_indefinitely()) {
            return Err(self.lost_or(Error::Gpu(format!("synchronize: {e}"))).await);
        }
        self.until_lost(rx).await?;
        self.recycle();
        Ok(())
    }

    /// Release cached (unused) buffers to the driver (torch.cuda.empty_cache).
    pub fn empty_cache(&self) -> Result<()> {
        self.synchronize()?;
        // Cached bind groups name pooled buffers; drop them before the buffers go.
        self.clear_bind_groups();
        let mut p = self.pool();
        let mut freed = 0;
        p.changes += 1;
        let pool = &mut *p;
        for (k, bufs) in pool.free.drain() {
            freed += bufs.len() as u64 * k.1;
            for b in bufs {
                pool.track.released(&b, k.1);
                b.destroy();
            }
        }
        p.stats.driver_allocated = p.stats.driver_allocated.saturating_sub(freed);
        Ok(())
    }

    pub fn memory_stats(&self) -> MemoryStats {
        let p = self.pool();
        let mut s = p.stats;
        // Pending buffers still belong to pt2web until recycled or released; so do the
        // bind-group cache's parameter buffers.
        s.driver_allocated = s.driver_allocated.max(s.allocated) + self.bind_group_cache_bytes();
        s
    }
    pub fn current_allocated_memory(&self) -> u64 {
        self.pool().stats.allocated
    }
    pub fn max_memory_allocated(&self) -> u64 {
        self.pool().stats.peak
    }
    /// Start measuring the peak of allocated bytes (a run's [`RunStats::peak_bytes`]); unlike
    /// [`GpuDevice::reset_peak_memory_stats`] it leaves the user-visible peak alone.
    ///
    /// [`RunStats::peak_bytes`]: super::RunStats::peak_bytes
    pub fn start_peak_window(&self) {
        let mut p = self.pool();
        p.window_peak = p.stats.allocated;
    }
    /// The peak since [`GpuDevice::start_peak_window`].
    pub fn peak_window(&self) -> u64 {
        self.pool().window_peak
    }
    pub fn reset_peak_memory_stats(&self) {
        let mut p = self.pool();
        p.stats.peak = p.stats.allocated;
        p.track.reset_peaks();
    }
    pub fn driver_allocated_memory(&self) -> u64 {
        self.memory_stats().driver_allocated
    }
    pub fn recommended_max_memory(&self) -> u64 {
        self.properties.recommended_max_memory
    }
    /// Limit live allocations to `fraction` of [`recommended_max_memory`] (0 < fraction <= 1);
    /// past it an allocation fails with [`Error::OutOfMemory`] and the device stays usable.
    pub fn set_per_process_memory_fraction(&self, fraction: f64) -> Result<()> {
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::Gpu(format!(
                "memory fraction must be in (0, 1], got {fraction}"
            )));
        }
        self.pool().limit = Some((self.recommended_max_memory() as f64 * fraction) as u64);
        Ok(())
    }
    /// The current limit in bytes, if one is set.
    pub fn memory_limit(&self) -> Option<u64> {
        self.pool().limit
    }
}
