//! Resampling on the GPU (shaders/resample.wgsl), f32 and f16 (computed in f32, as the CPU
//! kernels do):
//!
//! - `upsample_nearest1d/2d/3d`, `_upsample_nearest_exact1d/2d/3d`, `upsample_linear1d`,
//!   `upsample_bilinear2d`, `upsample_trilinear3d`, `upsample_bicubic2d` (`.vec` and
//!   `.default`): the per-dim source taps come from the CPU kernel's own tap code
//!   (`crate::ops::pool::upsample::taps`), uploaded as a small table, so the picked pixels and
//!   weights are the CPU kernel's (torch's UpSample.h);
//! - `grid_sampler` / `grid_sampler_2d` on 4-D inputs;
//! - `pixel_shuffle` / `pixel_unshuffle` as a strided copy of a 6-D view of the input.

use super::{contiguous, elementwise, grid, KernelCtx, Out, UnaryOp};
use crate::cpu::Tensor;
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::contiguous_strides;
use crate::ops::pool::upsample::{taps, Mode, Resize};
use bytemuck::{Pod, Zeroable};

pub const UPSAMPLE: Variant = Variant::new(Shader::Resample, "upsample");
pub const GRID_SAMPLE: Variant = Variant::new(Shader::Resample, "grid_sample");
pub const GRID_SAMPLE_3D: Variant = Variant::new(Shader::Resample, "grid_sample3d");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct ResampleMeta {
    pub numel: u32,
    pub row: u32,
    pub mode: u32,
    pub c: u32,
    /// (d, h, w, d * h * w)
    pub ins: [u32; 4],
    pub outs: [u32; 4],
    pub nt: [u32; 4],
    pub off: [u32; 4],
}

fn vec4(v: [usize; 3]) -> [u32; 4] {
    [
        v[0] as u32,
        v[1] as u32,
        v[2] as u32,
        (v[0] * v[1] * v[2]) as u32,
    ]
}

/// The mode and spatial rank of an upsample target.
fn upsample_kind(target: &str) -> Option<(Mode, usize)> {
    let op = target.split('.').nth(1)?;
    let nd = ["1d", "2d", "3d"].iter().position(|s| op.ends_with(s))? + 1;
    let mode = if op.starts_with("_upsample_nearest_exact") {
        Mode::NearestExact
    } else if op.starts_with("upsample_nearest") {
        Mode::Nearest
    } else if op == "upsample_bicubic2d" {
        Mode::Cubic
    } else if matches!(
        op,
        "upsample_linear1d" | "upsample_bilinear2d" | "upsample_trilinear3d"
    ) {
        Mode::Linear
    } else {
        return None;
    };
    Some((mode, nd))
}

