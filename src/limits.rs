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
}

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
        }
    }
}
