//! The seam between a loaded program and what runs it: one [`Backend`] trait for the CPU
//! interpreter ([`Session`]), the GPU executor ([`GpuSession`]) and the meta device
//! ([`MetaSession`]: dtypes and shapes only, from the Plan's meta pass), which the `pt2web`
//! binary and the JS bindings drive instead of matching on the backend. All three bind
//! inputs, check guards and infer shapes through the same Plan ([`Session::prepare`]).

use crate::error::{Error, Result};
use crate::gpu::{GpuInput, GpuSession, PrepareStats, RunStats, Slot};
use crate::meta::MValue;
#[cfg(not(target_arch = "wasm32"))]
use crate::runtime::RValue;
use crate::runtime::Session;
use std::future::Future;
use std::pin::Pin;

/// A future of the backend's (not `Send`: the browser's WebGPU objects live on one thread).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + 'a>>;

/// What runs a program.
pub trait Backend {
    /// `"cpu"`, `"gpu"` or `"meta"`.
    fn kind(&self) -> &'static str;
    /// `"cpu"`, `"meta"`, or `"gpu (ADAPTER, BACKEND)"`.
    fn describe(&self) -> String;
    /// The CPU session: the program, its state, the profiler and the random generator (on
    /// the GPU backend, the one its CPU fallbacks run on).
    fn session(&self) -> &Session;
    fn session_mut(&mut self) -> &mut Session;
    /// The GPU session, on the GPU backend.
    fn gpu(&self) -> Option<&GpuSession> {
        None
    }
    fn gpu_mut(&mut self) -> Option<&mut GpuSession> {
        None
    }
    /// The GPU counters of the last run (None on the CPU).
    fn last_stats(&self) -> Option<&RunStats> {
        self.gpu().map(|g| &g.last_stats)
    }

    /// Make `session().state` current: on the GPU backend, read back the state the runs
    /// updated on the device (it stays there between runs); elsewhere nothing to do.
    fn sync_state<'a>(&'a mut self) -> LocalFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    /// One run with flat user inputs; GPU-resident inputs and `keep` (tensor outputs stay
    /// on the GPU) are for the GPU backend.
    fn run_with<'a>(&'a mut self, inputs: Vec<GpuInput>, keep: bool) -> LocalFuture<'a, Vec<Slot>>;
    /// [`Session::prepare`] for inputs of these shapes and dtypes; on the GPU also every
    /// pipeline and bind group the run will use.
    fn prepare_with<'a>(&'a mut self, inputs: &'a [MValue]) -> LocalFuture<'a, PrepareStats>;

    /// One run, waiting for the GPU where there is one (native only). The meta backend
    /// computes no values: it answers with an error naming [`Backend::run_with`].
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&mut self, inputs: Vec<RValue>) -> Result<Vec<RValue>>;
    /// [`Backend::run`] that `options` may stop (a cancel token, a timeout): the run ends
    /// with [`Error::Cancelled`] before its next node, and the backend stays usable.
    #[cfg(not(target_arch = "wasm32"))]
    fn run_options(
        &mut self,
        inputs: Vec<RValue>,
        options: &crate::runtime::RunOptions,
    ) -> Result<Vec<RValue>> {
        self.session_mut().run_state.stop = crate::runtime::Stop::start(options);
        let r = self.run(inputs);
        self.session_mut().run_state.stop = Default::default();
        r
    }
    /// [`Backend::prepare_with`], waiting (native only).
    #[cfg(not(target_arch = "wasm32"))]
    fn prepare(&mut self, inputs: &[MValue]) -> Result<PrepareStats>;
}

impl Backend for Session {
    fn kind(&self) -> &'static str {
        "cpu"
    }
    fn describe(&self) -> String {
        "cpu".into()
    }
    fn session(&self) -> &Session {
        self
    }
    fn session_mut(&mut self) -> &mut Session {
        self
    }
    fn run_with<'a>(&'a mut self, inputs: Vec<GpuInput>, keep: bool) -> LocalFuture<'a, Vec<Slot>> {
        Box::pin(async move {
            // `keep` asks the GPU backend to leave tensor outputs on the GPU; on the CPU
            // they are where they are.
            let _ = keep;
            let cpu = cpu_inputs(inputs, "CPU")?;
            Ok(Session::run(self, cpu)?
                .into_iter()
                .map(Slot::Value)
                .collect())
        })
    }
    fn prepare_with<'a>(&'a mut self, inputs: &'a [MValue]) -> LocalFuture<'a, PrepareStats> {
        Box::pin(async move { cpu_prepare(self, inputs) })
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&mut self, inputs: Vec<RValue>) -> Result<Vec<RValue>> {
        Session::run(self, inputs)
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn prepare(&mut self, inputs: &[MValue]) -> Result<PrepareStats> {
        cpu_prepare(self, inputs)
    }
}

