//! Replaying warm runs (tinygrad's JIT, CUDA graphs): once two consecutive runs of one input
//! signature encoded exactly the same dispatches (same pipelines, kernel parameters, buffers
//! and workgroup counts), the session keeps that list as a [`Tape`], and later runs with the
//! signature skip the executor: they write the user inputs into the buffers the tape reads,
//! encode the recorded dispatches in one compute pass, copy the outputs out and wait once.
//! No kernel code, argument parsing, shape arithmetic or bind-group lookup runs.
//!
//! A run is recorded only when replaying it can give the same results and errors:
//! - every node ran on the GPU with one submit (no CPU fallback, no readback for control flow
//!   or data-dependent sizes) and no kernel looked at tensor data on the host (bernoulli's
//!   probabilities, [`note_host_read`]), but for the index range checks of the scatter
//!   family on user inputs or state ([`note_range_check`]), which each replay repeats on
//!   its own values (a failing check runs the executor, which gives torch's error);
//! - the program declares no state writes (no buffer or user-input mutation outputs, whose
//!   write-back goes through the CPU), the outputs come back to the CPU (no `keepOnGpu`),
//!   every user input is a CPU value, and the run is neither profiled nor in deterministic
//!   mode. In-place updates of state inside the graph (a training-IR batch norm's running
//!   statistics) are GPU dispatches like any other: a replay runs them on the state's
//!   buffers and marks that state's CPU copy stale, as the executor does;
//! - nothing but the user inputs was uploaded.
//!
//! Random ops draw with the generator's state in their parameters, so their runs never
//! encode the same twice and are never replayed. The tape's buffers stay in the device's
//! pool between runs; a replay takes exactly those buffers out of the pool for its duration
//! ([`GpuDevice::take_free`]) and runs the executor instead, dropping the tape, when any of
//! them is in use elsewhere or was released (`empty_cache`). A session keeps one tape (for
//! the last signature that had one).

use super::device::{GpuBuffer, GpuDevice};
use super::shaders::Variant;
use super::store::{from_gpu_bytes, gpu_bytes, to_gpu_bytes, Cell};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::plan::Signature;
use crate::runtime::RValue;
use std::cell::Cell as CountCell;

thread_local! {
    static HOST_READS: CountCell<u64> = const { CountCell::new(0) };
    /// The latest range checks and the sequence number of the first one kept.
    static RANGE_CHECKS: std::cell::RefCell<(u64, std::collections::VecDeque<RangeCheck>)> =
        const { std::cell::RefCell::new((0, std::collections::VecDeque::new())) };
}

/// Range checks kept per thread (a run that made more is not recorded).
const KEPT_CHECKS: usize = 4096;

/// A kernel checked on the host that an index tensor's values lie in `lo..hi` (the scatter
/// family's bounds checks, `host_in_range`). Unlike other host reads this does not stop a
/// run from being recorded when the index tensor is a user input or state: the tape
/// repeats the check on each replay's values, and where it fails runs the executor instead
/// (which gives torch's error).
#[derive(Clone)]
pub(crate) struct RangeCheck {
    /// The index tensor's store (weakly: recording must not keep it alive).
    pub store: std::sync::Weak<std::sync::Mutex<super::store::Store>>,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
    pub lo: i64,
    pub hi: i64,
}

/// Note a range check of `t`'s values (see [`RangeCheck`]).
pub(crate) fn note_range_check(t: &super::store::GTensor, lo: i64, hi: i64) {
    RANGE_CHECKS.with(|c| {
        let (first, kept) = &mut *c.borrow_mut();
        kept.push_back(RangeCheck {
            store: std::sync::Arc::downgrade(&t.cell),
            sizes: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.offset,
            lo,
            hi,
        });
        if kept.len() > KEPT_CHECKS {
            kept.pop_front();
            *first += 1;
        }
    });
}

/// The sequence number the next range check on this thread gets (a run's checks are those
/// from its start on).
pub(crate) fn range_checks() -> u64 {
    RANGE_CHECKS.with(|c| {
        let (first, kept) = &*c.borrow();
        first + kept.len() as u64
    })
}

