//! torch.cuda.memory's view of the buffer pool (`device.rs`): allocator statistics under
//! torch's keys, memory history and snapshots in the layout of `torch.cuda.memory._snapshot()`,
//! so torch's own tools (`torch.cuda._memory_viz`, pytorch.org/memory_viz) read them.
//!
//! # How the pool maps onto torch's caching allocator
//! - Every buffer pt2web creates from the driver is a *segment* (torch's `cudaMalloc`), and
//!   holds exactly one *block*: wgpu buffers are never split. A block is `active_allocated`
//!   while a tensor (or a staging buffer) holds it, `inactive` while it waits in the pool.
//! - WebGPU gives no device addresses, so each segment gets a made-up one when it is created:
//!   distinct, never reused, segments laid end to end from [`ADDRESS_BASE`].
//! - torch's pools: a size class under 1 MiB counts in `small_pool`, the rest in `large_pool`.
//! - No block waits for another stream before it is free (one queue), so `active` equals
//!   `allocation` and a free records `free_requested` and `free_completed` together.
//! - The bind-group cache's kernel-parameter buffers are not pool segments: they count in
//!   `driver_allocated_memory`, not in `memory_reserved`.
//!
//! # History
//! [`GpuDevice::record_memory_history`] keeps the last `max_entries` actions of the pool with
//! a timestamp and one frame: the op (`name`) and node (`filename`) the executor was running
//! (`line` is 0). An action outside any node (a weight or input upload, a readback buffer)
//! names what was allocated instead, under the name [`OUTSIDE_A_NODE`]. Recording a history
//! costs a lock per node and turns off tape replays (`tape.rs`), as profiling does, since a
//! replay runs no node to name.

use super::device::GpuDevice;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The `max_entries` of the history devices opened from now on record (0: none); see
/// [`record_memory_history`].
static HISTORY_ON_OPEN: AtomicUsize = AtomicUsize::new(0);

/// torch's `_record_memory_history` is process-wide: this starts (or, `enabled` false, stops)
/// a history of at most `max_entries` actions on every GPU device opened from now on, so a
/// history can include the weights' upload at load. [`GpuDevice::record_memory_history`]
/// does the same on a device already open.
pub fn record_memory_history(enabled: bool, max_entries: usize) {
    let n = if enabled { max_entries.max(1) } else { 0 };
    HISTORY_ON_OPEN.store(n, Ordering::Relaxed);
}

/// Where the made-up segment addresses start.
pub const ADDRESS_BASE: u64 = 1 << 32;
/// Size classes from here on count in torch's `large_pool`.
const LARGE_POOL: u64 = 1 << 20;
/// The frame name of an allocation made outside any node (its `filename` says what it holds).
pub const OUTSIDE_A_NODE: &str = "<outside a node>";
/// torch's pool names, in the order of [`Pools`].
const POOL_NAMES: [&str; 3] = ["all", "small_pool", "large_pool"];

/// One statistic as torch keeps it: its value, highest value, total increase and decrease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    pub current: u64,
    /// Highest `current` since the device was made or `reset_peak_memory_stats`.
    pub peak: u64,
    /// Sum of increases since the device was made or `reset_accumulated_memory_stats`.
    pub allocated: u64,
    /// Sum of decreases, over the same span.
    pub freed: u64,
}

impl Stat {
    fn add(&mut self, n: u64) {
        self.current += n;
        self.allocated += n;
        self.peak = self.peak.max(self.current);
    }
    fn sub(&mut self, n: u64) {
        self.current = self.current.saturating_sub(n);
        self.freed += n;
    }
}

/// One statistic per torch pool: `all`, `small_pool`, `large_pool`.
#[derive(Debug, Clone, Copy, Default)]
struct Pools([Stat; 3]);

impl Pools {
    fn of(size: u64) -> usize {
        if size < LARGE_POOL {
            1
        } else {
            2
        }
    }
    fn add(&mut self, size: u64, n: u64) {
        self.0[0].add(n);
        self.0[Self::of(size)].add(n);
    }
    fn sub(&mut self, size: u64, n: u64) {
        self.0[0].sub(n);
        self.0[Self::of(size)].sub(n);
    }
}

