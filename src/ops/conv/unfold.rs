//! `aten.im2col` (`F.unfold`, `nn.Unfold`) and `aten.col2im` (`F.fold`, `nn.Fold`): the
//! sliding 2-D windows of a batch of images as columns, and back (summing where windows
//! overlap). Written in the op table's one-declaration form: [`Window2d`] is parsed once from
//! the node by every backend (the CPU kernels here, the shape rules here, the GPU kernel in
//! `src/gpu/kernels/conv.rs`), and each target is declared once with its CPU kernel and its
//! shape rule ([`register`]).

use super::super::matmul::gemm::{with_contiguous, Float};
use super::super::{OpCtx, OpTable};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::meta::{MValue, MetaCtx, RuleResult};
use crate::ops::elementwise::meta::one;
use crate::runtime::RValue;

pub(crate) fn register(r: &mut OpTable) {
    r.define("aten.im2col.default", im2col, im2col_rule);
    r.define("aten.col2im.default", col2im, col2im_rule);
}

/// The window of `im2col` / `col2im`: kernel size, dilation, padding and stride, each
/// (height, width).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window2d {
    pub kernel: [usize; 2],
    pub dilation: [usize; 2],
    pub padding: [usize; 2],
    pub stride: [usize; 2],
}

/// The geometry of one call: channels, image size, window and the grid of window positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unfold {
    pub window: Window2d,
    /// Batch (1 for an unbatched call) and channels.
    pub n: usize,
    pub c: usize,
    /// The image (height, width).
    pub image: [usize; 2],
    /// Window positions (height, width): `L = blocks[0] * blocks[1]`.
    pub blocks: [usize; 2],
    /// Whether the call had no batch dim.
    pub unbatched: bool,
}

impl Window2d {
    /// The window arguments of the node, checked as torch checks them.
    pub fn parse(ctx: &OpCtx) -> Result<Window2d> {
        let pair = |name: &str, min: i64| -> Result<[usize; 2]> {
            let v = ctx.ints(name)?;
            if v.len() != 2 {
                return Err(ctx.err(format!(
                    "{name} must have 2 values (height, width), got {v:?}"
                )));
            }
            if let Some(b) = v.iter().find(|&&x| x < min) {
                let what = if min == 0 {
                    "non-negative"
                } else {
                    "greater than zero"
                };
                return Err(ctx.err(format!("{name} should be {what}, got {v:?} ({b})")));
            }
            if let Some(b) = v.iter().find(|&&x| x > i32::MAX as i64) {
                return Err(ctx.err(format!("{name} {b} is too large (got {v:?})")));
            }
            Ok([v[0] as usize, v[1] as usize])
        };
        let w = Window2d {
            kernel: pair("kernel_size", 1)?,
            dilation: pair("dilation", 1)?,
            padding: pair("padding", 0)?,
            stride: pair("stride", 1)?,
        };
        if w.kernel[0].checked_mul(w.kernel[1]).is_none() {
            return Err(ctx.err(format!("kernel_size {:?} is too large", w.kernel)));
        }
        Ok(w)
    }

    /// The window positions along an image of `image` (height, width), None where the dilated
    /// kernel is larger than the padded image.
    pub fn blocks(&self, image: [usize; 2]) -> Option<[usize; 2]> {
        let mut out = [0; 2];
        for i in 0..2 {
            let span = self.dilation[i]
                .checked_mul(self.kernel[i] - 1)?
                .checked_add(1)?;
            let padded = image[i].checked_add(self.padding[i].checked_mul(2)?)?;
            out[i] = padded.checked_sub(span)? / self.stride[i] + 1;
        }
        Some(out)
    }

    /// The taps of one window (`kernel[0] * kernel[1]`).
    pub fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }
}

impl Unfold {
    /// `im2col` of an input of `sizes` ([N, C, H, W] or [C, H, W]).
    pub fn of_image(w: Window2d, sizes: &[usize]) -> std::result::Result<Unfold, String> {
        let unbatched = sizes.len() == 3;
        if !unbatched && sizes.len() != 4 {
            return Err(format!(
                "expected a 3-D or 4-D input (a batch of images), got shape {sizes:?}"
            ));
        }
        let s = if unbatched {
            [&[1][..], sizes].concat()
        } else {
            sizes.to_vec()
        };
        if s[1..].contains(&0) {
            return Err(format!(
                "expected non-empty channel and spatial dims, got shape {sizes:?}"
            ));
        }
        let image = [s[2], s[3]];
        let blocks = w.blocks(image).filter(|b| b[0] > 0 && b[1] > 0).ok_or_else(|| {
            format!(
                "the dilated kernel {:?} (dilation {:?}) is larger than the padded input {image:?} (padding {:?})",
                w.kernel, w.dilation, w.padding
            )
        })?;
        Unfold {
            window: w,
            n: s[0],
            c: s[1],
            image,
            blocks,
            unbatched,
        }
        .checked()
    }

