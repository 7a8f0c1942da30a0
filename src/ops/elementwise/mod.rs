//! Op family: elementwise. Arithmetic, float math, comparisons and logic, clamps, copies and
//! dtype conversions, each with torch's type promotion, broadcasting and in-place forms.
//!
//! - `engine`: operands (tensor or number), promotion, broadcasting maps, in-place write-back
//! - `real`: the float compute trait and erf/erfc/erfinv; `fast`: vectorizable f32 exp/tanh/erf
//! - `arith`, `unary`, `ternary`, `logic`, `convert`: the kernels
//! - `fused`: the node the fusion pass makes of a chain of these ops
//! - `epilogue`: the node the epilogue pass makes of a matrix product or convolution and the
//!   chain that reads its result

/// Shape and dtype rules (the meta device) of this family's targets.
pub(crate) mod meta;

pub(crate) mod arith;
pub(crate) mod convert;
pub(crate) mod engine;
pub(crate) mod epilogue;
pub(crate) mod fast;
pub(crate) mod fused;
pub(crate) mod logic;
pub(crate) mod real;
pub(crate) mod special;
pub(crate) mod ternary;
pub(crate) mod unary;

use super::OpTable;

pub(crate) fn register(r: &mut OpTable) {
    meta::register(r);
    arith::register(r);
    convert::register(r);
    epilogue::register(r);
    fused::register(r);
    logic::register(r);
    special::register(r);
    ternary::register(r);
    unary::register(r);
}
