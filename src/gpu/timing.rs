//! GPU time per kernel for the profiler (`RunState::profiler`, `pt2web run --profile`).
//!
//! While a run is profiled and the device has `timestamp-query`, every compute pass that
//! `KernelCtx::dispatch` encodes writes a timestamp at its start and end into a query set
//! ([`GpuTimer::writes`]). At the end of the run ([`GpuTimer::finish`]) the query sets are
//! resolved, read back once, and each node's dispatches become one [`OpEvent`] (node name,
//! target, GPU milliseconds), placed on the profiler's timeline from the run's start, so the
//! profiler's summary and Chrome trace work for GPU runs. Nodes that ran on the CPU fallback
//! are not in the GPU timeline.

use super::device::GpuDevice;
use crate::error::{Error, Result};
use crate::runtime::{OpEvent, Profiler};

/// Queries per set (two per dispatch).
const PER_SET: u32 = 4096;

/// Query sets and the node of each timed dispatch.
pub struct GpuTimer {
    sets: Vec<wgpu::QuerySet>,
    /// Queries used in the last set.
    used: u32,
    /// (node, target) per dispatch, in query order.
    labels: Vec<(String, String)>,
    /// The profiler's clock when the run started (ms).
    start_ms: f64,
}

impl GpuTimer {
    /// A timer for one run, or `None` when the device has no timestamps.
    pub fn new(dev: &GpuDevice, start_ms: f64) -> Option<GpuTimer> {
        dev.has_timestamps().then(|| GpuTimer {
            sets: Vec::new(),
            used: PER_SET,
            labels: Vec::new(),
            start_ms,
        })
    }

    /// The timestamp writes of the next dispatch (of `node`, `target`).
    pub fn writes(
        &mut self,
        dev: &GpuDevice,
        node: &str,
        target: &str,
    ) -> (wgpu::QuerySet, u32, u32) {
        if self.used + 2 > PER_SET {
            self.sets
                .push(dev.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("pt2web profiler"),
                    ty: wgpu::QueryType::Timestamp,
                    count: PER_SET,
                }));
            self.used = 0;
        }
        let i = self.used;
        self.used += 2;
        self.labels.push((node.to_string(), target.to_string()));
        let qs = self
            .sets
            .last()
            .cloned()
            .expect("a query set was just made");
        (qs, i, i + 1)
    }

    /// Resolve and read back every timestamp (after all timed work was submitted) and add
    /// one event per node to `prof`. Returns each dispatch's GPU time (ms), in dispatch order.
    pub async fn finish(self, dev: &GpuDevice, prof: &mut Profiler) -> Result<Vec<f64>> {
        if self.labels.is_empty() {
            return Ok(Vec::new());
        }
        let n_sets = self.sets.len();
        let stride = PER_SET as u64 * 8;
        let total = stride * n_sets as u64;
        let resolve = dev.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("pt2web profiler resolve"),
            size: total,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = dev.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("pt2web profiler readback"),
            size: total,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for (i, qs) in self.sets.iter().enumerate() {
            let count = if i + 1 == n_sets { self.used } else { PER_SET };
            enc.resolve_query_set(qs, 0..count, &resolve, i as u64 * stride);
        }
        enc.copy_buffer_to_buffer(&resolve, 0, &readback, 0, total);
        dev.queue.submit([enc.finish()]);
        let (tx, rx) = super::wait::channel();
        readback
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
        #[cfg(not(target_arch = "wasm32"))]
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("profiler readback: {e}")))?;
        rx.await
            .map_err(|e| Error::Gpu(format!("mapping the profiler readback: {e}")))?;
        let ticks: Vec<u64> = {
            let view = readback
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("reading the profiler readback: {e}")))?;
            view.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect()
        };
        readback.unmap();
        dev.take_error()?;
        let ms = |t: u64| t as f64 * dev.timestamp_period() as f64 / 1e6;
        // Query k of dispatch d: set d / (PER_SET / 2), index 2 (d % (PER_SET / 2)) + k.
        let at = |d: usize, k: usize| {
            let per = (PER_SET / 2) as usize;
            ticks[(d / per) * PER_SET as usize + 2 * (d % per) + k]
        };
        let t0 = (0..self.labels.len()).map(|d| at(d, 0)).min().unwrap_or(0);
        // Consecutive dispatches of one node (a copy, then the kernel) make one event.
        let mut d = 0;
        while d < self.labels.len() {
            let (node, target) = &self.labels[d];
            let start = at(d, 0);
            let mut dur = 0.0;
            let mut e = d;
            while e < self.labels.len() && self.labels[e].0 == *node {
                dur += ms(at(e, 1).saturating_sub(at(e, 0)));
                e += 1;
            }
            prof.events.push(OpEvent {
                node: node.clone(),
                target: target.clone(),
                start_ms: self.start_ms + ms(start.saturating_sub(t0)),
                dur_ms: dur,
                depth: 0,
                cat: "gpu",
            });
            d = e;
        }
        Ok((0..self.labels.len())
            .map(|d| ms(at(d, 1).saturating_sub(at(d, 0))))
            .collect())
    }
}
