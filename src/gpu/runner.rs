//! The per-run encoder state: the open command encoder, uploads and downloads between the
//! CPU and GPU copies of a tensor, and what a recorded or prepare pass does differently.

use super::device::GpuDevice;
use super::graph::GpuPlans;
use super::stats::RunStats;
use super::store::{
    cpu_store, from_gpu_bytes, gpu_bytes, lock, to_gpu_bytes, words_as_held, Cell, GTensor,
};
use crate::cpu::Tensor;
use crate::error::{Error, Result};
use crate::runtime::RValue;
use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

/// A value of the GPU executor's environment.
#[derive(Clone, Debug)]
pub enum Slot {
    Tensor(GTensor),
    Tensors(Vec<GTensor>),
    OptTensors(Vec<Option<GTensor>>),
    Value(RValue),
    /// A value's dtype and sizes only: what the meta backend ([`crate::backend::MetaSession`])
    /// returns.
    Meta(crate::meta::MValue),
}

/// Per-run encoder state: the open command encoder and what it holds on to.
pub struct Runner<'d> {
    pub dev: &'d GpuDevice,
    pub(super) enc: Option<wgpu::CommandEncoder>,
    pub(super) held: Vec<super::device::GpuBuffer>,
    pub stats: RunStats,
    /// GPU timestamps per dispatch while the run is profiled (see [`super::timing`]).
    pub(crate) timer: Option<super::timing::GpuTimer>,
    /// The verbose kernel log of the run, while it is on (see [`super::verbose`]).
    pub(crate) verbose: Option<super::verbose::VerboseLog>,
    /// CPU storage address -> store, so CPU views map back to the store they view.
    pub(super) ident: &'d mut HashMap<usize, Weak<std::sync::Mutex<super::store::Store>>>,
    /// The GPU side of each graph's plan (see [`GpuGraphPlan`]).
    pub(super) plans: &'d mut GpuPlans,
    /// A prepare pass ([`GpuSession::prepare`]): pipelines and bind groups are created and
    /// buffers taken from the pool as a run would, but nothing is encoded or submitted, and
    /// the pass stops where a run would read anything back.
    pub(crate) dry: bool,
    /// What the run encodes and uploads, while it is recorded for a [`super::tape::Tape`].
    pub(crate) rec: Option<super::tape::Recording>,
    /// Whether kernels that report index faults were encoded since the fault record was
    /// last read ([`Runner::download`] reads it; see `fault.rs`).
    pub(crate) faults_armed: bool,
    /// The fault record of this run's session (`fault.rs`).
    pub(crate) fault_record: wgpu::Buffer,
}

/// Why a prepare pass stopped early (at a readback or a CPU fallback).
pub(super) const DRY_STOP: &str = "prepare stops here: the node needs values the GPU computes";

pub(super) fn addr(d: &Arc<RwLock<crate::cpu::Data>>) -> usize {
    Arc::as_ptr(d) as usize
}

/// Start mapping a whole buffer of `dev` for reading; the future resolves when it is
/// mapped, or with [`Error::DeviceLost`] when the device is lost first (a lost device may
/// never answer the map).
pub(crate) fn map_read<'a>(
    dev: &'a super::device::GpuDevice,
    buf: &wgpu::Buffer,
) -> impl std::future::Future<Output = Result<()>> + 'a {
    let (tx, rx) = super::wait::channel();
    buf.slice(..)
        .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
    async move {
        dev.until_lost(rx)
            .await?
            .map_err(|e| Error::Gpu(format!("mapping a readback buffer: {e}")))
    }
}

