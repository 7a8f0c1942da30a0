//! The seam between a loaded program and what runs it: one [`Backend`] trait for the CPU
//! interpreter ([`Session`]) and the GPU executor ([`GpuSession`]), which the `pt2web` binary
//! and the JS bindings drive instead of matching on the backend. Shapes and dtypes alone (the
//! meta device) go through [`crate::meta`] and the Plan ([`Session::prepare`]), which both
//! backends share.

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
    /// `"cpu"` or `"gpu"`.
    fn kind(&self) -> &'static str;
    /// `"cpu"`, or `"gpu (ADAPTER, BACKEND)"`.
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

    /// One run with flat user inputs; GPU-resident inputs and `keep` (tensor outputs stay
    /// on the GPU) are for the GPU backend.
    fn run_with<'a>(&'a mut self, inputs: Vec<GpuInput>, keep: bool) -> LocalFuture<'a, Vec<Slot>>;
    /// [`Session::prepare`] for inputs of these shapes and dtypes; on the GPU also every
    /// pipeline and bind group the run will use.
    fn prepare_with<'a>(&'a mut self, inputs: &'a [MValue]) -> LocalFuture<'a, PrepareStats>;

    /// One run, waiting for the GPU where there is one (native only).
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&mut self, inputs: Vec<RValue>) -> Result<Vec<RValue>>;
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
            let mut cpu = Vec::with_capacity(inputs.len());
            for (i, x) in inputs.into_iter().enumerate() {
                match x {
                    GpuInput::Cpu(v) => cpu.push(v),
                    GpuInput::Gpu(_) => {
                        return Err(Error::Input {
                            input: format!("#{i}"),
                            msg: "a GPU tensor cannot feed a CPU model".into(),
                        })
                    }
                }
            }
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
    #[cfg(not(target_arch = "wasm32"))]
    fn run(&mut self, inputs: Vec<RValue>) -> Result<Vec<RValue>> {
        GpuSession::run(self, inputs)
    }
    #[cfg(not(target_arch = "wasm32"))]
    fn prepare(&mut self, inputs: &[MValue]) -> Result<PrepareStats> {
        GpuSession::prepare(self, inputs)
    }
}
