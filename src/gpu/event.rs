//! Events on a device's queue (`torch.cuda.Event` / `torch.mps.event.Event`): mark a point
//! after the work submitted so far, ask whether the GPU got there, wait for it, and time the
//! GPU between two events.
//!
//! With `timestamp-query` (requested whenever the adapter offers it) [`Event::record`]
//! submits an empty compute pass whose start writes a GPU timestamp, resolved and copied to a
//! small readback buffer in the same submit; [`Event::elapsed_time`] is then GPU time
//! (`ticks * Queue::get_timestamp_period()`), not including host overhead. Without it the
//! event notes the host clock when the queue reports the work done
//! (`Queue::on_submitted_work_done`), which is only as precise as the polling that observes
//! it: [`Event::timing`] says which one an event used ([`Timing::HostClock`] is the flagged
//! fallback).
//!
//! Nothing here blocks except [`Event::synchronize`] (and `elapsed_time`, which waits for
//! both events): [`Event::query`] only polls, and [`Event::synchronize_async`] /
//! [`Event::elapsed_time_async`] are futures woken by the completion callbacks, so the same
//! type works with wgpu's WebGPU backend, where completion arrives through the browser's
//! event loop (the JS `gpu.Event`).

use super::device::GpuDevice;
use crate::error::{Error, Result};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// How an event's time was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// A GPU timestamp written when the queue reached the event.
    GpuTimestamp,
    /// The host clock when the completion callback ran (no `timestamp-query`): an upper bound
    /// of the GPU time, including polling latency.
    HostClock,
}

#[derive(Default)]
struct Shared {
    done: AtomicBool,
    host_ms: Mutex<Option<f64>>,
    /// Futures waiting in [`Event::synchronize_async`].
    wakers: Mutex<Vec<Waker>>,
}

impl Shared {
    fn finish(&self) {
        self.done.store(true, Ordering::Release);
        let w = std::mem::take(&mut *self.wakers.lock().unwrap_or_else(|e| e.into_inner()));
        w.into_iter().for_each(Waker::wake);
    }
}

/// Resolves when the event's completion callback has run.
struct Done(Arc<Shared>);

impl Future for Done {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.done.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.0
            .wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cx.waker().clone());
        // The callback may have run between the check and the registration.
        if self.0.done.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

struct Recorded {
    device: wgpu::Device,
    /// The recording [`GpuDevice`]'s address ([`Event::device_key`]).
    device_key: usize,
    shared: Arc<Shared>,
    /// The readback buffer holding the resolved timestamp (GPU timing only).
    readback: Option<wgpu::Buffer>,
    ticks: Option<u64>,
    period_ns: f64,
}

/// A marker in a device's queue. Create it, [`record`](Event::record) it after some work,
/// then [`query`](Event::query), [`synchronize`](Event::synchronize) or time it against
/// another event with [`elapsed_time`](Event::elapsed_time).
#[derive(Default)]
pub struct Event {
    rec: Mutex<Option<Recorded>>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event(recorded: {})", self.lock().is_some())
    }
}

