//! Matrix products: `mm`/`bmm`/`matmul`, `addmm`, `linear`; the scalar 4x4 and vec4
//! (matmul4.wgsl) forms.

use super::*;
use crate::backends::MatmulAlgorithm;
use crate::gpu::tune;

/// (batch, row, col) strides and offset of a rank-2 or rank-3 view (batch stride 0 for 2-D).
pub(super) fn mat_strides(t: &GTensor) -> [u32; 4] {
    let r = t.rank();
    let b = if r == 3 { t.strides[0] } else { 0 };
    [
        b as u32,
        t.strides[r - 2] as u32,
        t.strides[r - 1] as u32,
        t.offset as u32,
    ]
}

/// The checks and uploads every matrix-multiply dispatch shares: A, B and C within a binding,
/// a grid of `tile` x `tile` outputs per workgroup within the device's limits, and the
/// operands on the GPU. Returns the output sizes ([B, M, N], or [M, N] for a 2-D A).
#[allow(clippy::too_many_arguments)]
pub(super) fn matmul_operands(
    k: &mut KernelCtx,
    a: &GTensor,
    bm: &GTensor,
    c: Option<&GTensor>,
    batch: usize,
    m: usize,
    n: usize,
    tile: usize,
) -> Result<Option<Vec<usize>>> {
    let maxg =
        k.r.dev
            .properties
            .limits
            .max_compute_workgroups_per_dimension as usize;
    if !k.fits(a)
        || !k.fits(bm)
        || c.is_some_and(|c| !k.fits(c))
        || batch > maxg
        || m.div_ceil(tile) > maxg
        || n.div_ceil(tile) > maxg
    {
        return Ok(None);
    }
    k.ensure(a)?;
    k.ensure(bm)?;
    if let Some(c) = c {
        k.ensure(c)?;
    }
    Ok(Some(if a.rank() == 3 {
        vec![batch, m, n]
    } else {
        vec![m, n]
    }))
}

/// Most rows the `gemv` form takes (its invocations compute one row each).
const GEMV_ROWS: usize = 4;

