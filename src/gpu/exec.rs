//! The GPU executor: runs a program's graph with the CPU [`Session`]'s semantics (same input
//! checks and guards, buffer mutations written back, user-input mutations applied), with
//! every node that has a GPU kernel for its dtypes encoded into one command buffer and every
//! other node run by its CPU kernel (inputs downloaded, the op run, results kept on the CPU
//! until a GPU kernel needs them). A fallback flushes the command buffer (one more submit).
//! Control flow (`cond`, `while_loop`, `map`), `item` and the ops with data-dependent output
//! sizes run on the GPU with a readback of the words the host needs (see [`super::dynamic`]):
//! one more submit each, not a fallback.
//!
//! Views (`view`, `permute`, `slice`, `expand`...) are metadata only: the CPU view kernel
//! runs on a placeholder tensor with the same sizes and strides (zero-filled storage the OS
//! allocates lazily), and when its result shares the placeholder's storage the GPU tensor
//! becomes the same view of its GPU buffer. When the CPU kernel had to copy (a `reshape`
//! of a non-contiguous tensor), the node runs as a fallback.

use super::device::GpuDevice;
use super::graph::GpuPlans;
pub use super::graph::{run_graph, Env};
use super::runner::addr;
pub(crate) use super::runner::map_read;
pub use super::runner::{Runner, Slot};
pub use super::stats::{PrepareStats, RunStats};
use super::store::{lock, GTensor};
use crate::cpu::Tensor;
use crate::error::{Error, Result};
use crate::program::{Arg, InputKind, OutputKind, Program};
use crate::runtime::{Inputs, RValue, Session};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

/// A user input of [`GpuSession::run_with`].
#[derive(Debug, Clone)]
pub enum GpuInput {
    /// A CPU value (uploaded when a GPU kernel needs it).
    Cpu(RValue),
    /// A tensor already on this session's device (e.g. a kept output).
    Gpu(GTensor),
}

/// The plan signature of GPU-session inputs.
fn gpu_signature(inputs: &[GpuInput]) -> crate::plan::Signature {
    inputs
        .iter()
        .map(|i| match i {
            GpuInput::Cpu(v) => crate::plan::signature(std::slice::from_ref(v)).remove(0),
            GpuInput::Gpu(t) => crate::plan::InputSig::Tensor {
                dtype: t.dtype,
                sizes: t.sizes.clone(),
            },
        })
        .collect()
}

/// A runner outside any session, for work on one tensor.
fn bare_runner<'d>(
    dev: &'d GpuDevice,
    ident: &'d mut HashMap<usize, Weak<std::sync::Mutex<super::store::Store>>>,
    plans: &'d mut GpuPlans,
) -> Runner<'d> {
    Runner {
        dev,
        enc: None,
        held: Vec::new(),
        stats: RunStats::default(),
        ident,
        plans,
        dry: false,
        rec: None,
        faults_armed: false,
        fault_record: dev.faults.record().clone(),
        timer: None,
        verbose: None,
    }
}

/// Read one GPU tensor back to the CPU (e.g. a kept output).
pub async fn read_tensor(dev: &GpuDevice, t: &GTensor) -> Result<Tensor> {
    let (mut ident, mut plans) = (HashMap::new(), GpuPlans::default());
    let c = bare_runner(dev, &mut ident, &mut plans).to_cpu(t).await?;
    Ok(c.contiguous())
}

/// Make a GPU tensor's device copy current (uploaded when only its host copy is: a CPU
/// fallback's result), the upload submitted. `what` names it in errors.
pub fn upload_tensor(dev: &GpuDevice, t: &GTensor, what: &str) -> Result<()> {
    let (mut ident, mut plans) = (HashMap::new(), GpuPlans::default());
    let mut r = bare_runner(dev, &mut ident, &mut plans);
    r.upload(&t.cell, what)?;
    r.flush()
}

/// The outputs a run reads back: user outputs and the mutations written back to state.
fn read_back(k: &OutputKind) -> bool {
    matches!(
        k,
        OutputKind::User
            | OutputKind::BufferMutation { .. }
            | OutputKind::ParameterMutation { .. }
            | OutputKind::UserInputMutation { .. }
    )
}

/// Whether the new value `t` of the state tensor `state` can be written on the device: both
/// whole contiguous stores of one dtype and size, `t` current on the GPU (a fallback's CPU
/// result, a view or a dtype the GPU does not hold goes through the host as before).
fn device_write_back(state: &GTensor, t: &GTensor) -> bool {
    let whole = |g: &GTensor| {
        let s = lock(&g.cell);
        g.is_contiguous() && g.offset == 0 && g.numel() == s.len && s.len > 0 && s.dtype == g.dtype
    };
    state.dtype == t.dtype
        && state.sizes == t.sizes
        && (super::store::gpu_dtype(t.dtype) || t.dtype == crate::DType::F16)
        && !Arc::ptr_eq(&state.cell, &t.cell)
        && whole(state)
        && whole(t)
        && {
            let s = lock(&t.cell);
            s.gpu_valid && s.gpu.is_some()
        }
}

