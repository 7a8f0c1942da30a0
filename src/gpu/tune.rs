//! Autotuning: where a kernel has several forms that compute the same thing (the matrix
//! multiply's workgroup-tiled and register-blocked kernels), which is fastest depends on the
//! adapter and the shape. The first time a kernel meets a shape it asks the [`Tuner`], which
//! has no answer yet: the kernel takes its heuristic choice and leaves a [`Trial`] (its
//! candidates, parameters and buffer sizes). After the pass that met it (a prepare, or the
//! run), [`Tuner::run_pending`] times each candidate on scratch buffers of the same sizes:
//! a few dispatches in one compute pass, measured with GPU timestamps where the device has
//! `timestamp-query`, else by the wall time until the queue is done. The fastest is kept per
//! adapter and shape, in memory and natively on disk (`autotune.json` in
//! `$PT2WEB_CACHE_DIR`, else `$XDG_CACHE_HOME/pt2web` or `~/.cache/pt2web`), so later
//! sessions and processes start tuned.
//!
//! Tuning runs where [`crate::backends::autotune`] says: by default on hardware adapters only
//! (on software adapters the barrier-free kernels are known to win, and timing on a CPU
//! is slow), `Autotune::On` everywhere (the tests force it on lavapipe), `Autotune::Off`
//! nowhere; natively `PT2WEB_AUTOTUNE=0|1` overrides. A forced kernel
//! (`backends::set_matmul_algorithm`) is never tuned.

use super::device::GpuDevice;
use super::shaders::Variant;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Dispatches timed per candidate (after one untimed warm-up dispatch).
const REPEATS: u32 = 3;
/// Trials kept waiting at most, and shapes tuned at most per device (a program with
/// ever-changing shapes must not grow them forever; past that, heuristic choices).
const MAX_PENDING: usize = 256;
const MAX_CHOICES: usize = 4096;

/// One form of a kernel: its pipeline, grid and the storage bindings it uses (the same
/// parameters as the others, and bindings among theirs).
#[derive(Clone, Debug)]
pub struct Candidate {
    pub variant: Variant,
    pub groups: (u32, u32, u32),
    pub bindings: Vec<u32>,
}

/// A shape waiting to be timed.
struct Trial {
    key: String,
    candidates: Vec<Candidate>,
    meta: Vec<u8>,
    /// (binding, bytes) of each storage buffer.
    bufs: Vec<(u32, u64)>,
}

/// The choices of one device (see the module doc).
pub struct Tuner {
    /// The adapter's identity in the disk cache.
    adapter: String,
    /// The disk cache (natively).
    file: Option<std::path::PathBuf>,
    /// Shape key -> the label of the fastest candidate.
    choices: Mutex<HashMap<String, String>>,
    pending: Mutex<Vec<Trial>>,
    /// Shapes timed by this tuner (not loaded from disk).
    timed: std::sync::atomic::AtomicU64,
}

impl Tuner {
    /// The tuner of an adapter, with what the disk cache holds for it (natively).
    pub fn new(adapter: String) -> Tuner {
        Tuner::with_file(adapter, cache_file())
    }

    /// The tuner of an adapter over the cache file `file` (None: in memory only).
    pub fn with_file(adapter: String, file: Option<std::path::PathBuf>) -> Tuner {
        let choices = file
            .as_deref()
            .and_then(|f| read_file(f).remove(&adapter))
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        Tuner {
            adapter,
            file,
            choices: Mutex::new(choices),
            pending: Mutex::default(),
            timed: Default::default(),
        }
    }

