//! Index faults found by GPU kernels (`shaders/fault.wgsl`): an out-of-range index must raise
//! torch's error on the GPU as it does on the CPU, never give a silent value.
//!
//! A kernel cannot return an error, and waiting for the GPU after every node would serialize
//! the run. So each kernel that reads an index tensor ([`super::kernels::reports_faults`])
//! also binds its session's fault record (four words at binding [`BINDING`]: a code, the
//! site, the bad index, the size of the dimension; one record per session, so that sessions
//! sharing a device cannot clear or read each other's faults), skips the access an invalid index would make, and makes the first bad
//! index of the run win the record (`atomicMax` on the code). The host reads the record with
//! the next readback the run makes anyway (the outputs at its end, or a mid-run read for
//! control flow or a data-dependent size: [`super::runner::Runner::download`]), in the same
//! submit and wait; a run that keeps its outputs on the GPU reads the 16 bytes alone at its
//! end. A set record fails the run with the error the node's CPU kernel gives, naming the
//! node, and is cleared, so the session's next run starts clean.
//!
//! The site (which node, which dimension, how the CPU words the error) is a number in the
//! kernel's parameters, interned per device ([`Faults::site`]): the same node gets the same
//! number every run, so its bind group is cached and a recorded run replays unchanged.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::Mutex;

/// The binding of the fault record in every module that includes `shaders/fault.wgsl`.
pub const BINDING: u32 = 15;
/// Bytes of the fault record: code, site, index (i32 bits), size.
pub const BYTES: u64 = 16;
/// Most sites a device interns; later ones share site 0 (the error then names no node).
const MAX_SITES: usize = 1 << 16;

/// How the CPU kernel of a node words an invalid index (`src/ops/shape/mod.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexText {
    /// No negative index allowed: "index i is out of bounds for dimension d with size n".
    Bounds { dim: usize },
    /// Negatives count from the end: "index i is out of range for dimension d with size n".
    Range { dim: usize },
    /// Rows of a weight (embedding_bag): "index i is out of range for a weight of n rows".
    WeightRows,
    /// Rows of a quantized embedding: "index i is out of range for an embedding of n rows".
    EmbeddingRows,
    /// searchsorted's sorter: "sorter index i is out of range for a sequence of length n".
    Sorter,
}

impl IndexText {
    fn message(self, index: i64, size: u64) -> String {
        match self {
            IndexText::Bounds { dim } => crate::ops::shape::out_of_bounds(index, dim, size),
            IndexText::Range { dim } => crate::ops::shape::out_of_range(index, dim, size),
            IndexText::WeightRows => crate::ops::index::bag::bad_row(index, size),
            IndexText::EmbeddingRows => crate::ops::matmul::quant::bad_row(index, size),
            IndexText::Sorter => crate::ops::sort::bad_sorter(index, size),
        }
    }
}

/// Where a kernel checks indices: the node's target and name, and its error's wording.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Site {
    target: String,
    node: String,
    text: IndexText,
}

/// The sites a device's kernels name, and the fault record of runs outside a session.
pub struct Faults {
    record: wgpu::Buffer,
    sites: Mutex<Sites>,
}

/// A fresh fault record (zeroed: no fault).
pub(crate) fn new_record(device: &wgpu::Device) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("index fault record"),
        size: BYTES,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

#[derive(Default)]
struct Sites {
    list: Vec<Site>,
    ids: HashMap<Site, u32>,
}

impl Faults {
    pub(crate) fn new(device: &wgpu::Device) -> Faults {
        Faults {
            record: new_record(device),
            sites: Mutex::default(),
        }
    }

    /// The record of runs outside a session ([`super::exec::read_tensor`]).
    pub(crate) fn record(&self) -> &wgpu::Buffer {
        &self.record
    }

    /// The number of the site `(target, node, text)`: 1 + its place in the device's list,
    /// the same every run; 0 once [`MAX_SITES`] are known.
    pub(crate) fn site(&self, target: &str, node: &str, text: IndexText) -> u32 {
        let site = Site {
            target: target.to_string(),
            node: node.to_string(),
            text,
        };
        let mut s = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = s.ids.get(&site) {
            return id;
        }
        if s.list.len() >= MAX_SITES {
            return 0;
        }
        s.list.push(site.clone());
        let id = s.list.len() as u32;
        s.ids.insert(site, id);
        id
    }

    /// The error a read-back record holds (None: no fault). `words`: the record's bytes.
    pub(crate) fn error(&self, words: &[u8]) -> Option<Error> {
        let w = |i: usize| {
            words
                .get(i * 4..i * 4 + 4)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_le_bytes)
        };
        if w(0) == 0 {
            return None;
        }
        let (index, size) = (i64::from(w(2) as i32), u64::from(w(3)));
        let sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        let site = (w(1) as usize)
            .checked_sub(1)
            .and_then(|i| sites.list.get(i));
        Some(match site {
            Some(s) => Error::op(
                &s.target,
                format!(
                    "{} (node '{}', found by its GPU kernel)",
                    s.text.message(index, size),
                    s.node
                ),
            ),
            None => Error::Gpu(format!(
                "a GPU kernel read index {index}, outside a dimension of size {size}"
            )),
        })
    }
}

/// Read the fault record `record`, copied into the mapped staging buffer `st`: the run's
/// error, if any (the record is then cleared: the next run starts clean).
pub(crate) fn check(
    dev: &super::device::GpuDevice,
    record: &wgpu::Buffer,
    st: &wgpu::Buffer,
) -> Result<()> {
    let fault = {
        let view = st
            .slice(..)
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("reading the index fault record: {e}")))?;
        dev.faults.error(&view)
    };
    st.unmap();
    match fault {
        Some(e) => {
            dev.queue.write_buffer(record, 0, &[0; BYTES as usize]);
            Err(e)
        }
        None => Ok(()),
    }
}