/// The counters behind [`GpuDevice::memory_stats_as_nested_dict`].
#[derive(Debug, Clone, Default)]
struct Counters {
    /// Blocks held by tensors (torch's `allocation`; `active` is the same here).
    allocation: Pools,
    /// Buffers held from the driver.
    segment: Pools,
    /// Bytes of the blocks held by tensors, in size classes.
    allocated_bytes: Pools,
    /// Bytes of the segments.
    reserved_bytes: Pools,
    /// Bytes the callers asked for (before rounding up to the size class).
    requested_bytes: Pools,
    num_ooms: u64,
    num_device_alloc: u64,
    num_device_free: u64,
}

/// Where a block was allocated or freed: the op (`name`) and node (`filename`) being run,
/// torch's frame with `line` 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub name: Arc<str>,
    pub filename: Arc<str>,
}

impl Serialize for Frame {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut f = s.serialize_struct("Frame", 3)?;
        f.serialize_field("name", &*self.name)?;
        f.serialize_field("filename", &*self.filename)?;
        f.serialize_field("line", &0)?;
        f.end()
    }
}

/// One action of the pool (torch's `TraceEntry`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceEntry {
    /// `alloc`, `free_requested`, `free_completed`, `segment_alloc`, `segment_free` or `oom`.
    pub action: &'static str,
    pub addr: u64,
    /// Bytes: the size class (the requested bytes for an `oom`).
    pub size: u64,
    pub stream: u64,
    /// Microseconds on pt2web's clock (natively from its first reading in the process; in
    /// the browser `performance.now()`, from the page's start).
    pub time_us: u64,
    pub frames: Vec<Frame>,
    /// For an `oom`: the bytes left under the memory limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_free: Option<u64>,
}

/// A block of a segment (torch's `Block`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    /// `active_allocated` or `inactive`.
    pub state: &'static str,
    /// Where it was allocated, when history was recorded then.
    pub frames: Vec<Frame>,
}

/// A buffer held from the driver (torch's `Segment`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Segment {
    pub device: u32,
    pub address: u64,
    pub total_size: u64,
    pub allocated_size: u64,
    pub active_size: u64,
    pub requested_size: u64,
    pub stream: u64,
    /// `small` (under 1 MiB) or `large`.
    pub segment_type: &'static str,
    pub segment_pool_id: (u64, u64),
    pub is_expandable: bool,
    pub frames: Vec<Frame>,
    pub blocks: Vec<Block>,
}

/// What `torch.cuda.memory._snapshot()` returns: the segments now, and the recorded history
/// (one list per device; this device is device 0).
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemorySnapshot {
    pub segments: Vec<Segment>,
    pub device_traces: Vec<Vec<TraceEntry>>,
}

/// A segment as the tracker keeps it.
struct SegmentState {
    address: u64,
    size: u64,
    /// Requested bytes of its block while allocated, `None` while inactive.
    requested: Option<u64>,
    /// Where the block was allocated (recorded history only).
    frame: Option<Frame>,
}

struct History {
    /// False once stopped: kept for the snapshot, no longer grown.
    recording: bool,
    max_entries: usize,
    entries: VecDeque<TraceEntry>,
}

impl History {
    fn new(max_entries: usize) -> History {
        History {
            recording: true,
            max_entries: max_entries.max(1),
            entries: VecDeque::with_capacity(max_entries.clamp(1, 1 << 16)),
        }
    }
}

/// The pool's torch-style bookkeeping; `device.rs` calls it, under the pool's lock, at each
/// buffer created, handed out, returned or released.
#[derive(Default)]
pub(super) struct Tracker {
    counters: Counters,
    segments: HashMap<wgpu::Buffer, SegmentState>,
    /// Bytes of made-up address space handed out so far.
    next_address: u64,
    /// The node the executor runs (set only while history is recorded).
    frame: Option<Frame>,
    history: Option<History>,
}

