//! [`KernelCtx`]: what a GPU kernel sees (the runner, the node's GPU tensors, its other
//! arguments) and the helpers every kernel uses (outputs, dtypes, limits, one dispatch).

use super::*;

/// What a GPU kernel sees: the runner (device, encoder, counters), the node's GPU tensors,
/// and an [`OpCtx`] for its non-tensor arguments.
pub struct KernelCtx<'k, 'd, 'a> {
    pub r: &'k mut Runner<'d>,
    pub env_t: &'k [Option<GTensor>],
    pub op: OpCtx<'a>,
    /// Declared f16 outputs read as f32 ([`out_dtype`](KernelCtx::out_dtype)): set while an f16
    /// node runs its f32 kernel on converted operands (see [`run`]).
    pub f16_as_f32: bool,
    /// Set by [`inplace`]: an elementwise kernel whose `self` is this tensor writes into it
    /// (the `_ip` entries) instead of a new output, where its other operands allow.
    pub into: Option<GTensor>,
    /// A fused epilogue for this producer's storing dispatch ([`KernelCtx::dispatch_out`],
    /// `epilogue.rs`), and whether that dispatch applied it.
    pub(crate) epilogue: Option<super::epilogue::Pending>,
    pub(crate) epilogue_applied: bool,
}

pub(crate) type Out = Result<Option<Vec<Slot>>>;

impl<'k, 'd, 'a> KernelCtx<'k, 'd, 'a> {
    pub fn new(r: &'k mut Runner<'d>, env_t: &'k [Option<GTensor>], op: OpCtx<'a>) -> Self {
        KernelCtx {
            r,
            env_t,
            op,
            f16_as_f32: false,
            into: None,
            epilogue: None,
            epilogue_applied: false,
        }
    }
}

