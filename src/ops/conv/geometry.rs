//! One convolution geometry for every backend: [`ConvParams`] is parsed once from the node
//! (any of `convolution`, `_convolution`, `conv1d/2d/3d`, `conv_transpose1d/2d/3d`) and
//! [`ConvParams::geometry`] checks it against the input, weight and bias sizes and derives
//! the output size, as torch does. The CPU kernel, the shape rule (`meta.rs`) and the GPU
//! kernel (`src/gpu/kernels/conv.rs`) all take their geometry from here.

use super::kernels::Geometry;
use crate::error::Result;
use crate::ops::util::spatial;
use crate::ops::OpCtx;
use crate::program::Arg;

/// Padding as given: explicit sizes, or torch's 'same' / 'valid'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Padding {
    Explicit(Vec<i64>),
    Same,
    Valid,
}

/// Everything about a convolution call other than its tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConvParams {
    /// The spatial rank the target names (`conv2d`: 2); None for `convolution`, whose
    /// weight's rank says.
    pub nd: Option<usize>,
    pub stride: Vec<i64>,
    pub padding: Padding,
    pub dilation: Vec<i64>,
    pub transposed: bool,
    pub output_padding: Vec<i64>,
    pub groups: i64,
}

/// A checked convolution: the 3-D geometry the kernels compute (lower-rank convolutions get
/// leading size-1 spatial dims), the spatial rank, and what the output sizes need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conv {
    pub geo: Geometry,
    pub nd: usize,
    /// The input had no batch dim ([C, *spatial]).
    pub unbatched: bool,
    pub transposed: bool,
    /// Padding after the input per (D, H, W) (`geo.pad_lo` before; they differ for an even
    /// 'same' kernel).
    pub pad_hi: [usize; 3],
}

fn ints_or(ctx: &OpCtx, name: &str, default: i64) -> Result<Vec<i64>> {
    Ok(ctx.opt_ints(name)?.unwrap_or_else(|| vec![default]))
}

