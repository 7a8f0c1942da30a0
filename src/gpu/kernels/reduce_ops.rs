//! Reduction targets: softmax / log_softmax, sum/mean/amax/... over dims, the NaN-aware
//! reductions (built on the reduction plans of [`super::reduce`]).

use super::*;

pub(super) fn norm_dim(d: i64, rank: usize) -> Option<usize> {
    let r = rank.max(1) as i64;
    let d = if d < 0 { d + r } else { d };
    (0..r).contains(&d).then_some(d as usize)
}

/// softmax / log_softmax along `dim`.
pub(super) fn softmax(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // f32, f16, or f16 in and f32 out (`_softmax(half_to_float=True)`, softmax(dtype=)).
    let Some(od) = k.out_dtype(0) else {
        return Ok(None);
    };
    let Some(elems) = k.elems(x.dtype, od) else {
        return Ok(None);
    };
    // The op table's parameters (_safe_softmax: fully masked rows give zeros).
    let p = crate::ops::reduce::softmax::SoftmaxParams::parse(&k.op, x.rank(), x.dtype)?;
    let (log, safe, dim) = (p.log, p.safe, p.dim);
    // A 0-d tensor is one row of one element.
    let zero_d = x.rank() == 0;
    let x = if zero_d {
        x.view(vec![1], vec![1], x.offset)
    } else {
        x
    };
    // Move `dim` last (a view), make it contiguous, run rows, move it back with a copy.
    let r = x.rank();
    let mut perm: Vec<usize> = (0..r).filter(|&d| d != dim).collect();
    perm.push(dim);
    let pv = x.view(
        perm.iter().map(|&d| x.sizes[d]).collect(),
        perm.iter().map(|&d| x.strides[d]).collect(),
        x.offset,
    );
    let Some(xc) = contiguous(k, &pv)? else {
        return Ok(None);
    };
    let cols = x.sizes[dim];
    let rows = x.numel() / cols.max(1);
    if !rows_fit(k, cols) {
        return Ok(None);
    }
    let out = k.new_out(od, &pv.sizes)?;
    if rows * cols > 0 {
        let base = if safe {
            SAFE_SOFTMAX
        } else if log {
            LOG_SOFTMAX
        } else {
            SOFTMAX
        }
        .typed(elems);
        let (v, (gx, gy, row)) = softmax_dispatch(k.r.dev, base, rows, cols);
        let meta = RowMeta {
            rows: rows as u32,
            cols: cols as u32,
            row,
            ..Default::default()
        };
        k.dispatch(
            &v,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &xc)],
            (gx, gy, 1),
        )?;
    }
    if zero_d {
        return Ok(Some(vec![Slot::Tensor(out.view(vec![], vec![], 0))]));
    }
    if dim == r - 1 {
        return Ok(Some(vec![Slot::Tensor(out)]));
    }
    // out is laid out in `perm` order; view it in the original order and copy.
    let mut strides = vec![0; r];
    for (i, &d) in perm.iter().enumerate() {
        strides[d] = out.strides[i];
    }
    let back = out.view(x.sizes.clone(), strides, 0);
    one(elementwise(
        k,
        UnaryOp::Copy.variant(),
        od,
        &back,
        None,
        None,
        1.0,
        0.0,
    ))
}

/// sum / mean (dim list or all), amax / amin.
pub(super) fn reduce(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let op = k
        .target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .to_string();
    if matches!(op.as_str(), "aten.nansum" | "aten.nanmean") {
        return nan_reduce(k, x, &op);
    }
    let word = x.dtype == DType::Bool || ints::is_int(x.dtype);
    // mean of an int tensor with dtype=float32: the mean of its f32 conversion.
    if op == "aten.mean" && word && k.out_is(DType::F32) {
        let Some(xf) = to_f32(k, &x)? else {
            return Ok(None);
        };
        return reduce_with(k, xf, &op);
    }
    // any / all of an int tensor: of `x != 0` (a uint8 result for uint8, as torch).
    if matches!(op.as_str(), "aten.any" | "aten.all") && ints::is_int(x.dtype) {
        if !(k.out_is(DType::Bool) || (x.dtype == DType::U8 && k.out_is(DType::U8))) {
            return Ok(None);
        }
        let ne = ints::IntCompareOp::Ne.variant();
        let w0 = ints::WOperand::W(0);
        let Some(nz) = ints::encode(k, ne, DType::Bool, &x, Some(&w0), None, 0, 0)? else {
            return Ok(None);
        };
        return reduce_with(k, nz, &op);
    }
    // any / all of a float tensor: of `x != 0` (NaN counts as true).
    if matches!(op.as_str(), "aten.any" | "aten.all") && x.dtype == DType::F32 {
        if !k.out_is(DType::Bool) {
            return Ok(None);
        }
        let Some(nz) = elementwise(
            k,
            CompareOp::Ne.variant(),
            DType::Bool,
            &x,
            Some(&Operand::S(0.0)),
            None,
            1.0,
            0.0,
        )?
        else {
            return Ok(None);
        };
        return reduce_with(k, nz, &op);
    }
    reduce_with(k, x, &op)
}