/// out[b] = alpha * a[b] @ bm[b] (+ beta * c[b]); a is [B?, M, K], bm is [B?, K, N].
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_matmul(
    k: &mut KernelCtx,
    a: &GTensor,
    bm: &GTensor,
    c: Option<&GTensor>,
    batch: usize,
    m: usize,
    n: usize,
    kk: usize,
    alpha: f32,
    beta: f32,
) -> Result<Option<GTensor>> {
    if !super::loops_fit(k, kk, 1) {
        return matmul_in_parts(k, (a, bm, c), (batch, m, n, kk), (alpha, beta));
    }
    let Some(sizes) = matmul_operands(k, a, bm, c, batch, m, n, 32)? else {
        return Ok(None);
    };
    let Some(mut elems) = k.elems(a.dtype, a.dtype) else {
        return Ok(None);
    };
    if bm.dtype != a.dtype || c.is_some_and(|c| c.dtype != a.dtype) {
        return Ok(None);
    }
    if elems == Elems::F16 && crate::backends::allow_f16_reduced_precision() {
        elems = Elems::F16Acc;
    }
    let out = k.new_out(a.dtype, &sizes)?;
    if batch * m * n == 0 {
        return Ok(Some(out));
    }
    let meta = MatmulMeta {
        m: m as u32,
        n: n as u32,
        k: kk as u32,
        flags: c.is_some() as u32,
        a: mat_strides(a),
        b: mat_strides(bm),
        c: c.map(mat_strides).unwrap_or_default(),
        alpha,
        beta,
        _p: [0.0; 2],
    };
    // Every binding a form may use (the vec4 forms bind C always: A stands in for it).
    let bufs: [(u32, &GTensor); 4] = [(1, &out), (2, a), (3, bm), (4, c.unwrap_or(a))];
    let plain_bindings = if c.is_some() {
        vec![1, 2, 3, 4]
    } else {
        vec![1, 2, 3]
    };
    let tiled = tune::Candidate {
        variant: if c.is_some() {
            MATMUL_TILED_BIAS
        } else {
            MATMUL_TILED
        }
        .typed(elems),
        groups: (n.div_ceil(64) as u32, m.div_ceil(64) as u32, batch as u32),
        bindings: plain_bindings.clone(),
    };
    let dev = k.r.dev;
    let big_blocks = matmul4_big_blocks(&dev.properties);
    let gemv = match GemvForm::of(dev, kk) {
        GemvForm::Thread => tune::Candidate {
            variant: if c.is_some() { GEMV_BIAS } else { GEMV }.typed(elems),
            groups: (n.div_ceil(256) as u32, m as u32, batch as u32),
            bindings: plain_bindings.clone(),
        },
        // A workgroup per 4 outputs.
        GemvForm::Split => tune::Candidate {
            variant: if c.is_some() {
                GEMV_SPLIT_BIAS
            } else {
                GEMV_SPLIT
            }
            .typed(elems),
            groups: (n.div_ceil(4) as u32, m as u32, batch as u32),
            bindings: plain_bindings.clone(),
        },
    };
    let few_rows = m <= GEMV_ROWS && gemv.groups.0 <= 65535;
    let blocked = blocked_form(&meta, elems, plain_bindings, batch, m, n, kk, big_blocks);
    let chosen = match matmul_kernel() {
        MatmulAlgorithm::Tiled => tiled,
        MatmulAlgorithm::Blocked => blocked,
        MatmulAlgorithm::Auto => {
            // A few rows (a decode step): the blocks would compute rows past M again.
            let heuristic = if few_rows {
                &gemv
            } else if crate::gpu::is_software(&dev.properties) {
                &blocked
            } else {
                &tiled
            };
            let mut candidates = vec![tiled.clone(), blocked.clone()];
            if few_rows {
                candidates.push(gemv.clone());
            }
            let tuned = autotune(&dev.properties).then(|| {
                // Sizes by power-of-two bucket: a sequence that grows one token per run
                // meets a new bucket only at each doubling.
                let (batch, m, n, kk) = (
                    batch.next_power_of_two(),
                    m.next_power_of_two(),
                    n.next_power_of_two(),
                    kk.next_power_of_two(),
                );
                let key = format!(
                    "matmul {elems:?} b{batch} m{m} n{n} k{kk} a{:?} b{:?} bias{}",
                    [meta.a[1] == 1, meta.a[2] == 1],
                    [meta.b[1] == 1, meta.b[2] == 1],
                    c.is_some() as u8
                );
                let sizes = bufs
                    .iter()
                    .map(|(b, t)| (*b, k.bound_bytes(t)))
                    .collect::<Vec<_>>();
                dev.tuner
                    .choose(&key, &candidates, bytemuck::bytes_of(&meta), &sizes)
            });
            match tuned.flatten() {
                Some(i) => candidates[i].clone(),
                None => heuristic.clone(),
            }
        }
    };
    let bound: Vec<(u32, &GTensor)> = bufs
        .into_iter()
        .filter(|(b, _)| chosen.bindings.contains(b))
        .collect();
    k.dispatch_out(
        &chosen.variant,
        bytemuck::bytes_of(&meta),
        &bound,
        chosen.groups,
    )?;
    Ok(Some(out))
}

/// K per part of [`matmul_in_parts`]: within [`super::LOOP_BUDGET`] at one loop step per k
/// (the scalar, gemv and tiled forms), a multiple of 64 so the vec4 forms keep their
/// alignment in every part.
const K_PART: usize = 16_384;

/// `encode_matmul` (`dims`: batch, M, N, K; `scales`: alpha, beta) over K in parts of
/// [`K_PART`] for adapters that cap an invocation's loop steps (lavapipe ends every form's K
/// loop after 65,535 steps, silently: [1, 200,000] @ [200,000, 1] answered -5 for torch's
/// -1, op case matmul/mm_long_k). Part p adds `alpha · A[.., p] @ B[p, ..]` to the previous
/// part's result, read as the bias (`beta` 1); the first part takes the caller's bias, the
/// last one the pending epilogue. Each part's sum is rounded to the output dtype.
fn matmul_in_parts(
    k: &mut KernelCtx,
    (a, bm, c): (&GTensor, &GTensor, Option<&GTensor>),
    (batch, m, n, kk): (usize, usize, usize, usize),
    (alpha, beta): (f32, f32),
) -> Result<Option<GTensor>> {
    let mut epilogue = k.epilogue.take();
    let (ak, bk) = (a.rank() - 1, bm.rank() - 2);
    let mut acc: Option<GTensor> = None;
    for k0 in (0..kk).step_by(K_PART) {
        let len = K_PART.min(kk - k0);
        let part = |t: &GTensor, dim: usize| {
            let mut sizes = t.sizes.clone();
            sizes[dim] = len;
            t.view(sizes, t.strides.clone(), t.offset + k0 * t.strides[dim])
        };
        if k0 + len == kk {
            k.epilogue = epilogue.take();
        }
        let (bias, b) = match &acc {
            Some(prev) => (Some(prev), 1.0),
            None => (c, beta),
        };
        let (ap, bp) = (part(a, ak), part(bm, bk));
        let Some(out) = encode_matmul(k, &ap, &bp, bias, batch, m, n, len, alpha, b)? else {
            k.epilogue = k.epilogue.take().or(epilogue);
            return Ok(None);
        };
        acc = Some(out);
    }
    Ok(acc)
}

