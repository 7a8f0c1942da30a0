//! Safety limits for loading archives from strangers. Every size read from a file is checked
//! against the bytes actually present and against these bounds before anything is allocated.

/// Bounds applied while loading. The defaults fit real models (GPT-2 sized and beyond)
/// while refusing absurd declarations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Total uncompressed bytes read from one archive.
    pub max_total_bytes: u64,
    /// Uncompressed bytes of a single entry.
    pub max_entry_bytes: u64,
    /// Number of entries in the zip directory.
    pub max_entries: usize,
    /// Nesting depth of JSON, pickle containers and pytree specs.
    pub max_depth: usize,
    /// Elements of one tensor that pt2web materializes itself (e.g. zero-filled empty storages).
    pub max_tensor_elements: u64,
    /// Number of nodes in one graph (including subgraphs).
    pub max_nodes: usize,
    /// Rank of one tensor.
    pub max_rank: usize,
    /// Iterations of one `while_loop` in a run (a condition that never turns false ends
    /// with a `Limit` error instead of running forever).
    pub max_loop_iterations: u64,
    /// Bytes of one tensor a run may create (an op's output, checked on the Plan's meta
    /// pass before the run starts and, for sizes that depend on tensor data, by the kernel
    /// before it allocates).
    pub max_tensor_bytes: u64,
    /// Bytes of a run's inputs and intermediate values alive at once (the Plan's peak,
    /// checked before the run starts; the program's state is not counted).
    pub max_live_bytes: u64,
}

/// Native: a 4 GiB tensor (one archive entry's limit too) and 16 GiB of activations.
#[cfg(not(target_arch = "wasm32"))]
const MAX_TENSOR_BYTES: u64 = 4 << 30;
#[cfg(not(target_arch = "wasm32"))]
const MAX_LIVE_BYTES: u64 = 16 << 30;
/// wasm32: one Vec holds at most 2 GiB and an instance 4 GiB, weights included.
#[cfg(target_arch = "wasm32")]
const MAX_TENSOR_BYTES: u64 = 1 << 30;
#[cfg(target_arch = "wasm32")]
const MAX_LIVE_BYTES: u64 = 3 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_total_bytes: 8 << 30,
            max_entry_bytes: 4 << 30,
            max_entries: 1 << 20,
            max_depth: 64,
            max_tensor_elements: 1 << 32,
            max_nodes: 1 << 22,
            max_rank: 16,
            max_loop_iterations: 10_000_000,
            max_tensor_bytes: MAX_TENSOR_BYTES,
            max_live_bytes: MAX_LIVE_BYTES,
        }
    }
}