    /// `col2im` of an input of `sizes` ([N, C * taps, L] or [C * taps, L]) into images of
    /// `output_size`.
    pub fn of_columns(
        w: Window2d,
        sizes: &[usize],
        output_size: &[i64],
    ) -> std::result::Result<Unfold, String> {
        let unbatched = sizes.len() == 2;
        if !unbatched && sizes.len() != 3 {
            return Err(format!(
                "expected a 2-D or 3-D input (columns), got shape {sizes:?}"
            ));
        }
        let s = if unbatched {
            [&[1][..], sizes].concat()
        } else {
            sizes.to_vec()
        };
        let [oh, ow] = match output_size {
            &[h, w] if h > 0 && w > 0 => [h as usize, w as usize],
            other => {
                return Err(format!(
                    "output_size must be 2 positive sizes (height, width), got {other:?}"
                ))
            }
        };
        let taps = w.taps();
        if s[1] == 0 || s[1] % taps != 0 {
            return Err(format!(
                "dim 1 of the input {sizes:?} must be a non-zero multiple of the kernel's {taps} taps ({:?})",
                w.kernel
            ));
        }
        let blocks = w
            .blocks([oh, ow])
            .filter(|b| b[0] > 0 && b[1] > 0)
            .ok_or_else(|| {
                format!(
                    "the dilated kernel {:?} is larger than the padded output_size [{oh}, {ow}]",
                    w.kernel
                )
            })?;
        if blocks[0].checked_mul(blocks[1]) != Some(s[2]) {
            return Err(format!(
                "the input {sizes:?} has {} blocks in its last dim, but output_size [{oh}, {ow}], kernel {:?}, dilation {:?}, padding {:?} and stride {:?} give {} ({} x {})",
                s[2], w.kernel, w.dilation, w.padding, w.stride,
                blocks[0].saturating_mul(blocks[1]), blocks[0], blocks[1]
            ));
        }
        Unfold {
            window: w,
            n: s[0],
            c: s[1] / taps,
            image: [oh, ow],
            blocks,
            unbatched,
        }
        .checked()
    }

    /// Refuse a geometry whose column or image side has more elements than a `usize` holds
    /// (the sizes below multiply unchecked after this).
    fn checked(self) -> std::result::Result<Unfold, String> {
        let cols = self
            .c
            .checked_mul(self.window.kernel[0])
            .and_then(|v| v.checked_mul(self.window.kernel[1]))
            .and_then(|v| v.checked_mul(self.blocks[0]))
            .and_then(|v| v.checked_mul(self.blocks[1]))
            .and_then(|v| v.checked_mul(self.n));
        let image = crate::tensor::checked_numel(&[self.n, self.c, self.image[0], self.image[1]]);
        if cols.is_none() || image.is_none() {
            return Err(format!(
                "the columns ({} channels, kernel {:?}, {:?} blocks) or the images {:?} are too large",
                self.c, self.window.kernel, self.blocks, self.image
            ));
        }
        Ok(self)
    }

    /// The column side's sizes ([N, C * taps, L], without N for an unbatched call).
    pub fn columns_sizes(&self) -> Vec<usize> {
        let v = vec![
            self.n,
            self.c * self.window.taps(),
            self.blocks[0] * self.blocks[1],
        ];
        self.unbatch(v)
    }
    /// The image side's sizes ([N, C, H, W], without N for an unbatched call).
    pub fn image_sizes(&self) -> Vec<usize> {
        self.unbatch(vec![self.n, self.c, self.image[0], self.image[1]])
    }
    fn unbatch(&self, mut v: Vec<usize>) -> Vec<usize> {
        if self.unbatched {
            v.remove(0);
        }
        v
    }

    /// Calls `f(column element, image element)` for every column element that reads the
    /// image (the ones in the padding read nothing), both as offsets into contiguous data.
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let w = &self.window;
        let [bh, bw] = self.blocks;
        let [h, wd] = self.image;
        let l = bh * bw;
        let taps = w.taps();
        for img in 0..self.n {
            for ch in 0..self.c {
                let plane = (img * self.c + ch) * h * wd;
                for t in 0..taps {
                    let (ky, kx) = (t / w.kernel[1], t % w.kernel[1]);
                    let row = ((img * self.c + ch) * taps + t) * l;
                    for by in 0..bh {
                        let y = (by * w.stride[0] + ky * w.dilation[0]) as isize
                            - w.padding[0] as isize;
                        if y < 0 || y >= h as isize {
                            continue;
                        }
                        for bx in 0..bw {
                            let x = (bx * w.stride[1] + kx * w.dilation[1]) as isize
                                - w.padding[1] as isize;
                            if x < 0 || x >= wd as isize {
                                continue;
                            }
                            f(row + by * bw + bx, plane + y as usize * wd + x as usize);
                        }
                    }
                }
            }
        }
    }
}

