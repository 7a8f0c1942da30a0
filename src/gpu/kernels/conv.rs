//! Convolutions on the GPU (shaders/conv.wgsl): `convolution`, `_convolution` and
//! `conv1d/2d/3d`, f32 (and f16 storage computed in f32), any stride, padding (explicit,
//! 'valid', 'same' at stride 1), dilation and groups. A layer with one input channel per
//! group (depthwise) runs a direct kernel (`depthwise2d`, four output pixels of a row per
//! thread, for 2-D layers; `depthwise` otherwise), every other one the implicit GEMM or
//! `im2col` + matmul. Transposed convolutions (`transposed=True`,
//! `conv_transpose1d/2d/3d`) run a direct gather kernel (`conv_transpose`); `im2col`
//! (`F.unfold`) writes torch's column layout (`unfold`), `col2im` (`F.fold`) reads it back
//! (`fold`).

use super::{contiguous, grid, KernelCtx, Out};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::GTensor;
use crate::ops::conv::{Conv, ConvParams};
use bytemuck::{Pod, Zeroable};

/// Register-blocked convolution (no workgroup memory, no barriers).
pub const CONV: Variant = Variant::new(Shader::Conv, "conv");
/// Tiled convolution (tiles in workgroup memory, barriers).
pub const CONV_TILED: Variant = Variant::new(Shader::Conv, "conv_tiled");

/// Writes the implicit GEMM's columns (`ConvKernel::Gemm`).
pub const IM2COL: Variant = Variant::new(Shader::Conv, "im2col");
/// `aten.im2col` (`F.unfold`): the columns as torch lays them out, [N, C * taps, L].
pub const UNFOLD: Variant = Variant::new(Shader::Conv, "unfold");
/// `aten.col2im` (`F.fold`): the images back from such columns, overlaps summed.
pub const FOLD: Variant = Variant::new(Shader::Conv, "fold");

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{one_float, On};
    t.variants(&[
        CONV,
        CONV_TILED,
        IM2COL,
        UNFOLD,
        FOLD,
        DEPTHWISE,
        DEPTHWISE2D,
        CONV_TRANSPOSE,
    ]);
    t.kernel(
        &[
            "aten.convolution",
            "aten._convolution",
            "aten.conv1d",
            "aten.conv2d",
            "aten.conv3d",
        ],
        On::NotOut,
        conv,
        one_float,
    );
    t.kernel(
        &[
            "aten.conv_transpose1d",
            "aten.conv_transpose2d",
            "aten.conv_transpose3d",
        ],
        On::NotOut,
        conv_transpose,
        one_float,
    );
    t.kernel(&["aten.im2col"], On::Only(&["default"]), unfold, one_float);
    t.kernel(&["aten.col2im"], On::Only(&["default"]), fold, one_float);
}

/// `aten.im2col` and `aten.col2im`: one thread per output element, geometry from the op
/// table's [`Window2d`](crate::ops::conv::unfold::Window2d) (the CPU kernels').
pub(super) fn unfold(k: &mut KernelCtx) -> Out {
    sliding_windows(k, false)
}
pub(super) fn fold(k: &mut KernelCtx) -> Out {
    sliding_windows(k, true)
}