/// The barrier-free form for these operands: a vec4 form of matmul4.wgsl (f32, K contiguous
/// in A and in B (`*_kk`) or N contiguous in B (`*_kn`), every stride, offset, K (and N for
/// `*_kn`) a multiple of 4; an 8x8 or, with `big_blocks`, 16x16 block per invocation, see
/// `matmul4_block`), else the scalar 4x4 blocks of matmul.wgsl.
#[allow(clippy::too_many_arguments)]
fn blocked_form(
    meta: &MatmulMeta,
    elems: Elems,
    plain_bindings: Vec<u32>,
    batch: usize,
    m: usize,
    n: usize,
    kk: usize,
    big_blocks: bool,
) -> tune::Candidate {
    if elems == Elems::F32 && kk.is_multiple_of(4) && meta.a[2] == 1 && matmul4_enabled() {
        let (av, bv) = (meta.a, meta.b);
        let a4 = [av[0], av[1], av[3]].iter().all(|s| s % 4 == 0);
        let kk_form = bv[1] == 1 && [bv[0], bv[2], bv[3]].iter().all(|s| s % 4 == 0);
        let kn_form =
            bv[2] == 1 && n.is_multiple_of(4) && [bv[0], bv[1], bv[3]].iter().all(|s| s % 4 == 0);
        if a4 && (kk_form || kn_form) {
            let (block, variants) = matmul4_block(m, n, kk, big_blocks);
            return tune::Candidate {
                variant: variants[usize::from(!kk_form)],
                groups: (
                    n.div_ceil(8 * block) as u32,
                    m.div_ceil(8 * block) as u32,
                    batch as u32,
                ),
                bindings: vec![1, 2, 3, 4],
            };
        }
    }
    // 8x8 invocations of 4x4 outputs each (shaders/matmul.wgsl).
    let bias = plain_bindings.contains(&4);
    tune::Candidate {
        variant: if bias { MATMUL_BIAS } else { MATMUL }.typed(elems),
        groups: (n.div_ceil(32) as u32, m.div_ceil(32) as u32, batch as u32),
        bindings: plain_bindings,
    }
}

/// Whether kernel forms are timed on this adapter (`backends::set_autotune`;
/// `PT2WEB_AUTOTUNE=0|1` natively).
fn autotune(p: &crate::gpu::DeviceProperties) -> bool {
    use crate::backends::Autotune;
    #[cfg(not(target_arch = "wasm32"))]
    match std::env::var("PT2WEB_AUTOTUNE").as_deref() {
        Ok("1") => return true,
        Ok("0") => return false,
        _ => {}
    }
    match crate::backends::autotune() {
        Autotune::On => true,
        Autotune::Off => false,
        Autotune::Auto => !crate::gpu::is_software(p),
    }
}

/// The kernel asked for: `backends::set_matmul_algorithm`, or natively
/// `PT2WEB_MATMUL_KERNEL=tiled|blocked|auto`. With `Auto` the tuned choice for the shape,
/// else the heuristic one: the barrier-free `Blocked` forms on CPU adapters and SwiftShader
/// (which switch fibers at every workgroup barrier), `Tiled` on GPUs.
fn matmul_kernel() -> MatmulAlgorithm {
    #[cfg(not(target_arch = "wasm32"))]
    let chosen = std::env::var("PT2WEB_MATMUL_KERNEL")
        .ok()
        .and_then(|s| MatmulAlgorithm::parse(&s))
        .unwrap_or_else(crate::backends::matmul_algorithm);
    #[cfg(target_arch = "wasm32")]
    let chosen = crate::backends::matmul_algorithm();
    chosen
}

/// All f32, or all f16 (matmul operands; the output has their dtype).
pub(super) fn same_float(ts: &[&GTensor]) -> bool {
    ts.first()
        .is_some_and(|f| is_float(f.dtype) && ts.iter().all(|t| t.dtype == f.dtype))
}

