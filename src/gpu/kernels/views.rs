//! Copies and views: `clone`/`_to_copy`/`copy`, `contiguous`, and the metadata-only views
//! (a view of the input's GPU buffer, see the executor's module doc).

use super::*;

/// clone, _to_copy (f32 to f32), copy(self, src), lift_fresh_copy: a strided copy.
pub(super) fn copy(k: &mut KernelCtx) -> Out {
    // Between f16 and f32 (or f16 to f16): a converting strided copy.
    if let (Some(x), Some(od)) = (k.t("self"), k.out_dtype(0)) {
        let op = k.target().rsplit_once('.').map_or("", |(o, _)| o);
        if op != "aten.copy"
            && (x.dtype == DType::F16 || od == DType::F16)
            && is_float(x.dtype)
            && is_float(od)
        {
            return one(elementwise(
                k,
                UnaryOp::Copy.variant(),
                od,
                &x,
                None,
                None,
                1.0,
                0.0,
            ));
        }
    }
    if !k.out_is(DType::F32)
        || k.t("self").is_some_and(|x| x.dtype != DType::F32)
        || k.t("src").is_some_and(|x| x.dtype != DType::F32)
    {
        return ints::copy_any(k);
    }
    let op = k
        .target()
        .rsplit_once('.')
        .map_or("", |(o, _)| o)
        .to_string();
    let src = if op == "aten.copy" {
        let (Some(dst), Some(src)) = (k.t("self"), k.t("src")) else {
            return Ok(None);
        };
        if dst.dtype != DType::F32 {
            return Ok(None);
        }
        match src.expand_to(&dst.sizes) {
            Some(s) => s,
            None => return Ok(None),
        }
    } else {
        let Some(x) = k.t("self") else {
            return Ok(None);
        };
        if let Some(d) = k.op.opt_dtype("dtype")? {
            if d != x.dtype {
                return Ok(None);
            }
        }
        x
    };
    if src.dtype != DType::F32 || !k.out_is(DType::F32) {
        return Ok(None);
    }
    one(elementwise(
        k,
        UnaryOp::Copy.variant(),
        DType::F32,
        &src,
        None,
        None,
        1.0,
        0.0,
    ))
}

/// A contiguous copy of `x` (or `x` itself when it already is one starting at 0).
pub(crate) fn contiguous(k: &mut KernelCtx, x: &GTensor) -> Result<Option<GTensor>> {
    // f64 is never held on the GPU (WGSL has no f64): the CPU kernel serves the node.
    if x.dtype == DType::F64 {
        return Ok(None);
    }
    if x.is_contiguous() && x.offset == 0 {
        k.ensure(x)?;
        return Ok(Some(x.clone()));
    }
    if x.dtype == DType::Complex64 {
        let out = k.new_out(x.dtype, &x.sizes)?;
        super::index::encode_copy(k, x, &out)?;
        return Ok(Some(out));
    }
    elementwise(k, UnaryOp::Copy.variant(), x.dtype, x, None, None, 1.0, 0.0)
}

