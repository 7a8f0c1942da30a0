//! pt2web: run PyTorch `torch.export` programs (`.pt2` archives) on WebGPU and CPU.
//!
//! Data flow (one direction): bytes → [`archive`] → [`schema`] → [`program::Program`]
//! → plan → executor on a backend → outputs.

// The GPU types are `Arc`s of non-`Send` wgpu handles on wasm32 (one thread there); the
// same code shares them across threads natively.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

pub mod archive;
pub mod backend;
pub mod backends;
pub mod cpu;
pub mod dlpack;
pub mod dtype;
pub mod error;
pub mod generate;
pub mod gpu;
pub mod info;
#[cfg(target_arch = "wasm32")]
pub mod js;
pub mod limits;
pub mod meta;
pub mod ops;
pub mod passes;
pub mod pickle;
pub mod plan;
pub mod profiler;
pub mod program;
pub mod pytree;
pub mod random;
pub mod runtime;
pub mod schema;
pub mod sym;
pub mod tensor;
pub mod writer;

pub use dtype::DType;
pub use error::{Error, Result};
pub use limits::Limits;
pub use tensor::{HostTensor, Storage};