/// A loaded program ready to run on a GPU device. Holds the CPU [`Session`] (program, state
/// as the host copy, guards) and GPU views of the state, uploaded once. State a run updates
/// (buffer mutations, in place or not) stays on the GPU: `cpu.state` is current only after
/// [`GpuSession::sync_state_async`]; [`GpuSession::state_tensor_async`] reads one tensor as
/// it is now.
pub struct GpuSession {
    pub cpu: Session,
    pub device: Arc<GpuDevice>,
    state: BTreeMap<String, GTensor>,
    ident: HashMap<usize, Weak<std::sync::Mutex<super::store::Store>>>,
    plans: GpuPlans,
    /// Counters of the last run.
    pub last_stats: RunStats,
    /// Counters summed over every run (and the weight upload).
    pub total_stats: RunStats,
    /// What the last [`GpuSession::prepare`] did.
    pub last_prepare: Option<PrepareStats>,
    /// Warm runs replayed from a recording (see [`super::tape`]).
    tapes: super::tape::Tapes,
    /// The index fault record of this session's runs (see [`super::fault`]).
    fault_record: wgpu::Buffer,
}

/// The weight upload of a new [`GpuSession`], one state tensor at a time as the CPU session
/// makes it ([`Session::with_state_sink`]). Tensors sharing a storage share one GPU buffer.
/// State the graph does not read (a weight the passes folded into a new constant) stays on
/// the CPU until something asks for it. Once on the GPU, the host copy of a tensor the
/// program does not mutate is dropped at once (a CPU fallback that reads one downloads it
/// and keeps it); mutated buffers keep theirs, since a run whose mutation comes back from the
/// CPU writes into it.
#[derive(Default)]
struct WeightStream {
    state: BTreeMap<String, GTensor>,
    /// The state the graph reads, and the storages of mutated state (made on the first call:
    /// the passes have run by then).
    plan: Option<(
        std::collections::BTreeSet<String>,
        std::collections::HashSet<usize>,
    )>,
    /// Bytes written since the queue last went idle.
    pending_bytes: u64,
}

/// Bytes of weight uploads between two waits for the queue: wgpu stages each
/// `write_buffer` in host memory until its submission is done, so without a wait the staging
/// copies of a whole model would pile up.
const UPLOAD_SYNC_BYTES: u64 = 64 << 20;

impl WeightStream {
    fn take(&mut self, r: &mut Runner<'_>, p: &Program, fqn: &str, t: &Tensor) -> Result<()> {
        let (read, mutated) = self.plan.get_or_insert_with(|| {
            let read = read_state(p).into_iter().map(str::to_string).collect();
            let mutated = p
                .mutated_state()
                .iter()
                .filter_map(|n| p.state.get(n).map(|e| e.tensor.storage.id()))
                .collect();
            (read, mutated)
        });
        let g = r.wrap(t);
        // f32 weights, f16 ones where the device holds f16 (`--dtype f16`), and int32
        // ones (quantized weights' words: an int32 never fails the upload's range check,
        // as an int64 might).
        let uploads = matches!(g.dtype, crate::DType::F32 | crate::DType::I32)
            || (g.dtype == crate::DType::F16 && r.dev.f16_enabled());
        if uploads && read.contains(fqn) {
            let before = r.stats.upload_bytes;
            r.upload(&g.cell, &format!("parameter '{fqn}'"))?;
            self.pending_bytes += r.stats.upload_bytes - before;
        }
        let storage = p.state.get(fqn).map(|e| e.tensor.storage.id());
        if !storage.is_some_and(|id| mutated.contains(&id)) {
            super::store::release_host(&g.cell);
        }
        if self.pending_bytes >= UPLOAD_SYNC_BYTES {
            self.pending_bytes = 0;
            r.flush()?;
            r.dev.queue.submit([]);
            #[cfg(not(target_arch = "wasm32"))]
            r.dev.synchronize()?;
        }
        self.state.insert(fqn.to_string(), g);
        Ok(())
    }
}

/// A [`GpuSession`] made one weight at a time: each [`GpuSessionBuild::step`] makes the next
/// state tensor ([`crate::runtime::SessionBuild`]) and uploads it. [`GpuSession::new`] steps
/// through at once; the browser's main thread fetches the record of the next step between
/// steps (it cannot read the network synchronously), so that JS holds about one weight at a
/// time instead of the archive.
pub(crate) struct GpuSessionBuild {
    device: Arc<GpuDevice>,
    cpu: crate::runtime::SessionBuild,
    weights: WeightStream,
    ident: HashMap<usize, Weak<std::sync::Mutex<super::store::Store>>>,
    plans: GpuPlans,
    stats: RunStats,
    fault_record: wgpu::Buffer,
    buffers_before: u64,
}

impl GpuSessionBuild {
    /// Check the program against the device and run the graph passes; no weight is read yet
    /// (except those the passes fold).
    pub(crate) fn new(program: Program, device: Arc<GpuDevice>) -> Result<GpuSessionBuild> {
        if program.precision == crate::passes::half::Precision::F16 && !device.f16_enabled() {
            let name = &device.properties.name;
            let adapter = if name.is_empty() {
                "this GPU adapter".to_string()
            } else {
                format!("the GPU adapter '{name}'")
            };
            return Err(Error::Gpu(format!(
                "program '{}' was loaded to run in float16 (dtype f16), but {adapter} has no \
                 shader-f16; load it without dtype f16, or run it on the CPU",
                program.name
            )));
        }
        let fault_record = super::fault::new_record(&device.device);
        let buffers_before = device.memory_stats().buffers_created;
        let set = crate::backends::session_graph_passes().map_err(Error::Verify)?;
        Ok(GpuSessionBuild {
            cpu: crate::runtime::SessionBuild::new(program, set),
            device,
            weights: WeightStream::default(),
            ident: HashMap::new(),
            plans: GpuPlans::default(),
            stats: RunStats::default(),
            fault_record,
            buffers_before,
        })
    }

