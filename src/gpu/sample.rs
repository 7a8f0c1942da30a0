//! Picking the next token on the device: a decode step of a language model ends with the
//! logits of the last position on the GPU (a kept output, [`GpuSession::run_with`] with
//! `keep`), and the next token needs only them. [`GpuSession::argmax_last_async`] (greedy)
//! and [`GpuSession::sample_last_async`] (temperature, top-k, top-p, as
//! [`crate::generate::Sampler`]) each find it with one dispatch (`shaders/sample.wgsl`) and
//! read back 8 bytes (the index and a NaN flag) instead of the vocabulary's logits.

use super::exec::GpuSession;
use super::shaders::{Shader, Variant};
use super::store::{lock, GTensor};
use crate::dtype::DType;
use crate::error::{Error, Result};
use bytemuck::{Pod, Zeroable};

pub const ARGMAX_ROW: Variant = Variant::new(Shader::Sample, "argmax_row");
pub const SAMPLE_ROW: Variant = Variant::new(Shader::Sample, "sample_row");

/// Mirrors `Meta` in shaders/sample.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
struct SampleMeta {
    n: u32,
    offset: u32,
    top_k: u32,
    pad0: u32,
    temperature: f32,
    top_p: f32,
    u: f32,
    pad1: u32,
}

impl GpuSession {
    /// The index of the largest value in the last row (last dimension) of the f32 tensor
    /// `t` on the GPU (the first of equal maxima, as `torch.argmax`), computed there: the
    /// logits of a kept output in, a token id out. Adds the dispatch and the 8 bytes read
    /// back to [`GpuSession::last_stats`]. Logits holding NaN are an error, as on the CPU.
    pub async fn argmax_last_async(&mut self, t: &GTensor) -> Result<i64> {
        if !self.row_fits(t, 1) {
            let greedy = crate::generate::Sampling::default();
            return greedy.pick_with(&self.last_row_on_host(t).await?, || 0.0);
        }
        self.pick_last(
            t,
            "argmax of the last logits",
            &ARGMAX_ROW,
            SampleMeta::default(),
        )
        .await
    }

    /// A token drawn from the last row of the f32 logits `t` on the GPU as `s` says (not
    /// greedy: see [`GpuSession::argmax_last_async`]), with `u` the uniform number in [0, 1)
    /// of the draw: the same rule as [`crate::generate::Sampler::pick`], in f32. Reads back
    /// 8 bytes.
    pub async fn sample_last_async(
        &mut self,
        t: &GTensor,
        s: &crate::generate::Sampling,
        u: f64,
    ) -> Result<i64> {
        let meta = SampleMeta {
            top_k: s.top_k.map_or(0, |k| k.min(u32::MAX as usize) as u32),
            temperature: s.temperature as f32,
            top_p: s.top_p.map_or(1.0, |p| p as f32),
            // The largest f32 below 1 at most, so the draw never passes the total.
            u: (u as f32).min(1.0 - f32::EPSILON / 2.0),
            ..Default::default()
        };
        if !(meta.temperature > 0.0 && meta.temperature.is_finite()) {
            return Err(Error::Input {
                input: "sampling".into(),
                msg: format!(
                    "temperature {}: expected a positive value that fits in f32",
                    s.temperature
                ),
            });
        }
        // Loop steps per element of an invocation's share: the max, the draw's two walks, and
        // a walk per bit of top-k's and top-p's cuts.
        let steps = 3 + 33 * (meta.top_k > 0) as usize + 34 * (meta.top_p < 1.0) as usize;
        if !self.row_fits(t, steps) {
            return s.pick_with(&self.last_row_on_host(t).await?, || u);
        }
        self.pick_last(t, "sampling the last logits", &SAMPLE_ROW, meta)
            .await
    }

    /// Whether `sample.wgsl`'s 256 invocations, each taking `steps` loop steps per element of
    /// its 1/256 of the last row of `t`, stay within the loop cap of CPU adapters
    /// ([`super::kernels::LOOP_BUDGET`]): past it (lavapipe with a vocabulary of 300,000 and
    /// top-k + top-p) the row is read back and picked on the host by the same rule.
    fn row_fits(&self, t: &GTensor, steps: usize) -> bool {
        let n = t.sizes.last().copied().unwrap_or(0);
        !super::is_software(&self.device.properties)
            || n.div_ceil(256).saturating_mul(steps) <= super::kernels::LOOP_BUDGET
    }

