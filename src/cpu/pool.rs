//! The native CPU backend's fork-join pool: `num_threads() − 1` workers that spin between
//! splits, and the calling thread, which takes a share of each split itself.
//!
//! A run of a small model (mobilenet: ~50 threaded ops in ~3 ms) splits every few tens of
//! microseconds. rayon's idle workers yield a few dozen times and then sleep, so most splits
//! paid a futex wake-up and the kernel's scheduler (a fifth of mobilenet's run in `perf`)
//! before the second thread started. Here a worker spins on the job counter for
//! [`spin`] after its last item (as ONNX Runtime's pool spins), then parks until the next
//! split wakes it.
//!
//! One caller at a time owns the pool; a split started while it is taken (a split inside a
//! split, or two sessions running at once on different threads) goes to rayon's pool instead.

#![cfg(not(target_arch = "wasm32"))]

use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// One split: `n` items taken in turn by whichever thread asks next.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    n: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Job<'_> {
    /// Take and run items until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, SeqCst);
            if i >= self.n {
                return;
            }
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| (self.f)(i))) {
                let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(p);
            }
            self.done.fetch_add(1, SeqCst);
        }
    }
}

struct Pool {
    /// The current job (a `*const Job`), null between splits.
    job: AtomicPtr<()>,
    /// Bumped by each split, so that a worker notices new work.
    seq: AtomicU64,
    /// Workers that may be reading `job`.
    active: AtomicUsize,
    /// Taken by the caller that owns the pool.
    busy: AtomicBool,
    /// Bumped by [`rest`]: idle workers stop spinning and park at once.
    rest: AtomicU64,
    /// Parked workers, woken by the next split.
    sleepers: Mutex<Vec<Thread>>,
    spin: Duration,
}

/// How long an idle worker spins before it parks: `PT2WEB_SPIN_US` microseconds (0: park at
/// once, for hosts that share their cores), 2 ms by default.
fn spin() -> Duration {
    let us = std::env::var("PT2WEB_SPIN_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(2000);
    Duration::from_micros(us.min(1_000_000))
}

/// The pool (see [`pool`]).
static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();

/// The pool, started on first use; `None` with one thread.
fn pool() -> Option<&'static Pool> {
    *POOL.get_or_init(|| {
        let workers = crate::ops::matmul::gemm::num_threads().saturating_sub(1);
        if workers == 0 {
            return None;
        }
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            job: AtomicPtr::new(std::ptr::null_mut()),
            seq: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            busy: AtomicBool::new(false),
            rest: AtomicU64::new(0),
            sleepers: Mutex::new(Vec::new()),
            spin: spin(),
        }));
        let mut started = 0;
        for i in 0..workers {
            let spawned = std::thread::Builder::new()
                .name(format!("pt2web-cpu-{}", i + 1))
                .spawn(move || worker(pool));
            started += spawned.is_ok() as usize;
        }
        // Without any worker (the system refused threads) splits go to rayon.
        (started > 0).then_some(pool)
    })
}

fn worker(pool: &'static Pool) {
    let mut seen = pool.seq.load(SeqCst);
    let mut rested = pool.rest.load(SeqCst);
    let mut idle_since = Instant::now();
    let mut spins = 0u32;
    loop {
        let s = pool.seq.load(SeqCst);
        if s != seen {
            seen = s;
            pool.active.fetch_add(1, SeqCst);
            let p = pool.job.load(SeqCst) as *const Job<'static>;
            if !p.is_null() {
                // SAFETY: the caller clears `job` and then waits for `active` to reach zero
                // before the job goes out of scope; this worker counted itself in `active`
                // before it read the pointer (both SeqCst), so the job is alive.
                unsafe { (*p).work() };
            }
            // Read before leaving `active`: a [`rest`] after the split returns is seen.
            rested = pool.rest.load(SeqCst);
            pool.active.fetch_sub(1, SeqCst);
            idle_since = Instant::now();
            spins = 0;
            continue;
        }
        spins = spins.wrapping_add(1);
        let spin_on = !spins.is_multiple_of(64) || idle_since.elapsed() < pool.spin;
        if spin_on && pool.rest.load(SeqCst) == rested {
            std::hint::spin_loop();
            continue;
        }
        {
            let mut sleepers = pool.sleepers.lock().unwrap_or_else(|e| e.into_inner());
            // A split posted after the last check wakes from the list only if this worker
            // is on it: check again under the lock the poster takes.
            if pool.seq.load(SeqCst) != seen {
                continue;
            }
            sleepers.push(std::thread::current());
        }
        std::thread::park();
        // A spurious wake-up leaves this worker on the list: take it off.
        let me = std::thread::current().id();
        pool.sleepers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| t.id() != me);
        rested = pool.rest.load(SeqCst);
        idle_since = Instant::now();
        spins = 0;
    }
}

