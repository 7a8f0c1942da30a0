//! The process's Rust heap, counted: bytes live now and at most so far. pt2web's host memory
//! (weights, tensors, staging copies) is all Rust heap; the GPU driver's own allocations are
//! not (on lavapipe those are the "GPU" memory), so these counters say what pt2web itself
//! holds, which the resident set cannot on a CPU adapter. Two relaxed atomic adds per
//! allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(n: usize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            grow(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            grow(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            LIVE.fetch_sub(l.size(), Ordering::Relaxed);
            grow(new);
        }
        q
    }
}

/// Bytes of Rust heap live now.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes of Rust heap live at once so far.
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}