/// nansum / nanmean of f32: the sum of `x` with NaNs as zeros (over the count of the
/// non-NaN elements for nanmean), as torch's decompositions.
pub(super) fn nan_reduce(k: &mut KernelCtx, x: GTensor, op: &str) -> Out {
    if x.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    let Some(nan) = elementwise(
        k,
        CompareOp::IsNan.variant(),
        DType::Bool,
        &x,
        Some(&Operand::S(0.0)),
        None,
        1.0,
        0.0,
    )?
    else {
        return Ok(None);
    };
    // where_ computes cond ? a : b; flags bit 1 negates the condition: !isnan ? x : 0.
    let Some(zeroed) = elementwise_p(
        k,
        WHERE,
        DType::F32,
        &x,
        Some(&Operand::S(0.0)),
        Some(&nan),
        [1.0, 0.0, 0.0],
        2,
    )?
    else {
        return Ok(None);
    };
    let Some(sum) = one_t(reduce_with(k, zeroed, "aten.sum")?) else {
        return Ok(None);
    };
    if op == "aten.nansum" {
        return Ok(Some(vec![Slot::Tensor(sum)]));
    }
    // The count of non-NaN elements: 1 - isnan as f32, summed.
    let Some(isnan_f) = to_f32(k, &nan)? else {
        return Ok(None);
    };
    let Some(keep) = elementwise(
        k,
        UnaryOp::Affine.variant(),
        DType::F32,
        &isnan_f,
        None,
        None,
        -1.0,
        1.0,
    )?
    else {
        return Ok(None);
    };
    let Some(count) = one_t(reduce_with(k, keep, "aten.sum")?) else {
        return Ok(None);
    };
    one(binary_f32(k, BinaryOp::Div, &sum, count))
}

/// The one tensor of a kernel's result.
pub(super) fn one_t(r: Option<Vec<Slot>>) -> Option<GTensor> {
    match r.as_deref() {
        Some([Slot::Tensor(t)]) => Some(t.clone()),
        _ => None,
    }
}

