//! The verbose kernel log of GPU runs (`backends::set_verbose`, `PT2WEB_VERBOSE=1`): one
//! line per node, naming the shader variants the node dispatched (`matmul.wgsl:matmul_tiled`,
//! `conv.wgsl:im2col+matmul4.wgsl:mm4_kk`, `attention.wgsl:...`: which form of the op the
//! kernel chose), with its GPU time.
//!
//! Line: `pt2web_verbose,gpu,<op>,<node>,<inputs>,<variants>,<ms> ms,<clock>`. `<variants>` is
//! the labels of the variants dispatched, `+`-separated, or `gpu` (a view: nothing
//! dispatched) or `cpu-fallback`. `<clock>` says where the time comes from: `gpu-timestamp`
//! (the device has `timestamp-query`: the node's dispatches as the GPU timed them; the
//! lines are then written when the run's timestamps are read back, at its end) or `host`
//! (the host time to record the node's dispatches or run its CPU fallback, written at once).
//! A run with the log on is never replayed from a tape (a replay runs no nodes).

use super::device::GpuDevice;
use super::shaders::Variant;
use super::timing::GpuTimer;
use crate::error::Result;
use crate::runtime::Profiler;

/// A GPU run's verbose log (`Runner::verbose`, while the log is on).
#[derive(Default)]
pub(crate) struct VerboseLog {
    /// Every dispatch of the run so far, its variant (a node's are the range from its start).
    dispatches: Vec<Variant>,
    /// Whether the run is timed by GPU timestamps (its lines wait for them): then dispatch
    /// `i` here is dispatch `i` of the timer.
    timed: bool,
    /// Lines waiting for the run's GPU times.
    waiting: Vec<Line>,
}

/// A node's line but its time.
struct Line {
    /// `pt2web_verbose,gpu,...,<variants>`.
    fields: String,
    host_ms: f64,
    /// The node's dispatches (those of its subgraphs included), when it ran on the GPU.
    dispatches: Option<std::ops::Range<usize>>,
}

impl Line {
    fn write(&self, ms: f64, clock: &str) {
        crate::backends::verbose_line(&format!("{},{ms:.4} ms,{clock}", self.fields));
    }
}

impl VerboseLog {
    /// The log of a run, or `None` when the log is off or the pass runs nothing (a prepare).
    pub(crate) fn for_run(dry: bool) -> Option<VerboseLog> {
        (crate::backends::verbose() > 0 && !dry).then(VerboseLog::default)
    }

    /// A node starts: the mark its [`VerboseLog::end_node`] takes.
    pub(crate) fn start_node(&self) -> usize {
        self.dispatches.len()
    }

    /// The run dispatched `v`.
    pub(crate) fn dispatched(&mut self, v: &Variant) {
        self.dispatches.push(*v);
    }

    /// The node that started at `mark` is done (on the GPU, or on the CPU fallback): its
    /// line, now or once the run's timestamps are read.
    pub(crate) fn end_node<'a>(
        &mut self,
        mark: usize,
        node: &crate::program::Node,
        inputs: impl Iterator<Item = Option<(crate::dtype::DType, &'a [usize])>>,
        on_gpu: bool,
        host_ms: f64,
    ) {
        let range = mark..self.dispatches.len();
        let mut labels: Vec<String> = Vec::new();
        for v in self.dispatches.get(range.clone()).unwrap_or_default() {
            let l = v.label();
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        let variant = match (on_gpu, labels.is_empty()) {
            (false, _) => "cpu-fallback".to_string(),
            (true, true) => "gpu".to_string(),
            (true, false) => labels.join("+"),
        };
        let line = Line {
            fields: crate::runtime::profile::verbose_fields("gpu", node, inputs, &variant),
            host_ms,
            dispatches: (on_gpu && !range.is_empty()).then_some(range),
        };
        // Timed runs keep every line for the end, so the log stays in node order.
        if self.timed {
            self.waiting.push(line);
        } else {
            line.write(host_ms, "host");
        }
    }

    /// Write the waiting lines with the GPU time of their dispatches (`gpu_ms`: each
    /// dispatch's, from the timer); lines of nodes that dispatched nothing (views, CPU
    /// fallbacks) or of a failed run, with their host time.
    fn write_waiting(&mut self, gpu_ms: &[f64]) {
        for line in std::mem::take(&mut self.waiting) {
            match line.dispatches.clone().and_then(|r| gpu_ms.get(r)) {
                Some(t) => line.write(t.iter().sum(), "gpu-timestamp"),
                None => line.write(line.host_ms, "host"),
            }
        }
    }
}

impl Drop for VerboseLog {
    /// A run that failed before its timestamps were read: its lines with host times.
    fn drop(&mut self) {
        self.write_waiting(&[]);
    }
}

/// The timer of a run: while it is profiled (`profiler`), or while the verbose log is on
/// (`log`, which then waits for the GPU times), on a device with timestamps.
pub(crate) fn timer(
    dev: &GpuDevice,
    profiler: Option<&Profiler>,
    log: Option<&mut VerboseLog>,
) -> Option<GpuTimer> {
    let t = match (profiler, &log) {
        (Some(p), _) => GpuTimer::new(dev, p.elapsed()),
        (None, Some(_)) => GpuTimer::new(dev, 0.0),
        (None, None) => None,
    };
    if let (Some(_), Some(log)) = (&t, log) {
        log.timed = true;
    }
    t
}

/// The run's end: the timer's events to the profiler (when profiled), the verbose log's
/// lines with their GPU times.
pub(crate) async fn finish(
    dev: &GpuDevice,
    timer: Option<GpuTimer>,
    profiler: Option<&mut Profiler>,
    log: Option<VerboseLog>,
) -> Result<()> {
    let mut own = Profiler::default();
    let gpu_ms = match timer {
        Some(t) => t.finish(dev, profiler.unwrap_or(&mut own)).await?,
        None => Vec::new(),
    };
    if let Some(mut log) = log {
        log.write_waiting(&gpu_ms);
    }
    Ok(())
}
