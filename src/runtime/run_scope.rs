//! What a run borrows from process-wide state while it runs: its device's default generator
//! (unless the session has a stream of its own, [`crate::random`]) and, inside profiler
//! scopes ([`crate::profiler`]), a profiler whose events the scopes get when it ends. CPU and
//! GPU sessions wrap their runs in one.

use super::{Profiler, RunState};
use crate::random::Lease;

/// A run in progress: [`RunScope::begin`] before it, [`RunScope::end`] after it (whether it
/// failed or not).
pub(crate) struct RunScope {
    rng: Option<Lease>,
    /// Whether a profiler scope is open, and if so, the profiler events before this run (or
    /// `None` when the run got a profiler for the scopes only).
    capture: Option<Option<usize>>,
}

/// A number for a new session (`RunState::session`).
pub(crate) fn next_session() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl RunScope {
    pub(crate) fn begin(st: &mut RunState) -> RunScope {
        let rng = st.generator.as_ref().map(|g| {
            let (rng, lease) = g.lease();
            st.rng = rng;
            lease
        });
        let capture = crate::profiler::is_capturing().then(|| match &st.profiler {
            Some(p) => Some(p.events.len()),
            None => {
                st.profiler = Some(Profiler::default());
                None
            }
        });
        RunScope { rng, capture }
    }

    /// The run of `model`'s session on `device` (`"cpu"`, `"gpu"`) is over.
    pub(crate) fn end(self, st: &mut RunState, model: &str, device: &str) {
        if let Some(lease) = self.rng {
            lease.give_back(&st.rng);
        }
        let who = crate::profiler::Source {
            model,
            session: st.session,
            device,
        };
        let record = |p: &Profiler, from: usize| {
            let events = p.events.get(from..).unwrap_or_default();
            crate::profiler::record(&who, p.origin(), events);
        };
        match self.capture {
            None => {}
            // The session's own profiler keeps its events.
            Some(Some(from)) => {
                if let Some(p) = &st.profiler {
                    record(p, from);
                }
            }
            Some(None) => {
                if let Some(p) = st.profiler.take() {
                    record(&p, 0);
                }
            }
        }
    }
}
