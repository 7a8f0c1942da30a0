//! `grid_sampler` / `grid_sampler_2d` (`F.grid_sample` on 4-D inputs): bilinear, nearest
//! and bicubic sampling with zeros, border or reflection padding, following the formulas of
//! torch's vectorized CPU kernel (GridSamplerKernel.cpp) in f32 (f64 for f64 inputs).
// `!(a > b)` is deliberate: it is true for NaN too.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use super::upsample::cubic_coefficients;
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::matmul::gemm::{par_chunks, Float};
use crate::ops::{OpCtx, OpTable};
use crate::runtime::RValue;

pub(super) fn register(r: &mut OpTable) {
    r.cpu_op("aten.grid_sampler", grid_sampler);
    r.cpu_op("aten.grid_sampler_2d", grid_sampler);
    r.cpu_op("aten.grid_sampler_3d", grid_sampler);
}

#[derive(Clone, Copy, PartialEq)]
enum Pad {
    Zeros,
    Border,
    Reflection,
}

/// Coordinate rules of one spatial dim.
struct Axis<T> {
    size: usize,
    align: bool,
    pad: Pad,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> Axis<T> {
    fn new(size: usize, align: bool, pad: Pad) -> Self {
        Axis {
            size,
            align,
            pad,
            _t: std::marker::PhantomData,
        }
    }
    /// [-1, 1] to pixel coordinates.
    fn unnormalize(&self, c: T) -> T {
        if self.align {
            (c + T::ONE) * (T::of((self.size as f64) - 1.0) / T::of(2.0))
        } else {
            (c + T::ONE) * (T::of(self.size as f64) / T::of(2.0)) - T::of(0.5)
        }
    }
    fn clip(&self, c: T) -> T {
        let max = T::of(self.size as f64 - 1.0);
        let c = if c > T::ZERO { c } else { T::ZERO };
        if max < c {
            max
        } else {
            c
        }
    }
    fn reflect(&self, c: T) -> T {
        let (low, twice_span) = if self.align {
            (T::ZERO, T::of(2.0 * (self.size as f64 - 1.0)))
        } else {
            (T::of(-0.5), T::of(2.0 * self.size as f64))
        };
        if !(twice_span > T::ZERO) {
            return T::ZERO;
        }
        let a = (c - low).abs();
        let flips = a / twice_span;
        // trunc of a non-negative value is its floor
        let extra = a - flips.floor() * twice_span;
        let other = twice_span - extra;
        (if other < extra { other } else { extra }) + low
    }
    /// Padding applied to a (possibly fractional) pixel coordinate.
    fn coordinates(&self, c: T) -> T {
        let c = match self.pad {
            Pad::Zeros => c,
            Pad::Border => self.clip(c),
            Pad::Reflection => self.clip(self.reflect(c)),
        };
        // torch's safe_downgrade_to_int_range: non-finite or huge coordinates become -100.
        let v = c.to_f64();
        if !v.is_finite() || v > (i32::MAX - 1) as f64 || v < i32::MIN as f64 {
            T::of(-100.0)
        } else {
            c
        }
    }
    fn source(&self, c: T) -> T {
        self.coordinates(self.unnormalize(c))
    }
    fn inside(&self, i: isize) -> bool {
        i >= 0 && (i as usize) < self.size
    }
}

fn grid_sampler(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let x = ctx.tensor("input")?;
    let grid = ctx.tensor("grid")?;
    if x.rank() == 5 {
        return grid_sampler_3d(ctx, &x, &grid);
    }
    if x.rank() != 4 || grid.rank() != 4 || grid.sizes[3] != 2 || grid.sizes[0] != x.sizes[0] {
        return Err(ctx.err(format!(
            "expected a 4-D input [N, C, H, W] and a grid [N, H_out, W_out, 2], got {:?} and {:?} (or 5-D ones)",
            x.sizes, grid.sizes
        )));
    }
    if x.dtype != grid.dtype {
        return Err(ctx.err(format!(
            "input ({}) and grid ({}) must have the same dtype",
            x.dtype, grid.dtype
        )));
    }
    let (mode, pad, align) = modes(ctx)?;
    let out = match x.dtype {
        DType::F64 => Tensor::from_vec(
            sample::<f64>(&x, &grid, mode, pad, align),
            &[x.sizes[0], x.sizes[1], grid.sizes[1], grid.sizes[2]],
        ),
        DType::F32 | DType::F16 | DType::BF16 => Tensor::from_vec(
            sample::<f32>(&x, &grid, mode, pad, align),
            &[x.sizes[0], x.sizes[1], grid.sizes[1], grid.sizes[2]],
        )
        .to_dtype(x.dtype)?,
        d => return Err(ctx.err(format!("grid sampling is not implemented for dtype {d}"))),
    };
    Ok(vec![RValue::Tensor(out)])
}

/// `(interpolation_mode, padding_mode, align_corners)`, checked.
fn modes(ctx: &OpCtx) -> Result<(i64, Pad, bool)> {
    let mode = ctx.int_or("interpolation_mode", 0)?;
    let pad = match ctx.int_or("padding_mode", 0)? {
        0 => Pad::Zeros,
        1 => Pad::Border,
        2 => Pad::Reflection,
        p => {
            return Err(ctx.err(format!(
                "padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got {p}"
            )))
        }
    };
    if !(0..=2).contains(&mode) {
        return Err(ctx.err(format!(
            "interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got {mode}"
        )));
    }
    Ok((mode, pad, ctx.bool_or("align_corners", false)?))
}

/// `grid_sampler_3d` (`F.grid_sample` on 5-D inputs): trilinear or nearest sampling of
/// `[N, C, D, H, W]` at a grid `[N, D', H', W', 3]` of (x, y, z) coordinates, as torch's CPU
/// kernel (GridSampler.cpp): corner weights in the element type, the eight corners added in
/// its order (tnw, tne, tsw, tse, bnw, bne, bsw, bse).
fn grid_sampler_3d(ctx: &OpCtx, x: &Tensor, grid: &Tensor) -> Result<Vec<RValue>> {
    if grid.rank() != 5 || grid.sizes[4] != 3 || grid.sizes[0] != x.sizes[0] {
        return Err(ctx.err(format!(
            "expected a 5-D input [N, C, D, H, W] and a grid [N, D_out, H_out, W_out, 3], got {:?} and {:?}",
            x.sizes, grid.sizes
        )));
    }
    if x.dtype != grid.dtype {
        return Err(ctx.err(format!(
            "input ({}) and grid ({}) must have the same dtype",
            x.dtype, grid.dtype
        )));
    }
    let (mode, pad, align) = modes(ctx)?;
    if mode == 2 {
        return Err(ctx.err("bicubic interpolation only supports 4-D input"));
    }
    let sizes = [
        x.sizes[0],
        x.sizes[1],
        grid.sizes[1],
        grid.sizes[2],
        grid.sizes[3],
    ];
    let out = match x.dtype {
        DType::F64 => Tensor::from_vec(sample3d::<f64>(x, grid, mode, pad, align), &sizes),
        DType::F32 | DType::F16 | DType::BF16 => {
            Tensor::from_vec(sample3d::<f32>(x, grid, mode, pad, align), &sizes)
                .to_dtype(x.dtype)?
        }
        d => return Err(ctx.err(format!("grid sampling is not implemented for dtype {d}"))),
    };
    Ok(vec![RValue::Tensor(out)])
}

fn sample3d<T: Float>(x: &Tensor, grid: &Tensor, mode: i64, pad: Pad, align: bool) -> Vec<T> {
    let (n, c, d, h, w) = (x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3], x.sizes[4]);
    let (od, oh, ow) = (grid.sizes[1], grid.sizes[2], grid.sizes[3]);
    let xv = x.to_vec::<T>();
    let gv = grid.to_vec::<T>();
    let (ax, ay, az) = (
        Axis::<T>::new(w, align, pad),
        Axis::<T>::new(h, align, pad),
        Axis::<T>::new(d, align, pad),
    );
    let op = od * oh * ow;
    let mut out = vec![T::ZERO; n * c * op];
    par_chunks(&mut out, op, op * 16, |plane, dst| {
        let b = plane / c;
        let xp = &xv[plane * d * h * w..(plane + 1) * d * h * w];
        let at = |zi: isize, yi: isize, xi: isize| -> Option<T> {
            (ax.inside(xi) && ay.inside(yi) && az.inside(zi))
                .then(|| xp[(zi as usize * h + yi as usize) * w + xi as usize])
        };
        for (p, o) in dst.iter_mut().enumerate() {
            let g = &gv[(b * op + p) * 3..(b * op + p) * 3 + 3];
            let (fx, fy, fz) = (ax.source(g[0]), ay.source(g[1]), az.source(g[2]));
            *o = if mode == 1 {
                at(
                    fz.round_even().to_isize(),
                    fy.round_even().to_isize(),
                    fx.round_even().to_isize(),
                )
                .unwrap_or(T::ZERO)
            } else {
                let (x0, y0, z0) = (fx.floor(), fy.floor(), fz.floor());
                let (x1, y1, z1) = (x0 + T::ONE, y0 + T::ONE, z0 + T::ONE);
                // Distances to the far faces (w: west x0, e: east x1; n: y0, s: y1;
                // t: z0, b: z1), multiplied in torch's order.
                let (dw, de) = (x1 - fx, fx - x0);
                let (dn, ds) = (y1 - fy, fy - y0);
                let (dt, db) = (z1 - fz, fz - z0);
                let (xi, yi, zi) = (x0.to_isize(), y0.to_isize(), z0.to_isize());
                let corners = [
                    (zi, yi, xi, dw * dn * dt),
                    (zi, yi, xi + 1, de * dn * dt),
                    (zi, yi + 1, xi, dw * ds * dt),
                    (zi, yi + 1, xi + 1, de * ds * dt),
                    (zi + 1, yi, xi, dw * dn * db),
                    (zi + 1, yi, xi + 1, de * dn * db),
                    (zi + 1, yi + 1, xi, dw * ds * db),
                    (zi + 1, yi + 1, xi + 1, de * ds * db),
                ];
                let mut acc = T::ZERO;
                for (z, y, xx, wgt) in corners {
                    if let Some(v) = at(z, y, xx) {
                        acc = acc + v * wgt;
                    }
                }
                acc
            };
        }
    });
    out
}

