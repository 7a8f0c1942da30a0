//! Streams (`torch.cuda.Stream` / `torch.xpu.Stream`): ordering domains over a device's queue.
//!
//! # What WebGPU's single queue means
//! WebGPU (and wgpu natively) gives a device exactly one queue, and the GPU runs the command
//! buffers of a queue in the order they were submitted. So unlike CUDA, two streams never
//! run kernels side by side on the GPU: pt2web's streams are a way to *name and wait for*
//! work, not a way to get more GPU parallelism. What they give:
//! - [`Stream::query`] / [`Stream::synchronize`] ask about or wait for the work ordered on one
//!   stream (the runs given it), not all the device's work: a stream whose last run finished
//!   answers `true` while a later run on another stream still runs.
//! - [`Stream::wait_event`] / [`Stream::wait_stream`] order work across streams. Since the
//!   queue executes in submission order, work a stream submits after `wait_event(e)` runs
//!   after everything `e` marks (`e` was recorded, hence submitted, before); no host wait is
//!   needed, and none is made. What the wait adds is that the stream's own
//!   `query`/`synchronize` then cover `e`, as a CUDA stream's do after `cudaStreamWaitEvent`.
//! - Concurrency that does exist: the host side. A run encodes its commands, submits, then
//!   waits for its readback; meanwhile another model (another thread natively, another task
//!   of the page's event loop in the browser, where runs are async) encodes and submits its
//!   own work, and its CPU-side steps (encoding, CPU fallbacks, reading back) overlap the
//!   GPU executing the first. Keeping outputs on the GPU (`keep`) lets a second model
//!   consume the first one's output with no readback in between.
//!
//! Every run goes on a stream: the one in its `RunOptions`, else this thread's current
//! stream of its device ([`current_stream`], the [`default_stream`] unless [`set_stream`] or
//! a [`stream`] scope chose another). After a run's last submit the stream puts a mark on the
//! queue (a completion callback, no extra submit), which `query`/`synchronize` look at.
//! Events record after everything submitted to the queue so far, all streams included: a
//! superset of the stream's work, which in one in-order queue is the same point.
//!
//! [`get_stream_from_external`] makes a stream for work the app submits itself to the
//! device's queue (in the browser: a `GPUDevice` the app owns, given to pt2web with
//! `gpu.fromExternalDevice`); pt2web does not see those submits, so its `synchronize` waits
//! for everything submitted to the queue so far, and its `query` asks whether the queue is
//! idle (natively; in the browser, which answers only through callbacks, whether the work
//! submitted before the previous query or synchronize is done).

use super::device::GpuDevice;
use super::event::Event;
use crate::error::{Error, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Stream ids: 0 is every device's default stream.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Inner {
    id: u64,
    /// The device; weak, so a device keeps no stream alive and no stream keeps a device. Its
    /// address (pinned while the weak exists) tells devices apart.
    device: Weak<GpuDevice>,
    /// Over a queue the app submits to itself ([`get_stream_from_external`]).
    external: bool,
    /// The mark after the last work ordered on this stream.
    last: Mutex<Option<Arc<Event>>>,
}

/// An ordering domain over a device's queue (see the module doc). Clones are handles on the
/// same stream.
#[derive(Clone)]
pub struct Stream(Arc<Inner>);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream({}{})",
            self.0.id,
            if self.0.external { ", external" } else { "" }
        )
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn key(dev: &GpuDevice) -> usize {
    dev as *const GpuDevice as usize
}

impl Stream {
    fn make(dev: &Arc<GpuDevice>, id: u64, external: bool) -> Stream {
        Stream(Arc::new(Inner {
            id,
            device: Arc::downgrade(dev),
            external,
            last: Mutex::new(None),
        }))
    }

    /// A new stream on `dev` (`torch.cuda.Stream(device)`).
    pub fn new(dev: &Arc<GpuDevice>) -> Stream {
        Stream::make(dev, NEXT_ID.fetch_add(1, Ordering::Relaxed), false)
    }

    /// The stream's id: 0 for a device's default stream.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Whether this is a stream over work the app submits itself ([`get_stream_from_external`]).
    pub fn is_external(&self) -> bool {
        self.0.external
    }

    /// Whether the stream is on `dev`.
    pub fn is_on(&self, dev: &GpuDevice) -> bool {
        self.0.device.as_ptr() as usize == key(dev)
    }

    /// The device, while it exists.
    pub fn device(&self) -> Result<Arc<GpuDevice>> {
        self.0
            .device
            .upgrade()
            .ok_or_else(|| Error::Gpu(format!("stream {}: its device was dropped", self.0.id)))
    }