fn sliding_windows(k: &mut KernelCtx, fold: bool) -> Out {
    use crate::ops::conv::unfold::{Unfold, Window2d};
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let d = x.dtype;
    let Some(elems) = k.elems(d, d) else {
        return Ok(None);
    };
    let w = Window2d::parse(&k.op)?;
    let u = if fold {
        Unfold::of_columns(w, &x.sizes, &k.op.ints("output_size")?)
    } else {
        Unfold::of_image(w, &x.sizes)
    }
    .map_err(|m| k.op.err(m))?;
    let sizes = if fold {
        u.image_sizes()
    } else {
        u.columns_sizes()
    };
    let numel = crate::tensor::checked_numel(&sizes).unwrap_or(usize::MAX);
    if !k.out_is(d) || !k.fits(&x) || numel >= u32::MAX as usize {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let out = k.new_out(d, &sizes)?;
    if numel == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let (gx, gy, row) = grid(numel, 64);
    let meta = ConvMeta {
        n: u.n as u32,
        c: u.c as u32,
        ins: vec4([1, u.image[0], u.image[1]]),
        ks: vec4([1, w.kernel[0], w.kernel[1]]),
        outs: vec4([1, u.blocks[0], u.blocks[1]]),
        stride: vec4([1, w.stride[0], w.stride[1]]),
        pad: vec4([0, w.padding[0], w.padding[1]]),
        dil: vec4([1, w.dilation[0], w.dilation[1]]),
        kdim: (u.c * w.taps()) as u32,
        row,
        ..Default::default()
    };
    k.dispatch(
        &if fold { FOLD } else { UNFOLD }.typed(elems),
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The convolution kernels (groups > 1 other than depthwise always take `Blocked` or `Tiled`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ConvKernel {
    /// Tiles in workgroup memory with barriers (`conv_tiled`): GPUs, where workgroup memory
    /// is the usual win.
    Tiled,
    /// Register-blocked direct loads, no barriers (`conv`): also where `Gemm`'s conditions
    /// fail.
    Blocked,
    /// `im2col` then the vec4 matrix multiply of matmul4.wgsl (1x1 stride-1 convolutions read
    /// the input as the columns directly): software adapters, where SwiftShader (Chrome's
    /// software WebGPU) switches fibers at every workgroup barrier and gathers dominate.
    Gemm,
}

/// The kernel an adapter gets: `Gemm` (falling back to `Blocked` where its alignment
/// conditions fail) on CPU adapters and SwiftShader, `Tiled` on GPUs.
/// `backends::set_conv_algorithm` forces one; `PT2WEB_CONV_KERNEL=tiled|blocked|gemm`
/// overrides both natively.
fn conv_kernel(p: &crate::gpu::DeviceProperties) -> ConvKernel {
    use crate::backends::ConvAlgorithm;
    #[cfg(not(target_arch = "wasm32"))]
    let chosen = std::env::var("PT2WEB_CONV_KERNEL")
        .ok()
        .and_then(|s| ConvAlgorithm::parse(&s))
        .unwrap_or_else(crate::backends::conv_algorithm);
    #[cfg(target_arch = "wasm32")]
    let chosen = crate::backends::conv_algorithm();
    match chosen {
        ConvAlgorithm::Tiled => return ConvKernel::Tiled,
        ConvAlgorithm::Blocked => return ConvKernel::Blocked,
        ConvAlgorithm::Gemm => return ConvKernel::Gemm,
        ConvAlgorithm::Auto => {}
    }
    if crate::gpu::is_software(p) {
        ConvKernel::Gemm
    } else {
        ConvKernel::Tiled
    }
}

/// Columns past this many bytes take the direct kernel instead of `im2col` + GEMM.
const MAX_COL_BYTES: usize = 256 << 20;
pub const DEPTHWISE: Variant = Variant::new(Shader::Conv, "depthwise");
/// A depthwise convolution without depth: four output pixels of a row per thread.
pub const DEPTHWISE2D: Variant = Variant::new(Shader::Conv, "depthwise2d");
pub const CONV_TRANSPOSE: Variant = Variant::new(Shader::Conv, "conv_transpose");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct ConvMeta {
    pub n: u32,
    pub c: u32,
    pub o: u32,
    pub groups: u32,
    /// (d, h, w, d * h * w) of the input, kernel and output.
    pub ins: [u32; 4],
    pub ks: [u32; 4],
    pub outs: [u32; 4],
    pub stride: [u32; 4],
    pub pad: [u32; 4],
    pub dil: [u32; 4],
    pub cg: u32,
    pub og: u32,
    pub kdim: u32,
    pub flags: u32,
    pub row: u32,
    /// im2col: the column row length (kdim rounded up to a multiple of 4).
    pub kpad: u32,
    pub _p: [u32; 2],
}

fn vec4(v: [usize; 3]) -> [u32; 4] {
    [
        v[0] as u32,
        v[1] as u32,
        v[2] as u32,
        (v[0] * v[1] * v[2]) as u32,
    ]
}

/// A convolution node's tensors (input, weight and optional bias of one dtype: f32, or f16
/// storage computed in f32 where the device has shader-f16) and its geometry, checked by the
/// op table's [`ConvParams`] as the CPU kernel and the shape rule check it.
struct Operands {
    x: GTensor,
    w: GTensor,
    bias: Option<GTensor>,
    d: DType,
    elems: crate::gpu::shaders::Elems,
    conv: Conv,
}

/// The node's operands, None where no GPU kernel takes their dtypes; an error where torch
/// refuses the call (the CPU kernel's error).
fn operands(k: &KernelCtx) -> Result<Option<Operands>> {
    let (Some(x), Some(w)) = (k.t("input"), k.t("weight")) else {
        return Ok(None);
    };
    let bias = k.t("bias");
    if k.is_tensor_arg("bias") && bias.is_none() {
        return Ok(None);
    }
    let d = x.dtype;
    let Some(elems) = k.elems(d, d) else {
        return Ok(None);
    };
    if w.dtype != d || bias.as_ref().is_some_and(|b| b.dtype != d) || !k.out_is(d) {
        return Ok(None);
    }
    let conv = ConvParams::parse(&k.op)?
        .geometry(&x.sizes, &w.sizes, bias.as_ref().map(|b| b.numel()))
        .map_err(|m| k.op.err(m))?;
    Ok(Some(Operands {
        x,
        w,
        bias,
        d,
        elems,
        conv,
    }))
}

/// The shader's view of a convolution's geometry (sizes, stride, padding before, dilation,
/// channels per group).
fn geometry_meta(g: &crate::ops::conv::Geometry) -> ConvMeta {
    ConvMeta {
        n: g.n as u32,
        c: g.c as u32,
        o: g.o as u32,
        groups: g.groups as u32,
        ins: vec4(g.ins),
        ks: vec4(g.ks),
        outs: vec4(g.outs),
        stride: vec4(g.stride),
        pad: vec4(g.pad_lo),
        dil: vec4(g.dil),
        cg: (g.c / g.groups) as u32,
        og: (g.o / g.groups) as u32,
        ..Default::default()
    }
}

/// The operands made contiguous on the GPU (None: a copy the GPU cannot make).
fn contiguous_operands(
    k: &mut KernelCtx,
    o: &Operands,
) -> Result<Option<(GTensor, GTensor, Option<GTensor>)>> {
    let (Some(xc), Some(wc)) = (contiguous(k, &o.x)?, contiguous(k, &o.w)?) else {
        return Ok(None);
    };
    let bc = match &o.bias {
        Some(b) => match contiguous(k, b)? {
            Some(t) => Some(t),
            None => return Ok(None),
        },
        None => None,
    };
    Ok(Some((xc, wc, bc)))
}

pub(super) fn conv(k: &mut KernelCtx) -> Out {
    let Some(ops) = operands(k)? else {
        return Ok(None);
    };
    if ops.conv.transposed {
        return conv_transpose_of(k, ops);
    }
    let Operands {
        ref x,
        ref w,
        d,
        elems,
        conv: Conv { ref geo, .. },
        ..
    } = ops;
    // Asymmetric 'same' padding: the kernel pads `pad_lo` before and clips at the input end,
    // so the extra element at the end is implicit in the output size.
    let (n, c, o, groups) = (geo.n, geo.c, geo.o, geo.groups);
    let (cg, og) = (c / groups, o / groups);
    let taps: usize = geo.ks.iter().product();
    let plane_out: usize = geo.outs.iter().product();
    let maxg =
        k.r.dev
            .properties
            .limits
            .max_compute_workgroups_per_dimension as usize;
    let depthwise = cg == 1;
    if !k.fits(x)
        || !k.fits(w)
        || n * o * plane_out >= u32::MAX as usize
        || (!depthwise
            && (plane_out.div_ceil(32) > maxg || og.div_ceil(32) > maxg || n * groups > maxg))
    {
        return Ok(None);
    }
    let Some((xc, wc, bc)) = contiguous_operands(k, &ops)? else {
        return Ok(None);
    };
    let sizes = ops.conv.out_sizes();
    // A fused epilogue indexes the convolution's result by its shape ([N, O, spatial...]),
    // which the GEMM form's [N, O, pixels] output holds in the same order.
    if let Some(ep) = k.epilogue.as_mut() {
        ep.shape = Some(sizes.clone());
    }
    let mut meta = ConvMeta {
        kdim: (cg * taps) as u32,
        flags: bc.is_some() as u32,
        ..geometry_meta(geo)
    };
    let kernel = conv_kernel(&k.r.dev.properties);
    // `im2col`'s invocations walk one channel's window; the GEMM splits a long K itself.
    if kernel == ConvKernel::Gemm
        && d == DType::F32
        && !depthwise
        && groups == 1
        && n * o * plane_out > 0
        && super::loops_fit(k, taps, 2)
    {
        if let Some(res) = conv_gemm(k, &meta, &xc, &wc, bc.as_ref())? {
            let st = crate::gpu::store::contiguous_strides(&sizes);
            return Ok(Some(vec![Slot::Tensor(res.view(sizes, st, 0))]));
        }
    }
    // The direct kernels' invocations each reduce a whole channel x window (`taps` for
    // depthwise ones); the tiled one takes ~26 loop steps per term (its staging loops and 4x4
    // register block per k). Past the loop cap of CPU adapters the CPU kernel runs (a
    // 70,000-tap window gave wrong sums on lavapipe: op case conv/conv_long_windows).
    let (terms, steps) = match (depthwise, kernel) {
        (true, _) => (taps, 2),
        (false, ConvKernel::Tiled) => (cg * taps, 26),
        (false, _) => (cg * taps, 2),
    };
    if !super::loops_fit(k, terms, steps) {
        return Ok(None);
    }
    let out = k.new_out(d, &sizes)?;
    if n * o * plane_out == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let bref = bc.as_ref().unwrap_or(&wc);
    let bufs = [(1, &out), (2, &xc), (3, &wc), (4, bref)];
    if depthwise {
        // 2-D layers: four output pixels of a row per invocation; otherwise one per pixel.
        let (variant, threads) = if geo.ks[0] == 1 && geo.ins[0] == 1 && geo.outs[0] == 1 {
            (DEPTHWISE2D, n * o * geo.outs[1] * geo.outs[2].div_ceil(4))
        } else {
            (DEPTHWISE, n * o * plane_out)
        };
        let (gx, gy, row) = grid(threads, 64);
        meta.row = row;
        k.dispatch_out(
            &variant.typed(elems),
            bytemuck::bytes_of(&meta),
            &bufs,
            (gx, gy, 1),
        )?;
    } else {
        if kernel == ConvKernel::Tiled {
            // 64 x 64 tiles of 16x16 threads.
            let groups3 = (
                plane_out.div_ceil(64) as u32,
                og.div_ceil(64) as u32,
                (n * groups) as u32,
            );
            k.dispatch_out(
                &CONV_TILED.typed(elems),
                bytemuck::bytes_of(&meta),
                &bufs,
                groups3,
            )?;
        } else {
            // 8x8 invocations of 4 channels x 4 pixels each.
            let groups3 = (
                plane_out.div_ceil(32) as u32,
                og.div_ceil(32) as u32,
                (n * groups) as u32,
            );
            k.dispatch_out(
                &CONV.typed(elems),
                bytemuck::bytes_of(&meta),
                &bufs,
                groups3,
            )?;
        }
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// `ConvKernel::Gemm` (groups = 1): out[img] = W [O, K] x cols[img] (+ bias per row) with
/// the vec4 matrix multiply. The columns are the input itself, [K, P], for a 1x1
/// convolution with stride 1 and no padding (`mm_kn` where K and P are multiples of 4,
/// else the scalar form: one dispatch either way), else
/// `im2col`'s pixel-major [P, K4] copy (`mm_kk`, any P), K4 = K rounded up to a multiple
/// of 4 with zero columns, the weights zero-padded to [O, K4] to match (a first layer's
/// 3 x 7 x 7 = 147 taps). None where the columns are too large.
fn conv_gemm(
    k: &mut KernelCtx,
    meta: &ConvMeta,
    x: &GTensor,
    w: &GTensor,
    bias: Option<&GTensor>,
) -> Result<Option<GTensor>> {
    let (n, o, kdim, plane) = (
        meta.n as usize,
        meta.o as usize,
        meta.kdim as usize,
        meta.outs[3] as usize,
    );
    let kpad = kdim.next_multiple_of(4);
    let col_bytes = n * kpad * plane * 4;
    if col_bytes > MAX_COL_BYTES
        || col_bytes > k.r.dev.properties.limits.max_storage_buffer_binding_size as usize
    {
        return Ok(None);
    }
    let pointwise = meta.ks[3] == 1
        && meta.stride[..3] == [1, 1, 1]
        && meta.pad[..3] == [0, 0, 0]
        && meta.ins == meta.outs;
    let (cols, kk) = if pointwise {
        // The input is the columns; the matrix multiply picks its vec4 form where the
        // sizes and offset align (an SE block's 1x1 plane, a 7x7 plane take the scalar one).
        (
            x.view(vec![n, kdim, plane], vec![kdim * plane, plane, 1], x.offset),
            kdim,
        )
    } else {
        let col = k.new_out(DType::F32, &[n, plane, kpad])?;
        let ws = &mut k.r.stats.workspace_bytes;
        *ws = (*ws).max(col_bytes as u64);
        // One invocation per (image, pixel, input channel).
        let (gx, gy, row) = grid(n * plane * meta.c as usize, 64);
        let m = ConvMeta {
            row,
            kpad: kpad as u32,
            ..*meta
        };
        k.dispatch(
            &IM2COL,
            bytemuck::bytes_of(&m),
            &[(1, &col), (2, x)],
            (gx, gy, 1),
        )?;
        // [K4, P] as a view of the pixel-major copy.
        (
            col.view(vec![n, kpad, plane], vec![kpad * plane, 1, kpad], 0),
            kpad,
        )
    };
    // The weights as [O, K4]: zero columns past K (a small copy per run).
    let w = if kk == kdim {
        w.clone()
    } else {
        let wk = w.view(vec![o, kdim], vec![kdim, 1], w.offset);
        match super::shape::zero_pad_last(k, &wk, kpad - kdim)? {
            Some(t) => t,
            None => return Ok(None),
        }
    };
    let wv = w.view(vec![n, o, kk], vec![0, kk, 1], w.offset);
    let bv = bias.map(|b| b.view(vec![n, o, plane], vec![0, 1, 0], b.offset));
    super::encode_matmul(k, &wv, &cols, bv.as_ref(), n, o, plane, kk, 1.0, 1.0)
}

/// Transposed convolution: `convolution(transposed=True)` and `conv_transpose1d/2d/3d`
/// (f32, explicit padding, output_padding, groups, dilation, unbatched inputs).
pub(super) fn conv_transpose(k: &mut KernelCtx) -> Out {
    match operands(k)? {
        Some(ops) => conv_transpose_of(k, ops),
        None => Ok(None),
    }
}

fn conv_transpose_of(k: &mut KernelCtx, ops: Operands) -> Out {
    let Operands {
        ref x,
        ref w,
        d,
        elems,
        conv: Conv { ref geo, .. },
        ..
    } = ops;
    if geo.ins.contains(&0) {
        return Ok(None);
    }
    let (n, o) = (geo.n, geo.o);
    let plane_out: usize = geo.outs.iter().product();
    let numel = n * o * plane_out;
    // An invocation walks every tap and, at each tap that reaches an input, the group's
    // channels: past the loop cap of CPU adapters the CPU kernel runs.
    let taps: usize = geo.ks.iter().product();
    if !super::loops_fit(k, taps, geo.c / geo.groups.max(1) + 1) {
        return Ok(None);
    }
    if !k.fits(x) || !k.fits(w) || numel >= u32::MAX as usize {
        return Ok(None);
    }
    let Some((xc, wc, bc)) = contiguous_operands(k, &ops)? else {
        return Ok(None);
    };
    let out = k.new_out(d, &ops.conv.out_sizes())?;
    if numel == 0 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    let (gx, gy, row) = grid(numel, 64);
    let meta = ConvMeta {
        flags: bc.is_some() as u32,
        row,
        ..geometry_meta(geo)
    };
    let bref = bc.as_ref().unwrap_or(&wc);
    k.dispatch(
        &CONV_TRANSPOSE.typed(elems),
        bytemuck::bytes_of(&meta),
        &[(1, &out), (2, &xc), (3, &wc), (4, bref)],
        (gx, gy, 1),
    )?;
    Ok(Some(vec![Slot::Tensor(out)]))
}
