//! Profiler scopes (`torch.profiler.profile` as a context, for pt2web): every run of every
//! session inside a scope, on the CPU or a GPU, lands in one [`Profile`] (one Chrome trace
//! for all models), next to the per-session profiler (`RunState::profiler`, JS
//! `model.startProfiler()`), which keeps working inside a scope.
//!
//! [`profile`] (and [`profile_async`]) capture around a closure; natively [`start`] /
//! [`stop`] capture between two calls and write the Chrome trace JSON file on `stop`.
//! Scopes nest: a run inside two scopes is in both profiles. The scopes are process-wide
//! (as torch's): a run on another thread during a scope is captured too.
//!
//! How a run joins: when it starts inside a scope it gets a per-session profiler if it had
//! none (`runtime::RunScope`); when it ends, its events go to every open scope, placed on
//! the scope's timeline, with the model's name and the device.

use crate::runtime::{OpEvent, OpSummary, Profiler};
use serde_json::{json, Value};
use std::sync::{Mutex, MutexGuard};

/// One kernel of a profile: which model ran it, where, and when.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ScopedEvent {
    /// The program's name (`Program::name`).
    pub model: String,
    /// The session's number in this process (sessions of one program name told apart).
    pub session: u64,
    /// `"cpu"` or `"gpu"`.
    pub device: String,
    /// The node's name in the graph.
    pub node: String,
    /// The op target (`aten.linear.default`).
    pub op: String,
    /// Milliseconds since the scope started.
    pub start_ms: f64,
    pub dur_ms: f64,
    /// Subgraph nesting depth (0 for the top-level graph).
    pub depth: usize,
    /// Where the time comes from (see [`OpEvent::cat`]).
    pub cat: &'static str,
}

/// What a scope captured.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Profile {
    pub events: Vec<ScopedEvent>,
}

impl Profile {
    /// The sessions that ran in the scope, `(session, model)`, in the order they first ran.
    pub fn sessions(&self) -> Vec<(u64, &str)> {
        let mut v: Vec<(u64, &str)> = Vec::new();
        for e in &self.events {
            if !v.iter().any(|(s, _)| *s == e.session) {
                v.push((e.session, &e.model));
            }
        }
        v
    }

    /// Time per op target over every model, the most expensive first.
    pub fn summary(&self) -> Vec<OpSummary> {
        let mut p = Profiler::default();
        p.events = self
            .events
            .iter()
            .map(|e| OpEvent {
                node: e.node.clone(),
                target: e.op.clone(),
                start_ms: e.start_ms,
                dur_ms: e.dur_ms,
                depth: e.depth,
                cat: e.cat,
            })
            .collect();
        p.summary()
    }

    /// The Chrome trace event format (`chrome://tracing`, Perfetto): one process per session
    /// (named `<model> (session <n>)` by a metadata event), CPU work on thread 1 and GPU
    /// kernels on thread 2 as in [`Profiler::chrome_trace`], times in microseconds from the
    /// scope's start.
    pub fn chrome_trace(&self) -> Value {
        let sessions = self.sessions();
        let pid = |s: u64| sessions.iter().position(|x| x.0 == s).unwrap_or(0) + 1;
        let mut events: Vec<Value> = sessions
            .iter()
            .map(|(s, m)| {
                json!({"name": "process_name", "ph": "M", "pid": pid(*s),
                       "args": {"name": format!("{m} (session {s})")}})
            })
            .collect();
        events.extend(self.events.iter().map(|e| {
            let (tid, clock) = crate::runtime::profile::trace_thread(e.cat);
            json!({"name": e.op, "cat": e.cat, "ph": "X", "ts": e.start_ms * 1e3,
                   "dur": e.dur_ms * 1e3, "pid": pid(e.session), "tid": tid,
                   "args": {"model": e.model, "session": e.session, "device": e.device,
                            "node": e.node, "depth": e.depth, "clock": clock}})
        }));
        let models: Vec<&str> = sessions.iter().map(|s| s.1).collect();
        json!({"traceEvents": events, "displayTimeUnit": "ms",
               "otherData": {"producer": "pt2web", "models": models}})
    }
}

/// An open scope.
struct Capture {
    id: u64,
    /// `now_ms` when it started.
    origin: f64,
    profile: Profile,
    /// Where [`stop`] writes the trace (a scope [`start`] opened; native only).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    trace_path: Option<std::path::PathBuf>,
}

