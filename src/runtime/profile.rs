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

    /// The Chrome trace event format: one complete ("X") event per kernel, in microseconds.
    pub fn chrome_trace(&self, device: &str) -> Value {
        let events: Vec<Value> = self
            .events
            .iter()
            .map(|e| {
                json!({"name": e.target, "cat": "op", "ph": "X", "ts": e.start_ms * 1e3,
                       "dur": e.dur_ms * 1e3, "pid": 1, "tid": 1,
                       "args": {"node": e.node, "depth": e.depth}})
            })
            .collect();
        json!({"traceEvents": events, "displayTimeUnit": "ms",
               "otherData": {"producer": "pt2web", "device": device}})
    }
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