/// The inputs of a backend that takes CPU values only (`what`: its name, for the error).
fn cpu_inputs(inputs: Vec<GpuInput>, what: &str) -> Result<Vec<crate::runtime::RValue>> {
    inputs
        .into_iter()
        .enumerate()
        .map(|(i, x)| match x {
            GpuInput::Cpu(v) => Ok(v),
            GpuInput::Gpu(_) => Err(Error::Input {
                input: format!("#{i}"),
                msg: format!("a GPU tensor cannot feed a {what} model"),
            }),
        })
        .collect()
}

/// The CPU backend's prepare: the Plan (nothing to compile).
fn cpu_prepare(s: &mut Session, inputs: &[MValue]) -> Result<PrepareStats> {
    let p = Session::prepare(s, inputs)?;
    Ok(PrepareStats {
        prepare_ms: p.prepare_ms,
        plan_steps: p.steps as u64,
        ..Default::default()
    })
}

impl Backend for GpuSession {
    fn kind(&self) -> &'static str {
        "gpu"
    }
    fn describe(&self) -> String {
        format!(
            "gpu ({}, {})",
            self.device.properties.name, self.device.properties.backend
        )
    }
    fn session(&self) -> &Session {
        &self.cpu
    }
    fn session_mut(&mut self) -> &mut Session {
        &mut self.cpu
    }
    fn gpu(&self) -> Option<&GpuSession> {
        Some(self)
    }
    fn gpu_mut(&mut self) -> Option<&mut GpuSession> {
        Some(self)
    }
    fn run_with<'a>(&'a mut self, inputs: Vec<GpuInput>, keep: bool) -> LocalFuture<'a, Vec<Slot>> {
        Box::pin(GpuSession::run_with(self, inputs, keep))
    }
    fn prepare_with<'a>(&'a mut self, inputs: &'a [MValue]) -> LocalFuture<'a, PrepareStats> {
        Box::pin(GpuSession::prepare_async(self, inputs))
    }
    fn sync_state<'a>(&'a mut self) -> LocalFuture<'a, ()> {
        Box::pin(GpuSession::sync_state_async(self))
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&mut self, inputs: Vec<RValue>) -> Result<Vec<RValue>> {
        GpuSession::run(self, inputs)
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn prepare(&mut self, inputs: &[MValue]) -> Result<PrepareStats> {
        GpuSession::prepare(self, inputs)
    }
}

/// The meta backend (torch's `meta` device): a run checks the inputs against the program's
/// guards and returns each user output's dtype and sizes ([`Slot::Meta`]) from the Plan's
/// meta pass, computing no values and leaving the state as it is. Inputs may be real values
/// (only their dtypes, sizes and, for numbers, values are read). An op without a shape rule,
/// or a size that depends on tensor data, is an error naming the node.
pub struct MetaSession {
    session: Session,
}

impl MetaSession {
    pub fn new(program: crate::program::Program) -> Result<MetaSession> {
        Ok(MetaSession {
            session: Session::new(program)?,
        })
    }

    /// The user outputs' metas for inputs of this signature.
    pub fn infer(&mut self, sig: crate::plan::Signature) -> Result<Vec<MValue>> {
        let plan = self.session.plan_for(sig)?;
        let inferred = plan.meta.as_ref().map_err(|e| Error::Op {
            op: "meta".into(),
            msg: e.clone(),
        })?;
        inferred
            .user_outputs(&self.session.program)
            .map_err(|e| Error::Op {
                op: "meta".into(),
                msg: format!("an output: {e}"),
            })
    }
}

impl Backend for MetaSession {
    fn kind(&self) -> &'static str {
        "meta"
    }
    fn describe(&self) -> String {
        "meta".into()
    }
    fn session(&self) -> &Session {
        &self.session
    }
    fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }
    fn run_with<'a>(&'a mut self, inputs: Vec<GpuInput>, keep: bool) -> LocalFuture<'a, Vec<Slot>> {
        Box::pin(async move {
            let _ = keep;
            let cpu = cpu_inputs(inputs, "meta")?;
            let metas = self.infer(crate::plan::signature(&cpu))?;
            Ok(metas.into_iter().map(Slot::Meta).collect())
        })
    }
    fn prepare_with<'a>(&'a mut self, inputs: &'a [MValue]) -> LocalFuture<'a, PrepareStats> {
        Box::pin(async move { cpu_prepare(&mut self.session, inputs) })
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&mut self, inputs: Vec<RValue>) -> Result<Vec<RValue>> {
        let _ = inputs;
        Err(Error::Op {
            op: "meta".into(),
            msg: "the meta device computes no values; Backend::run_with returns each \
                  output's dtype and sizes"
                .into(),
        })
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn prepare(&mut self, inputs: &[MValue]) -> Result<PrepareStats> {
        cpu_prepare(&mut self.session, inputs)
    }
}