    /// Whether every weight was made and uploaded.
    pub(crate) fn is_done(&self) -> bool {
        self.cpu.is_done()
    }

    /// The archive records the steps left read, in order (see
    /// [`crate::runtime::SessionBuild::next_reads`]).
    // Read by the browser's main-thread load (src/js/stream.rs) only.
    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
    pub(crate) fn next_reads(&self) -> Vec<Arc<crate::archive::source::EntryBytes>> {
        self.cpu.next_reads()
    }

    /// Make the next state tensor and upload it (its host copy then goes, and its record is
    /// released once no state tensor left reads it). A step whose record cannot be read
    /// fails before it changes anything, so it can be tried again.
    pub(crate) fn step(&mut self) -> Result<()> {
        let dev = self.device.clone();
        // Weights go up as each is made (read from the archive then, when the archive is a
        // file), so the host never holds the whole state: see [`WeightStream`].
        let mut r = Runner {
            dev: &dev,
            enc: None,
            held: Vec::new(),
            stats: RunStats::default(),
            timer: None,
            verbose: None,
            ident: &mut self.ident,
            plans: &mut self.plans,
            dry: false,
            rec: None,
            faults_armed: false,
            fault_record: self.fault_record.clone(),
        };
        let weights = &mut self.weights;
        let made = self
            .cpu
            .step(&mut |p, fqn, t| weights.take(&mut r, p, fqn, t));
        let flushed = r.flush();
        self.stats.add(&std::mem::take(&mut r.stats));
        made.and(flushed)
    }

    /// The session, once every step ran.
    pub(crate) fn finish(self) -> Result<GpuSession> {
        let GpuSessionBuild {
            device,
            cpu,
            weights,
            ident,
            plans,
            mut stats,
            fault_record,
            buffers_before,
        } = self;
        let mut cpu = cpu.finish()?;
        // Random ops draw from the GPU device's default generator until seeded.
        cpu.run_state.generator = Some(device.generator.clone());
        stats.buffer_allocations = device.memory_stats().buffers_created - buffers_before;
        let mut s = GpuSession {
            cpu,
            device,
            state: weights.state,
            ident,
            plans,
            last_stats: RunStats::default(),
            total_stats: RunStats::default(),
            last_prepare: None,
            tapes: Default::default(),
            fault_record,
        };
        s.total_stats.add(&stats);
        Ok(s)
    }
}

impl GpuSession {
    pub fn new(program: Program, device: Arc<GpuDevice>) -> Result<GpuSession> {
        let mut build = GpuSessionBuild::new(program, device)?;
        while !build.is_done() {
            build.step()?;
        }
        build.finish()
    }

    /// A parameter, buffer or constant as it is now: read back from the GPU when the GPU
    /// copy is the current one (in-place updates of a training-IR program), else the CPU's.
    pub async fn state_tensor_async(&self, name: &str) -> Result<Tensor> {
        let t = self.state.get(name).ok_or_else(|| Error::Input {
            input: name.to_string(),
            msg: "no parameter, buffer or constant of that name".into(),
        })?;
        read_tensor(&self.device, t).await
    }

    /// Write new values into a parameter, buffer or constant that owns its whole storage
    /// (`data`: the caller checked its dtype and length): into its GPU buffer in place, so
    /// the Plans, bind groups and recorded runs that bind that buffer stay valid and the next
    /// run reads the new values, and into its host copy (shared with the CPU session's state).
    pub fn write_state(&mut self, name: &str, data: crate::cpu::Data) -> Result<()> {
        let t = self.state.get(name).ok_or_else(|| Error::Input {
            input: name.to_string(),
            msg: "no parameter, buffer or constant of that name".into(),
        })?;
        let mut s = lock(&t.cell);
        let whole =
            t.offset == 0 && t.is_contiguous() && s.len == data.len() && s.dtype == data.dtype();
        if !whole {
            return Err(Error::Input {
                input: name.to_string(),
                msg: "it shares its storage with other state (a tied weight or a view), or is \
                      held in another form on the GPU: it cannot be set alone"
                    .into(),
            });
        }
        if let (Some(buf), true) = (&s.gpu, s.gpu_valid) {
            let mut bytes = super::store::to_gpu_bytes(&data, name)?;
            // Queue writes go in 4-byte units (an odd count of f16 values).
            bytes.resize(bytes.len().next_multiple_of(4), 0);
            self.device.queue.write_buffer(buf.buffer(), 0, &bytes);
        }
        match &s.cpu {
            Some(c) => *c.write().unwrap_or_else(|e| e.into_inner()) = data,
            None => s.cpu = Some(Arc::new(std::sync::RwLock::new(data))),
        }
        s.cpu_valid = true;
        Ok(())
    }

