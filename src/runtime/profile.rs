//! A per-op profiler for the interpreter: wall time of every kernel (nested for `cond`
//! subgraphs), a per-target summary and a Chrome trace (`chrome://tracing`, Perfetto).

use serde_json::{json, Value};
use std::collections::BTreeMap;

/// One kernel execution.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpEvent {
    /// The node's name in the graph (`linear_1`).
    pub node: String,
    /// `aten.linear.default`.
    pub target: String,
    /// Milliseconds since the profiler started.
    pub start_ms: f64,
    pub dur_ms: f64,
    /// Subgraph nesting depth (0 for the top-level graph).
    pub depth: usize,
    /// Where the time comes from: `"op"` (a CPU kernel, host clock), `"gpu"` (a GPU kernel
    /// timed by GPU timestamps), `"gpu-host"` (a GPU kernel without `timestamp-query`: the
    /// host time to encode it, not its GPU time), `"fallback"` (a CPU-fallback node of a GPU
    /// run, host clock, including its download).
    pub cat: &'static str,
}

/// Time per op target, summed over a profile.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpSummary {
    pub target: String,
    pub count: usize,
    pub total_ms: f64,
}

/// Collects [`OpEvent`]s while enabled (`RunState::profiler`).
#[derive(Debug, Clone)]
pub struct Profiler {
    origin: f64,
    pub events: Vec<OpEvent>,
    pub(crate) depth: usize,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            origin: now_ms(),
            events: Vec::new(),
            depth: 0,
        }
    }
}

impl Profiler {
    pub(crate) fn elapsed(&self) -> f64 {
        now_ms() - self.origin
    }

    /// The [`now_ms`] its events' times count from.
    pub(crate) fn origin(&self) -> f64 {
        self.origin
    }

    /// Time per target, the most expensive first.
    pub fn summary(&self) -> Vec<OpSummary> {
        let mut m: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
        // Only top-level events: a `cond` already includes its subgraph's time.
        for e in self.events.iter().filter(|e| e.depth == 0) {
            let s = m.entry(&e.target).or_default();
            s.0 += 1;
            s.1 += e.dur_ms;
        }
        let mut v: Vec<OpSummary> = m
            .into_iter()
            .map(|(t, (count, total_ms))| OpSummary {
                target: t.to_string(),
                count,
                total_ms,
            })
            .collect();
        v.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
        v
    }

    /// How the GPU kernels of this profile were timed: `"timestamp"` (GPU timestamps),
    /// `"host"` (no `timestamp-query`: host clock, flagged per event), `None` without any.
    pub fn gpu_timing(&self) -> Option<&'static str> {
        if self.events.iter().any(|e| e.cat == "gpu") {
            Some("timestamp")
        } else if self.events.iter().any(|e| e.cat == "gpu-host") {
            Some("host")
        } else {
            None
        }
    }

    /// The Chrome trace event format: one complete ("X") event per kernel, in microseconds.
    /// CPU work is thread 1, GPU kernels thread 2 (`args.clock` says `gpu-timestamp` or
    /// `host`; `otherData.gpuTiming` sums it up).
    pub fn chrome_trace(&self, device: &str) -> Value {
        let events: Vec<Value> = self
            .events
            .iter()
            .map(|e| {
                let (tid, clock) = trace_thread(e.cat);
                json!({"name": e.target, "cat": e.cat, "ph": "X", "ts": e.start_ms * 1e3,
                   "dur": e.dur_ms * 1e3, "pid": 1, "tid": tid,
                   "args": {"node": e.node, "depth": e.depth, "clock": clock}})
            })
            .collect();
        json!({"traceEvents": events, "displayTimeUnit": "ms",
               "otherData": {"producer": "pt2web", "device": device,
                             "gpuTiming": self.gpu_timing()}})
    }
}

/// The Chrome trace thread of an event of category `cat` (CPU work 1, GPU kernels 2) and
/// its clock (`gpu-timestamp` or `host`).
pub(crate) fn trace_thread(cat: &str) -> (u32, &'static str) {
    let tid = if cat.starts_with("gpu") { 2 } else { 1 };
    let clock = if cat == "gpu" {
        "gpu-timestamp"
    } else {
        "host"
    };
    (tid, clock)
}

/// Milliseconds from a fixed origin: `Instant` natively, `performance.now()` (or `Date.now()`)
/// on wasm32, where `Instant` does not exist.
#[cfg(not(target_arch = "wasm32"))]
pub fn now_ms() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

#[cfg(target_arch = "wasm32")]
pub fn now_ms() -> f64 {
    use wasm_bindgen::JsCast;
    let perf = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).ok();
    if let Some(p) = perf.filter(|p| !p.is_undefined()) {
        if let Ok(f) = js_sys::Reflect::get(&p, &"now".into()) {
            if let Ok(f) = f.dyn_into::<js_sys::Function>() {
                if let Some(v) = f.call0(&p).ok().and_then(|v| v.as_f64()) {
                    return v;
                }
            }
        }
    }
    js_sys::Date::now()
}

/// One line of the verbose kernel log (`backends::set_verbose`): the device, the op, the
/// node, its tensor inputs (`float32[2x3]`, `;`-separated: the line stays comma-separated),
/// the kernel variant and the time in ms.
pub(crate) fn verbose_kernel<'a>(
    device: &str,
    node: &crate::program::Node,
    inputs: impl Iterator<Item = Option<(crate::dtype::DType, &'a [usize])>>,
    variant: &str,
    ms: f64,
) {
    let fields = verbose_fields(device, node, inputs, variant);
    crate::backends::verbose_line(&format!("{fields},{ms:.4} ms"));
}

/// A verbose line's fields before the time: `pt2web_verbose,<device>,<op>,<node>,<inputs>,
/// <variant>`.
pub(crate) fn verbose_fields<'a>(
    device: &str,
    node: &crate::program::Node,
    inputs: impl Iterator<Item = Option<(crate::dtype::DType, &'a [usize])>>,
    variant: &str,
) -> String {
    let inputs: Vec<String> = inputs
        .flatten()
        .map(|(d, s)| {
            let dims: Vec<String> = s.iter().map(usize::to_string).collect();
            format!("{d}[{}]", dims.join("x"))
        })
        .collect();
    let inputs = inputs.join(";");
    format!(
        "pt2web_verbose,{device},{},{},{inputs},{variant}",
        node.target, node.name
    )
}