pub(super) fn upsample(k: &mut KernelCtx) -> Out {
    let Some((mode, nd)) = upsample_kind(k.target()) else {
        return Ok(None);
    };
    let name = if k.op.arg("input").is_some() {
        "input"
    } else {
        "self"
    };
    let Some(x) = k.t(name) else {
        return Ok(None);
    };
    // f32 / f16 (bf16 / f64 stay on the CPU); int nearest modes: a gather of words.
    let d = x.dtype;
    let nearest = matches!(mode, Mode::Nearest | Mode::NearestExact);
    let elems = k.elems(d, d);
    if elems.is_none() && !(nearest && super::ints::is_int(d)) {
        return Ok(None);
    }
    if !k.out_is(d) || !k.fits(&x) || x.rank() != nd + 2 {
        return Ok(None);
    }
    let r = x.rank();
    let mut ins = [1usize; 3];
    ins[3 - nd..].copy_from_slice(&x.sizes[r - nd..]);
    if ins.contains(&0) {
        return Ok(None);
    }
    // Sizes or scales torch rejects are the CPU kernel's error.
    let Ok(Resize {
        outs,
        scales,
        align_corners: align,
    }) = Resize::parse(&k.op, nd, ins)
    else {
        return Ok(None);
    };
    if outs.iter().any(|&o| o >= u32::MAX as usize) {
        return Ok(None);
    }
    let mut sizes = x.sizes[..r - nd].to_vec();
    sizes.extend_from_slice(&outs[3 - nd..]);
    let numel: usize = sizes.iter().product();
    if numel >= u32::MAX as usize {
        return Ok(None);
    }
    let Some(elems) = elems else {
        return nearest_int(k, &x, mode, ins, outs, scales, &sizes);
    };
    // The tap table: per dim and output index, 4 (index, weight) pairs. The dims an op does
    // not have take one tap (0, 1).
    let mut tab: Vec<f32> = Vec::new();
    let mut nt = [1usize; 3];
    let mut off = [0usize; 3];
    for d in 0..3 {
        off[d] = tab.len();
        if d < 3 - nd {
            tab.extend([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
            continue;
        }
        let t = taps::<f32>(mode, ins[d], outs[d], align, scales[d]);
        nt[d] = t.first().map_or(1, |v| v.len());
        if nt[d] > 4 || t.iter().any(|v| v.len() != nt[d]) {
            return Ok(None);
        }
        for v in &t {
            for j in 0..4 {
                let (i, w) = v.get(j).copied().unwrap_or((0, 0.0));
                // Indices travel as f32 (exact below 2^24).
                if i >= 1 << 24 {
                    return Ok(None);
                }
                tab.push(i as f32);
                tab.push(w);
            }
        }
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let out = k.new_out(d, &sizes)?;
    if numel == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let n_tab = tab.len();
    let t = k.r.wrap(&Tensor::from_vec(tab, &[n_tab]));
    k.ensure(&t)?;
    let (gx, gy, row) = grid(numel, 64);
    let meta = ResampleMeta {
        numel: numel as u32,
        row,
        ins: vec4(ins),
        outs: vec4(outs),
        nt: [nt[0] as u32, nt[1] as u32, nt[2] as u32, 0],
        off: [off[0] as u32, off[1] as u32, off[2] as u32, 0],
        ..Default::default()
    };
    k.dispatch(
        &UPSAMPLE.typed(elems),
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc), (3, &t)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// Nearest upsampling of an int tensor: one gather of each output pixel's source (its flat
/// offset within the contiguous input plane, from the CPU kernel's taps), words as they are.
fn nearest_int(
    k: &mut KernelCtx,
    x: &super::GTensor,
    mode: Mode,
    ins: [usize; 3],
    outs: [usize; 3],
    scales: [Option<f64>; 3],
    sizes: &[usize],
) -> Out {
    let src: Vec<Vec<usize>> = (0..3)
        .map(|d| {
            taps::<f32>(mode, ins[d], outs[d], false, scales[d])
                .iter()
                .map(|t| t.first().map_or(0, |&(i, _)| i))
                .collect()
        })
        .collect();
    if src.iter().zip(outs).any(|(v, o)| v.len() != o) || outs[0] * outs[1] * outs[2] > 1 << 24 {
        return Ok(None);
    }
    let mut idx: Vec<i64> = Vec::with_capacity(outs[0] * outs[1] * outs[2]);
    for &z in &src[0] {
        for &y in &src[1] {
            for &xx in &src[2] {
                idx.push(((z * ins[1] + y) * ins[2] + xx) as i64);
            }
        }
    }
    let Some(xc) = contiguous(k, x)? else {
        return Ok(None);
    };
    let it =
        k.r.wrap(&Tensor::from_vec(idx, &[outs[0], outs[1], outs[2]]));
    // Output dims: the leading ones walk planes of the input, the spatial ones the index.
    let r = sizes.len();
    let nd = r - 2;
    let plane: usize = ins.iter().product();
    let mut src_strides = vec![xc.sizes[1] * plane, plane];
    src_strides.resize(r, 0);
    let mut idx_strides = vec![0, 0];
    idx_strides.extend_from_slice(&contiguous_strides(&outs)[3 - nd..]);
    let ix = super::index::Indexing::INTERNAL;
    super::index::encode_gather(k, &xc, &it, sizes, &src_strides, &idx_strides, 1, plane, ix)
}

/// `grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)`: 4-D
/// (`grid_sampler_2d`: bilinear, nearest, bicubic) or 5-D (`grid_sampler_3d`: trilinear,
/// nearest), one thread per output element.
pub(super) fn grid_sampler(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(g)) = (k.t("input"), k.t("grid")) else {
        return Ok(None);
    };
    let d = x.dtype;
    let Some(elems) = k.elems(d, d) else {
        return Ok(None);
    };
    let r = x.rank();
    if g.dtype != d
        || !k.out_is(d)
        || !matches!(r, 4 | 5)
        || g.rank() != r
        || g.sizes[r - 1] != r - 2
        || g.sizes[0] != x.sizes[0]
        || !k.fits(&x)
        || !k.fits(&g)
    {
        return Ok(None);
    }
    let interp = k.op.int_or("interpolation_mode", 0)?;
    let pad = k.op.int_or("padding_mode", 0)?;
    // Bicubic is 2-D only (torch refuses it for 5-D; so does the CPU kernel).
    if !(0..=2 - (r == 5) as i64).contains(&interp) || !(0..=2).contains(&pad) {
        return Ok(None);
    }
    let align = k.op.bool_or("align_corners", false)?;
    let (n, c) = (x.sizes[0], x.sizes[1]);
    // (D, H, W) of the input and the output (D = 1 for 2-D).
    let dhw = |s: &[usize]| {
        let mut a = [1; 3];
        a[3 - s.len()..].copy_from_slice(s);
        a
    };
    let (ins, outs) = (dhw(&x.sizes[2..]), dhw(&g.sizes[1..r - 1]));
    let numel = n * c * outs.iter().product::<usize>();
    if numel >= u32::MAX as usize || (ins.iter().product::<usize>() == 0 && numel > 0) {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let Some(gc) = contiguous(k, &g)? else {
        return Ok(None);
    };
    let mut sizes = vec![n, c];
    sizes.extend_from_slice(&g.sizes[1..r - 1]);
    let out = k.new_out(d, &sizes)?;
    if numel == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let (gx, gy, row) = grid(numel, 64);
    let meta = ResampleMeta {
        numel: numel as u32,
        row,
        mode: interp as u32 | ((pad as u32) << 2) | ((align as u32) << 4),
        c: c as u32,
        ins: vec4(ins),
        outs: vec4(outs),
        ..Default::default()
    };
    let variant = if r == 5 {
        &GRID_SAMPLE_3D
    } else {
        &GRID_SAMPLE
    };
    k.dispatch(
        &variant.typed(elems),
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc), (4, &gc)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// `pixel_shuffle(self, upscale_factor)` / `pixel_unshuffle(self, downscale_factor)`: a
/// contiguous copy of a permuted 6-D view (f32 / f16).
pub(super) fn pixel_shuffle(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let unshuffle = k.target().starts_with("aten.pixel_unshuffle");
    let f = if unshuffle {
        k.op.int("downscale_factor")?
    } else {
        k.op.int("upscale_factor")?
    };
    let d = x.dtype;
    if !matches!(d, DType::F32 | DType::F16) || !k.out_is(d) || x.rank() < 3 || f < 1 {
        return Ok(None);
    }
    let f = f as usize;
    let r = x.rank();
    let lead = &x.sizes[..r - 3];
    let ls = &x.strides[..r - 3];
    let (c, h, w) = (x.sizes[r - 3], x.sizes[r - 2], x.sizes[r - 1]);
    let (sc, sh, sw) = (x.strides[r - 3], x.strides[r - 2], x.strides[r - 1]);
    // (sizes, strides) of the permuted view, and the output's trailing sizes.
    let (vs, vst, tail): (Vec<usize>, Vec<usize>, [usize; 3]) = if !unshuffle {
        if c % (f * f) != 0 {
            return Ok(None);
        }
        let oc = c / (f * f);
        // [oc, f, f, h, w] -> [oc, h, f, w, f]
        (
            vec![oc, h, f, w, f],
            vec![sc * f * f, sh, sc * f, sw, sc],
            [oc, h * f, w * f],
        )
    } else {
        if h % f != 0 || w % f != 0 {
            return Ok(None);
        }
        let (oh, ow) = (h / f, w / f);
        // [c, oh, f, ow, f] -> [c, f, f, oh, ow]
        (
            vec![c, f, f, oh, ow],
            vec![sc, sh, sw, sh * f, sw * f],
            [c * f * f, oh, ow],
        )
    };
    let mut sizes = lead.to_vec();
    sizes.extend(vs);
    let mut strides = ls.to_vec();
    strides.extend(vst);
    if sizes.len() > super::MAX_RANK {
        return Ok(None);
    }
    let v = x.view(sizes, strides, x.offset);
    let Some(out) = elementwise(k, UnaryOp::Copy.variant(), d, &v, None, None, 1.0, 0.0)? else {
        return Ok(None);
    };
    let mut os = lead.to_vec();
    os.extend(tail);
    let st = contiguous_strides(&os);
    Ok(Some(vec![Slot::Tensor(out.view(os, st, 0))]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, f32, int, On};
    // Nearest modes gather the words of any int dtype.
    t.kernel(
        &[
            "aten.upsample_nearest1d",
            "aten.upsample_nearest2d",
            "aten.upsample_nearest3d",
            "aten._upsample_nearest_exact1d",
            "aten._upsample_nearest_exact2d",
            "aten._upsample_nearest_exact3d",
        ],
        On::NotOut,
        upsample,
        |i, o| {
            let first = i.first().copied();
            first.is_some_and(|d| f32(d) || int(d)) && o.first() == first.as_ref()
        },
    );
    t.kernel(
        &[
            "aten.upsample_linear1d",
            "aten.upsample_bilinear2d",
            "aten.upsample_trilinear3d",
            "aten.upsample_bicubic2d",
        ],
        On::NotOut,
        upsample,
        all_f32,
    );
    let default = On::Only(&["default"]);
    t.kernel(
        &[
            "aten.grid_sampler",
            "aten.grid_sampler_2d",
            "aten.grid_sampler_3d",
        ],
        default,
        grid_sampler,
        all_f32,
    );
    t.kernel(
        &["aten.pixel_shuffle", "aten.pixel_unshuffle"],
        default,
        pixel_shuffle,
        all_f32,
    );
}