fn captures() -> MutexGuard<'static, Vec<Capture>> {
    static CAPTURES: Mutex<Vec<Capture>> = Mutex::new(Vec::new());
    CAPTURES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Open a scope; [`end`] with the id closes it and returns its profile.
pub fn begin() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    open(id, None);
    id
}

fn open(id: u64, trace_path: Option<std::path::PathBuf>) {
    captures().push(Capture {
        id,
        origin: crate::runtime::profile::now_ms(),
        profile: Profile::default(),
        trace_path,
    });
}

/// Close the scope [`begin`] opened; `None` when it is not open (closed already).
pub fn end(id: u64) -> Option<Profile> {
    let mut c = captures();
    let i = c.iter().position(|c| c.id == id)?;
    Some(c.remove(i).profile)
}

/// Whether a scope is open (`torch.profiler`'s `is_capturing`-style query): runs starting
/// now are captured.
pub fn is_capturing() -> bool {
    !captures().is_empty()
}

/// Closes its scope when dropped (so a panicking closure does not leave it open).
struct Open(u64);

impl Drop for Open {
    fn drop(&mut self) {
        end(self.0);
    }
}

/// Run `f` in a scope: its result and every session's runs during it.
pub fn profile<R>(f: impl FnOnce() -> R) -> (R, Profile) {
    let scope = Open(begin());
    let r = f();
    let p = end(scope.0).unwrap_or_default();
    (r, p)
}

/// [`profile`] around a future (the browser's `await gpu.profile(async () => ...)`).
pub async fn profile_async<F: std::future::Future>(f: F) -> (F::Output, Profile) {
    let scope = Open(begin());
    let r = f.await;
    let p = end(scope.0).unwrap_or_default();
    (r, p)
}

/// The id [`start`] uses for its scope (one at a time).
#[cfg(not(target_arch = "wasm32"))]
const STARTED: u64 = 0;

/// Open a scope until [`stop`], which writes its Chrome trace to `trace_path`. One such
/// scope at a time: a second `start` before `stop` is an error.
#[cfg(not(target_arch = "wasm32"))]
pub fn start(trace_path: impl Into<std::path::PathBuf>) -> crate::Result<()> {
    if captures().iter().any(|c| c.id == STARTED) {
        return Err(crate::Error::Input {
            input: "profiler".into(),
            msg: "start(): the profiler is already started: stop() it first".into(),
        });
    }
    open(STARTED, Some(trace_path.into()));
    Ok(())
}

/// Close the scope [`start`] opened, write its Chrome trace JSON to the path given there,
/// and return the profile. Without a `start`, or when the file cannot be written, an error
/// (the scope is closed either way).
#[cfg(not(target_arch = "wasm32"))]
pub fn stop() -> crate::Result<Profile> {
    let c = {
        let mut c = captures();
        let i = c
            .iter()
            .position(|c| c.id == STARTED)
            .ok_or_else(|| crate::Error::Input {
                input: "profiler".into(),
                msg: "stop(): the profiler was not started (start(trace_path) first)".into(),
            })?;
        c.remove(i)
    };
    let path = c.trace_path.unwrap_or_default();
    let text = serde_json::to_string(&c.profile.chrome_trace())
        .map_err(|e| crate::Error::Verify(format!("profiler trace: {e}")))?;
    std::fs::write(&path, text).map_err(|e| crate::Error::Input {
        input: "trace_path".into(),
        msg: format!("writing the profiler trace to {}: {e}", path.display()),
    })?;
    Ok(c.profile)
}

/// Who ran the events [`record`] adds.
pub(crate) struct Source<'a> {
    pub model: &'a str,
    pub session: u64,
    pub device: &'a str,
}

/// Add a run's events to every open scope. `origin` is the `now_ms` the events' times count
/// from (their profiler's start).
pub(crate) fn record(who: &Source, origin: f64, events: &[OpEvent]) {
    for c in captures().iter_mut() {
        let shift = origin - c.origin;
        c.profile.events.extend(events.iter().map(|e| ScopedEvent {
            model: who.model.to_string(),
            session: who.session,
            device: who.device.to_string(),
            node: e.node.clone(),
            op: e.target.clone(),
            start_ms: e.start_ms + shift,
            dur_ms: e.dur_ms,
            depth: e.depth,
            cat: e.cat,
        }));
    }
}