impl Tracker {
    /// A new device's tracker, recording a history when [`record_memory_history`] asked.
    pub(super) fn on_open() -> Tracker {
        let n = HISTORY_ON_OPEN.load(Ordering::Relaxed);
        Tracker {
            history: (n > 0).then(|| History::new(n)),
            ..Default::default()
        }
    }

    fn recording(&self) -> bool {
        self.history.as_ref().is_some_and(|h| h.recording)
    }

    fn record(&mut self, action: &'static str, addr: u64, size: u64, frame: Option<Frame>) {
        let Some(h) = self.history.as_mut().filter(|h| h.recording) else {
            return;
        };
        if h.entries.len() >= h.max_entries {
            h.entries.pop_front();
        }
        h.entries.push_back(TraceEntry {
            action,
            addr,
            size,
            stream: 0,
            time_us: (crate::runtime::profile::now_ms() * 1e3) as u64,
            frames: frame.into_iter().collect(),
            device_free: None,
        });
    }

    /// The frame of an action now: the node being run, else `what` outside any node.
    fn frame_now(&self, what: &str) -> Option<Frame> {
        if !self.recording() {
            return None;
        }
        Some(self.frame.clone().unwrap_or_else(|| Frame {
            name: OUTSIDE_A_NODE.into(),
            filename: what.into(),
        }))
    }

    /// A buffer of `size` bytes was created from the driver.
    pub(super) fn created(&mut self, buf: &wgpu::Buffer, size: u64) {
        let address = ADDRESS_BASE + self.next_address;
        self.next_address += size;
        self.segments.insert(
            buf.clone(),
            SegmentState {
                address,
                size,
                requested: None,
                frame: None,
            },
        );
        self.counters.segment.add(size, 1);
        self.counters.reserved_bytes.add(size, size);
        self.counters.num_device_alloc += 1;
        let frame = self.frame_now("a new buffer");
        self.record("segment_alloc", address, size, frame);
    }

    /// A pooled buffer of `size` bytes was handed out for `requested` bytes of `what`.
    pub(super) fn taken(&mut self, buf: &wgpu::Buffer, size: u64, requested: u64, what: &str) {
        let frame = self.frame_now(what);
        let Some(s) = self.segments.get_mut(buf) else {
            return;
        };
        s.requested = Some(requested);
        s.frame = frame.clone();
        let address = s.address;
        let c = &mut self.counters;
        c.allocation.add(size, 1);
        c.allocated_bytes.add(size, size);
        c.requested_bytes.add(size, requested);
        self.record("alloc", address, size, frame);
    }

    /// A buffer went back to the pool.
    pub(super) fn returned(&mut self, buf: &wgpu::Buffer, size: u64) {
        let Some(s) = self.segments.get_mut(buf) else {
            return;
        };
        let requested = s.requested.take().unwrap_or(size);
        s.frame = None;
        let address = s.address;
        let c = &mut self.counters;
        c.allocation.sub(size, 1);
        c.allocated_bytes.sub(size, size);
        c.requested_bytes.sub(size, requested);
        let frame = self.frame.clone();
        self.record("free_requested", address, size, frame.clone());
        self.record("free_completed", address, size, frame);
    }

    /// A free buffer was released to the driver (`empty_cache`).
    pub(super) fn released(&mut self, buf: &wgpu::Buffer, size: u64) {
        let Some(s) = self.segments.remove(buf) else {
            return;
        };
        self.counters.segment.sub(size, 1);
        self.counters.reserved_bytes.sub(size, size);
        self.counters.num_device_free += 1;
        let frame = self.frame_now("empty_cache");
        self.record("segment_free", s.address, size, frame);
    }

    /// An allocation of `requested` bytes failed with `left` bytes under the memory limit.
    pub(super) fn oom(&mut self, requested: u64, left: u64, what: &str) {
        self.counters.num_ooms += 1;
        let frame = self.frame_now(what);
        self.record("oom", 0, requested, frame);
        if let Some(e) = self.history.as_mut().filter(|h| h.recording) {
            if let Some(e) = e.entries.back_mut() {
                e.device_free = Some(left);
            }
        }
    }

    /// Every peak back to its current value (`reset_peak_memory_stats`).
    pub(super) fn reset_peaks(&mut self) {
        for s in self.stats_mut() {
            s.peak = s.current;
        }
    }

