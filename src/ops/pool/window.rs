//! One pooling window for every backend: [`PoolParams`] is parsed once from a `max_pool*` /
//! `avg_pool*` node, [`Planes`] views the input as planes of a 3-D volume, and
//! [`PoolParams::window`] checks the parameters against it and derives the output size
//! (torch's `pooling_output_shape`); [`adaptive_sizes`] does the same for the adaptive pools.
//! The CPU kernels, the shape rules (`meta.rs`) and the GPU kernel
//! (`src/gpu/kernels/pool.rs`) all take their windows from here.

use crate::error::Result;
use crate::ops::util::spatial;
use crate::ops::OpCtx;

/// The largest kernel size, stride, padding or dilation accepted: past it the products of
/// the window arithmetic overflow (torch's kernels index with int32 on most devices too).
const MAX_PARAM: i64 = i32::MAX as i64;

/// An input seen as `count` planes (all leading dims) of a (D, H, W) volume; lower-rank
/// pools get leading size-1 spatial dims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planes {
    pub count: usize,
    pub ins: [usize; 3],
    /// The leading (non-spatial) dims, kept in the output.
    pub lead: Vec<usize>,
    pub nd: usize,
}

impl Planes {
    /// An input of `sizes` for an `nd`-D op: `[N, C, *spatial]`, or `[C, *spatial]` unless
    /// `batched_only`.
    pub fn of(
        sizes: &[usize],
        nd: usize,
        batched_only: bool,
    ) -> std::result::Result<Planes, String> {
        let r = sizes.len();
        if !(r == nd + 2 || (!batched_only && r == nd + 1)) {
            let want = if batched_only {
                format!("{}", nd + 2)
            } else {
                format!("{} or {}", nd + 1, nd + 2)
            };
            return Err(format!(
                "expected a {want}-D input for a {nd}-D op, got shape {sizes:?}"
            ));
        }
        let mut ins = [1usize; 3];
        ins[3 - nd..].copy_from_slice(&sizes[r - nd..]);
        let lead = sizes[..r - nd].to_vec();
        Ok(Planes {
            // Saturating: a shape rule may see sizes no tensor has (a hostile archive).
            count: lead.iter().fold(1usize, |a, &b| a.saturating_mul(b)),
            ins,
            lead,
            nd,
        })
    }
    pub fn in_plane(&self) -> usize {
        self.ins.iter().product()
    }
    /// The output's sizes: the leading dims, then the last `nd` of `outs`.
    pub fn out_sizes(&self, outs: &[usize; 3]) -> Vec<usize> {
        let mut s = self.lead.clone();
        s.extend_from_slice(&outs[3 - self.nd..]);
        s
    }
}

/// Everything about a windowed pooling call (`max_pool1d/2d/3d`, `*_with_indices`,
/// `avg_pool1d/2d/3d`) other than its input, per (D, H, W) (unused leading dims: kernel 1,
/// stride 1, padding 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolParams {
    pub nd: usize,
    /// Max pooling (dilated windows), else average pooling.
    pub max: bool,
    pub with_indices: bool,
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub padding: [usize; 3],
    pub dilation: [usize; 3],
    pub ceil_mode: bool,
    /// Average pooling: whether padding counts in a window's divisor, and a fixed divisor.
    pub count_include_pad: bool,
    pub divisor_override: Option<i64>,
}

/// A checked window: its parameters and the output's spatial sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    pub k: [usize; 3],
    pub s: [usize; 3],
    pub p: [usize; 3],
    pub d: [usize; 3],
    pub outs: [usize; 3],
}

/// The spatial rank in an op's name (`max_pool2d_with_indices` -> 2).
pub(crate) fn nd_of(name: &str) -> Option<usize> {
    ["1d", "2d", "3d"]
        .iter()
        .position(|s| name.contains(s))
        .map(|i| i + 1)
}

impl PoolParams {
    pub fn parse(ctx: &OpCtx) -> Result<PoolParams> {
        let target = ctx.target();
        let op = target.rsplit_once('.').map_or(target, |(o, _)| o);
        let op = op.strip_prefix("aten.").unwrap_or(op);
        let max = op.starts_with("max_pool");
        let nd = match nd_of(op) {
            Some(nd) if max || op.starts_with("avg_pool") => nd,
            _ => return Err(ctx.err("not a windowed pooling op")),
        };
        let e = |m: String| ctx.err(m);
        let kernel = spatial("kernel_size", &ctx.ints("kernel_size")?, nd, 1, 1).map_err(e)?;
        let stride = match ctx.opt_ints("stride")? {
            Some(v) if !v.is_empty() => spatial("stride", &v, nd, 1, 1).map_err(e)?,
            _ => kernel,
        };
        let padding = ctx.opt_ints("padding")?.unwrap_or_else(|| vec![0]);
        let padding = spatial("padding", &padding, nd, 0, 0).map_err(e)?;
        let dilation = if max {
            let d = ctx.opt_ints("dilation")?.unwrap_or_else(|| vec![1]);
            spatial("dilation", &d, nd, 1, 1).map_err(e)?
        } else {
            [1; 3]
        };
        let (count_include_pad, divisor_override) = if max {
            (true, None)
        } else {
            let d = ctx.opt_int("divisor_override")?;
            if d == Some(0) {
                return Err(ctx.err("divisor_override must not be zero"));
            }
            (ctx.bool_or("count_include_pad", true)?, d)
        };
        Ok(PoolParams {
            nd,
            max,
            with_indices: op.ends_with("_with_indices"),
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode: ctx.bool_or("ceil_mode", false)?,
            count_include_pad,
            divisor_override,
        })
    }