/// mm, bmm, and matmul of 2-D/3-D operands with matching batch.
pub(super) fn matmul(k: &mut KernelCtx) -> Out {
    let other = if k.op.arg("mat2").is_some() {
        "mat2"
    } else {
        "other"
    };
    let (Some(a), Some(b)) = (k.t("self"), k.t(other)) else {
        return Ok(None);
    };
    if !same_float(&[&a, &b]) || !k.out_is(a.dtype) {
        return Ok(None);
    }
    match (a.rank(), b.rank()) {
        (2, 2) if a.sizes[1] == b.sizes[0] => one(encode_matmul(
            k, &a, &b, None, 1, a.sizes[0], b.sizes[1], a.sizes[1], 1.0, 0.0,
        )),
        (3, 3) if a.sizes[0] == b.sizes[0] && a.sizes[2] == b.sizes[1] => one(encode_matmul(
            k, &a, &b, None, a.sizes[0], a.sizes[1], b.sizes[2], a.sizes[2], 1.0, 0.0,
        )),
        // [B, M, K] @ [K, N]: the 2-D operand broadcast over the batch (batch stride 0).
        (3, 2) if a.sizes[2] == b.sizes[0] => {
            let bb = b.view(
                vec![a.sizes[0], b.sizes[0], b.sizes[1]],
                vec![0, b.strides[0], b.strides[1]],
                b.offset,
            );
            one(encode_matmul(
                k, &a, &bb, None, a.sizes[0], a.sizes[1], b.sizes[1], a.sizes[2], 1.0, 0.0,
            ))
        }
        _ => Ok(None),
    }
}

/// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * mat1 @ mat2.
pub(super) fn addmm(k: &mut KernelCtx) -> Out {
    let (Some(c), Some(a), Some(b)) = (k.t("self"), k.t("mat1"), k.t("mat2")) else {
        return Ok(None);
    };
    if !same_float(&[&a, &b, &c]) || !k.out_is(a.dtype) || a.rank() != 2 || b.rank() != 2 {
        return Ok(None);
    }
    let (m, kk, n) = (a.sizes[0], a.sizes[1], b.sizes[1]);
    if b.sizes[0] != kk {
        return Ok(None);
    }
    let Some(cb) = c.expand_to(&[m, n]) else {
        return Ok(None);
    };
    let beta = k.op.float_or("beta", 1.0)? as f32;
    let alpha = k.op.float_or("alpha", 1.0)? as f32;
    one(encode_matmul(
        k,
        &a,
        &b,
        Some(&cb),
        1,
        m,
        n,
        kk,
        alpha,
        beta,
    ))
}

/// linear(input [..., K], weight [N, K], bias [N]?) = input @ weight^T + bias.
pub(super) fn linear(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(w)) = (k.t("input"), k.t("weight")) else {
        return Ok(None);
    };
    let bias = k.t("bias");
    if !same_float(&[&x, &w]) || bias.as_ref().is_some_and(|b| b.dtype != x.dtype) {
        return Ok(None);
    }
    if !k.out_is(x.dtype) || x.rank() == 0 || w.rank() != 2 {
        return Ok(None);
    }
    let kk = x.sizes[x.rank() - 1];
    let n = w.sizes[0];
    if w.sizes[1] != kk
        || bias
            .as_ref()
            .is_some_and(|b| b.rank() != 1 || b.sizes[0] != n)
    {
        return Ok(None);
    }
    let lead: Vec<usize> = x.sizes[..x.rank() - 1].to_vec();
    let m: usize = lead.iter().product();
    // The result is a view of the [M, N] product: a fused epilogue indexes it by its shape.
    if let Some(ep) = k.epilogue.as_mut() {
        let mut shape = lead.clone();
        shape.push(n);
        ep.shape = Some(shape);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let a = xc.view(vec![m, kk], vec![kk, 1], xc.offset);
    let wt = w.view(vec![kk, n], vec![w.strides[1], w.strides[0]], w.offset);
    let c = bias.map(|b| b.view(vec![m, n], vec![0, b.strides[0]], b.offset));
    let Some(out) = encode_matmul(k, &a, &wt, c.as_ref(), 1, m, n, kk, 1.0, 1.0)? else {
        return Ok(None);
    };
    let mut sizes = lead;
    sizes.push(n);
    let st = contiguous_strides(&sizes);
    Ok(Some(vec![Slot::Tensor(out.view(sizes, st, 0))]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On, F16};
    t.kernel(&["aten.linear"], On::All, linear, all_f32)
        .f16(F16::Native);
}