    fn last(&self) -> Option<Arc<Event>> {
        self.0
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Mark the point after the work submitted to the queue so far as this stream's last
    /// work (after a run on it, a wait, or a query of an external stream).
    pub(crate) fn mark(&self, dev: &GpuDevice) {
        let e = Event::new();
        e.record_untimed(dev);
        *self.0.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(e));
    }

    /// The mark to wait for: for an external stream a new one, since the app's submits are
    /// not seen.
    fn current_mark(&self) -> Result<Option<Arc<Event>>> {
        if self.0.external {
            self.mark(&*self.device()?);
        }
        Ok(self.last())
    }

    /// Whether the work ordered on this stream has finished (polls, never waits). A stream
    /// with no work counts as done.
    pub fn query(&self) -> bool {
        if self.0.external {
            // A dropped device runs nothing any more.
            return self.device().map_or(true, |d| self.external_query(&d));
        }
        self.last().is_none_or(|e| e.query())
    }

    /// An external stream's query natively: whether the queue has nothing in flight (the
    /// first poll may only retire what has finished; the second then sees the queue empty).
    #[cfg(not(target_arch = "wasm32"))]
    fn external_query(&self, dev: &GpuDevice) -> bool {
        (0..2).any(|_| {
            dev.device
                .poll(wgpu::PollType::Poll)
                .is_ok_and(|s| s.is_queue_empty())
        })
    }

    /// An external stream's query in the browser, which tells completion only through
    /// callbacks: whether the last mark (put by the previous query or synchronize, or by
    /// this one when there is none) is done. A finished mark is replaced by one after
    /// everything submitted so far, which the next query answers for: in the browser a query
    /// lags the app's newest submits by one call.
    #[cfg(target_arch = "wasm32")]
    fn external_query(&self, dev: &GpuDevice) -> bool {
        match self.last() {
            Some(e) if !e.query() => false,
            Some(_) => {
                self.mark(dev);
                true
            }
            None => {
                self.mark(dev);
                self.last().is_none_or(|e| e.query())
            }
        }
    }

    /// Wait until the work ordered on this stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        match self.current_mark()? {
            Some(e) => e.synchronize(),
            None => Ok(()),
        }
    }

    /// [`Stream::synchronize`] as a future (the browser cannot block).
    pub async fn synchronize_async(&self) -> Result<()> {
        match self.current_mark()? {
            Some(e) => e.synchronize_async().await,
            None => Ok(()),
        }
    }

    /// Record `event` (a new one when `None`) after the work submitted so far, and return
    /// it (`Stream.record_event`).
    pub fn record_event(&self, event: Option<Event>) -> Result<Event> {
        let e = event.unwrap_or_default();
        self.record(&e)?;
        Ok(e)
    }

    /// Record `event` after the work submitted so far, on this stream's device.
    pub fn record(&self, event: &Event) -> Result<()> {
        event.record(&*self.device()?)
    }

    /// Order the work this stream submits from now after `event` (`Stream.wait_event`).
    /// The queue already runs it after (see the module doc); the stream's `query` and
    /// `synchronize` now cover `event` too. An event never recorded is no wait, as in
    /// torch; one recorded on another device is an error.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let dev = self.device()?;
        match event.device_key() {
            None => Ok(()),
            Some(k) if k != key(&dev) => Err(Error::Input {
                input: "wait_event".into(),
                msg: format!(
                    "the event was recorded on another device than stream {}'s ({})",
                    self.0.id, dev.properties.name
                ),
            }),
            Some(_) => {
                self.mark(&dev);
                Ok(())
            }
        }
    }

    /// Order the work this stream submits from now after the work `other` has ordered so
    /// far (`Stream.wait_stream`); both must be on one device.
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        let dev = self.device()?;
        if !other.is_on(&dev) {
            return Err(Error::Input {
                input: "wait_stream".into(),
                msg: format!(
                    "stream {} is on another device than stream {}",
                    other.0.id, self.0.id
                ),
            });
        }
        self.mark(&dev);
        Ok(())
    }

    /// The stream a run on `dev` goes on: `given` (which must be on `dev`), else the current
    /// stream.
    pub(crate) fn for_run(dev: &Arc<GpuDevice>, given: Option<&Stream>) -> Result<Stream> {
        match given {
            Some(s) if !s.is_on(dev) => Err(Error::Input {
                input: "stream".into(),
                msg: format!(
                    "stream {} is on another device than the model's ({})",
                    s.0.id, dev.properties.name
                ),
            }),
            Some(s) => Ok(s.clone()),
            None => Ok(current_stream(dev)),
        }
    }
}