    fn stats_mut(&mut self) -> impl Iterator<Item = &mut Stat> {
        let c = &mut self.counters;
        [
            &mut c.allocation,
            &mut c.segment,
            &mut c.allocated_bytes,
            &mut c.reserved_bytes,
            &mut c.requested_bytes,
        ]
        .into_iter()
        .flat_map(|p| p.0.iter_mut())
    }

    /// torch's nested statistics: `{"allocated_bytes": {"all": {"current": ..}, ..}, ..}`.
    fn nested(&self) -> serde_json::Value {
        let c = &self.counters;
        let pools = |p: &Pools| {
            let by_pool = POOL_NAMES.iter().zip(p.0.iter()).map(|(name, s)| {
                let stat = serde_json::json!({
                    "current": s.current, "peak": s.peak,
                    "allocated": s.allocated, "freed": s.freed,
                });
                (name.to_string(), stat)
            });
            serde_json::Value::Object(by_pool.collect())
        };
        serde_json::json!({
            "allocation": pools(&c.allocation),
            "active": pools(&c.allocation),
            "segment": pools(&c.segment),
            "allocated_bytes": pools(&c.allocated_bytes),
            "active_bytes": pools(&c.allocated_bytes),
            "reserved_bytes": pools(&c.reserved_bytes),
            "requested_bytes": pools(&c.requested_bytes),
            "num_alloc_retries": 0,
            "num_ooms": c.num_ooms,
            "num_device_alloc": c.num_device_alloc,
            "num_device_free": c.num_device_free,
        })
    }

    fn snapshot(&self) -> MemorySnapshot {
        let mut segments: Vec<Segment> = self
            .segments
            .values()
            .map(|s| {
                let held = s.requested.map_or(0, |_| s.size);
                let frames: Vec<Frame> = s.frame.clone().into_iter().collect();
                Segment {
                    device: 0,
                    address: s.address,
                    total_size: s.size,
                    allocated_size: held,
                    active_size: held,
                    requested_size: s.requested.unwrap_or(0),
                    stream: 0,
                    segment_type: if s.size < LARGE_POOL {
                        "small"
                    } else {
                        "large"
                    },
                    segment_pool_id: (0, 0),
                    is_expandable: false,
                    frames: Vec::new(),
                    blocks: vec![Block {
                        address: s.address,
                        size: s.size,
                        // torch's tools count an inactive block's size as free memory.
                        requested_size: s.requested.unwrap_or(s.size),
                        state: match s.requested {
                            Some(_) => "active_allocated",
                            None => "inactive",
                        },
                        frames,
                    }],
                }
            })
            .collect();
        segments.sort_by_key(|s| s.address);
        let trace = self
            .history
            .as_ref()
            .map(|h| h.entries.iter().cloned().collect())
            .unwrap_or_default();
        MemorySnapshot {
            segments,
            device_traces: vec![trace],
        }
    }
}

/// Restores the executor's previous frame when a node is done (see [`GpuDevice::memory_frame`]).
pub struct FrameGuard<'d> {
    dev: &'d GpuDevice,
    previous: Option<Frame>,
}

impl Drop for FrameGuard<'_> {
    fn drop(&mut self) {
        let previous = self.previous.take();
        self.dev.memory(|t| t.frame = previous);
    }
}

impl GpuDevice {
    /// `(free, total)` bytes, as `torch.cuda.mem_get_info` (WebGPU has no query for either):
    /// `total` is [`GpuDevice::recommended_max_memory`] (system memory for CPU and integrated
    /// adapters, the largest buffer size otherwise, or `PT2WEB_GPU_MEMORY`), and `free` is
    /// `total` less what pt2web holds from the driver ([`GpuDevice::driver_allocated_memory`]);
    /// other programs' use of the device is not seen.
    pub fn mem_get_info(&self) -> (u64, u64) {
        let total = self.recommended_max_memory();
        (total.saturating_sub(self.driver_allocated_memory()), total)
    }

