//! A kernel that panics (a pt2web bug) ends its run with [`Error::Internal`] naming the node
//! and its op, instead of unwinding through the caller: a CLI run, a server holding
//! sessions, a test suite. The session stays usable: the failed run's values are dropped, and
//! a tensor lock the panic poisoned is taken back by `Tensor::read`/`write` (an in-place
//! kernel may have written part of its buffer, as any failed in-place run may). Native
//! builds only catch: wasm32 aborts on a panic, and the JS side treats that instance as lost.

use crate::error::{Error, Result};
use crate::program::Node;
use std::any::Any;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// Run `kernel` for `node`; a panic inside becomes [`Error::Internal`].
pub(crate) fn guarded<T>(node: &Node, kernel: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(|| {
        injected_panic(node);
        kernel()
    }))
    .unwrap_or_else(|payload| Err(internal(node, payload.as_ref())))
}

/// [`guarded`] for a kernel that awaits (the GPU's control flow and data-dependent sizes,
/// which read values back between dispatches): every poll is guarded, and a panic ends the
/// future with [`Error::Internal`] (it is never polled again).
pub(crate) async fn guarded_async<T>(
    node: &Node,
    kernel: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let mut kernel = std::pin::pin!(kernel);
    std::future::poll_fn(|cx| {
        catch_unwind(AssertUnwindSafe(|| {
            injected_panic(node);
            kernel.as_mut().poll(cx)
        }))
        .unwrap_or_else(|payload| std::task::Poll::Ready(Err(internal(node, payload.as_ref()))))
    })
    .await
}

fn internal(node: &Node, payload: &(dyn Any + Send)) -> Error {
    Error::Internal {
        node: node.name.clone(),
        op: node.target.clone(),
        msg: format!("panicked: {}", panic_message(payload)),
    }
}

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Whether some thread asked for injected panics: one relaxed load per node otherwise.
static INJECTING: AtomicBool = AtomicBool::new(false);

thread_local! {
    static PANIC_ON: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Tests only: make every kernel of op `target` that this thread runs panic (`None` stops),
/// to check that a panic becomes [`Error::Internal`] and the session runs on.
#[doc(hidden)]
pub fn inject_kernel_panic(target: Option<&str>) {
    if target.is_some() {
        INJECTING.store(true, Ordering::Relaxed);
    }
    PANIC_ON.with(|p| *p.borrow_mut() = target.map(String::from));
}

fn injected_panic(node: &Node) {
    if INJECTING.load(Ordering::Relaxed)
        && PANIC_ON.with(|p| p.borrow().as_deref() == Some(node.target.as_str()))
    {
        panic!("injected panic in a {} kernel", node.target);
    }
}