    /// The last row of the f32 logits `t`, read back (the rows too long for `sample.wgsl`).
    async fn last_row_on_host(&mut self, t: &GTensor) -> Result<Vec<f32>> {
        let n = t.sizes.last().copied().unwrap_or(0);
        let all = super::exec::read_tensor(&self.device, t).await?;
        if all.dtype != DType::F32 {
            return Err(Error::op("sampling the last logits", "expected f32 logits"));
        }
        let v = all.to_vec::<f32>();
        let st = &mut self.last_stats;
        st.downloads += 1;
        st.download_bytes += 4 * v.len() as u64;
        Ok(v[v.len().saturating_sub(n)..].to_vec())
    }

    /// One workgroup of `variant` over the last row of `t`, its 8-byte answer read back.
    async fn pick_last(
        &mut self,
        t: &GTensor,
        what: &str,
        variant: &Variant,
        meta: SampleMeta,
    ) -> Result<i64> {
        let n = match t.sizes.last() {
            Some(&n) if t.numel() > 0 && t.dtype == DType::F32 => n,
            _ => {
                return Err(Error::op(
                    what,
                    format!(
                        "expected non-empty f32 logits, got {} {:?}",
                        t.dtype, t.sizes
                    ),
                ))
            }
        };
        if t.strides.last() != Some(&1) && n > 1 {
            return Err(Error::op(what, "the last dimension is not contiguous"));
        }
        // The last row: every leading index at its largest value.
        let offset = t.offset
            + t.sizes[..t.rank() - 1]
                .iter()
                .zip(&t.strides)
                .map(|(s, st)| (s - 1) * st)
                .sum::<usize>();
        let (src, bound) = {
            let s = lock(&t.cell);
            let b = s
                .gpu
                .as_ref()
                .filter(|_| s.gpu_valid)
                .map(|b| b.buffer().clone());
            (b, super::store::gpu_bytes(s.dtype, s.len))
        };
        let src = src.ok_or_else(|| Error::op(what, "the logits are not on the GPU"))?;
        if offset + n > u32::MAX as usize {
            return Err(Error::op(what, "the logits are too large for one dispatch"));
        }
        let dev = self.device.clone();
        let out = dev.alloc_output(8, what)?;
        let staging = dev.alloc_readback(8)?;
        let meta = SampleMeta {
            n: n as u32,
            offset: offset as u32,
            ..meta
        };
        let pipeline = dev.pipeline(variant)?;
        let bg = dev.bind_group(
            variant,
            bytemuck::bytes_of(&meta),
            vec![(1, out.buffer().clone(), 8), (2, src, bound)],
        )?;
        let mut enc = dev
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(what) });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(what),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        enc.copy_buffer_to_buffer(out.buffer(), 0, staging.buffer(), 0, 8);
        dev.queue.submit([enc.finish()]);
        dev.take_error()?;
        let wait = super::runner::map_read(&dev, staging.buffer());
        let start = crate::runtime::profile::now_ms();
        #[cfg(not(target_arch = "wasm32"))]
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for a readback: {e}")))?;
        wait.await?;
        let words: [u32; 2] = {
            let view = staging
                .buffer()
                .slice(..)
                .get_mapped_range()
                .map_err(|e| Error::Gpu(format!("reading a readback buffer: {e}")))?;
            [
                u32::from_le_bytes([view[0], view[1], view[2], view[3]]),
                u32::from_le_bytes([view[4], view[5], view[6], view[7]]),
            ]
        };
        staging.buffer().unmap();
        drop(out);
        dev.recycle();
        let st = &mut self.last_stats;
        st.submits += 1;
        st.dispatches += 1;
        st.downloads += 1;
        st.download_bytes += 8;
        st.wait_us += ((crate::runtime::profile::now_ms() - start) * 1e3) as u64;
        if words[1] != 0 {
            return Err(Error::op(what, "the logits hold NaN"));
        }
        if words[0] as usize >= n {
            return Err(Error::Gpu(format!(
                "internal: {what}: index {} of {n}",
                words[0]
            )));
        }
        Ok(words[0] as i64)
    }

    /// [`GpuSession::argmax_last_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn argmax_last(&mut self, t: &GTensor) -> Result<i64> {
        pollster::block_on(self.argmax_last_async(t))
    }

    /// [`GpuSession::sample_last_async`], blocking (native).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn sample_last(
        &mut self,
        t: &GTensor,
        s: &crate::generate::Sampling,
        u: f64,
    ) -> Result<i64> {
        pollster::block_on(self.sample_last_async(t, s, u))
    }
}