fn sample<T: Float>(x: &Tensor, grid: &Tensor, mode: i64, pad: Pad, align: bool) -> Vec<T> {
    let (n, c, h, w) = (x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3]);
    let (oh, ow) = (grid.sizes[1], grid.sizes[2]);
    let xv = x.to_vec::<T>();
    let gv = grid.to_vec::<T>();
    let ax = Axis::<T>::new(w, align, pad);
    let ay = Axis::<T>::new(h, align, pad);
    let op = oh * ow;
    let mut out = vec![T::ZERO; n * c * op];
    par_chunks(&mut out, op, op * 16, |plane, dst| {
        let b = plane / c;
        let xp = &xv[plane * h * w..(plane + 1) * h * w];
        let at = |yi: isize, xi: isize| -> T {
            if ax.inside(xi) && ay.inside(yi) {
                xp[yi as usize * w + xi as usize]
            } else {
                T::ZERO
            }
        };
        for (p, d) in dst.iter_mut().enumerate() {
            let gx = gv[(b * op + p) * 2];
            let gy = gv[(b * op + p) * 2 + 1];
            *d = match mode {
                0 => {
                    let (fx, fy) = (ax.source(gx), ay.source(gy));
                    let (x0, y0) = (fx.floor(), fy.floor());
                    let (we, wn) = (fx - x0, fy - y0);
                    let (ww, ws) = (T::ONE - we, T::ONE - wn);
                    let (xi, yi) = (x0.to_isize(), y0.to_isize());
                    at(yi, xi) * (ws * ww)
                        + at(yi, xi + 1) * (ws * we)
                        + at(yi + 1, xi) * (wn * ww)
                        + at(yi + 1, xi + 1) * (wn * we)
                }
                1 => at(
                    ay.source(gy).round_even().to_isize(),
                    ax.source(gx).round_even().to_isize(),
                ),
                _ => {
                    let (fx, fy) = (ax.unnormalize(gx), ay.unnormalize(gy));
                    let (x0, y0) = (fx.floor(), fy.floor());
                    let (cx, cy) = (cubic_coefficients(fx - x0), cubic_coefficients(fy - y0));
                    let bounded = |yi: T, xi: T| -> T {
                        let (yc, xc) = (ay.coordinates(yi), ax.coordinates(xi));
                        at(yc.to_isize(), xc.to_isize())
                    };
                    let mut acc = T::ZERO;
                    for (i, &wy) in cy.iter().enumerate() {
                        let yy = y0 + T::of(i as f64 - 1.0);
                        let mut row = T::ZERO;
                        for (j, &wx) in cx.iter().enumerate() {
                            row = row + wx * bounded(yy, x0 + T::of(j as f64 - 1.0));
                        }
                        acc = acc + wy * row;
                    }
                    acc
                }
            };
        }
    });
    out
}
