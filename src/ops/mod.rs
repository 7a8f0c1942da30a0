//! Op families and the registry mapping `aten.x.overload` targets to CPU kernels.
//!
//! Each family lives in its own file and registers its targets in `register`. A kernel reads
//! its arguments through [`OpCtx`] (by schema argument name) and returns one [`RValue`] per
//! schema return, in order.

mod ctx;
pub mod util;

// One file per op family; each registers its targets.
mod activation;
mod attention;
pub(crate) mod control;
mod conv;
mod elementwise;
mod factory;
pub(crate) use factory::sizes_arg;
mod index;
pub(crate) mod matmul;
mod norm;
pub(crate) mod pool;
pub(crate) mod reduce;
mod rnn;
pub(crate) mod shape;
mod sort;

pub use ctx::{OpCtx, Scalar};

use crate::error::Result;
use crate::runtime::RValue;
use std::collections::HashMap;
use std::sync::OnceLock;

/// A CPU kernel.
pub type Kernel = fn(&mut OpCtx) -> Result<Vec<RValue>>;

/// Targets → kernels. Exact targets (`aten.add.Tensor`) win over whole-op registrations
/// (`aten.add`, which covers every overload whose arguments the kernel reads by name).
#[derive(Default)]
pub struct Registry {
    exact: HashMap<String, Kernel>,
    any_overload: HashMap<String, Kernel>,
}

impl Registry {
    /// Register one exact target.
    pub fn add(&mut self, target: &str, k: Kernel) {
        self.exact.insert(target.to_string(), k);
    }
    /// Register every overload of an op (`aten.add` covers `aten.add.Tensor`, `aten.add.Scalar`...).
    pub fn add_op(&mut self, op: &str, k: Kernel) {
        self.any_overload.insert(op.to_string(), k);
    }
    pub fn lookup(&self, target: &str) -> Option<Kernel> {
        if let Some(k) = self.exact.get(target) {
            return Some(*k);
        }
        let base = target.rsplit_once('.').map(|(b, _)| b).unwrap_or(target);
        self.any_overload
            .get(base)
            .copied()
            .or_else(|| self.any_overload.get(target).copied())
    }
    /// Every registered name (for `pt2web check` and docs).
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .exact
            .keys()
            .chain(self.any_overload.keys())
            .cloned()
            .collect();
        v.sort();
        v
    }
}

/// The process-wide registry of CPU kernels.
pub fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let mut r = Registry::default();
        register_all(&mut r);
        r
    })
}

fn register_all(r: &mut Registry) {
    activation::register(r);
    attention::register(r);
    control::register(r);
    conv::register(r);
    elementwise::register(r);
    factory::register(r);
    index::register(r);
    matmul::register(r);
    norm::register(r);
    pool::register(r);
    reduce::register(r);
    rnn::register(r);
    shape::register(r);
    sort::register(r);
}