    /// The window of this call over `pl`, or why torch would refuse it.
    pub fn window(&self, pl: &Planes) -> std::result::Result<Window, String> {
        let (k, s, p, d) = (self.kernel, self.stride, self.padding, self.dilation);
        let mut outs = [1; 3];
        for i in 0..3 {
            // Every term is at most MAX_PARAM: the product fits in u64 (not in a wasm32 usize).
            let limit = if self.max {
                ((k[i] as u64 - 1) * d[i] as u64).div_ceil(2)
            } else {
                k[i] as u64 / 2
            };
            if p[i] as u64 > limit {
                let r = 3 - self.nd..;
                return Err(format!(
                    "padding {:?} should be at most half of the effective kernel size {:?} (dilation {:?})",
                    &p[r.clone()],
                    &k[r.clone()],
                    &d[r]
                ));
            }
            outs[i] = pooled_size(pl.ins[i], k[i], p[i], s[i], d[i], self.ceil_mode)?;
        }
        Ok(Window { k, s, p, d, outs })
    }
}

/// torch's `pooling_output_shape`: windows that start in the right padding are dropped in
/// ceil mode.
fn pooled_size(
    input: usize,
    k: usize,
    p: usize,
    s: usize,
    d: usize,
    ceil: bool,
) -> std::result::Result<usize, String> {
    let (i, k, p, s, d) = (input as i128, k as i128, p as i128, s as i128, d as i128);
    let num = i + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut out = num.div_euclid(s) + 1;
    if ceil && (out - 1) * s >= i + p {
        out -= 1;
    }
    if out < 1 {
        return Err(format!(
            "the output size is too small ({out}) for input size {input}, kernel {k}, padding {p}, stride {s}, dilation {d}"
        ));
    }
    usize::try_from(out).map_err(|_| format!("the output size {out} is too large"))
}

/// The output sizes of an adaptive pool over `pl` (`output_size`: 1 or `nd` values; the
/// other slots keep the input's size).
pub(crate) fn adaptive_sizes(
    output_size: &[i64],
    pl: &Planes,
) -> std::result::Result<[usize; 3], String> {
    let nd = pl.nd;
    let v: Vec<i64> = if output_size.len() == 1 {
        vec![output_size[0]; nd]
    } else {
        output_size.to_vec()
    };
    if v.len() != nd {
        return Err(format!("output_size must have 1 or {nd} values, got {v:?}"));
    }
    let mut outs = pl.ins;
    for (i, &o) in v.iter().enumerate() {
        if !(0..=MAX_PARAM).contains(&o) {
            return Err(format!(
                "output_size must be in 0..={MAX_PARAM}, got {output_size:?}"
            ));
        }
        outs[3 - nd + i] = o as usize;
    }
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_sizes_follow_torch() {
        // torch.nn.functional.max_pool2d(x[1,1,5,5], 2, 2, ceil_mode=True) -> 3x3.
        assert_eq!(pooled_size(5, 2, 0, 2, 1, true), Ok(3));
        assert_eq!(pooled_size(5, 2, 0, 2, 1, false), Ok(2));
        // Ceil mode drops the window that would start in the right padding.
        assert_eq!(pooled_size(5, 2, 1, 2, 1, true), Ok(3));
        assert_eq!(pooled_size(6, 3, 1, 2, 1, true), Ok(4));
        assert!(pooled_size(1, 3, 0, 1, 1, false).is_err());
    }

    #[test]
    fn hostile_sizes_are_errors() {
        assert!(spatial("kernel_size", &[i64::MAX], 2, 1, 1).is_err());
        assert!(spatial("stride", &[-1], 2, 1, 1).is_err());
        assert!(spatial("kernel_size", &[2, 2, 2], 2, 1, 1).is_err());
        let pl = Planes::of(&[1, 1, 4, 4], 2, false).unwrap();
        assert!(adaptive_sizes(&[i64::MAX], &pl).is_err());
        assert!(adaptive_sizes(&[-1], &pl).is_err());
        assert_eq!(adaptive_sizes(&[2], &pl), Ok([1, 2, 2]));
        // The largest parameters stay within the arithmetic.
        let m = MAX_PARAM as usize;
        assert!(pooled_size(usize::MAX / 4, m, m / 2, m, m, true).is_ok());
        assert!(Planes::of(&[4, 4], 2, true).is_err());
    }
}