/// The range checks noted on this thread since `from` ([`range_checks`] at a run's start;
/// with sessions interleaved on one thread, another run's too, which only makes the
/// recording fail). None when some were dropped already.
pub(crate) fn range_checks_since(from: u64) -> Option<Vec<RangeCheck>> {
    RANGE_CHECKS.with(|c| {
        let (first, kept) = &*c.borrow();
        let skip = usize::try_from(from.checked_sub(*first)?).ok()?;
        Some(kept.iter().skip(skip).cloned().collect())
    })
}

/// Where a tape's range check reads its index values on each replay.
#[derive(Clone)]
pub(crate) enum CheckSource {
    /// User input `i` (the replay's own value).
    Input(usize),
    /// A view of a state tensor: checked from its CPU copy while that copy is the current
    /// one (as the executor does; it does not check a GPU-current store either).
    State(super::store::GTensor),
}

/// A range check a replay repeats.
#[derive(Clone)]
pub(crate) struct TapeCheck {
    pub source: CheckSource,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
    pub lo: i64,
    pub hi: i64,
}

impl TapeCheck {
    fn same_as(&self, o: &TapeCheck) -> bool {
        let same_source = match (&self.source, &o.source) {
            (CheckSource::Input(a), CheckSource::Input(b)) => a == b,
            (CheckSource::State(a), CheckSource::State(b)) => {
                std::sync::Arc::ptr_eq(&a.cell, &b.cell)
            }
            _ => false,
        };
        same_source
            && (&self.sizes, &self.strides, self.offset, self.lo, self.hi)
                == (&o.sizes, &o.strides, o.offset, o.lo, o.hi)
    }

    /// Whether the values the check reads now lie in its range.
    fn holds(&self, inputs: &[RValue]) -> bool {
        let in_range = |v: &Tensor| {
            v.to_vec::<i64>()
                .iter()
                .all(|i| (self.lo..self.hi).contains(i))
        };
        match &self.source {
            CheckSource::Input(i) => match inputs.get(*i) {
                Some(RValue::Tensor(t)) => {
                    in_range(&t.view_with(self.sizes.clone(), self.strides.clone(), self.offset))
                }
                _ => false,
            },
            CheckSource::State(g) => match g.cpu_view() {
                Ok(v) => in_range(&v),
                Err(_) => true,
            },
        }
    }
}

/// A kernel decided something from tensor data on the host: runs that do this are not
/// replayed (the replay would skip the check).
pub(crate) fn note_host_read() {
    HOST_READS.with(|c| c.set(c.get() + 1));
}

/// Host reads so far on this thread.
pub(crate) fn host_reads() -> u64 {
    HOST_READS.with(|c| c.get())
}

/// One encoded dispatch.
#[derive(Debug, Clone)]
pub(crate) struct Dispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub groups: (u32, u32, u32),
    /// What identifies it: the variant, the parameter bytes and the bound buffers.
    pub variant: Variant,
    pub meta: Vec<u8>,
    pub bufs: Vec<(u32, wgpu::Buffer, u64)>,
    /// Each bound storage buffer with its pool size class.
    pub classes: Vec<(wgpu::Buffer, u64)>,
}

impl PartialEq for Dispatch {
    fn eq(&self, o: &Dispatch) -> bool {
        self.variant == o.variant
            && self.groups == o.groups
            && self.meta == o.meta
            && self.bufs == o.bufs
    }
}

/// What a run encoded and uploaded, while it is being recorded.
#[derive(Default)]
pub(crate) struct Recording {
    pub dispatches: Vec<Dispatch>,
    pub uploads: Vec<Upload>,
}

/// One upload of a recorded run.
pub(crate) struct Upload {
    /// The store (weakly: recording must not keep it alive).
    pub store: std::sync::Weak<std::sync::Mutex<super::store::Store>>,
    pub buffer: wgpu::Buffer,
    pub class: u64,
    pub dtype: DType,
    pub len: usize,
    /// What was written (kept for uploads other than the user inputs').
    pub bytes: Vec<u8>,
}

/// A user input the tape writes: the buffer its kernels read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TapeInput {
    pub buffer: wgpu::Buffer,
    pub class: u64,
    pub dtype: DType,
    /// Elements of the input's storage when it was recorded.
    pub len: usize,
}

/// A user output as the tape reads it back.
#[derive(Debug, Clone)]
pub(crate) enum TapeOutput {
    /// A value fixed by the signature (a symbolic size).
    Value(RValue),
    /// A view of a buffer's contents.
    Tensor(OutTensor),
}

