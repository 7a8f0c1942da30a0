//! Counters of a GPU run and of a prepare pass.

use std::collections::BTreeMap;

/// Counters of one run (`pt2web run --json` prints them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Command buffers submitted.
    pub submits: u64,
    /// Buffers created from the driver (pool misses).
    pub buffer_allocations: u64,
    /// Compute pipelines created (cache misses).
    pub pipelines_created: u64,
    /// Bind groups created (cache misses; see the device module's doc).
    pub bind_groups_created: u64,
    /// Dispatches encoded.
    pub dispatches: u64,
    /// Bytes of the storage buffers the run's dispatches bind, summed over dispatches: what
    /// the kernels may read and write (an upper bound: a kernel reading part of a buffer, a
    /// view's slice, counts the whole buffer). Fusion lowers it by the intermediates it
    /// keeps in registers.
    pub bound_bytes: u64,
    /// Most bytes of pt2web's buffers in use at once during the run (weights included). A
    /// replayed run reports its recording's: the same buffers hold the same tensors at the
    /// same points (the device's own peak, `max_memory_allocated`, counts every buffer of
    /// the tape as taken for the whole replay).
    pub peak_bytes: u64,
    /// The largest kernel scratch buffer of the run (a convolution's `im2col` columns): memory
    /// the graph's liveness does not see.
    pub workspace_bytes: u64,
    /// Nodes run by a GPU kernel.
    pub gpu_nodes: u64,
    /// View nodes handled as GPU metadata (no data moved).
    pub view_nodes: u64,
    /// Nodes run by their CPU kernel, by target.
    pub fallbacks: BTreeMap<String, u64>,
    /// Stores uploaded to / downloaded from the GPU.
    pub uploads: u64,
    pub downloads: u64,
    /// Bytes written to / read back from the GPU (whole stores, in their GPU form: an int64
    /// tensor moves as 32-bit words). State the run updates on the device is not read back,
    /// so a decode step of a language model reads back its logits, not its KV cache.
    pub upload_bytes: u64,
    pub download_bytes: u64,
    /// State updates written on the device (a buffer mutation copied into the buffer's GPU
    /// copy instead of read back).
    pub device_copies: u64,
    /// Steps of the Plan the run walked (nodes of the program's graph).
    pub plan_steps: u64,
    /// Host time of the run outside waits for the GPU, microseconds: input checks,
    /// encoding every node, uploads, submits and copying outputs out.
    pub host_us: u64,
    /// Time spent waiting for the GPU (readbacks), microseconds.
    pub wait_us: u64,
    /// Whether the run replayed a recorded tape of dispatches (see `gpu::tape`).
    pub replayed: bool,
    /// What the tape machinery made of the run: replayed, recorded, or why neither.
    pub tape: Option<&'static str>,
}

impl RunStats {
    pub fn fallback_nodes(&self) -> u64 {
        self.fallbacks.values().sum()
    }
    pub fn add(&mut self, o: &RunStats) {
        self.submits += o.submits;
        self.buffer_allocations += o.buffer_allocations;
        self.pipelines_created += o.pipelines_created;
        self.bind_groups_created += o.bind_groups_created;
        self.dispatches += o.dispatches;
        self.bound_bytes += o.bound_bytes;
        self.peak_bytes = self.peak_bytes.max(o.peak_bytes);
        self.workspace_bytes = self.workspace_bytes.max(o.workspace_bytes);
        self.gpu_nodes += o.gpu_nodes;
        self.view_nodes += o.view_nodes;
        self.uploads += o.uploads;
        self.downloads += o.downloads;
        self.upload_bytes += o.upload_bytes;
        self.download_bytes += o.download_bytes;
        self.device_copies += o.device_copies;
        self.plan_steps += o.plan_steps;
        self.host_us += o.host_us;
        self.wait_us += o.wait_us;
        for (k, v) in &o.fallbacks {
            *self.fallbacks.entry(k.clone()).or_default() += v;
        }
    }
}

/// What [`GpuSession::prepare`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrepareStats {
    /// Wall time of the prepare call (Plan, meta pass, pipeline and bind-group creation).
    pub prepare_ms: f64,
    /// Of which creating the pipelines the pass dispatches (natively on several threads; in
    /// the browser until their asynchronous compilation is done).
    pub pipelines_ms: f64,
    /// Of which the warm-up: the run's buffers cleared once and each new pipeline dispatched
    /// once (one workgroup; not for a program that writes state in place), so the driver's
    /// work at a buffer's first use and a pipeline's first dispatch is done before the first
    /// run.
    pub warm_up_ms: f64,
    /// Of which waiting, at the end, for the device to finish what prepare created.
    pub wait_ms: f64,
    /// Pipelines the warm-up dispatched once (0 for a program with in-place ops).
    pub first_dispatches: u64,
    /// Compute pipelines and bind groups it created.
    pub pipelines_created: u64,
    pub bind_groups_created: u64,
    /// Steps of the program's Plan.
    pub plan_steps: u64,
    /// Shapes whose kernel forms were timed (autotuning, `src/gpu/tune.rs`).
    pub autotuned: u64,
    /// Where the prepare pass stopped before the end of the graph, if it did.
    pub stopped: Option<String>,
}
