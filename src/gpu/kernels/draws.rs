//! Kernels that draw into or pass through an existing tensor: `uniform_` / `normal_` /
//! `exponential_` (the CPU generator's stream, copied into `self`), `normal(Tensor, float)`,
//! and the eval-mode dropouts (their input). The seeded out-of-place draws are in
//! `src/gpu/random.rs`.

use super::*;

/// uniform_ / normal_: the out-of-place draw (the CPU generator's stream, row-major as the
/// CPU kernel fills), copied into `self`.
pub(super) fn rand_inplace(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let overlap = x
        .sizes
        .iter()
        .zip(&x.strides)
        .any(|(&n, &s)| n > 1 && s == 0);
    if x.dtype != DType::F32 || overlap || !k.fits(&x) {
        return Ok(None);
    }
    let res = if k.target().starts_with("aten.exponential_") {
        crate::gpu::random::exponential(k)?
    } else {
        crate::gpu::random::rand(k)?
    };
    let Some(res) = res else {
        return Ok(None);
    };
    let [Slot::Tensor(t)] = &res[..] else {
        return Ok(None);
    };
    index::copy_into(k, t, &x)?;
    lock(&x.cell).cpu_valid = false;
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// normal.Tensor_float(mean, std): mean + std * z, z from the randn stream in the mean's
/// row-major order (as the CPU kernel draws).
pub(super) fn normal_tensor_float(k: &mut KernelCtx) -> Out {
    let Some(mean) = k.t("mean") else {
        return Ok(None);
    };
    let std = k.op.float_or("std", 1.0)?;
    if mean.dtype != DType::F32 || !k.out_is(DType::F32) || std < 0.0 || !k.fits(&mean) {
        return Ok(None);
    }
    let Some(z) = crate::gpu::random::standard_normal(k, &mean.sizes)? else {
        return Ok(None);
    };
    one(elementwise(
        k,
        BinaryOp::Add.variant(),
        DType::F32,
        &mean,
        Some(&Operand::T(z)),
        None,
        std as f32,
        0.0,
    ))
}

/// dropout in eval mode (or p = 0): the input itself, as the CPU kernel returns it.
pub(super) fn dropout_eval(k: &mut KernelCtx) -> Out {
    let name = if k.op.arg("input").is_some() {
        "input"
    } else {
        "self"
    };
    let Some(x) = k.t(name) else {
        return Ok(None);
    };
    if k.op.bool_or("train", true)? && k.op.float("p")? != 0.0 {
        if k.target() == "aten.feature_dropout.default" {
            return crate::gpu::random::feature_dropout(k);
        }
        return Ok(None);
    }
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    // Eval-mode dropouts are their input (training `aten.dropout` is random::dropout).
    t.kernel(
        &[
            "aten.dropout_",
            "aten.feature_dropout",
            "aten.feature_dropout_",
            "aten.alpha_dropout",
            "aten.alpha_dropout_",
        ],
        On::All,
        dropout_eval,
        |_, _| true,
    );

    t.kernel(
        &["aten.uniform_", "aten.normal_", "aten.exponential_"],
        On::Only(&["default"]),
        rand_inplace,
        all_f32,
    );

    t.kernel(
        &["aten.normal"],
        On::Only(&["Tensor_float"]),
        normal_tensor_float,
        all_f32,
    );
}
