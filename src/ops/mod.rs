//! Op families and the op table mapping `aten.x.overload` targets to what each backend has.
//!
//! Each family lives in its own folder (`src/ops/<family>/`) and registers its targets in
//! `register`: the CPU kernels in its kernel files, the shape and dtype rules in its
//! `meta.rs` (see [`table`]). A kernel reads its arguments through [`OpCtx`] (by schema
//! argument name) and returns one [`RValue`] per schema return, in order.

mod ctx;
pub mod doc;
mod table;
pub mod util;

// One file per op family; each registers its targets.
pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod complex;
pub(crate) mod control;
pub(crate) mod conv;
pub(crate) mod elementwise;
pub(crate) mod factory;
pub(crate) mod fft;
pub(crate) use factory::sizes_arg;
pub(crate) mod index;
pub(crate) mod linalg;
pub(crate) mod matmul;
pub(crate) mod norm;
pub(crate) mod pool;
pub(crate) mod quantized;
pub(crate) mod reduce;
mod rnn;
pub(crate) mod shape;
pub(crate) mod sort;

pub use ctx::{OpCtx, Scalar};
pub use table::{touches_complex, OpDef, OpTable};

use crate::error::Result;
use crate::runtime::RValue;
use std::sync::OnceLock;

/// A CPU kernel.
pub type Kernel = fn(&mut OpCtx) -> Result<Vec<RValue>>;

/// The process-wide op table (CPU kernels and shape rules of every family).
pub fn table() -> &'static OpTable {
    static T: OnceLock<OpTable> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = OpTable::default();
        register_all(&mut t);
        t
    })
}

fn register_all(r: &mut OpTable) {
    r.set_family("activation");
    activation::register(r);
    r.set_family("attention");
    attention::register(r);
    r.set_family("control");
    control::register(r);
    r.set_family("conv");
    conv::register(r);
    r.set_family("elementwise");
    elementwise::register(r);
    r.set_family("factory");
    factory::register(r);
    r.set_family("index");
    index::register(r);
    r.set_family("linalg");
    linalg::register(r);
    r.set_family("matmul");
    matmul::register(r);
    r.set_family("norm");
    norm::register(r);
    r.set_family("pool");
    pool::register(r);
    r.set_family("quantized");
    quantized::register(r);
    r.set_family("reduce");
    reduce::register(r);
    r.set_family("rnn");
    rnn::register(r);
    // Composite ops whose sizes are symbolic: decomposed per call (the load-time rewrite
    // decomposes the others, src/passes/decompose/).
    r.set_family("decompose");
    crate::passes::decompose::register(r);
    r.set_family("shape");
    shape::register(r);
    r.set_family("sort");
    sort::register(r);
    // Last: these bind complex kernels to targets the families above own.
    r.set_family("complex");
    complex::register(r);
    r.set_family("fft");
    fft::register(r);
}