/// Park the idle workers now instead of letting them spin: called before work goes to
/// other threads (the `gemm` crate's rayon split), which a spinning worker would otherwise
/// hold a core from. On two cores MiniLM's products took up to 5x as long next to a
/// spinning worker (run median 80 ms -> 55 ms with this).
pub(crate) fn rest() {
    if let Some(Some(pool)) = POOL.get() {
        pool.rest.fetch_add(1, SeqCst);
    }
}

/// Items handed out once each by index.
struct Slots<I>(Vec<UnsafeCell<Option<I>>>);
// SAFETY: each slot is taken by exactly one thread (the job's counter hands out each index
// once); the items themselves are Send.
unsafe impl<I: Send> Sync for Slots<I> {}

/// `f(t, item)` for each item, spread over the pool's workers and the calling thread;
/// returns when all are done (a panic in any is resumed here). `Err(items)` when the pool is
/// taken or there is none: the caller runs them some other way.
pub(crate) fn fork_each<I: Send, F: Fn(usize, I) + Sync>(
    items: Vec<I>,
    f: &F,
) -> Result<(), Vec<I>> {
    let Some(pool) = pool() else {
        return Err(items);
    };
    if pool
        .busy
        .compare_exchange(false, true, SeqCst, SeqCst)
        .is_err()
    {
        return Err(items);
    }
    let n = items.len();
    let slots = Slots(
        items
            .into_iter()
            .map(|i| UnsafeCell::new(Some(i)))
            .collect(),
    );
    // A reference to the whole wrapper: the closure would otherwise capture its field.
    let slots = &slots;
    let run = |t: usize| {
        // SAFETY: index t is handed out once (see `Slots`).
        let item = unsafe { (*slots.0[t].get()).take() };
        if let Some(item) = item {
            f(t, item);
        }
    };
    let job = Job {
        f: &run,
        n,
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        panic: Mutex::new(None),
    };
    pool.job.store(&job as *const Job as *mut (), SeqCst);
    pool.seq.fetch_add(1, SeqCst);
    for t in std::mem::take(&mut *pool.sleepers.lock().unwrap_or_else(|e| e.into_inner())) {
        t.unpark();
    }
    job.work();
    let mut spins = 0u32;
    while job.done.load(SeqCst) < n {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(1024) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    pool.job.store(std::ptr::null_mut(), SeqCst);
    while pool.active.load(SeqCst) > 0 {
        std::hint::spin_loop();
    }
    pool.busy.store(false, SeqCst);
    if let Some(p) = job.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
        resume_unwind(p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fork_each`, retried while another test's split holds the pool; false when there is
    /// no pool (one thread).
    fn split<I: Send>(mut items: Vec<I>, f: &(impl Fn(usize, I) + Sync)) -> bool {
        loop {
            match fork_each(items, f) {
                Ok(()) => return true,
                Err(back) if pool().is_some() => {
                    items = back;
                    std::thread::yield_now();
                }
                Err(_) => return false,
            }
        }
    }

    /// Every item runs once with its index, splits in a row reuse the pool, a split inside a
    /// split is refused (the caller falls back), and a panic reaches the caller.
    #[test]
    fn splits_run_every_item_once() {
        for n in [0usize, 1, 2, 3, 17] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            let items: Vec<usize> = (0..n).map(|i| i * 10).collect();
            let ran = split(items, &|t, v: usize| {
                assert_eq!(v, t * 10);
                hits[t].fetch_add(1, SeqCst);
            });
            if !ran {
                return;
            }
            assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "n {n}");
        }
        let refused = AtomicUsize::new(0);
        split(vec![(); 4], &|_, _| {
            if fork_each(vec![1], &|_, _: i32| {}).is_err() {
                refused.fetch_add(1, SeqCst);
            }
        });
        assert_eq!(refused.load(SeqCst), 4);
        let r = catch_unwind(|| split(vec![0, 1, 2], &|t, _: i32| assert!(t != 1, "boom")));
        assert!(r.is_err(), "the panic was lost");
        // The pool is free again.
        assert!(split(vec![0], &|_, _: i32| {}));
    }
}