impl KernelCtx<'_, '_, '_> {
    pub(super) fn target(&self) -> &str {
        &self.op.node.target
    }
    /// The GPU tensor passed as argument `name` (None if absent or not a tensor).
    pub(crate) fn t(&self, name: &str) -> Option<GTensor> {
        match self.op.arg(name)? {
            Arg::Tensor(id) | Arg::OptTensor(Some(id)) => self.env_t.get(*id)?.clone(),
            _ => None,
        }
    }
    pub(super) fn is_tensor_arg(&self, name: &str) -> bool {
        matches!(
            self.op.arg(name),
            Some(Arg::Tensor(_) | Arg::OptTensor(Some(_)))
        )
    }
    /// The declared dtype of output `i`.
    pub(crate) fn out_dtype(&self, i: usize) -> Option<DType> {
        match self.op.node.outputs.get(i)? {
            Arg::Tensor(id) => self.value_dtype(*id),
            _ => None,
        }
    }
    /// The declared dtype of graph value `id` (f16 read as f32 under `f16_as_f32`).
    pub(super) fn value_dtype(&self, id: usize) -> Option<DType> {
        match &self.op.graph.value(id).kind {
            crate::program::ValueKind::Tensor { dtype, .. } => Some(match *dtype {
                DType::F16 if self.f16_as_f32 => DType::F32,
                d => d,
            }),
            _ => None,
        }
    }
    pub(super) fn out_is(&self, dtype: DType) -> bool {
        self.out_dtype(0) == Some(dtype)
    }
    pub(crate) fn name(&self) -> String {
        format!("{} ({})", self.target(), self.op.node.name)
    }
    pub(crate) fn ensure(&mut self, t: &GTensor) -> Result<()> {
        let what = format!("an input of {}", self.name());
        self.r.upload(&t.cell, &what)
    }
    pub(crate) fn new_out(&mut self, dtype: DType, sizes: &[usize]) -> Result<GTensor> {
        let n: usize = sizes.iter().product();
        // Every kernel output is bound whole as a storage buffer: past the device's binding
        // limit a dispatch would be a validation error, not a result.
        let bytes = gpu_bytes(dtype, n);
        let limit = self.r.dev.properties.limits.max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(Error::Limit {
                what: format!(
                    "the output of {}: GPU storage binding bytes (the device's \
                     max_storage_buffer_binding_size; run it on the CPU)",
                    self.name()
                ),
                value: bytes,
                limit,
            });
        }
        let cell = gpu_store(
            self.r.dev,
            dtype,
            n,
            &format!("the output of {}", self.name()),
        )?;
        Ok(GTensor {
            cell,
            dtype,
            sizes: sizes.to_vec(),
            strides: contiguous_strides(sizes),
            offset: 0,
        })
    }
    /// The [`Elems`] of a float kernel reading `input` and writing `output` storage: f32,
    /// or an f16 form when the device has `shader-f16` (None: no kernel for the pair).
    pub(crate) fn elems(&self, input: DType, output: DType) -> Option<Elems> {
        let e = Elems::of(input, output)?;
        (!e.uses_f16() || self.r.dev.f16_enabled()).then_some(e)
    }
    pub(crate) fn fits(&self, t: &GTensor) -> bool {
        let limit = self.r.dev.properties.limits.max_storage_buffer_binding_size;
        t.rank() <= MAX_RANK && self.bound_bytes(t) <= limit && t.span() < u32::MAX as usize
    }
    /// The bytes a dispatch binds for `t` (its whole store).
    pub(crate) fn bound_bytes(&self, t: &GTensor) -> u64 {
        let s = lock(&t.cell);
        gpu_bytes(s.dtype, s.len)
    }

    /// The fault site of this node for its kernels' parameters (`gpu::fault`): invalid
    /// indices then fail the run with the CPU kernel's error, worded as `text` says.
    pub(crate) fn fault_site(&self, text: crate::gpu::fault::IndexText) -> u32 {
        let n = &self.op.node;
        self.r.dev.faults.site(&n.target, &n.name, text)
    }

    /// Encode one dispatch. `bufs`: (binding, tensor) for every storage binding; a kernel
    /// that reads indices ([`reports_faults`]) also binds the fault record.
    pub(crate) fn dispatch(
        &mut self,
        v: &Variant,
        meta: &[u8],
        bufs: &[(u32, &GTensor)],
        groups: (u32, u32, u32),
    ) -> Result<()> {
        let mut bound: Vec<(u32, wgpu::Buffer, u64)> = Vec::with_capacity(bufs.len());

        let mut classes = Vec::new();
        for (b, t) in bufs {
            let s = lock(&t.cell);
            let buf = s.gpu.as_ref().ok_or_else(|| {
                Error::Gpu(format!("internal: {} input not on the GPU", v.label()))
            })?;
            bound.push((*b, buf.buffer().clone(), gpu_bytes(s.dtype, s.len)));
            if self.r.rec.is_some() {
                classes.push((buf.buffer().clone(), buf.size()));
            }
        }
        let bound_bytes: u64 = bound.iter().map(|b| b.2).sum();
        if reports_faults(v) {
            // Not a pool buffer: no class (a replay takes nothing from the pool for it).
            let record = self.r.fault_record.clone();
            bound.push((crate::gpu::fault::BINDING, record, crate::gpu::fault::BYTES));
            self.r.arm_faults();
        }
        if self.r.dry {
            // A prepare pass: the bind group exists now, the pipeline is created with the
            // others at the end of the pass (`pipelines.rs`); nothing is encoded.
            let bg = self.r.dev.bind_group(v, meta, bound)?;
            return self.r.dev.want_pipeline(v, &bg);
        }
        let pipeline = self.r.dev.pipeline(v)?;
        let recorded = self.r.rec.is_some().then(|| bound.clone());
        let bg = self.r.dev.bind_group(v, meta, bound)?;
        if let (Some(rec), Some(bufs)) = (self.r.rec.as_mut(), recorded) {
            rec.dispatches.push(crate::gpu::tape::Dispatch {
                pipeline: pipeline.clone(),
                bind_group: bg.clone(),
                groups,
                variant: *v,
                meta: meta.to_vec(),
                bufs,
                classes,
            });
        }
        if let Some(log) = self.r.verbose.as_mut() {
            log.dispatched(v);
        }
        // While profiling: GPU timestamps at the pass's start and end (src/gpu/timing.rs).
        let dev = self.r.dev;
        let times = self
            .r
            .timer
            .as_mut()
            .map(|t| t.writes(dev, &self.op.node.name, &self.op.node.target));
        {
            let enc = self.r.encoder();
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: times.as_ref().map(|(qs, b, e)| {
                    wgpu::ComputePassTimestampWrites {
                        query_set: qs,
                        beginning_of_pass_write_index: Some(*b),
                        end_of_pass_write_index: Some(*e),
                    }
                }),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        }
        self.r.stats.dispatches += 1;
        self.r.stats.bound_bytes += bound_bytes;
        Ok(())
    }
}