impl<'d> Runner<'d> {
    pub fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        self.enc.get_or_insert_with(|| {
            self.dev
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        })
    }

    /// Note that a kernel reporting index faults is about to be encoded: the first since the
    /// record was read clears it (in the encoder, before the kernel).
    pub(crate) fn arm_faults(&mut self) {
        if self.faults_armed {
            return;
        }
        self.faults_armed = true;
        // A prepare pass only notes it: its end reserves the record's staging buffer
        // (`reserve_readbacks`), so the first run allocates nothing.
        if self.dry {
            return;
        }
        let record = self.fault_record.clone();
        self.encoder().clear_buffer(&record, 0, None);
    }

    /// Keep a buffer alive until the next submit (kernel parameters).
    pub fn hold(&mut self, b: super::device::GpuBuffer) {
        self.held.push(b);
    }

    /// Submit what is encoded.
    pub fn flush(&mut self) -> Result<()> {
        if self.dry {
            // Nothing of a prepare pass runs; freed buffers become free as after a submit.
            self.enc = None;
            self.held.clear();
            self.dev.recycle();
            return Ok(());
        }
        if let Some(enc) = self.enc.take() {
            self.dev.queue.submit([enc.finish()]);
            self.stats.submits += 1;
            self.held.clear();
            self.dev.recycle();
            self.dev.take_error()?;
        }
        Ok(())
    }

    /// The GPU tensor for a CPU tensor (the same store when its storage is already known).
    pub fn wrap(&mut self, t: &Tensor) -> GTensor {
        let key = addr(&t.data);
        let cell = match self.ident.get(&key).and_then(Weak::upgrade) {
            Some(c)
                if lock(&c)
                    .cpu
                    .as_ref()
                    .is_some_and(|d| Arc::ptr_eq(d, &t.data)) =>
            {
                c
            }
            _ => {
                let c = cpu_store(t);
                self.ident.insert(key, Arc::downgrade(&c));
                c
            }
        };
        GTensor {
            cell,
            dtype: t.dtype,
            sizes: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.offset,
        }
    }

    /// Make the store's GPU copy current. `what` names the tensor in errors.
    pub fn upload(&mut self, cell: &Cell, what: &str) -> Result<()> {
        if lock(cell).gpu_valid {
            return Ok(());
        }
        // A re-upload must not overtake encoded work that still reads the old contents.
        if lock(cell).gpu.is_some() {
            self.flush()?;
        }
        let mut s = lock(cell);
        let data = s
            .cpu
            .clone()
            .filter(|_| s.cpu_valid)
            .ok_or_else(|| Error::Gpu(format!("internal: {what} has no current copy")))?;
        if s.gpu.is_none() {
            s.gpu = Some(self.dev.alloc(gpu_bytes(s.dtype, s.len), what)?);
        }
        // f32 and int32 words go up as they are held, with no converted copy (a weight's
        // upload then needs no host memory beyond the tensor), unless a recording keeps them.
        if self.rec.is_none() {
            let held = data.read().unwrap_or_else(|e| e.into_inner());
            if let (Some(words), Some(b)) = (words_as_held(&held), s.gpu.as_ref()) {
                if !words.is_empty() {
                    self.dev.queue.write_buffer(b.buffer(), 0, words);
                }
                s.gpu_valid = true;
                self.stats.uploads += 1;
                self.stats.upload_bytes += words.len() as u64;
                return Ok(());
            }
        }
        let bytes = to_gpu_bytes(&data.read().unwrap_or_else(|e| e.into_inner()), what)?;
        if !bytes.is_empty() {
            let buf = s.gpu.as_ref().map(|b| b.buffer().clone());
            if let Some(b) = buf {
                self.dev.queue.write_buffer(&b, 0, &bytes);
            }
        }
        s.gpu_valid = true;
        self.stats.uploads += 1;
        self.stats.upload_bytes += bytes.len() as u64;
        if let (Some(rec), Some(b)) = (&mut self.rec, s.gpu.as_ref()) {
            rec.uploads.push(super::tape::Upload {
                store: Arc::downgrade(cell),
                buffer: b.buffer().clone(),
                class: b.size(),
                dtype: s.dtype,
                len: s.len,
                bytes,
            });
        }
        Ok(())
    }

    /// Copy the whole store `src` (current on the GPU) into the store `dst` of the same dtype
    /// and length, on the device: `dst`'s GPU copy becomes the current one, its CPU copy
    /// stale. Encoded after the pending work (which may still read `dst`'s old contents).
    pub fn copy_store(&mut self, src: &Cell, dst: &Cell, what: &str) -> Result<()> {
        let (from, bytes) = {
            let s = lock(src);
            let b = s
                .gpu
                .as_ref()
                .filter(|_| s.gpu_valid)
                .map(|b| b.buffer().clone());
            (b, gpu_bytes(s.dtype, s.len))
        };
        let from = from.ok_or_else(|| Error::Gpu(format!("internal: {what}: no GPU copy")))?;
        let to = {
            let mut d = lock(dst);
            if gpu_bytes(d.dtype, d.len) != bytes {
                return Err(Error::Gpu(format!(
                    "internal: {what}: stores of different sizes"
                )));
            }
            if d.gpu.is_none() {
                d.gpu = Some(self.dev.alloc(bytes, what)?);
            }
            d.gpu.as_ref().map(|b| b.buffer().clone())
        };
        if let Some(to) = to {
            self.encoder()
                .copy_buffer_to_buffer(&from, 0, &to, 0, bytes);
        }
        let mut d = lock(dst);
        d.gpu_valid = true;
        d.cpu_valid = false;
        self.stats.device_copies += 1;
        Ok(())
    }

    /// Make the CPU copies of `cells` current: one copy per stale store into a staging
    /// buffer, encoded after the pending work, one submit, then one wait for all of them
    /// (natively a blocking poll; in the browser the future yields to the event loop).
    /// The index fault record comes back in the same wait when kernels that write it ran
    /// since it was read: a fault fails the download with the node's error (`fault.rs`).
    pub async fn download(&mut self, cells: &[Cell]) -> Result<()> {
        if self.dry {
            return Err(Error::Gpu(DRY_STOP.into()));
        }
        let mut pending: Vec<(Cell, super::device::GpuBuffer, usize, crate::DType)> = Vec::new();
        for cell in cells {
            if pending.iter().any(|(c, ..)| Arc::ptr_eq(c, cell)) {
                continue;
            }
            let (buf, len, dtype) = {
                let s = lock(cell);
                if s.cpu_valid {
                    continue;
                }
                let b = s
                    .gpu
                    .as_ref()
                    .filter(|_| s.gpu_valid)
                    .map(|b| b.buffer().clone())
                    .ok_or_else(|| Error::Gpu("internal: a tensor has no current copy".into()))?;
                (b, s.len, s.dtype)
            };
            let bytes = gpu_bytes(dtype, len);
            let staging = self.dev.alloc_readback(bytes)?;
            self.encoder()
                .copy_buffer_to_buffer(&buf, 0, staging.buffer(), 0, bytes);
            pending.push((cell.clone(), staging, len, dtype));
        }
        let fault = if self.faults_armed {
            let st = self.dev.alloc_readback(super::fault::BYTES)?;
            let record = self.fault_record.clone();
            self.encoder()
                .copy_buffer_to_buffer(&record, 0, st.buffer(), 0, super::fault::BYTES);
            self.faults_armed = false;
            Some(st)
        } else {
            None
        };
        if pending.is_empty() && fault.is_none() {
            return Ok(());
        }
        self.flush()?;
        let waits: Vec<_> = pending
            .iter()
            .map(|(_, st, ..)| st)
            .chain(&fault)
            .map(|st| map_read(self.dev, st.buffer()))
            .collect();
        let wait_start = crate::runtime::profile::now_ms();
        #[cfg(not(target_arch = "wasm32"))]
        self.dev
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for a readback: {e}")))?;
        for w in waits {
            w.await?;
        }
        self.stats.wait_us += ((crate::runtime::profile::now_ms() - wait_start) * 1e3) as u64;
        if let Some(st) = fault {
            let found = super::fault::check(self.dev, &self.fault_record, st.buffer());
            if found.is_err() {
                pending.iter().for_each(|(_, st, ..)| st.buffer().unmap());
            }
            found?;
        }
        for (cell, staging, len, dtype) in pending {
            let data = {
                let view = staging
                    .buffer()
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| Error::Gpu(format!("reading a readback buffer: {e}")))?;
                from_gpu_bytes(dtype, &view, len)?
            };
            staging.buffer().unmap();
            let mut s = lock(&cell);
            match &s.cpu {
                Some(d) => *d.write().unwrap_or_else(|e| e.into_inner()) = data,
                None => {
                    let d = Arc::new(RwLock::new(data));
                    self.ident.insert(addr(&d), Arc::downgrade(&cell));
                    s.cpu = Some(d);
                }
            }
            s.cpu_valid = true;
            self.stats.downloads += 1;
            self.stats.download_bytes += gpu_bytes(dtype, len);
        }
        Ok(())
    }

    /// CPU tensors with the current contents of `ts` (one readback for all of them).
    pub async fn to_cpu_all(&mut self, ts: &[&GTensor]) -> Result<Vec<Tensor>> {
        let cells: Vec<Cell> = ts.iter().map(|t| t.cell.clone()).collect();
        self.download(&cells).await?;
        ts.iter().map(|t| t.cpu_view()).collect()
    }

    /// A CPU tensor with the current contents of `t`.
    pub async fn to_cpu(&mut self, t: &GTensor) -> Result<Tensor> {
        self.download(std::slice::from_ref(&t.cell)).await?;
        t.cpu_view()
    }

    /// The GPU tensors a slot holds.
    pub(super) fn slot_tensors<'s>(s: &'s Slot, out: &mut Vec<&'s GTensor>) {
        match s {
            Slot::Tensor(t) => out.push(t),
            Slot::Tensors(ts) => out.extend(ts.iter()),
            Slot::OptTensors(ts) => out.extend(ts.iter().flatten()),
            Slot::Value(_) | Slot::Meta(_) => {}
        }
    }

    /// What [`Runner::slots_to_rvalues`] would allocate to read `slots` back: one staging
    /// buffer per distinct store, taken from the pool and returned to it (a prepare pass).
    pub(super) fn reserve_readbacks(&mut self, slots: &[Slot]) -> Result<()> {
        let mut ts = Vec::new();
        slots.iter().for_each(|s| Self::slot_tensors(s, &mut ts));
        let mut seen: Vec<&Cell> = Vec::new();
        let mut staging = Vec::new();
        for t in ts {
            if seen.iter().any(|c| Arc::ptr_eq(c, &t.cell)) {
                continue;
            }
            seen.push(&t.cell);
            let (len, dtype) = {
                let s = lock(&t.cell);
                (s.len, s.dtype)
            };
            staging.push(self.dev.alloc_readback(gpu_bytes(dtype, len))?);
        }
        if std::mem::take(&mut self.faults_armed) {
            staging.push(self.dev.alloc_readback(super::fault::BYTES)?);
        }
        Ok(())
    }

    /// Slots as CPU values; every tensor among them read back in one submit.
    pub(super) async fn slots_to_rvalues(&mut self, slots: &[Slot]) -> Result<Vec<RValue>> {
        let mut ts = Vec::new();
        slots.iter().for_each(|s| Self::slot_tensors(s, &mut ts));
        let cells: Vec<Cell> = ts.iter().map(|t| t.cell.clone()).collect();
        self.download(&cells).await?;
        slots
            .iter()
            .map(|s| {
                Ok(match s {
                    Slot::Tensor(t) => RValue::Tensor(t.cpu_view()?),
                    Slot::Tensors(ts) => {
                        RValue::Tensors(ts.iter().map(|t| t.cpu_view()).collect::<Result<_>>()?)
                    }
                    Slot::OptTensors(ts) => RValue::OptTensors(
                        ts.iter()
                            .map(|t| t.as_ref().map(|t| t.cpu_view()).transpose())
                            .collect::<Result<_>>()?,
                    ),
                    Slot::Value(v) => v.clone(),
                    Slot::Meta(_) => {
                        return Err(Error::Gpu("internal: a meta value in a GPU run".into()))
                    }
                })
            })
            .collect()
    }

    pub(super) fn rvalue_to_slot(&mut self, v: RValue) -> Slot {
        match v {
            RValue::Tensor(t) => Slot::Tensor(self.wrap(&t)),
            RValue::Tensors(ts) => Slot::Tensors(ts.iter().map(|t| self.wrap(t)).collect()),
            RValue::OptTensors(ts) => Slot::OptTensors(
                ts.iter()
                    .map(|t| t.as_ref().map(|t| self.wrap(t)))
                    .collect(),
            ),
            other => Slot::Value(other),
        }
    }
}