/// Every device's default stream. A stale entry (its device dropped) is removed.
#[cfg(not(target_arch = "wasm32"))]
static DEFAULTS: Mutex<Vec<Stream>> = Mutex::new(Vec::new());

#[cfg(not(target_arch = "wasm32"))]
fn with_defaults<R>(f: impl FnOnce(&mut Vec<Stream>) -> R) -> R {
    f(&mut DEFAULTS.lock().unwrap_or_else(|e| e.into_inner()))
}

// In the browser wgpu's handles are not `Send`: the page's (or Worker's) one thread holds them.
#[cfg(target_arch = "wasm32")]
thread_local! {
    static DEFAULTS: RefCell<Vec<Stream>> = const { RefCell::new(Vec::new()) };
}

#[cfg(target_arch = "wasm32")]
fn with_defaults<R>(f: impl FnOnce(&mut Vec<Stream>) -> R) -> R {
    DEFAULTS.with(|d| f(&mut d.borrow_mut()))
}

/// The default stream of `dev` (id 0; `torch.cuda.default_stream`).
pub fn default_stream(dev: &Arc<GpuDevice>) -> Stream {
    with_defaults(|d| default_in(d, dev))
}

fn default_in(d: &mut Vec<Stream>, dev: &Arc<GpuDevice>) -> Stream {
    d.retain(|s| s.0.device.strong_count() > 0);
    if let Some(s) = d.iter().find(|s| s.is_on(dev)) {
        return s.clone();
    }
    let s = Stream::make(dev, 0, false);
    d.push(s.clone());
    s
}

thread_local! {
    /// This thread's current stream per device (by device address).
    static CURRENT: RefCell<HashMap<usize, Stream>> = RefCell::new(HashMap::new());
}

/// This thread's current stream on `dev`: the default stream unless [`set_stream`] or a
/// [`stream`] scope chose another (`torch.cuda.current_stream`).
pub fn current_stream(dev: &Arc<GpuDevice>) -> Stream {
    let k = key(dev);
    let s = CURRENT.with(|c| {
        c.borrow()
            .get(&k)
            .filter(|s| s.0.device.strong_count() > 0)
            .cloned()
    });
    s.unwrap_or_else(|| default_stream(dev))
}

/// Make `s` this thread's current stream on its device (`torch.cuda.set_stream`); the
/// previous one, if another was set.
pub fn set_stream(s: &Stream) -> Option<Stream> {
    let k = s.0.device.as_ptr() as usize;
    CURRENT.with(|c| c.borrow_mut().insert(k, s.clone()))
}

/// Makes a stream current until dropped, then restores the one before
/// (`torch.cuda.StreamContext`).
#[must_use = "the previous stream is restored when the context drops"]
#[derive(Debug)]
pub struct StreamContext {
    key: usize,
    previous: Option<Stream>,
}

impl Drop for StreamContext {
    fn drop(&mut self) {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            match self.previous.take() {
                Some(p) => c.insert(self.key, p),
                None => c.remove(&self.key),
            };
        });
    }
}

/// Make `s` current on its device until the context drops (`with torch.cuda.stream(s):`).
pub fn stream(s: &Stream) -> StreamContext {
    StreamContext {
        key: s.0.device.as_ptr() as usize,
        previous: set_stream(s),
    }
}

/// A stream over `dev`'s queue for work the app submits to it itself
/// (`torch.cuda.get_stream_from_external`): wgpu and WebGPU give a device one queue, so the
/// app's queue is `dev.queue` (in the browser: the queue of the `GPUDevice` given to
/// `gpu.fromExternalDevice`, which the JS binding checks). Its `query` and `synchronize`
/// cover everything submitted to the queue so far; runs may go on it like on any stream.
pub fn get_stream_from_external(dev: &Arc<GpuDevice>) -> Stream {
    Stream::make(dev, NEXT_ID.fetch_add(1, Ordering::Relaxed), true)
}

impl super::exec::GpuSession {
    /// [`GpuSession::run_with`](super::exec::GpuSession::run_with) with `options`: its
    /// stream, cancel token and timeout.
    pub async fn run_with_options(
        &mut self,
        inputs: Vec<super::exec::GpuInput>,
        keep: bool,
        options: &crate::runtime::RunOptions,
    ) -> Result<Vec<super::exec::Slot>> {
        self.cpu.run_state.stop = crate::runtime::Stop::start(options);
        let r = self.run_with(inputs, keep).await;
        self.cpu.run_state.stop = Default::default();
        r
    }
}