    /// Bytes of the pool's buffers, live plus cached for reuse (`torch.cuda.memory_reserved`):
    /// the sum of the snapshot's segment sizes.
    pub fn memory_reserved(&self) -> u64 {
        self.memory(|t| t.counters.reserved_bytes.0[0].current)
    }

    /// Highest [`GpuDevice::memory_reserved`] since the device was made or
    /// `reset_peak_memory_stats`.
    pub fn max_memory_reserved(&self) -> u64 {
        self.memory(|t| t.counters.reserved_bytes.0[0].peak)
    }

    /// torch's `memory_stats_as_nested_dict`: per statistic (`allocation`, `active`,
    /// `segment`, `allocated_bytes`, `active_bytes`, `reserved_bytes`, `requested_bytes`) and
    /// pool (`all`, `small_pool`, `large_pool`) its `current`, `peak`, `allocated` (sum of
    /// increases) and `freed` (sum of decreases); and the counters `num_ooms` (allocations
    /// refused by the memory limit), `num_device_alloc` / `num_device_free` (buffers created
    /// from / released to the driver) and `num_alloc_retries` (always 0: pt2web does not
    /// empty its cache and retry).
    pub fn memory_stats_as_nested_dict(&self) -> serde_json::Value {
        self.memory(|t| t.nested())
    }

    /// torch's `memory_stats`: [`GpuDevice::memory_stats_as_nested_dict`] flattened to keys
    /// such as `allocated_bytes.all.current` (the older [`GpuDevice::memory_stats`] keeps its
    /// struct).
    pub fn memory_stats_map(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        flatten("", &self.memory_stats_as_nested_dict(), &mut out);
        out
    }

    /// Zero the `allocated` and `freed` totals and the `num_*` counters
    /// (`torch.cuda.reset_accumulated_memory_stats`); current values and peaks stay.
    pub fn reset_accumulated_memory_stats(&self) {
        self.memory(|t| {
            for s in t.stats_mut() {
                s.allocated = 0;
                s.freed = 0;
            }
            let c = &mut t.counters;
            (c.num_ooms, c.num_device_alloc, c.num_device_free) = (0, 0, 0);
        })
    }

    /// Start (`enabled`, with a fresh history of at most `max_entries` actions, the latest
    /// kept) or stop recording the pool's actions (`torch.cuda.memory._record_memory_history`).
    /// Stopping keeps what was recorded for [`GpuDevice::memory_snapshot`].
    pub fn record_memory_history(&self, enabled: bool, max_entries: usize) {
        self.memory(|t| {
            if !enabled {
                t.frame = None;
                if let Some(h) = t.history.as_mut() {
                    h.recording = false;
                }
                return;
            }
            t.history = Some(History::new(max_entries));
        })
    }

    /// Whether history is being recorded.
    pub fn is_recording_memory_history(&self) -> bool {
        self.memory(|t| t.recording())
    }

    /// The pool now and the recorded history, in the layout of
    /// `torch.cuda.memory._snapshot()`: every segment with its block (the active blocks' sizes
    /// sum to [`GpuDevice::current_allocated_memory`], the segments' to
    /// [`GpuDevice::memory_reserved`]) and `device_traces[0]`, the history.
    pub fn memory_snapshot(&self) -> MemorySnapshot {
        self.memory(|t| t.snapshot())
    }

    /// Name `op` and `node` in the history's actions until the guard drops (the executor
    /// calls it per node); `None`, at the cost of one lock, while no history is recorded.
    pub fn memory_frame(&self, op: &str, node: &str) -> Option<FrameGuard<'_>> {
        let previous = self.memory(|t| {
            if !t.recording() {
                return None;
            }
            let frame = Frame {
                name: op.into(),
                filename: node.into(),
            };
            Some(t.frame.replace(frame))
        })?;
        Some(FrameGuard {
            dev: self,
            previous,
        })
    }
}

/// torch's flattening of nested statistics: keys joined with dots.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, u64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let key = match prefix {
                    "" => k.clone(),
                    p => format!("{p}.{k}"),
                };
                flatten(&key, v, out);
            }
        }
        v => {
            out.insert(prefix.to_string(), v.as_u64().unwrap_or(0));
        }
    }
}
