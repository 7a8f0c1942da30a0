//! Default generators per device, in the spirit of torch's (`torch.cuda.manual_seed_all`,
//! `seed_all`, `get_rng_state_all`, `set_rng_state_all`).
//!
//! Every device has one default generator: the CPU ([`cpu`]) and each open GPU device (made
//! with it, [`register`]). A session draws from its device's default generator until it is
//! given a stream of its own (`Session::manual_seed`, `seed`, `set_rng_state`), as torch
//! modules share the default generator until a `torch.Generator` is passed: two models run
//! one after the other on one device continue one stream, and after
//! [`manual_seed_all`]`(s)` they draw what one model seeded with `manual_seed(s)` draws in
//! its first and second runs.
//!
//! A run takes the generator's state when it starts and adds the draws it made when it ends
//! ([`Lease`]), so kernels keep drawing from a plain [`Rng`] with no lock per draw. Runs on
//! one device that overlap in time (two threads, or two awaited runs interleaved in a page)
//! start from the same state and so repeat each other's draws; the generator still moves on
//! by both runs' draws. Give such sessions their own seeds for independent streams.
//!
//! The device list of the `*_all` calls is the CPU first, then the GPU devices still open, in
//! the order they were opened (index `i + 1` for the `i`-th).

use crate::error::{Error, Result};
use crate::runtime::Rng;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// One device's default generator.
#[derive(Debug)]
pub struct DeviceGenerator {
    /// `"cpu"`, or the GPU adapter's name.
    pub device: String,
    state: Mutex<Seeded>,
}

/// A generator and how many times it was seeded or restored (a run that began before a
/// reseed leaves the new stream alone when it ends).
#[derive(Debug, Clone, Default)]
struct Seeded {
    rng: Rng,
    epoch: u64,
}

impl DeviceGenerator {
    fn new(device: &str) -> DeviceGenerator {
        DeviceGenerator {
            device: device.to_string(),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Seeded> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The generator as it is now.
    pub fn rng(&self) -> Rng {
        self.lock().rng.clone()
    }

    /// Start over from `rng` (a seed or a restored state).
    pub fn reset(&self, rng: Rng) {
        let mut s = self.lock();
        s.rng = rng;
        s.epoch += 1;
    }

    /// Lend the generator to a run: its state now, to draw from.
    pub(crate) fn lease(self: &Arc<Self>) -> (Rng, Lease) {
        let s = self.lock();
        let lease = Lease {
            generator: self.clone(),
            start: s.rng.state(),
            epoch: s.epoch,
        };
        (s.rng.clone(), lease)
    }
}

/// A run's loan of a device's default generator ([`DeviceGenerator::lease`]).
#[derive(Debug)]
pub(crate) struct Lease {
    generator: Arc<DeviceGenerator>,
    start: u64,
    epoch: u64,
}

impl Lease {
    /// The run is over, leaving `rng`: the generator moves on by the draws the run made
    /// (unless it was seeded or restored meanwhile).
    pub(crate) fn give_back(self, rng: &Rng) {
        let mut s = self.generator.lock();
        if s.epoch == self.epoch {
            let made = rng.state().wrapping_sub(self.start);
            let now = s.rng.state().wrapping_add(made);
            s.rng.set_state(now);
        }
    }
}

/// The CPU's default generator.
pub fn cpu() -> Arc<DeviceGenerator> {
    static CPU: OnceLock<Arc<DeviceGenerator>> = OnceLock::new();
    CPU.get_or_init(|| Arc::new(DeviceGenerator::new("cpu")))
        .clone()
}

/// The GPU devices' generators, in the order the devices were opened (dropped ones pruned).
fn gpus() -> MutexGuard<'static, Vec<Weak<DeviceGenerator>>> {
    static GPUS: Mutex<Vec<Weak<DeviceGenerator>>> = Mutex::new(Vec::new());
    let mut g = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    g.retain(|w| w.strong_count() > 0);
    g
}

/// A default generator for a GPU device being opened (it holds the only strong reference:
/// the generator leaves the device list with the device).
pub fn register(device: &str) -> Arc<DeviceGenerator> {
    let g = Arc::new(DeviceGenerator::new(device));
    gpus().push(Arc::downgrade(&g));
    g
}

/// Every device's default generator: the CPU's, then each open GPU device's.
pub fn all() -> Vec<Arc<DeviceGenerator>> {
    let mut v = vec![cpu()];
    v.extend(gpus().iter().filter_map(Weak::upgrade));
    v
}

/// Seed every device's default generator (`torch.manual_seed`; `torch.cuda.manual_seed_all`
/// for the GPUs): sessions without their own seed then draw as one session seeded with
/// `seed` does.
pub fn manual_seed_all(seed: u64) {
    for g in all() {
        g.reset(Rng::new(seed));
    }
}

/// Seed every device's default generator from the clock (`torch.cuda.seed_all`): one seed
/// for all, returned.
pub fn seed_all() -> u64 {
    let seed = crate::runtime::clock_seed(all().len() as u64);
    manual_seed_all(seed);
    seed
}

/// Every device's default generator state, in the 16-byte form of `Session::get_rng_state`
/// (`torch.cuda.get_rng_state_all`, with the CPU first).
pub fn get_rng_state_all() -> Vec<Vec<u8>> {
    all().iter().map(|g| g.rng().to_bytes()).collect()
}

/// Restore every device's default generator from [`get_rng_state_all`]'s list
/// (`torch.cuda.set_rng_state_all`). One state per device, checked before any is set: a
/// list of another length or a state that is not 16 bytes is an input error naming it.
pub fn set_rng_state_all(states: &[Vec<u8>]) -> Result<()> {
    let gens = all();
    if states.len() != gens.len() {
        return Err(Error::Input {
            input: "rng_states".into(),
            msg: format!(
                "expected one state per device ({}: the CPU and {} GPU devices open), got {}",
                gens.len(),
                gens.len() - 1,
                states.len()
            ),
        });
    }
    let rngs = states
        .iter()
        .enumerate()
        .map(|(i, s)| Rng::from_bytes(s, &format!("rng_states[{i}]")))
        .collect::<Result<Vec<_>>>()?;
    for (g, r) in gens.iter().zip(rngs) {
        g.reset(r);
    }
    Ok(())
}