impl ConvParams {
    pub fn parse(ctx: &OpCtx) -> Result<ConvParams> {
        let op = ctx
            .target()
            .rsplit_once('.')
            .map_or(ctx.target(), |(o, _)| o);
        let spatial_rank = |prefix: &str| {
            op.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix('d'))
                .and_then(|n| n.parse::<usize>().ok())
        };
        let (nd, transposed, output_padding) = if let Some(n) = spatial_rank("aten.conv_transpose")
        {
            (Some(n), true, ints_or(ctx, "output_padding", 0)?)
        } else if let Some(n) = spatial_rank("aten.conv") {
            (Some(n), false, vec![0])
        } else {
            (
                None,
                ctx.bool_or("transposed", false)?,
                ints_or(ctx, "output_padding", 0)?,
            )
        };
        let padding = match ctx.arg("padding") {
            Some(Arg::Str(s)) => match s.as_str() {
                "same" => Padding::Same,
                "valid" => Padding::Valid,
                other => {
                    return Err(ctx.err(format!(
                        "padding must be 'same', 'valid' or a list of ints, got '{other}'"
                    )))
                }
            },
            _ => Padding::Explicit(ints_or(ctx, "padding", 0)?),
        };
        Ok(ConvParams {
            nd,
            stride: ints_or(ctx, "stride", 1)?,
            padding,
            dilation: ints_or(ctx, "dilation", 1)?,
            transposed,
            output_padding,
            groups: ctx.int_or("groups", 1)?,
        })
    }

    /// The geometry of this call on an input of sizes `x`, a weight of sizes `w` and a bias
    /// of `bias` elements, or why torch would refuse it.
    pub fn geometry(
        &self,
        x: &[usize],
        w: &[usize],
        bias: Option<usize>,
    ) -> std::result::Result<Conv, String> {
        let nd = match self.nd {
            Some(nd) => {
                if w.len() != nd + 2 {
                    return Err(format!(
                        "weight of a {nd}-D convolution must have rank {}, got shape {w:?}",
                        nd + 2
                    ));
                }
                nd
            }
            None => w
                .len()
                .checked_sub(2)
                .filter(|&n| (1..=3).contains(&n))
                .ok_or_else(|| format!("weight must be 3-D, 4-D or 5-D, got shape {w:?}"))?,
        };
        // Unbatched input: [C, *spatial].
        let unbatched = x.len() == nd + 1;
        if !unbatched && x.len() != nd + 2 {
            return Err(format!(
                "input of a {nd}-D convolution must have rank {} or {}, got shape {x:?}",
                nd + 1,
                nd + 2
            ));
        }
        let xs: Vec<usize> = if unbatched {
            [&[1][..], x].concat()
        } else {
            x.to_vec()
        };
        if self.groups < 1 {
            return Err(format!("groups must be positive, got {}", self.groups));
        }
        let groups = self.groups as usize;
        let too_large = || format!("the convolution of input {x:?} and weight {w:?} is too large");
        let stride = spatial("stride", &self.stride, nd, 1, 1)?;
        let dil = spatial("dilation", &self.dilation, nd, 1, 1)?;
        let mut ks = [1usize; 3];
        ks[3 - nd..].copy_from_slice(&w[2..]);
        let mut ins = [1usize; 3];
        ins[3 - nd..].copy_from_slice(&xs[2..]);
        let (pad_lo, pad_hi) = match &self.padding {
            Padding::Explicit(v) => {
                let v = spatial("padding", v, nd, 0, 0)?;
                (v, v)
            }
            Padding::Valid => ([0; 3], [0; 3]),
            Padding::Same => {
                if self.transposed {
                    return Err(
                        "padding='same' is not supported for transposed convolutions".into(),
                    );
                }
                if stride != [1, 1, 1] {
                    return Err("padding='same' is not supported for strided convolutions".into());
                }
                // Odd total padding puts the extra element at the end, as torch does.
                let mut lo = [0; 3];
                let mut hi = [0; 3];
                for i in 0..3 {
                    let total = dil[i]
                        .checked_mul(ks[i].saturating_sub(1))
                        .ok_or_else(too_large)?;
                    lo[i] = total / 2;
                    hi[i] = total - lo[i];
                }
                (lo, hi)
            }
        };
        let c = xs[1];
        let grouped = w[1].checked_mul(groups).ok_or_else(too_large)?;
        let (o, outs) = if self.transposed {
            if w[0] != c {
                return Err(format!(
                    "expected input of shape {x:?} to have {} channels, but got {c} channels instead",
                    w[0]
                ));
            }
            let op = spatial("output_padding", &self.output_padding, nd, 0, 0)?;
            let mut outs = [1usize; 3];
            for i in 0..3 {
                if op[i] >= stride[i] && op[i] >= dil[i] {
                    return Err(format!(
                        "output padding must be smaller than either stride or dilation, got {op:?}"
                    ));
                }
                let full = ins[i]
                    .saturating_sub(1)
                    .checked_mul(stride[i])
                    .and_then(|v| v.checked_add(dil[i].checked_mul(ks[i].saturating_sub(1))?))
                    .and_then(|v| v.checked_add(op[i] + 1))
                    .ok_or_else(|| format!("the output of input {x:?} overflows"))?;
                let pad = pad_lo[i].checked_add(pad_hi[i]).ok_or_else(too_large)?;
                outs[i] = full.checked_sub(pad).filter(|&v| v > 0).ok_or_else(|| {
                    format!("the output of a transposed convolution of input {x:?} would be empty")
                })?;
            }
            (grouped, outs)
        } else {
            if grouped != c {
                return Err(format!(
                    "expected input of shape {x:?} to have {grouped} channels, but got {c} channels instead"
                ));
            }
            let mut outs = [1usize; 3];
            for i in 0..3 {
                let span = dil[i]
                    .checked_mul(ks[i].saturating_sub(1))
                    .and_then(|v| v.checked_add(1))
                    .ok_or_else(too_large)?;
                let padded = ins[i]
                    .checked_add(pad_lo[i])
                    .and_then(|v| v.checked_add(pad_hi[i]))
                    .ok_or_else(too_large)?;
                if padded < span {
                    return Err(format!(
                        "kernel size {:?} (dilated) is larger than the padded input {:?}",
                        &w[2..],
                        &xs[2..]
                    ));
                }
                outs[i] = (padded - span) / stride[i] + 1;
            }
            (w[0], outs)
        };
        if !c.is_multiple_of(groups) || o % groups != 0 {
            return Err(format!("{c} input channels and {o} output channels must both be divisible by groups = {groups}"));
        }
        if let Some(b) = bias {
            if b != o {
                return Err(format!("bias must have {o} elements, got {b}"));
            }
        }
        Ok(Conv {
            geo: Geometry {
                n: xs[0],
                c,
                o,
                groups,
                ins,
                ks,
                outs,
                stride,
                pad_lo,
                dil,
            },
            nd,
            unbatched,
            transposed: self.transposed,
            pad_hi,
        })
    }
}

impl Conv {
    /// The output's sizes: [N, O, *spatial], without N for an unbatched input.
    pub fn out_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![self.geo.n, self.geo.o];
        sizes.extend_from_slice(&self.geo.outs[3 - self.nd..]);
        if self.unbatched {
            sizes.remove(0);
        }
        sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(stride: i64, dilation: i64, padding: i64, groups: i64) -> ConvParams {
        ConvParams {
            nd: None,
            stride: vec![stride],
            padding: Padding::Explicit(vec![padding]),
            dilation: vec![dilation],
            transposed: false,
            output_padding: vec![0],
            groups,
        }
    }

    #[test]
    fn output_sizes_follow_torch() {
        let c = params(2, 1, 1, 1)
            .geometry(&[1, 3, 7, 8], &[4, 3, 3, 3], Some(4))
            .unwrap();
        assert_eq!(c.out_sizes(), vec![1, 4, 4, 4]);
    }

    #[test]
    fn hostile_parameters_are_errors() {
        let x = [1, 3, 7, 8];
        let w = [4, 3, 3, 3];
        for p in [
            params(1, i32::MAX as i64, 0, 1),
            params(1, 1, i32::MAX as i64 + 1, 1),
            params(i64::MAX, 1, 0, 1),
            params(1, 1, 0, i64::MAX),
            params(0, 1, 0, 1),
        ] {
            assert!(p.geometry(&x, &w, None).is_err(), "{p:?}");
        }
    }
}
