//! Stopping a run from outside: a [`CancelToken`] another thread (or a JS `AbortSignal`'s
//! handler) sets, and a timeout. The interpreters (the CPU's and the GPU executor's) check
//! them before each node, and `while_loop` before each iteration, so a cancelled or
//! timed-out run ends with [`Error::Cancelled`] at the next node boundary, and the session
//! stays usable: the next run starts clean (state mutations of the stopped run's finished
//! nodes are not applied, as for any failed run).

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag that stops runs: clone it into [`RunOptions`], call [`CancelToken::cancel`] from
/// anywhere. A run started with a token that is already cancelled stops at its first node.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }
    /// Ask every run holding this token to stop at its next node.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What bounds one run besides the session's [`Limits`](crate::Limits).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Stop when this token is cancelled.
    pub cancel: Option<CancelToken>,
    /// Stop once the run has taken this long (milliseconds of wall time).
    pub timeout_ms: Option<f64>,
    /// The stream a GPU run goes on (this thread's current stream of the device when
    /// `None`; see [`crate::gpu::stream`]). A CPU run has no stream and ignores it.
    pub stream: Option<crate::gpu::Stream>,
}

/// The checks of one run, made from its [`RunOptions`] when it starts.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stop {
    cancel: Option<CancelToken>,
    /// (timeout, the clock reading it ends at), both in milliseconds.
    deadline: Option<(f64, f64)>,
    /// [`RunOptions::stream`], which the GPU executor reads as the run starts.
    pub(crate) stream: Option<crate::gpu::Stream>,
}

impl Stop {
    pub(crate) fn start(o: &RunOptions) -> Stop {
        Stop {
            cancel: o.cancel.clone(),
            deadline: o
                .timeout_ms
                .map(|t| (t, super::profile::now_ms() + t.max(0.0))),
            stream: o.stream.clone(),
        }
    }

    /// `Err(Cancelled)` when the run must stop; `at` names where it stands (the next node).
    pub(crate) fn check(&self, at: &str) -> Result<()> {
        if self.cancel.as_ref().is_some_and(CancelToken::is_cancelled) {
            return Err(Error::Cancelled {
                reason: "cancelled".into(),
                at: at.into(),
            });
        }
        if let Some((t, end)) = self.deadline {
            if super::profile::now_ms() >= end {
                return Err(Error::Cancelled {
                    reason: format!("timed out after {t} ms"),
                    at: at.into(),
                });
            }
        }
        Ok(())
    }
}
