//! Padding, once for every backend: the ten padding targets (`constant_pad_nd`, `pad`,
//! `_pad_enum`, `_pad_circular`, `reflection_pad{1,2,3}d`, `replication_pad{1,2,3}d`) parse
//! into one [`PadParams`], and [`PadParams::dims`] checks it against the input's sizes as
//! torch does. The CPU kernel and the shape rule here and the GPU kernel
//! (`src/gpu/kernels/shape.rs`) all take their padding from it.

use super::copy::{gather_dims, identity, DimMap};
use super::one;
use crate::cpu::Tensor;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::{OpCtx, OpTable, Scalar};
use crate::runtime::RValue;

/// Each padding target once, with its CPU kernel and its shape rule.
pub(super) fn register(r: &mut OpTable) {
    let mut targets = vec![
        "aten.constant_pad_nd.default".to_string(),
        "aten.pad.default".to_string(),
        "aten._pad_enum.default".to_string(),
        "aten._pad_circular.default".to_string(),
    ];
    for k in ["1d", "2d", "3d"] {
        targets.push(format!("aten.reflection_pad{k}.default"));
        targets.push(format!("aten.replication_pad{k}.default"));
    }
    for t in &targets {
        r.define(t, pad, pad_rule);
    }
}

/// How the padded elements are filled.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PadMode {
    Constant,
    Reflect,
    Replicate,
    Circular,
}

/// Everything about a padding call other than its input.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PadParams {
    /// (before, after) pairs from the last dim backwards; negative values crop.
    pub pads: Vec<i64>,
    pub mode: PadMode,
    /// The fill of constant mode (0 in the others, which fill from the input).
    pub value: Scalar,
}

/// One padded dim: `lo` elements before the input's, `size` in all.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PadDim {
    pub dim: usize,
    pub lo: i64,
    pub size: usize,
}

impl PadParams {
    pub fn parse(ctx: &OpCtx) -> Result<PadParams> {
        Self::with_pads(ctx, ctx.ints(Self::pads_arg(ctx.target()))?)
    }