/// A tensor output: which buffer holds it and how it views it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OutTensor {
    pub buffer: wgpu::Buffer,
    pub class: u64,
    pub dtype: DType,
    pub len: usize,
    pub sizes: Vec<usize>,
    pub strides: Vec<usize>,
    pub offset: usize,
}

impl TapeOutput {
    fn same_as(&self, o: &TapeOutput) -> bool {
        match (self, o) {
            // Ints, floats, bools and None (never a tensor): Debug is exact for them.
            (TapeOutput::Value(a), TapeOutput::Value(b)) => format!("{a:?}") == format!("{b:?}"),
            (TapeOutput::Tensor(a), TapeOutput::Tensor(b)) => a == b,
            _ => false,
        }
    }
}

/// A recorded run, complete: what a replay needs.
#[derive(Clone)]
pub(crate) struct Tape {
    pub signature: Signature,
    pub dispatches: Vec<Dispatch>,
    /// Per user input: the buffer to write, or None (no kernel reads it from a buffer).
    pub inputs: Vec<Option<TapeInput>>,
    pub outputs: Vec<TapeOutput>,
    /// Host-built constants kernels upload (a causal mask, interpolation tables): functions
    /// of the signature, written again by each replay.
    pub consts: Vec<(wgpu::Buffer, Vec<u8>)>,
    /// Pool buffers the replay takes for its duration (everything bound but the state's).
    pub buffers: Vec<(wgpu::Buffer, u64)>,
    /// Counters of the recorded run a replay reports as its own.
    pub gpu_nodes: u64,
    pub view_nodes: u64,
    pub nodes_run: usize,
    /// The recorded run's peak of allocated bytes and its largest kernel scratch buffer: a
    /// replay binds the same buffers at the same points, so its tensors occupy the same
    /// memory (the pool counts all of the tape's buffers as allocated while it runs).
    pub peak_bytes: u64,
    pub workspace_bytes: u64,
    /// State whose GPU copy was the current one after the recorded run (what in-place ops
    /// of a training-IR program wrote): a replay writes it again, so its CPU copy is stale.
    pub gpu_state: Vec<Cell>,
    /// The index range checks of the recorded run, repeated before each replay.
    pub checks: Vec<TapeCheck>,
}

impl Tape {
    /// Whether two recordings of one signature are the same run.
    pub fn same_as(&self, o: &Tape) -> bool {
        self.signature == o.signature
            && self.dispatches == o.dispatches
            && self.inputs == o.inputs
            && self.consts == o.consts
            && self.checks.len() == o.checks.len()
            && self.checks.iter().zip(&o.checks).all(|(a, b)| a.same_as(b))
            && self.outputs.len() == o.outputs.len()
            && self
                .outputs
                .iter()
                .zip(&o.outputs)
                .all(|(a, b)| a.same_as(b))
    }

    /// Whether `inputs` can be written as recorded: CPU tensors laid out densely from the
    /// start of storages of the recorded size, whose indices pass the recorded range checks.
    pub fn accepts(&self, inputs: &[RValue]) -> bool {
        inputs.len() == self.inputs.len()
            && inputs
                .iter()
                .zip(&self.inputs)
                .all(|(v, ti)| match (v, ti) {
                    (RValue::Tensor(t), Some(ti)) => {
                        t.dtype == ti.dtype
                            && t.offset == 0
                            && t.is_contiguous()
                            && t.read().len() == ti.len
                            && t.numel() == ti.len
                    }
                    (_, None) => true,
                    _ => false,
                })
            && self.checks.iter().all(|c| c.holds(inputs))
    }
}

/// What a replay produced.
pub(crate) struct Replayed {
    pub outputs: Vec<RValue>,
    pub uploads: u64,
    pub downloads: u64,
    pub upload_bytes: u64,
    pub download_bytes: u64,
    pub wait_us: u64,
}