impl Event {
    /// A new, unrecorded event.
    pub fn new() -> Event {
        Event::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Recorded>> {
        self.rec.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record the event on `dev`'s queue, after every command buffer submitted so far
    /// (re-recording replaces the previous mark).
    pub fn record(&self, dev: &GpuDevice) -> Result<()> {
        let rec = Self::marker(dev, dev.has_timestamps());
        dev.take_error()?;
        *self.lock() = Some(rec);
        Ok(())
    }

    /// Record the event by the host clock whatever the device has: no submit, only a
    /// callback on the work submitted so far (the marks streams put after each run).
    pub(crate) fn record_untimed(&self, dev: &GpuDevice) {
        *self.lock() = Some(Self::marker(dev, false));
    }

    /// The address of the device the event was recorded on (`None` before `record`), to
    /// tell devices apart.
    pub(crate) fn device_key(&self) -> Option<usize> {
        self.lock().as_ref().map(|r| r.device_key)
    }

    /// A mark after the work submitted to `dev` so far: a GPU timestamp written by an empty
    /// pass (`timestamps`), else the host clock when the queue reports the work done.
    fn marker(dev: &GpuDevice, timestamps: bool) -> Recorded {
        let shared = Arc::new(Shared::default());
        let mut readback = None;
        if timestamps {
            let qs = dev.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("pt2web event"),
                ty: wgpu::QueryType::Timestamp,
                count: 1,
            });
            let resolve = dev.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("pt2web event resolve"),
                size: 8,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let rb = dev.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("pt2web event readback"),
                size: 8,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = dev
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            {
                // An empty pass: its start timestamp is taken when the queue gets here.
                let _pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("pt2web event"),
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &qs,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: None,
                    }),
                });
            }
            enc.resolve_query_set(&qs, 0..1, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &rb, 0, 8);
            dev.queue.submit([enc.finish()]);
            let s = shared.clone();
            rb.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                if r.is_ok() {
                    s.finish();
                }
            });
            readback = Some(rb);
        } else {
            let s = shared.clone();
            dev.queue.on_submitted_work_done(move || {
                *s.host_ms.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(crate::runtime::profile::now_ms());
                s.finish();
            });
        }
        Recorded {
            device: dev.device.clone(),
            device_key: dev as *const GpuDevice as usize,
            shared,
            readback,
            ticks: None,
            period_ns: dev.timestamp_period() as f64,
        }
    }

    /// Whether the GPU has reached the event (polls the device once, never waits). An event
    /// that was never recorded counts as done, as in torch.
    pub fn query(&self) -> bool {
        let g = self.lock();
        let Some(r) = g.as_ref() else {
            return true;
        };
        if !r.shared.done.load(Ordering::Acquire) {
            let _ = r.device.poll(wgpu::PollType::Poll);
        }
        r.shared.done.load(Ordering::Acquire)
    }

    /// Wait until the GPU has reached the event.
    pub fn synchronize(&self) -> Result<()> {
        let g = self.lock();
        let Some(r) = g.as_ref() else {
            return Ok(());
        };
        while !r.shared.done.load(Ordering::Acquire) {
            r.device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| Error::Gpu(format!("waiting for an event: {e}")))?;
        }
        Ok(())
    }

    /// [`Event::synchronize`] as a future (the browser cannot block): resolves when the GPU
    /// has reached the event.
    pub async fn synchronize_async(&self) -> Result<()> {
        let shared = {
            let g = self.lock();
            let Some(r) = g.as_ref() else {
                return Ok(());
            };
            #[cfg(not(target_arch = "wasm32"))]
            while !r.shared.done.load(Ordering::Acquire) {
                r.device
                    .poll(wgpu::PollType::wait_indefinitely())
                    .map_err(|e| Error::Gpu(format!("waiting for an event: {e}")))?;
            }
            r.shared.clone()
        };
        Done(shared).await;
        Ok(())
    }

    /// How this event was (or will be) timed; `None` before [`Event::record`].
    pub fn timing(&self) -> Option<Timing> {
        self.lock().as_ref().map(|r| match r.readback {
            Some(_) => Timing::GpuTimestamp,
            None => Timing::HostClock,
        })
    }

    /// The event's time in milliseconds (GPU clock or host clock, see [`Event::timing`]).
    fn time_ms(&self) -> Result<(f64, Timing)> {
        self.synchronize()?;
        self.read_time()
    }

    /// The event's time once it is done.
    fn read_time(&self) -> Result<(f64, Timing)> {
        let mut g = self.lock();
        let r = g
            .as_mut()
            .ok_or_else(|| Error::Gpu("elapsed_time: an event was never recorded".into()))?;
        if let Some(rb) = &r.readback {
            if r.ticks.is_none() {
                let v = {
                    let view = rb
                        .slice(..)
                        .get_mapped_range()
                        .map_err(|e| Error::Gpu(format!("reading an event timestamp: {e}")))?;
                    u64::from_le_bytes(view[..8].try_into().unwrap_or([0; 8]))
                };
                rb.unmap();
                r.ticks = Some(v);
            }
            let ticks = r.ticks.unwrap_or(0);
            return Ok((ticks as f64 * r.period_ns / 1e6, Timing::GpuTimestamp));
        }
        let ms = r
            .shared
            .host_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| Error::Gpu("event completed without a time".into()))?;
        Ok((ms, Timing::HostClock))
    }

    /// Milliseconds from this event to `end` (`torch.cuda.Event.elapsed_time`); waits for
    /// both. GPU time when both carry timestamps; otherwise the host-clock fallback (see
    /// [`Timing::HostClock`]). Both events must come from the same device.
    pub fn elapsed_time(&self, end: &Event) -> Result<f64> {
        let (a, ta) = self.time_ms()?;
        let (b, tb) = end.time_ms()?;
        if ta != tb {
            return Err(Error::Gpu(format!(
                "elapsed_time: one event was timed by {ta:?} and the other by {tb:?}"
            )));
        }
        Ok(b - a)
    }

    /// [`Event::elapsed_time`] as a future (the browser cannot block).
    pub async fn elapsed_time_async(&self, end: &Event) -> Result<f64> {
        self.synchronize_async().await?;
        end.synchronize_async().await?;
        let (a, ta) = self.read_time()?;
        let (b, tb) = end.read_time()?;
        if ta != tb {
            return Err(Error::Gpu(format!(
                "elapsed_time: one event was timed by {ta:?} and the other by {tb:?}"
            )));
        }
        Ok(b - a)
    }
}