    /// The argument that holds the pad list.
    pub fn pads_arg(target: &str) -> &'static str {
        match target.split('.').nth(1).unwrap_or_default() {
            op if op.starts_with("reflection_pad") || op.starts_with("replication_pad") => {
                "padding"
            }
            _ => "pad",
        }
    }

    /// [`PadParams::parse`] with the pad list already resolved (the meta pass resolves
    /// symbolic sizes in it from its own values).
    pub fn with_pads(ctx: &OpCtx, pads: Vec<i64>) -> Result<PadParams> {
        let op = ctx
            .target()
            .split('.')
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let mode = if op.starts_with("reflection_pad") {
            PadMode::Reflect
        } else if op.starts_with("replication_pad") {
            PadMode::Replicate
        } else if op == "_pad_circular" {
            PadMode::Circular
        } else if op == "_pad_enum" {
            // at::padding_mode: 0 constant, 1 reflect, 2 replicate, 3 circular.
            match ctx.int("mode")? {
                0 => PadMode::Constant,
                1 => PadMode::Reflect,
                2 => PadMode::Replicate,
                3 => PadMode::Circular,
                m => return Err(ctx.err(format!("unknown padding mode {m}"))),
            }
        } else if op == "pad" {
            match ctx.opt_str("mode")?.as_deref().unwrap_or("constant") {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "replicate" => PadMode::Replicate,
                "circular" => PadMode::Circular,
                other => return Err(ctx.err(format!("unsupported padding mode '{other}' (expected constant, reflect, replicate or circular)"))),
            }
        } else {
            PadMode::Constant
        };
        let value = match ctx.opt_scalar("value")? {
            Some(v) if mode != PadMode::Constant => {
                if op == "pad" && v.as_f64() != 0.0 {
                    return Err(ctx.err(format!(
                        "padding mode {mode:?} doesn't take in value argument"
                    )));
                }
                Scalar::Int(0)
            }
            Some(v) => v,
            None => Scalar::Int(0),
        };
        Ok(PadParams { pads, mode, value })
    }

    /// The padded dims of an input of `sizes`, checked as torch checks them (an even list of
    /// at most twice the rank, no negative output size, reflect and circular padding smaller
    /// than the dim, nothing to replicate from an empty dim).
    pub fn dims(&self, ctx: &OpCtx, sizes: &[usize]) -> Result<Vec<PadDim>> {
        let (pad, r) = (&self.pads, sizes.len());
        if pad.len() % 2 != 0 || pad.len() / 2 > r {
            return Err(ctx.err(format!(
                "padding length {} must be even and at most twice the rank {r} of the input",
                pad.len()
            )));
        }
        let mut out = Vec::with_capacity(pad.len() / 2);
        for k in 0..pad.len() / 2 {
            let d = r - 1 - k;
            let (lo, hi, n) = (pad[2 * k], pad[2 * k + 1], sizes[d] as i64);
            let Some(size) = n.checked_add(lo).and_then(|s| s.checked_add(hi)) else {
                return Err(ctx.err(format!(
                    "padding ({lo}, {hi}) at dimension {d} overflows the output size"
                )));
            };
            if size < 0 {
                return Err(ctx.err(format!("the input size {n} at dimension {d}, plus negative padding {lo} and {hi}, resulted in a negative output size")));
            }
            let bad = match self.mode {
                PadMode::Constant => false,
                PadMode::Reflect => lo >= n || hi >= n,
                PadMode::Circular => lo > n || hi > n,
                PadMode::Replicate => n == 0,
            };
            // (a size beyond the element limit would not even fit a wasm32 usize)
            crate::ops::factory::check_numel(ctx, size as u64)?;
            if bad {
                return Err(ctx.err(format!("padding ({lo}, {hi}) at dimension {d} is too large for an input of size {n} in {:?} mode (input shape {sizes:?})", self.mode)));
            }
            out.push(PadDim {
                dim: d,
                lo,
                size: size as usize,
            });
        }
        Ok(out)
    }

    /// The output sizes for an input of `sizes`.
    pub fn out_sizes(&self, ctx: &OpCtx, sizes: &[usize]) -> Result<Vec<usize>> {
        let mut s = sizes.to_vec();
        for p in self.dims(ctx, sizes)? {
            s[p.dim] = p.size;
        }
        Ok(s)
    }
}

/// Where output index `o` of a padded dim of input size `n` reads from (None: the fill).
fn source(mode: PadMode, o: i64, lo: i64, n: i64) -> Option<usize> {
    let i = o - lo;
    let j = match mode {
        PadMode::Constant => i,
        PadMode::Reflect => {
            let j = if i < 0 { -i } else { i };
            if j >= n {
                2 * (n - 1) - j
            } else {
                j
            }
        }
        PadMode::Replicate => i.clamp(0, n - 1),
        PadMode::Circular => i.rem_euclid(n.max(1)),
    };
    (0..n).contains(&j).then_some(j as usize)
}

/// Pad `t` as `p` says.
pub(crate) fn pad_t(ctx: &OpCtx, t: &Tensor, p: &PadParams) -> Result<Tensor> {
    let dims = p.dims(ctx, &t.sizes)?;
    // The output is materialized: bounded before anything is allocated.
    let numel = p
        .out_sizes(ctx, &t.sizes)?
        .iter()
        .try_fold(1u64, |a, &n| a.checked_mul(n as u64))
        .unwrap_or(u64::MAX);
    crate::ops::factory::check_numel(ctx, numel)?;
    let mut maps: Vec<DimMap> = t.sizes.iter().map(|&n| identity(n)).collect();
    for d in dims {
        let n = t.sizes[d.dim] as i64;
        maps[d.dim] = (0..d.size as i64)
            .map(|o| source(p.mode, o, d.lo, n))
            .collect();
    }
    gather_dims(t, &maps, p.value.as_f64())
}

fn pad(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let p = PadParams::parse(ctx)?;
    one(pad_t(ctx, &t, &p)?)
}

fn pad_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let pads = ctx.ints(PadParams::pads_arg(ctx.target()))?;
    let s = ctx.with_op(|c| PadParams::with_pads(c, pads)?.out_sizes(c, &t.sizes))?;
    Ok(vec![MValue::Tensor(t.with_sizes(s))])
}