/// Replay `tape` with `inputs` (checked with [`Tape::accepts`]), `record` the session's
/// fault record: `None` when its buffers cannot all be had now (the caller runs the executor
/// and drops the tape).
pub(crate) async fn replay(
    dev: &GpuDevice,
    tape: &Tape,
    inputs: &[RValue],
    record: &wgpu::Buffer,
) -> Result<Option<Replayed>> {
    let Some(held) = dev.take_free(&tape.buffers) else {
        return Ok(None);
    };
    let (mut uploads, mut upload_bytes) = (0, 0);
    for (i, (v, ti)) in inputs.iter().zip(&tape.inputs).enumerate() {
        let (RValue::Tensor(t), Some(ti)) = (v, ti) else {
            continue;
        };
        let bytes = to_gpu_bytes(&t.read(), &format!("user input #{i}"))?;
        if !bytes.is_empty() {
            dev.queue.write_buffer(&ti.buffer, 0, &bytes);
        }
        uploads += 1;
        upload_bytes += bytes.len() as u64;
    }
    for (buffer, bytes) in &tape.consts {
        if !bytes.is_empty() {
            dev.queue.write_buffer(buffer, 0, bytes);
        }
    }
    let mut enc = dev
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    let faults = tape
        .dispatches
        .iter()
        .any(|d| super::kernels::reports_faults(&d.variant));
    if faults {
        enc.clear_buffer(record, 0, None);
    }
    {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("replay"),
            timestamp_writes: None,
        });
        for d in &tape.dispatches {
            pass.set_pipeline(&d.pipeline);
            pass.set_bind_group(0, &d.bind_group, &[]);
            pass.dispatch_workgroups(d.groups.0, d.groups.1, d.groups.2);
        }
    }
    // One staging copy per distinct output buffer.
    let mut staged: Vec<(wgpu::Buffer, GpuBuffer, DType, usize)> = Vec::new();
    for o in &tape.outputs {
        let TapeOutput::Tensor(t) = o else {
            continue;
        };
        if staged.iter().any(|(b, ..)| *b == t.buffer) {
            continue;
        }
        let bytes = gpu_bytes(t.dtype, t.len);
        let st = dev.alloc_readback(bytes)?;
        enc.copy_buffer_to_buffer(&t.buffer, 0, st.buffer(), 0, bytes);
        staged.push((t.buffer.clone(), st, t.dtype, t.len));
    }
    // The index fault record, read in the same wait (`fault.rs`).
    let fault = match faults {
        true => {
            let st = dev.alloc_readback(super::fault::BYTES)?;
            let bytes = super::fault::BYTES;
            enc.copy_buffer_to_buffer(record, 0, st.buffer(), 0, bytes);
            Some(st)
        }
        false => None,
    };
    dev.queue.submit([enc.finish()]);
    dev.recycle();
    dev.take_error()?;
    let waits: Vec<_> = staged
        .iter()
        .map(|(_, st, ..)| st)
        .chain(&fault)
        .map(|st| super::exec::map_read(dev, st.buffer()))
        .collect();
    let wait_start = crate::runtime::profile::now_ms();
    #[cfg(not(target_arch = "wasm32"))]
    dev.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Gpu(format!("waiting for a readback: {e}")))?;
    for w in waits {
        w.await?;
    }
    let wait_us = ((crate::runtime::profile::now_ms() - wait_start) * 1e3) as u64;
    if let Some(st) = fault {
        let found = super::fault::check(dev, record, st.buffer());
        if found.is_err() {
            staged.iter().for_each(|(_, st, ..)| st.buffer().unmap());
        }
        found?;
    }
    let staged_bytes = staged.iter().map(|(_, _, d, n)| gpu_bytes(*d, *n)).sum();
    let mut data: Vec<(wgpu::Buffer, Tensor)> = Vec::with_capacity(staged.len());
    for (buffer, st, dtype, len) in staged {
        let d = {
            let view = st
                .buffer()
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("reading a readback buffer: {e}")))?;
            from_gpu_bytes(dtype, &view, len)?
        };
        st.buffer().unmap();
        data.push((buffer, Tensor::from_data(d, &[len])));
    }
    drop(held);
    for c in &tape.gpu_state {
        super::store::lock(c).cpu_valid = false;
    }
    let outputs =
        tape.outputs
            .iter()
            .map(|o| match o {
                TapeOutput::Value(v) => Ok(v.clone()),
                TapeOutput::Tensor(t) => {
                    let (_, base) = data.iter().find(|(b, _)| *b == t.buffer).ok_or_else(|| {
                        Error::Gpu("internal: a replayed output was not read".into())
                    })?;
                    Ok(RValue::Tensor(base.view_with(
                        t.sizes.clone(),
                        t.strides.clone(),
                        t.offset,
                    )))
                }
            })
            .collect::<Result<Vec<_>>>()?;
    Ok(Some(Replayed {
        outputs,
        uploads,
        downloads: data.len() as u64,
        download_bytes: staged_bytes,
        upload_bytes,
        wait_us,
    }))
}

