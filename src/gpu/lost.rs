//! Device loss. wgpu's device-lost callback (native: from `Device::poll` once the device is
//! gone; in the browser: `GPUDevice.lost`) marks the [`GpuDevice`](super::GpuDevice) lost,
//! and [`GpuDevice::destroy`](super::GpuDevice::destroy) marks it at once. From then on every
//! run, prepare and wait on the device ends with [`Error::DeviceLost`]: a wait in progress
//! (a readback's map, `synchronize`) is woken by the mark, so no future waits for a callback
//! that a lost device may never make. The sessions on the device stay lost; a new device and
//! a reloaded model recover.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct State {
    reason: Option<String>,
    /// Wakers of the waits in progress ([`Lost::until`]), by wait id; each wait removes its
    /// own when it ends, so the map holds only the waits pending now.
    waiting: HashMap<u64, Waker>,
    next_id: u64,
}

/// Whether a device is lost, and the waits to wake when it becomes so.
#[derive(Default)]
pub struct Lost(Mutex<State>);

impl Lost {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Mark the device lost (the first reason is kept) and wake every pending wait.
    pub fn mark(&self, reason: impl Into<String>) {
        let mut s = self.state();
        if s.reason.is_none() {
            s.reason = Some(reason.into());
        }
        for (_, w) in s.waiting.drain() {
            w.wake();
        }
    }

    /// `Err(DeviceLost)` once the device is lost.
    pub fn check(&self) -> Result<()> {
        match &self.state().reason {
            Some(reason) => Err(Error::DeviceLost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// `fut`'s output, or `Err(DeviceLost)` as soon as the device is lost (also when it is
    /// lost already).
    pub fn until<'a, F: Future + 'a>(
        &'a self,
        fut: F,
    ) -> impl Future<Output = Result<F::Output>> + 'a {
        Until {
            lost: self,
            fut: Box::pin(fut),
            id: None,
        }
    }
}

struct Until<'a, F: Future> {
    lost: &'a Lost,
    fut: Pin<Box<F>>,
    /// This wait's entry in [`State::waiting`] while it is pending.
    id: Option<u64>,
}

impl<F: Future> Future for Until<'_, F> {
    type Output = Result<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.lost.check()?;
        if let Poll::Ready(v) = self.fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        // Checked again under the lock that `mark` takes: a mark between the check above
        // and this registration is seen here, one after it wakes this waker.
        let lost = self.lost;
        let mut s = lost.state();
        if let Some(reason) = &s.reason {
            return Poll::Ready(Err(Error::DeviceLost {
                reason: reason.clone(),
            }));
        }
        let id = match self.id {
            Some(id) => id,
            None => {
                s.next_id = s.next_id.wrapping_add(1);
                s.next_id
            }
        };
        s.waiting.insert(id, cx.waker().clone());
        drop(s);
        self.id = Some(id);
        Poll::Pending
    }
}

impl<F: Future> Drop for Until<'_, F> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.lost.state().waiting.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_when_the_device_is_lost() {
        let lost = Lost::default();
        let (_tx, rx) = super::super::wait::channel::<()>();
        let mut fut = Box::pin(lost.until(rx));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(lost.state().waiting.len(), 1);
        lost.mark("test");
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(Err(e)) => assert_eq!(e.code(), "DEVICE_LOST"),
            _ => panic!("the wait should end with DEVICE_LOST"),
        }
        drop(fut);
        assert!(lost.state().waiting.is_empty());
    }
}