    /// Make the host copy of the whole state current (`cpu.state`, what a state dict or the
    /// JS `model.state` reads): one readback of every state tensor whose current copy is on
    /// the GPU (buffers the runs updated there), nothing when none is.
    pub async fn sync_state_async(&mut self) -> Result<()> {
        let stale: Vec<super::store::Cell> = self
            .state
            .values()
            .filter(|t| !lock(&t.cell).cpu_valid)
            .map(|t| t.cell.clone())
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        let mut r = self.side_runner();
        r.download(&stale).await?;
        r.flush()?;
        let stats = std::mem::take(&mut r.stats);
        self.total_stats.add(&stats);
        Ok(())
    }

    /// A runner for work outside a run (state reads, uploads): no timer, no recording.
    fn side_runner(&mut self) -> Runner<'_> {
        Runner {
            dev: &self.device,
            enc: None,
            held: Vec::new(),
            stats: RunStats::default(),
            ident: &mut self.ident,
            plans: &mut self.plans,
            dry: false,
            rec: None,
            faults_armed: false,
            fault_record: self.fault_record.clone(),
            timer: None,
            verbose: None,
        }
    }

    /// A host tensor put on this session's device: an input to pass as [`GpuInput::Gpu`]
    /// (it stays there across runs), or logits to pick a token from.
    pub fn upload(&mut self, t: &Tensor) -> Result<GTensor> {
        let mut r = self.side_runner();
        let g = r.wrap(t);
        r.upload(&g.cell, "an uploaded tensor")?;
        r.flush()?;
        let stats = std::mem::take(&mut r.stats);
        self.total_stats.add(&stats);
        Ok(g)
    }

    /// [`GpuSession::sync_state_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn sync_state(&mut self) -> Result<()> {
        pollster::block_on(self.sync_state_async())
    }

    /// [`GpuSession::state_tensor_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn state_tensor(&self, name: &str) -> Result<Tensor> {
        pollster::block_on(self.state_tensor_async(name))
    }

    /// Seed the random ops' generator (shared with the CPU session: same seed, same streams).
    pub fn manual_seed(&mut self, seed: u64) {
        self.cpu.manual_seed(seed)
    }
    /// Seed from the clock; returns the seed.
    pub fn seed(&mut self) -> u64 {
        self.cpu.seed()
    }
    /// The seed the generator started from.
    pub fn initial_seed(&self) -> u64 {
        self.cpu.initial_seed()
    }
    /// The generator state (see [`Session::get_rng_state`]).
    pub fn get_rng_state(&self) -> Vec<u8> {
        self.cpu.get_rng_state()
    }
    /// Restore a generator state.
    pub fn set_rng_state(&mut self, bytes: &[u8]) -> Result<()> {
        self.cpu.set_rng_state(bytes)
    }

    /// Run with flattened user inputs (pytree order); returns flattened user outputs (CPU).
    /// Blocks until the GPU is done (native; in the browser use [`GpuSession::run_async`]).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run(&mut self, inputs: Inputs) -> Result<Vec<RValue>> {
        pollster::block_on(self.run_async(inputs))
    }

    /// [`GpuSession::run`] as a future: with no CPU fallback in the program, the whole run
    /// (kernels and the readback of outputs and mutated buffers) is one submit and one wait.
    pub async fn run_async(&mut self, inputs: Inputs) -> Result<Vec<RValue>> {
        let inputs = inputs.into_iter().map(GpuInput::Cpu).collect();
        let outs = self.run_with(inputs, false).await?;
        outs.into_iter()
            .map(|s| match s {
                Slot::Value(v) => Ok(v),
                _ => Err(Error::Gpu("internal: an output was not read back".into())),
            })
            .collect()
    }

    /// [`GpuSession::run_async`] that `options` may stop (a cancel token, a timeout): the
    /// run ends with [`Error::Cancelled`] before its next node, and the session stays usable.
    pub async fn run_async_options(
        &mut self,
        inputs: Inputs,
        options: &crate::runtime::RunOptions,
    ) -> Result<Vec<RValue>> {
        self.cpu.run_state.stop = crate::runtime::Stop::start(options);
        let r = self.run_async(inputs).await;
        self.cpu.run_state.stop = Default::default();
        r
    }

    /// Run with user inputs that may already be on the GPU (kept outputs of an earlier run).
    /// `keep`: user outputs stay on the GPU (`Slot::Tensor`, nothing read back for them; buffer
    /// mutations are still written back to the state); otherwise they come back as
    /// `Slot::Value` CPU values.
    /// On a lost device the run fails with [`Error::DeviceLost`], whatever failed first.
    /// The run goes on the stream of its `RunOptions`, else the current stream, which marks
    /// the queue after it (`stream.rs`).
    pub async fn run_with(&mut self, inputs: Vec<GpuInput>, keep: bool) -> Result<Vec<Slot>> {
        let given = self.cpu.run_state.stop.stream.clone();
        let stream = super::stream::Stream::for_run(&self.device, given.as_ref())?;
        let scope = crate::runtime::RunScope::begin(&mut self.cpu.run_state);
        let r = self.run_with_tuning(inputs, keep).await;
        stream.mark(&self.device);
        let program = self.cpu.program.clone();
        scope.end(&mut self.cpu.run_state, &program.name, "gpu");
        // A loss during the run may have left zeros where results should be: never those.
        match r.and_then(|outs| self.device.check_lost().map(|()| outs)) {
            Ok(outs) => Ok(outs),
            Err(e) => Err(self.device.lost_or(e).await),
        }
    }

    async fn run_with_tuning(&mut self, inputs: Vec<GpuInput>, keep: bool) -> Result<Vec<Slot>> {
        self.device.check_lost()?;
        let outs = self.run_inner(inputs, keep, false).await?;
        // Shapes met for the first time without a prepare are timed now: the next run takes
        // the tuned kernels.
        self.device.tuner.run_pending(&self.device).await?;
        Ok(outs)
    }

    /// Prepare the program for user inputs of these dtypes and shapes without running it:
    /// the CPU session's Plan (guards checked, meta pass; see [`Session::prepare`]), then a
    /// prepare pass over the GPU steps that creates every compute pipeline and bind group
    /// a run with this signature uses and leaves the buffer pool as that run will find it,
    /// so the first run creates no pipelines. The pass itself submits nothing. It stops
    /// early where a run needs values the GPU computes (a CPU fallback, a readback for
    /// control flow or a data-dependent size); the rest is created by the first run
    /// ([`PrepareStats::stopped`] says where). Then the warm-up
    /// ([`PrepareStats::warm_up_ms`]): the run's buffers are cleared once and, where the
    /// program writes no state in place, each new pipeline is dispatched once (one
    /// workgroup), so the driver's work at a buffer's first use and a pipeline's first
    /// dispatch is paid here, not by the first run.
    pub async fn prepare_async(&mut self, inputs: &[crate::meta::MValue]) -> Result<PrepareStats> {
        self.device.check_lost()?;
        let start = crate::runtime::profile::now_ms();
        let sig = crate::plan::meta_signature(inputs);
        self.cpu.plan_for(sig.clone())?;
        super::wait::yield_to_page().await;
        let dev = self.device.clone();
        let pipes_before = dev.pipelines_created();
        let groups_before = dev.bind_groups_created();
        // A prepare pass draws no random numbers and records no profile.
        let rng = self.cpu.run_state.rng.clone();
        let profiler = self.cpu.run_state.profiler.take();
        let nodes_run = self.cpu.run_state.nodes_run;
        let (last, total) = (self.last_stats.clone(), self.total_stats.clone());
        let mut stopped = None;
        // Twice when the first pass had to create buffers: the second starts from the pool a
        // run will start from, so its bind groups are the ones that run binds. Kernels that
        // met a shape to tune (`tune.rs`) are timed after a pass, and a pass follows with
        // the tuned choices.
        let mut autotuned = 0;
        for _ in 0..3 {
            let created = dev.memory_stats().buffers_created;
            let placeholders: Vec<GpuInput> =
                crate::plan::dense_placeholders(&sig, dev.recommended_max_memory())?
                    .into_iter()
                    .map(GpuInput::Cpu)
                    .collect();
            stopped = self
                .run_inner(placeholders, false, true)
                .await
                .err()
                .map(|e| e.to_string());
            dev.recycle();
            let tuned = dev.tuner.run_pending(&dev).await?;
            autotuned += tuned as u64;
            if dev.memory_stats().buffers_created == created && tuned == 0 {
                break;
            }
        }
        let pool_changes = dev.pool_changes();
        // Every pipeline the pass dispatches, created at once (in parallel natively,
        // asynchronously in the browser: `pipelines.rs`).
        let t = crate::runtime::profile::now_ms();
        let created = dev.create_wanted().await;
        let pipelines_ms = crate::runtime::profile::now_ms() - t;
        // Wait until the device has processed what the pass created: the browser's GPU
        // process gets to each creation in order, so prepare (not the first run) pays for it.
        let t = crate::runtime::profile::now_ms();
        let synced = dev.synchronize_async().await;
        let wait_ms = crate::runtime::profile::now_ms() - t;
        // The warm-up: what a driver does at a buffer's first use (wgpu zero-fills it, the
        // driver backs its memory) and at a pipeline's first dispatch (llvmpipe generates
        // its code then) happens here, not in the first run: the run's buffers are cleared
        // and each new pipeline is dispatched once, one workgroup, where the program writes
        // no state in place (the dispatches write into their nodes' pooled outputs, which
        // are free unless something took a buffer from the pool or released the cache since
        // the pass: then the dispatches are left out).
        let t = crate::runtime::profile::now_ms();
        dev.touch_free_buffers();
        let firsts = match &created {
            Ok(f)
                if leaves_state_alone(&self.cpu.program) && dev.pool_changes() == pool_changes =>
            {
                dev.first_dispatches(f)
            }
            _ => Ok(0),
        };
        let warmed = dev.synchronize_async().await;
        let warm_up_ms = crate::runtime::profile::now_ms() - t;
        self.cpu.run_state.rng = rng;
        self.cpu.run_state.profiler = profiler;
        self.cpu.run_state.nodes_run = nodes_run;
        self.last_stats = last;
        self.total_stats = total;
        created?;
        synced?;
        let first_dispatches = firsts? as u64;
        warmed?;
        let stats = PrepareStats {
            prepare_ms: crate::runtime::profile::now_ms() - start,
            pipelines_ms,
            warm_up_ms,
            wait_ms,
            pipelines_created: dev.pipelines_created() - pipes_before,
            first_dispatches,
            bind_groups_created: dev.bind_groups_created() - groups_before,
            plan_steps: self.cpu.program.graph.nodes.len() as u64,
            autotuned,
            stopped,
        };
        self.last_prepare = Some(stats.clone());
        Ok(stats)
    }

    /// [`GpuSession::prepare_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn prepare(&mut self, inputs: &[crate::meta::MValue]) -> Result<PrepareStats> {
        pollster::block_on(self.prepare_async(inputs))
    }

    /// Run the session's tape for `sig`, if it has one that can run now (see
    /// [`super::tape`]); the user outputs as CPU values.
    async fn replay(
        &mut self,
        sig: &crate::plan::Signature,
        inputs: &[RValue],
        run_start: f64,
    ) -> Result<Option<Vec<Slot>>> {
        let Some(tape) = self.tapes.get(sig, inputs) else {
            return Ok(None);
        };
        let dev = self.device.clone();
        let before = dev.memory_stats().buffers_created;
        let Some(done) = super::tape::replay(&dev, &tape, inputs, &self.fault_record).await? else {
            // Its buffers are in use elsewhere (or were released): run the executor.
            self.tapes.drop_tape();
            return Ok(None);
        };
        self.cpu.run_state.nodes_run += tape.nodes_run;
        let host_us = (((crate::runtime::profile::now_ms() - run_start) * 1e3) as u64)
            .saturating_sub(done.wait_us);
        let stats = RunStats {
            submits: 1,
            buffer_allocations: dev.memory_stats().buffers_created - before,
            dispatches: tape.dispatches.len() as u64,
            bound_bytes: tape
                .dispatches
                .iter()
                .flat_map(|d| d.bufs.iter().map(|b| b.2))
                .sum(),
            peak_bytes: tape.peak_bytes,
            workspace_bytes: tape.workspace_bytes,
            gpu_nodes: tape.gpu_nodes,
            view_nodes: tape.view_nodes,
            uploads: done.uploads,
            downloads: done.downloads,
            upload_bytes: done.upload_bytes,
            download_bytes: done.download_bytes,
            plan_steps: self.cpu.program.graph.nodes.len() as u64,
            host_us,
            wait_us: done.wait_us,
            replayed: true,
            tape: Some("replayed"),
            ..Default::default()
        };
        self.total_stats.add(&stats);
        self.last_stats = stats;
        Ok(Some(done.outputs.into_iter().map(Slot::Value).collect()))
    }

    async fn run_inner(
        &mut self,
        inputs: Vec<GpuInput>,
        keep: bool,
        dry: bool,
    ) -> Result<Vec<Slot>> {
        let run_start = crate::runtime::profile::now_ms();
        // Nothing is encoded between runs, so every buffer freed since the last submit is
        // reusable by uploads too: each run starts from the whole free pool, and picks the
        // same buffers as the run before (which is what lets a recording repeat).
        self.device.recycle();
        // In the browser, validation errors arrive asynchronously: catch this run's in a
        // scope so they fail this run, not a later one (natively the uncaptured-error
        // handler is checked after every submit).
        #[cfg(target_arch = "wasm32")]
        let scope = self
            .device
            .device
            .push_error_scope(wgpu::ErrorFilter::Validation);
        // The Plan of this signature (a GPU input counts as a tensor of its dtype and sizes):
        // inputs checked against the guards once per signature.
        let sig = gpu_signature(&inputs);
        let plan = self.cpu.plan_for(sig.clone())?;
        self.cpu.run_state.bindings = plan.bindings.clone();
        let p = self.cpu.program.clone();
        let dev = self.device.clone();
        let cpu_inputs: Option<Vec<RValue>> = inputs
            .iter()
            .map(|i| match i {
                GpuInput::Cpu(v) => Some(v.clone()),
                GpuInput::Gpu(_) => None,
            })
            .collect();
        let replayable = !dry
            && !keep
            && self.cpu.run_state.profiler.is_none()
            && crate::backends::verbose() == 0
            && !dev.is_recording_memory_history()
            && !crate::backends::deterministic()
            && !super::tape::writes_state(&p);
        if let (true, Some(values)) = (replayable, &cpu_inputs) {
            if let Some(outs) = self.replay(&sig, values, run_start).await? {
                return Ok(outs);
            }
        }
        let record = replayable && cpu_inputs.is_some() && self.tapes.may_record(&sig);
        let before = dev.memory_stats().buffers_created;
        let pipes_before = dev.pipelines_created();
        let groups_before = dev.bind_groups_created();
        dev.start_peak_window();
        let mut verbose = super::verbose::VerboseLog::for_run(dry);
        let mut r = Runner {
            dev: &dev,
            enc: None,
            held: Vec::new(),
            stats: RunStats::default(),
            timer: super::verbose::timer(
                &dev,
                self.cpu.run_state.profiler.as_ref(),
                verbose.as_mut(),
            ),
            verbose,
            ident: &mut self.ident,
            plans: &mut self.plans,
            dry,
            rec: record.then(super::tape::Recording::default),
            faults_armed: false,
            fault_record: self.fault_record.clone(),
        };
        let mut user = inputs.iter();
        let mut graph_inputs = Vec::with_capacity(p.inputs.len());
        for spec in &p.inputs {
            graph_inputs.push(match &spec.kind {
                InputKind::User => match user.next() {
                    Some(GpuInput::Cpu(v)) => r.rvalue_to_slot(v.clone()),
                    Some(GpuInput::Gpu(t)) => Slot::Tensor(t.clone()),
                    None => Slot::Value(RValue::None),
                },
                InputKind::Parameter { name }
                | InputKind::Buffer { name, .. }
                | InputKind::Constant { name } => Slot::Tensor(
                    self.state
                        .get(name)
                        .cloned()
                        .ok_or_else(|| Error::Verify(format!("state '{name}' missing")))?,
                ),
                InputKind::ConstantValue { value } => Slot::Value(match value {
                    crate::schema::ConstantValue::AsInt(i) => RValue::Int(*i),
                    crate::schema::ConstantValue::AsFloat(f) => RValue::Float(f.0),
                    crate::schema::ConstantValue::AsBool(b) => RValue::Bool(*b),
                    crate::schema::ConstantValue::AsString(s) => RValue::Str(s.clone()),
                    crate::schema::ConstantValue::AsNone(_) => RValue::None,
                }),
                // torch's effect tokens are empty tensors (`with_effects` threads them).
                InputKind::Token => r.rvalue_to_slot(RValue::Tensor(crate::cpu::Tensor::from_vec(
                    Vec::<f32>::new(),
                    &[0],
                ))),
                InputKind::CustomObj { name } => {
                    return Err(Error::op(
                        "custom object",
                        format!("'{name}' (torchbind objects are not supported)"),
                    ))
                }
            });
        }
        // A recorded run names its user inputs' stores (weakly: it must not change when
        // they are freed) to find the buffers they were uploaded to.
        let held_inputs: Vec<Option<Weak<std::sync::Mutex<super::store::Store>>>> = if record {
            p.inputs
                .iter()
                .zip(&graph_inputs)
                .filter(|(spec, _)| spec.kind == InputKind::User)
                .map(|(_, s)| match s {
                    Slot::Tensor(t) => Some(Arc::downgrade(&t.cell)),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        let (reads_before, checks_before, nodes_before) = (
            super::tape::host_reads(),
            super::tape::range_checks(),
            self.cpu.run_state.nodes_run,
        );
        let outs = run_graph(&mut r, &p.graph, graph_inputs, &mut self.cpu.run_state).await?;
        // State the graph updated in place is current where it lives: nothing to read. A
        // buffer or parameter update computed on the GPU as a new tensor is copied into the
        // state's own GPU buffer (on the device), its host copy marked stale: the state stays
        // on the GPU between runs and is read back only when asked ([`GpuSession::
        // state_tensor_async`], [`GpuSession::sync_state_async`]). The other outputs and
        // mutations come back together: one copy each, one submit, one wait.
        let on_device: Vec<bool> = p
            .outputs
            .iter()
            .zip(&outs)
            .enumerate()
            .map(|(i, (spec, out))| {
                !p.mutation_in_place(i)
                    && match (&spec.kind, out) {
                        (
                            OutputKind::BufferMutation { buffer }
                            | OutputKind::ParameterMutation { parameter: buffer },
                            Slot::Tensor(t),
                        ) => self
                            .state
                            .get(buffer)
                            .is_some_and(|sg| device_write_back(sg, t)),
                        _ => false,
                    }
            })
            .collect();
        // Outputs never read back: written in place or on the device.
        let stays = |i: usize, kind: &OutputKind| {
            !read_back(kind) || p.mutation_in_place(i) || on_device[i]
        };
        let wanted_at =
            |i: usize, kind: &OutputKind| !(stays(i, kind) || keep && *kind == OutputKind::User);
        let wanted: Vec<Slot> = p
            .outputs
            .iter()
            .zip(&outs)
            .enumerate()
            .filter(|(i, (spec, _))| wanted_at(*i, &spec.kind))
            .map(|(_, (_, s))| s.clone())
            .collect();
        if dry {
            // The prepare pass walked the whole graph: what is left (reading outputs back,
            // writing mutations to the state) creates no pipelines, only the staging
            // buffers, which the pool keeps for the first run.
            r.reserve_readbacks(&wanted)?;
            return Ok(Vec::new());
        }
        for ((spec, out), _) in p.outputs.iter().zip(&outs).zip(&on_device).filter(|x| *x.1) {
            let (
                OutputKind::BufferMutation { buffer }
                | OutputKind::ParameterMutation { parameter: buffer },
                Slot::Tensor(t),
            ) = (&spec.kind, out)
            else {
                continue;
            };
            if let Some(sg) = self.state.get(buffer) {
                r.copy_store(&t.cell, &sg.cell, &format!("buffer '{buffer}'"))?;
            }
        }
        let user_names: Vec<String> = p.user_inputs().iter().map(|u| u.name.clone()).collect();
        let mut values = r.slots_to_rvalues(&wanted).await?.into_iter();
        let mut result = Vec::new();
        for (i, (spec, out)) in p.outputs.iter().zip(&outs).enumerate() {
            if stays(i, &spec.kind) {
                continue;
            }
            if keep && spec.kind == OutputKind::User {
                result.push(out.clone());
                continue;
            }
            let v = values.next().unwrap_or(RValue::None);
            match &spec.kind {
                OutputKind::User => result.push(Slot::Value(v)),
                OutputKind::BufferMutation { buffer }
                | OutputKind::ParameterMutation { parameter: buffer } => {
                    let RValue::Tensor(t) = v else { continue };
                    match self.cpu.state.get(buffer) {
                        Some(old) if old.sizes == t.sizes => {
                            old.copy_from(&t)?;
                            // The CPU copy is now the current one for every view of it.
                            if let Some(sg) = self.state.get(buffer) {
                                lock(&sg.cell).gpu_valid = false;
                            }
                        }
                        _ => {
                            let g = r.wrap(&t);
                            self.cpu.state.insert(buffer.clone(), t);
                            self.state.insert(buffer.clone(), g);
                        }
                    }
                }
                OutputKind::UserInputMutation { input } => {
                    let RValue::Tensor(t) = v else { continue };
                    if let Some(i) = user_names.iter().position(|n| n == input) {
                        if let GpuInput::Gpu(_) = &inputs[i] {
                            return Err(Error::Input {
                                input: input.clone(),
                                msg: "the program mutates this input in place, which a \
                                      GPU-resident input does not support: pass a CPU tensor"
                                    .into(),
                            });
                        }
                        if let GpuInput::Cpu(RValue::Tensor(dst)) = &inputs[i] {
                            dst.copy_from(&t)?;
                            // The caller's tensor may be a store of this run: invalidate it.
                            if let Some(c) = r.ident.get(&addr(&dst.data)).and_then(Weak::upgrade) {
                                lock(&c).gpu_valid = false;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        r.flush()?;
        let (timer, log) = (r.timer.take(), r.verbose.take());
        super::verbose::finish(&dev, timer, self.cpu.run_state.profiler.as_mut(), log).await?;
        r.stats.buffer_allocations = dev.memory_stats().buffers_created - before;
        r.stats.pipelines_created = dev.pipelines_created() - pipes_before;
        r.stats.bind_groups_created = dev.bind_groups_created() - groups_before;
        r.stats.peak_bytes = dev.peak_window();
        r.stats.plan_steps = plan.steps as u64;
        r.stats.host_us = (((crate::runtime::profile::now_ms() - run_start) * 1e3) as u64)
            .saturating_sub(r.stats.wait_us);
        let mut stats = std::mem::take(&mut r.stats);
        stats.tape = Some(match (replayable, cpu_inputs.is_some(), record) {
            (false, ..) => {
                "not recorded: state written back, keepOnGpu, profiling, the verbose log, memory \
                 history or \
                 deterministic mode"
            }
            (true, false, _) => "not recorded: GPU-resident inputs",
            (true, true, false) => "not recorded: this signature's runs did not repeat",
            (true, true, true) => "recorded",
        });
        if let Some(rec) = r.rec.take() {
            let user_outs: Vec<&Slot> = p
                .outputs
                .iter()
                .zip(&outs)
                .filter(|(spec, _)| spec.kind == OutputKind::User)
                .map(|(_, s)| s)
                .collect();
            let checks = super::tape::range_checks_since(checks_before);
            let clean = stats.fallbacks.is_empty()
                && stats.submits == 1
                && super::tape::host_reads() == reads_before
                && checks.is_some();
            let recorded = clean
                .then(|| {
                    super::tape::Tape::from_run(
                        sig,
                        rec,
                        checks.unwrap_or_default(),
                        &held_inputs,
                        &user_outs,
                        &self.state,
                        &stats,
                        self.cpu.run_state.nodes_run - nodes_before,
                    )
                })
                .flatten();
            let note = if clean {
                self.tapes.recorded(recorded)
            } else {
                "not recorded: a fallback, a readback or a host check of tensor data"
            };
            stats.tape = Some(note);
        }
        drop(held_inputs);
        self.ident.retain(|_, w| w.strong_count() > 0);
        self.total_stats.add(&stats);
        self.last_stats = stats;
        #[cfg(target_arch = "wasm32")]
        if let Some(e) = scope.pop().await {
            return Err(Error::Gpu(e.to_string()));
        }
        Ok(result)
    }
}

/// The names of the state tensors `p`'s graph reads (its placeholders with a use).
fn read_state(p: &crate::program::Program) -> std::collections::BTreeSet<&str> {
    let mut used = vec![false; p.graph.values.len()];
    let mut ids = Vec::new();
    for n in &p.graph.nodes {
        for (_, a) in &n.inputs {
            a.values(&mut ids);
        }
    }
    for a in &p.graph.outputs {
        a.values(&mut ids);
    }
    for i in ids {
        if let Some(u) = used.get_mut(i) {
            *u = true;
        }
    }
    p.inputs
        .iter()
        .zip(&p.graph.inputs)
        .filter_map(|(spec, a)| match (&spec.kind, a) {
            (
                InputKind::Parameter { name }
                | InputKind::Buffer { name, .. }
                | InputKind::Constant { name },
                Arg::Tensor(v),
            ) if used.get(*v).copied().unwrap_or(true) => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

/// Whether `p`'s graph has no in-place op (`aten.add_`, `aten.copy_`, `__iand__`): its kernels
/// then write only the outputs they are given from the pool, never a state buffer (declared
/// mutations are written back after a run), so prepare's warm-up may dispatch them.
fn leaves_state_alone(p: &crate::program::Program) -> bool {
    !p.graph.nodes.iter().any(|n| {
        let op = n
            .target
            .rsplit_once('.')
            .map_or(n.target.as_str(), |(o, _)| o);
        let name = op.rsplit('.').next().unwrap_or(op);
        match name.strip_prefix("__") {
            Some(dunder) => dunder.starts_with('i'), // `__iand__`; `__and__` is not
            None => name.ends_with('_'),
        }
    })
}
