//! A one-shot future fed by a wgpu callback (`map_async`, `on_submitted_work_done`).
//!
//! Natively the callback runs inside `Device::poll`, so the caller polls first and the
//! future is ready; in the browser it runs from the event loop, which the awaiting JS
//! promise yields to. `Send + Sync` so the callbacks satisfy wgpu's bounds on both.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Shared<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// The receiving half: resolves to the value the callback sent.
pub struct Wait<T>(Arc<Mutex<Shared<T>>>);

/// The sending half, moved into the callback.
pub struct Notify<T>(Arc<Mutex<Shared<T>>>);

pub fn channel<T>() -> (Notify<T>, Wait<T>) {
    let s = Arc::new(Mutex::new(Shared {
        value: None,
        waker: None,
    }));
    (Notify(s.clone()), Wait(s))
}

impl<T> Notify<T> {
    pub fn send(self, v: T) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.value = Some(v);
        if let Some(w) = g.waker.take() {
            w.wake();
        }
    }
}

impl<T> Future for Wait<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match g.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                g.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Let the browser's event loop run (a `setTimeout(0)` task) so a long host-side pass does
/// not stall the page; natively nothing.
pub async fn yield_to_page() {
    #[cfg(target_arch = "wasm32")]
    {
        use wasm_bindgen::JsCast;
        let p = js_sys::Promise::new(&mut |resolve, _| {
            let g = js_sys::global();
            let timer = js_sys::Reflect::get(&g, &"setTimeout".into())
                .ok()
                .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
            let queued = timer.is_some_and(|f| f.call2(&g, &resolve, &0.into()).is_ok());
            if !queued {
                let _ = resolve.call0(&wasm_bindgen::JsValue::NULL);
            }
        });
        let _ = wasm_bindgen_futures::JsFuture::from(p).await;
    }
}
