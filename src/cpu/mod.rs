//! The CPU backend's data structures: typed storage, strided tensors, type promotion; and
//! (native) its thread pool.
//! Kernels live with their op families in `crate::ops`.

pub mod complex;
pub mod elem;
pub(crate) mod pool;
pub mod promote;
pub mod tensor;

pub use complex::{C128, C64};
pub use elem::{cast, Data, Elem};
pub use tensor::{broadcast_shapes, Tensor};