/// sum / mean / amax / amin / any / all (`op`) of `x` over the node's dims.
pub(super) fn reduce_with(k: &mut KernelCtx, x: GTensor, op: &str) -> Out {
    // int / bool inputs: an int output (sum), or the input's int dtype (amax, amin).
    let int_mode = !is_float(x.dtype);
    // amax / amin of bools are any / all.
    let logical = matches!(op, "aten.any" | "aten.all")
        || (x.dtype == DType::Bool && matches!(op, "aten.amax" | "aten.amin"));
    let out_dtype = if logical {
        // any / all of bools: max / min of the 0/1 words (as bool, or uint8 for uint8).
        match k.out_dtype(0) {
            Some(d @ (DType::Bool | DType::U8)) if x.dtype == DType::Bool => d,
            _ => return Ok(None),
        }
    } else if int_mode {
        match k.out_dtype(0) {
            Some(d) if ints::is_int(d) && (ints::is_int(x.dtype) || x.dtype == DType::Bool) => d,
            _ => return Ok(None),
        }
    } else {
        // f32, or f16 in (sum/mean/amax/amin of f16 give f16, or f32 with dtype=).
        match k.out_dtype(0) {
            Some(d) if k.elems(x.dtype, d).is_some() => d,
            _ => return Ok(None),
        }
    };
    if !k.out_is(out_dtype) || !k.fits(&x) {
        return Ok(None);
    }
    if let Some(d) = k.op.opt_dtype("dtype")? {
        if d != out_dtype {
            return Ok(None);
        }
    }
    let r = x.rank();
    let crate::ops::reduce::Reduction { mask: red, keepdim } =
        crate::ops::reduce::Reduction::parse(&k.op, r)?;
    let n_red: usize = (0..r).filter(|&d| red[d]).map(|d| x.sizes[d]).product();
    let (rop, scale) = match op {
        "aten.sum" => (ReduceOp::Sum, 1.0),
        "aten.mean" => (ReduceOp::Sum, 1.0 / n_red as f32),
        "aten.amax" => (ReduceOp::Max, 1.0),
        "aten.amin" => (ReduceOp::Min, 1.0),
        "aten.any" => (ReduceOp::Max, 1.0),
        "aten.all" => (ReduceOp::Min, 1.0),
        _ => return Ok(None),
    };
    if n_red == 0 && rop != ReduceOp::Sum && !(logical && matches!(op, "aten.any" | "aten.all")) {
        return Ok(None);
    }
    if int_mode
        && !logical
        && (op == "aten.mean" || (rop != ReduceOp::Sum && x.dtype == DType::Bool))
    {
        return Ok(None);
    }
    // any / all over no elements: false / true.
    if n_red == 0 && logical {
        let w = (op == "aten.all") as u32;
        let out_sizes = reduced_sizes(&x, &red, keepdim);
        return index::encode_fill(k, out_dtype, &out_sizes, 0, [w, 0]);
    }
    let out = encode_reduce(k, &x, &red, keepdim, rop, scale, out_dtype, int_mode)?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The sizes of `x` reduced over the dims `red` marks (kept as 1 with `keepdim`).
fn reduced_sizes(x: &GTensor, red: &[bool], keepdim: bool) -> Vec<usize> {
    (0..x.rank())
        .filter(|&d| keepdim || !red[d])
        .map(|d| if red[d] { 1 } else { x.sizes[d] })
        .collect()
}

/// `rop` of `x` over the dims `red` marks, times `scale`, into a new `out_dtype` tensor
/// (`int_mode`: the int reduction of int or bool words).
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_reduce(
    k: &mut KernelCtx,
    x: &GTensor,
    red: &[bool],
    keepdim: bool,
    rop: ReduceOp,
    scale: f32,
    out_dtype: DType,
    int_mode: bool,
) -> Result<GTensor> {
    let r = x.rank();
    let kept: Vec<usize> = (0..r).filter(|&d| !red[d]).collect();
    let rd: Vec<usize> = (0..r).filter(|&d| red[d]).collect();
    let n_red: usize = rd.iter().map(|&d| x.sizes[d]).product();
    let n_out: usize = kept.iter().map(|&d| x.sizes[d]).product();
    k.ensure(x)?;
    let out = k.new_out(out_dtype, &reduced_sizes(x, red, keepdim))?;
    if n_out == 0 {
        return Ok(out);
    }
    let sel = |ds: &[usize], v: &[usize]| -> Vec<usize> { ds.iter().map(|&d| v[d]).collect() };
    let meta = ReduceMeta {
        n_out: n_out as u32,
        n_red: n_red as u32,
        kept_rank: kept.len() as u32,
        red_rank: rd.len() as u32,
        kept_shape: pad8(&sel(&kept, &x.sizes)),
        kept_strides: pad8(&sel(&kept, &x.strides)),
        red_shape: pad8(&sel(&rd, &x.sizes)),
        red_strides: pad8(&sel(&rd, &x.strides)),
        offset: x.offset as u32,
        row: 0,
        scale,
        // reduce_i: a small int output wraps to its dtype (sum(dtype=torch.uint8)).
        p: f32::from_bits(crate::gpu::store::SmallInt::code(out_dtype)),
        ..Default::default()
    };
    let int = int_mode || k.elems(x.dtype, out_dtype).is_none();
    dispatch_reduce(k, meta, rop, x, &out, int)?;
    Ok(out)
}

/// Reduced elements one thread of `reduce` / `reduce_i` (and of `arg_reduce`, `scan`) takes
/// at most; longer rows are reduced in parts, then the parts (see reduce.wgsl). Mesa's
/// lavapipe ends an invocation's loops, silently, once they have run 65,535 iterations in
/// all (every loop counts, the index arithmetic's too: `sum` stopped after 21,845 elements);
/// long rows also want more threads than outputs on any GPU.
pub(super) const PART_LEN: usize = 4096;

/// The [`ReduceMeta`] of a pass over the `[n_out, chunks]` partial results of a pass in parts.
pub(super) fn over_parts(n_out: usize, chunks: usize) -> ReduceMeta {
    ReduceMeta {
        n_out: n_out as u32,
        n_red: chunks as u32,
        kept_rank: 1,
        red_rank: 1,
        kept_shape: pad8(&[n_out]),
        kept_strides: pad8(&[chunks]),
        red_shape: pad8(&[chunks]),
        red_strides: pad8(&[1]),
        ..Default::default()
    }
}

/// Dispatch `reduce` (`int`: `reduce_i`) of `meta` from `x` into `out`: one thread per
/// output, or for rows longer than [`PART_LEN`] one per part of a row, then one per output
/// over its parts (f32 or int32 partial results; `scale` and the small-int wrap applied
/// once, at the end).
pub(super) fn dispatch_reduce(
    k: &mut KernelCtx,
    meta: ReduceMeta,
    rop: ReduceOp,
    x: &GTensor,
    out: &GTensor,
    int: bool,
) -> Result<()> {
    let one = |k: &mut KernelCtx, mut meta: ReduceMeta, x: &GTensor, out: &GTensor| {
        let threads = meta.n_out as usize * meta.chunks.max(1) as usize;
        let (gx, gy, row) = grid(threads, 64);
        meta.row = row;
        let (v, bufs) = match k.elems(x.dtype, out.dtype) {
            Some(e) if !int => (rop.variant().typed(e), [(1, out), (2, x)]),
            _ => (rop.int_variant(), [(3, out), (4, x)]),
        };
        k.dispatch(&v, bytemuck::bytes_of(&meta), &bufs, (gx, gy, 1))
    };
    let (n_out, n_red) = (meta.n_out as usize, meta.n_red as usize);
    let part_dtype = if int { DType::I32 } else { DType::F32 };
    let typed = |k: &KernelCtx| {
        int || (k.elems(x.dtype, part_dtype).is_some() && k.elems(part_dtype, out.dtype).is_some())
    };
    if n_red <= PART_LEN || !typed(k) {
        return one(k, meta, x, out);
    }
    let chunks = n_red.div_ceil(PART_LEN);
    let parts = k.new_out(part_dtype, &[n_out, chunks])?;
    let first = ReduceMeta {
        chunks: chunks as u32,
        chunk_len: PART_LEN as u32,
        scale: 1.0,
        // reduce_i: the partial sums as they are (no small-int wrap yet).
        p: f32::from_bits(0),
        ..meta
    };
    one(k, first, x, &parts)?;
    let second = ReduceMeta {
        scale: meta.scale,
        p: meta.p,
        ..over_parts(n_out, chunks)
    };
    one(k, second, &parts, out)
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, all_f32, f32, f32_or_ints, int, int_like, On, F16};
    t.kernel(
        &[
            "aten._softmax",
            "aten.softmax",
            "aten._log_softmax",
            "aten.log_softmax",
        ],
        On::All,
        softmax,
        all_f32,
    )
    .f16(F16::Mixed);
    t.kernel(
        &["aten._safe_softmax"],
        On::Only(&["default"]),
        softmax,
        all_f32,
    );
    t.kernel(&["aten.sum"], On::All, reduce, f32_or_ints)
        .f16(F16::Mixed);
    // The mean of ints with an f32 `dtype`.
    t.kernel(
        &["aten.mean"],
        On::All,
        reduce,
        super::elementwise::to_float,
    )
    .f16(F16::Mixed);
    t.kernel(&["aten.amax", "aten.amin"], On::All, reduce, |i, o| {
        all_f32(i, o) || (all(i, int) && all(o, int)) || (i == [DType::Bool] && o == [DType::Bool])
    })
    .f16(F16::Native);
    // Of bools, of `x != 0` for f32 and ints; uint8 in, uint8 out (as torch).
    t.kernel(&["aten.any", "aten.all"], On::All, reduce, |i, o| {
        (all(i, |d| f32(d) || int_like(d)) && o == [DType::Bool])
            || (i == [DType::U8] && o == [DType::U8])
    });
    t.kernel(
        &["aten.nansum", "aten.nanmean"],
        On::Only(&["default"]),
        reduce,
        all_f32,
    );
}