/// The element count of `sizes`, refused past the tensor element limit.
fn checked(ctx: &OpCtx, sizes: &[usize]) -> Result<usize> {
    let max = crate::limits::Limits::default().max_tensor_elements;
    crate::tensor::checked_numel(sizes)
        .filter(|&n| n as u64 <= max)
        .ok_or_else(|| ctx.err(format!("the output {sizes:?} has more than {max} elements")))
}

fn float_input(ctx: &OpCtx, x: &Tensor) -> Result<()> {
    match x.dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => Ok(()),
        d => Err(ctx.err(format!("not implemented for dtype {d} (a float input)"))),
    }
}

fn im2col(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    float_input(ctx, &x)?;
    let u = Unfold::of_image(Window2d::parse(ctx)?, &x.sizes).map_err(|m| ctx.err(m))?;
    let sizes = u.columns_sizes();
    let n = checked(ctx, &sizes)?;
    fn gather<T: Float>(u: &Unfold, x: &Tensor, n: usize) -> crate::cpu::Data {
        let mut out = vec![T::ZERO; n];
        with_contiguous::<T, _>(x, |xv| u.for_each(|o, i| out[o] = xv[i]));
        T::wrap(out)
    }
    let data = if x.dtype == DType::F64 {
        gather::<f64>(&u, &x, n)
    } else {
        gather::<f32>(&u, &x, n)
    };
    finish(Tensor::from_data(data, &sizes), x.dtype)
}

fn col2im(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("self")?;
    float_input(ctx, &x)?;
    let output_size = ctx.ints("output_size")?;
    let u = Unfold::of_columns(Window2d::parse(ctx)?, &x.sizes, &output_size)
        .map_err(|m| ctx.err(m))?;
    let sizes = u.image_sizes();
    let n = checked(ctx, &sizes)?;
    // Overlapping windows add up in the order torch's CPU kernel adds them (channel, tap,
    // block row, block column), so f32 sums round the same way.
    fn scatter<T: Float>(u: &Unfold, x: &Tensor, n: usize) -> crate::cpu::Data {
        let mut out = vec![T::ZERO; n];
        with_contiguous::<T, _>(x, |xv| u.for_each(|c, i| out[i] = out[i] + xv[c]));
        T::wrap(out)
    }
    let data = if x.dtype == DType::F64 {
        scatter::<f64>(&u, &x, n)
    } else {
        scatter::<f32>(&u, &x, n)
    };
    finish(Tensor::from_data(data, &sizes), x.dtype)
}

fn finish(t: Tensor, dtype: DType) -> Result<Vec<RValue>> {
    let t = if t.dtype != dtype {
        t.to_dtype(dtype)?
    } else {
        t
    };
    Ok(vec![RValue::Tensor(t)])
}

fn im2col_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let u = Unfold::of_image(ctx.with_op(Window2d::parse)?, &x.sizes)?;
    one(crate::meta::MetaTensor::new(x.dtype, u.columns_sizes()))
}

fn col2im_rule(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let x = ctx.tensor("self")?;
    let output_size = ctx.ints("output_size")?;
    let u = Unfold::of_columns(ctx.with_op(Window2d::parse)?, &x.sizes, &output_size)?;
    one(crate::meta::MetaTensor::new(x.dtype, u.image_sizes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(k: usize, d: usize, p: usize, s: usize) -> Window2d {
        Window2d {
            kernel: [k, k],
            dilation: [d, d],
            padding: [p, p],
            stride: [s, s],
        }
    }

    #[test]
    fn sizes_follow_torch() {
        let u = Unfold::of_image(window(3, 1, 1, 2), &[2, 3, 7, 8]).unwrap();
        assert_eq!(u.columns_sizes(), vec![2, 27, 16]);
        let f = Unfold::of_columns(window(2, 1, 0, 2), &[12, 9], &[6, 6]).unwrap();
        assert_eq!(f.image_sizes(), vec![3, 6, 6]);
    }

    #[test]
    fn hostile_sizes_are_errors() {
        let max = i32::MAX as usize;
        // Huge padding: the columns would not fit in memory, let alone a usize.
        assert!(Unfold::of_image(window(1, 1, max, 1), &[1, 1 << 20, 4, 4]).is_err());
        // A kernel larger than the padded input.
        assert!(Unfold::of_image(window(max, max, 0, 1), &[1, 1, 4, 4]).is_err());
        // Huge images from output_size: the blocks do not match the columns.
        assert!(Unfold::of_columns(window(2, 1, 0, 2), &[4, 9], &[i64::MAX, 6]).is_err());
        assert!(Unfold::of_columns(window(2, 1, 0, 2), &[4, 9], &[0, 6]).is_err());
        // One block from a huge image with a huge stride: the image is refused.
        assert!(
            Unfold::of_columns(window(1, 1, 0, max), &[1 << 16, 1], &[1 << 30, 1 << 30]).is_err()
        );
    }
}