/// Whether the program writes state or inputs back after its graph (buffer, parameter or
/// user-input mutations returned as new values): such runs are not recorded. State the graph
/// updates in place (training IR, reinplaced updates) is replayed like any other kernel.
pub(crate) fn writes_state(p: &crate::program::Program) -> bool {
    use crate::program::OutputKind;
    p.outputs.iter().enumerate().any(|(i, o)| {
        matches!(
            o.kind,
            OutputKind::BufferMutation { .. }
                | OutputKind::ParameterMutation { .. }
                | OutputKind::UserInputMutation { .. }
        ) && !p.mutation_in_place(i)
    })
}

impl Tape {
    /// The tape of a finished recorded run, or None when something in it cannot be
    /// replayed: an upload other than a user input's, an output that is not a value or a
    /// tensor on the GPU.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_run(
        signature: Signature,
        rec: Recording,
        range_checks: Vec<RangeCheck>,
        user_inputs: &[Option<std::sync::Weak<std::sync::Mutex<super::store::Store>>>],
        user_outputs: &[&super::exec::Slot],
        state: &std::collections::BTreeMap<String, super::store::GTensor>,
        stats: &super::exec::RunStats,
        nodes_run: usize,
    ) -> Option<Tape> {
        use super::exec::Slot;
        use super::store::lock;
        let buffer_of = |c: &Cell| -> Option<(wgpu::Buffer, u64, usize, DType)> {
            let s = lock(c);
            let b = s.gpu.as_ref().filter(|_| s.gpu_valid)?;
            Some((b.buffer().clone(), b.size(), s.len, s.dtype))
        };
        let is_input = |u: &Upload| {
            user_inputs
                .iter()
                .flatten()
                .any(|w| std::sync::Weak::ptr_eq(w, &u.store))
        };
        let inputs: Vec<Option<TapeInput>> = user_inputs
            .iter()
            .map(|w| {
                let w = w.as_ref()?;
                let u = rec
                    .uploads
                    .iter()
                    .find(|u| std::sync::Weak::ptr_eq(w, &u.store))?;
                Some(TapeInput {
                    buffer: u.buffer.clone(),
                    class: u.class,
                    dtype: u.dtype,
                    len: u.len,
                })
            })
            .collect();
        let consts: Vec<(wgpu::Buffer, Vec<u8>, u64)> = rec
            .uploads
            .iter()
            .filter(|u| !is_input(u))
            .map(|u| (u.buffer.clone(), u.bytes.clone(), u.class))
            .collect();
        // A range check of anything but a user input or state (an intermediate the CPU
        // computed) cannot be repeated: no tape.
        let mut checks = Vec::with_capacity(range_checks.len());
        for c in range_checks {
            let input = user_inputs
                .iter()
                .position(|w| w.as_ref().is_some_and(|w| w.ptr_eq(&c.store)));
            let source = match input {
                Some(i) => CheckSource::Input(i),
                None => {
                    let strong = c.store.upgrade()?;
                    state
                        .values()
                        .find(|g| std::sync::Arc::ptr_eq(&g.cell, &strong))
                        .map(|g| {
                            CheckSource::State(g.view(c.sizes.clone(), c.strides.clone(), c.offset))
                        })?
                }
            };
            checks.push(TapeCheck {
                source,
                sizes: c.sizes,
                strides: c.strides,
                offset: c.offset,
                lo: c.lo,
                hi: c.hi,
            });
        }
        let mut outputs = Vec::with_capacity(user_outputs.len());
        for slot in user_outputs {
            outputs.push(match slot {
                Slot::Value(
                    v @ (RValue::Int(_) | RValue::Float(_) | RValue::Bool(_) | RValue::None),
                ) => TapeOutput::Value(v.clone()),
                Slot::Tensor(t) => {
                    let (buffer, class, len, dtype) = buffer_of(&t.cell)?;
                    TapeOutput::Tensor(OutTensor {
                        buffer,
                        class,
                        dtype,
                        len,
                        sizes: t.sizes.clone(),
                        strides: t.strides.clone(),
                        offset: t.offset,
                    })
                }
                // Lists of tensors and CPU values stay with the executor.
                _ => return None,
            });
        }
        // Every buffer the replay binds or reads, but the state's (the session holds those).
        let state_bufs: Vec<wgpu::Buffer> = state
            .values()
            .filter_map(|g| buffer_of(&g.cell).map(|b| b.0))
            .collect();
        let mut buffers: Vec<(wgpu::Buffer, u64)> = Vec::new();
        let all = rec
            .dispatches
            .iter()
            .flat_map(|d| d.classes.iter().cloned())
            .chain(inputs.iter().flatten().map(|i| (i.buffer.clone(), i.class)))
            .chain(consts.iter().map(|(b, _, class)| (b.clone(), *class)))
            .chain(outputs.iter().filter_map(|o| match o {
                TapeOutput::Tensor(t) => Some((t.buffer.clone(), t.class)),
                TapeOutput::Value(_) => None,
            }));
        for (b, class) in all {
            if !state_bufs.contains(&b) && !buffers.iter().any(|(x, _)| *x == b) {
                buffers.push((b, class));
            }
        }
        Some(Tape {
            signature,
            dispatches: rec.dispatches,
            inputs,
            outputs,
            consts: consts.into_iter().map(|(b, bytes, _)| (b, bytes)).collect(),
            buffers,
            gpu_nodes: stats.gpu_nodes,
            view_nodes: stats.view_nodes,
            nodes_run,
            peak_bytes: stats.peak_bytes,
            workspace_bytes: stats.workspace_bytes,
            gpu_state: state
                .values()
                .filter(|g| !lock(&g.cell).cpu_valid)
                .map(|g| g.cell.clone())
                .collect(),
            checks,
        })
    }
}