/// Metadata-only views through the CPU kernel on a placeholder (see the executor doc).
pub(super) fn view(k: &mut KernelCtx) -> Out {
    let Some(kernel) = table().kernel_for(k.op.node, k.op.graph) else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    k.op.node
        .inputs
        .iter()
        .for_each(|(_, a)| a.values(&mut ids));
    let mut env: Vec<Option<RValue>> = k.op.env.to_vec();
    let mut placeholders: Vec<(Arc<RwLock<Data>>, GTensor)> = Vec::new();
    for id in ids {
        let Some(t) = k.env_t.get(id).and_then(|t| t.clone()) else {
            continue;
        };
        let Some(data) = Data::zeros(t.dtype, t.span()) else {
            return Ok(None);
        };
        let data = Arc::new(RwLock::new(data));
        env[id] = Some(RValue::Tensor(Tensor {
            dtype: t.dtype,
            sizes: t.sizes.clone(),
            strides: t.strides.clone(),
            offset: t.offset,
            data: data.clone(),
        }));
        placeholders.push((data, t));
    }
    let outs = {
        let mut ctx = OpCtx {
            node: k.op.node,
            graph: k.op.graph,
            env: &env,
            state: &mut *k.op.state,
        };
        match kernel(&mut ctx) {
            Ok(o) => o,
            // The CPU kernel will report the same error with real data.
            Err(_) => return Ok(None),
        }
    };
    let map = |t: &Tensor| -> Option<GTensor> {
        placeholders
            .iter()
            .find(|(d, _)| Arc::ptr_eq(d, &t.data))
            .map(|(_, g)| {
                // A view between complex and real storage (view_as_real, real...) changes
                // the dtype; sizes, strides and offset are in the view's elements.
                let mut v = g.view(t.sizes.clone(), t.strides.clone(), t.offset);
                v.dtype = t.dtype;
                v
            })
    };
    // The CPU kernel copied (a reshape of a tensor whose strides cannot be merged): the
    // result is the input's elements in row-major order, so a contiguous GPU copy of the
    // input, viewed in the new shape, is it.
    let op = k.target().rsplit_once('.').map_or("", |(o, _)| o);
    let row_major_copy = matches!(
        op,
        "aten.reshape"
            | "aten.reshape_as"
            | "aten._unsafe_view"
            | "aten.flatten"
            | "aten.unflatten"
            | "aten.contiguous"
    ) && (placeholders.len() == 1 || op == "aten.reshape_as");
    let mut copied: Option<(Vec<usize>, GTensor)> = None;
    let mut slots = Vec::new();
    for o in outs {
        slots.push(match o {
            RValue::Tensor(t) => match map(&t) {
                Some(g) => Slot::Tensor(g),
                None if row_major_copy
                    && t.is_contiguous()
                    && t.numel() == placeholders[0].1.numel()
                    && copied.is_none() =>
                {
                    copied = Some((t.sizes.clone(), placeholders[0].1.clone()));
                    Slot::Value(RValue::None)
                }
                None => return Ok(None),
            },
            RValue::Tensors(ts) => {
                let mut v = Vec::new();
                for t in &ts {
                    match map(t) {
                        Some(g) => v.push(g),
                        None => return Ok(None),
                    }
                }
                Slot::Tensors(v)
            }
            other => Slot::Value(other),
        });
    }
    if let Some((sizes, x)) = copied {
        if slots.len() != 1 {
            return Ok(None);
        }
        let Some(xc) = contiguous(k, &x)? else {
            return Ok(None);
        };
        let st = contiguous_strides(&sizes);
        slots = vec![Slot::Tensor(xc.view(sizes, st, xc.offset))];
    }
    Ok(Some(slots))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{gpu_dtypes, On, F16};
    t.views(
        &[
            "aten.view",
            "aten._unsafe_view",
            "aten.reshape",
            "aten.permute",
            "aten.expand",
            "aten.slice",
            "aten.select",
            "aten.unsqueeze",
            "aten.squeeze",
            "aten.t",
            "aten.transpose",
            "aten.alias",
            "aten.detach",
            "aten.as_strided",
            "aten.unflatten",
            "aten.flatten",
            "aten.split",
            "aten.split_with_sizes",
            "aten.chunk",
            "aten.unbind",
            "aten.narrow",
            "aten.movedim",
            "aten.view_as",
            "aten.expand_as",
            "aten.contiguous",
            "aten.numpy_T",
            "aten.swapaxes",
            "aten.detach_",
            "aten.diagonal",
            "aten.broadcast_to",
            "aten.mT",
            "aten.reshape_as",
            "aten.unfold",
        ],
        On::All,
    );
    // Split points as ints (a tensor of them holds data a placeholder lacks: the CPU kernel
    // reads its values).
    t.views(&["aten.tensor_split"], On::Only(&["sections", "indices"]));
    // Metadata checks and symbolic-int arithmetic: the CPU kernel on placeholders, so they
    // neither flush the command buffer nor download anything.
    t.views(
        &[
            "aten._assert_tensor_metadata",
            "aten.sym_size",
            "aten.sym_stride",
            "aten.sym_numel",
            "aten.sym_storage_offset",
            "aten._assert_scalar",
            "aten.sym_constrain_range_for_size",
            "_operator",
            "math",
        ],
        On::All,
    );
    t.views(&["torch"], On::Prefix(&["sym_", "_sym_"]));
    t.kernel(
        &["aten.clone", "aten.lift_fresh_copy"],
        On::All,
        copy,
        gpu_dtypes,
    )
    .f16(F16::Native);
    t.kernel(&["aten._to_copy"], On::All, copy, gpu_dtypes)
        .f16(F16::Mixed);
    t.kernel(
        &["aten.detach_copy", "aten.alias_copy", "aten.copy"],
        On::All,
        copy,
        gpu_dtypes,
    );
}