    /// The candidate tuned for `key`: its index in `candidates`, or None (not timed yet: the
    /// caller takes its heuristic choice, and the shape is timed after this pass).
    pub fn choose(
        &self,
        key: &str,
        candidates: &[Candidate],
        meta: &[u8],
        bufs: &[(u32, u64)],
    ) -> Option<usize> {
        if let Some(label) = self
            .choices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return candidates.iter().position(|c| c.variant.label() == *label);
        }
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if candidates.len() > 1
            && pending.len() < MAX_PENDING
            && self.len() < MAX_CHOICES
            && !pending.iter().any(|t| t.key == key)
        {
            pending.push(Trial {
                key: key.to_string(),
                candidates: candidates.to_vec(),
                meta: meta.to_vec(),
                bufs: bufs.to_vec(),
            });
        }
        None
    }

    /// How many shapes have a choice.
    pub fn len(&self) -> usize {
        self.choices.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tuned choices: (shape key, candidate label), sorted.
    pub fn choices(&self) -> Vec<(String, String)> {
        let c = self.choices.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, String)> = c.iter().map(|(k, l)| (k.clone(), l.clone())).collect();
        v.sort();
        v
    }

    /// Forget the choices in memory (the cache file stays): every shape is timed again.
    pub fn forget(&self) {
        self.choices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The adapter's name in the cache file.
    pub fn adapter(&self) -> &str {
        &self.adapter
    }

    /// The cache file (None: in memory only).
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// Shapes this tuner timed (not counting those loaded from disk).
    pub fn timed(&self) -> u64 {
        self.timed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Time every waiting trial on `dev` and keep the fastest candidates (saved to disk
    /// natively); how many shapes were timed.
    pub async fn run_pending(&self, dev: &GpuDevice) -> Result<usize> {
        let trials = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if trials.is_empty() {
            return Ok(0);
        }
        for t in &trials {
            let mut best: Option<(f64, &Candidate)> = None;
            for c in &t.candidates {
                let ms = time(dev, c, &t.meta, &t.bufs).await?;
                if best.is_none_or(|(b, _)| ms < b) {
                    best = Some((ms, c));
                }
            }
            if let Some((_, c)) = best {
                self.choices
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(t.key.clone(), c.variant.label());
            }
        }
        self.timed
            .fetch_add(trials.len() as u64, std::sync::atomic::Ordering::Relaxed);
        if let Some(f) = &self.file {
            save(f, &self.adapter, &self.choices());
        }
        Ok(trials.len())
    }
}

/// Milliseconds of [`REPEATS`] dispatches of `c` on scratch buffers of the trial's sizes.
async fn time(dev: &GpuDevice, c: &Candidate, meta: &[u8], bufs: &[(u32, u64)]) -> Result<f64> {
    let pipeline = dev.pipeline(&c.variant)?;
    let uniform = dev.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("autotune parameters"),
        size: (meta.len() as u64).next_multiple_of(16).max(16),
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    dev.queue.write_buffer(&uniform, 0, meta);
    let scratch: Vec<(u32, wgpu::Buffer)> = bufs
        .iter()
        .filter(|(b, _)| c.bindings.contains(b))
        .map(|&(b, bytes)| {
            let buf = dev.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("autotune scratch"),
                size: bytes.next_multiple_of(4).max(4),
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            (b, buf)
        })
        .collect();
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: uniform.as_entire_binding(),
    }];
    entries.extend(scratch.iter().map(|(b, buf)| wgpu::BindGroupEntry {
        binding: *b,
        resource: buf.as_entire_binding(),
    }));
    let bg = dev.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("autotune"),
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    let dispatch =
        |enc: &mut wgpu::CommandEncoder, n: u32, ts: Option<wgpu::ComputePassTimestampWrites>| {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("autotune"),
                timestamp_writes: ts,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            for _ in 0..n {
                pass.dispatch_workgroups(c.groups.0, c.groups.1, c.groups.2);
            }
        };
    // The warm-up: the driver's work at a pipeline's first dispatch is not the kernel's.
    let mut enc = dev.device.create_command_encoder(&Default::default());
    dispatch(&mut enc, 1, None);
    dev.queue.submit([enc.finish()]);
    dev.synchronize_async().await?;
    let mut enc = dev.device.create_command_encoder(&Default::default());
    if dev.has_timestamps() {
        let qs = dev.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("autotune"),
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        dispatch(
            &mut enc,
            REPEATS,
            Some(wgpu::ComputePassTimestampWrites {
                query_set: &qs,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
        );
        let resolve = dev.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("autotune resolve"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = dev.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("autotune readback"),
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        enc.resolve_query_set(&qs, 0..2, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, 16);
        dev.queue.submit([enc.finish()]);
        let wait = super::exec::map_read(dev, &read);
        #[cfg(not(target_arch = "wasm32"))]
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("autotune: {e}")))?;
        wait.await?;
        let ticks: Vec<u64> = {
            let view = read
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("autotune: reading the timestamps: {e}")))?;
            view.chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
                .collect()
        };
        read.unmap();
        dev.take_error()?;
        let dt = ticks[1].saturating_sub(ticks[0]);
        return Ok(dt as f64 * dev.timestamp_period() as f64 / 1e6);
    }
    dispatch(&mut enc, REPEATS, None);
    let start = crate::runtime::profile::now_ms();
    dev.queue.submit([enc.finish()]);
    dev.synchronize_async().await?;
    dev.take_error()?;
    Ok(crate::runtime::profile::now_ms() - start)
}

/// The disk cache's file (natively; None in the browser or without a home).
fn cache_file() -> Option<std::path::PathBuf> {
    #[cfg(target_arch = "wasm32")]
    return None;
    #[cfg(not(target_arch = "wasm32"))]
    {
        /// The file format's version is part of the name.
        const FILE: &str = "autotune-v1.json";
        let dir = std::env::var_os("PT2WEB_CACHE_DIR")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME")
                    .map(|d| std::path::PathBuf::from(d).join("pt2web"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/pt2web"))
            })?;
        Some(dir.join(FILE))
    }
}

type CacheFile = BTreeMap<String, BTreeMap<String, String>>;

/// The cache file's entries (empty when it is missing or unreadable: the cache is a hint).
fn read_file(path: &std::path::Path) -> CacheFile {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Write this adapter's choices into the cache file, keeping other adapters' (best effort:
/// a cache that cannot be written is only a slower start next time).
fn save(path: &std::path::Path, adapter: &str, choices: &[(String, String)]) {
    let mut all = read_file(path);
    all.insert(adapter.to_string(), choices.iter().cloned().collect());
    let Ok(bytes) = serde_json::to_vec_pretty(&all) else {
        return;
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Written aside and renamed: a concurrent reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}