/// Recordings that never repeat stop being made after this many tries per signature.
const MAX_UNSTABLE: u32 = 3;

/// A session's tape and the recording on its way to becoming one.
#[derive(Default)]
pub(crate) struct Tapes {
    tape: Option<std::sync::Arc<Tape>>,
    /// The last recording, waiting for a second identical one.
    candidate: Option<Tape>,
    /// Signatures whose recordings differed, with how many times (a few, bounded).
    unstable: Vec<(Signature, u32)>,
}

impl Tapes {
    /// The tape for `sig`, if `inputs` fit it.
    pub fn get(&self, sig: &Signature, inputs: &[RValue]) -> Option<std::sync::Arc<Tape>> {
        self.tape
            .as_ref()
            .filter(|t| &t.signature == sig && t.accepts(inputs))
            .cloned()
    }
    /// Whether a run of `sig` should be recorded.
    pub fn may_record(&self, sig: &Signature) -> bool {
        !self
            .unstable
            .iter()
            .any(|(s, n)| s == sig && *n >= MAX_UNSTABLE)
            && self.tape.as_ref().is_none_or(|t| &t.signature != sig)
    }
    /// A recorded run (None: it could not be replayed).
    /// Returns what became of it (`RunStats::tape`).
    pub fn recorded(&mut self, rec: Option<Tape>) -> &'static str {
        let Some(rec) = rec else {
            self.candidate = None;
            return "not replayable: an upload or an output the tape cannot hold";
        };
        match self.candidate.take() {
            Some(prev) if prev.same_as(&rec) => {
                self.unstable.retain(|(s, _)| *s != rec.signature);
                self.tape = Some(std::sync::Arc::new(rec));
                "recorded: the next run replays"
            }
            Some(prev) if prev.signature == rec.signature => {
                match self.unstable.iter_mut().find(|(s, _)| *s == rec.signature) {
                    Some((_, n)) => *n += 1,
                    None => {
                        if self.unstable.len() >= 8 {
                            self.unstable.remove(0);
                        }
                        self.unstable.push((rec.signature.clone(), 1));
                    }
                }
                self.candidate = Some(rec);
                "recorded: differs from the last run's"
            }
            _ => {
                self.candidate = Some(rec);
                "recorded: waiting for a run that repeats it"
            }
        }
    }
    pub fn drop_tape(&mut self) {
        self.tape = None;
    }
}
