//! Pairwise distances on the GPU (shaders/distance.wgsl): `cdist` / `_cdist_forward` and
//! `pdist` / `_pdist_forward` of f32 tensors, the direct p-norm sums (f32 accumulation).
//! Euclidean `cdist` in its matmul form (`compute_mode`, or P or R above 25 by default, see
//! src/ops/linalg/distance.rs) and broadcast batch dims decline to the CPU kernel.

use super::{contiguous, grid, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use bytemuck::{Pod, Zeroable};

pub const CDIST: Variant = Variant::new(Shader::Distance, "cdist");
pub const PDIST: Variant = Variant::new(Shader::Distance, "pdist");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
struct DistMeta {
    numel: u32,
    row: u32,
    kind: u32,
    m: u32,
    rows_a: u32,
    rows_b: u32,
    p: f32,
    _pad: u32,
}

/// The shader's norm kind for `p`, or None for a p it does not serve.
fn kind(p: f64) -> Option<u32> {
    Some(match p {
        0.0 => 0,
        1.0 => 1,
        2.0 => 2,
        p if p == f64::INFINITY => 3,
        p if p > 0.0 && p.is_finite() => 4,
        _ => return None,
    })
}

/// Whether one invocation's walk over `m` features (`dist`) stays within the loop cap of
/// CPU adapters; longer rows take the CPU kernel.
fn features_fit(k: &KernelCtx, m: usize) -> bool {
    super::loops_fit(k, m, 2)
}

fn cdist(k: &mut KernelCtx) -> Out {
    let (Some(a), Some(b)) = (k.t("x1"), k.t("x2")) else {
        return Ok(None);
    };
    let p = k.op.float_or("p", 2.0)?;
    let Some(kind) = kind(p) else {
        return Ok(None);
    };
    let (ra, rb) = (a.rank(), b.rank());
    if a.dtype != DType::F32
        || b.dtype != DType::F32
        || !k.out_is(DType::F32)
        || ra < 2
        || ra != rb
        || a.sizes[..ra - 2] != b.sizes[..rb - 2]
        || a.sizes[ra - 1] != b.sizes[rb - 1]
        || !k.fits(&a)
        || !k.fits(&b)
    {
        return Ok(None);
    }
    let (pr, rr, m) = (a.sizes[ra - 2], b.sizes[rb - 2], a.sizes[ra - 1]);
    let mode = k.op.opt_int("compute_mode")?.unwrap_or(0);
    if p == 2.0 && (mode == 1 || (mode == 0 && (pr > 25 || rr > 25))) || !features_fit(k, m) {
        return Ok(None);
    }
    let mut sizes = a.sizes[..ra - 2].to_vec();
    sizes.extend([pr, rr]);
    let numel: usize = sizes.iter().product();
    if numel >= u32::MAX as usize {
        return Ok(None);
    }
    let (Some(ac), Some(bc)) = (contiguous(k, &a)?, contiguous(k, &b)?) else {
        return Ok(None);
    };
    let out = k.new_out(DType::F32, &sizes)?;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let meta = DistMeta {
            numel: numel as u32,
            row,
            kind,
            m: m as u32,
            rows_a: pr as u32,
            rows_b: rr as u32,
            p: p as f32,
            _pad: 0,
        };
        k.dispatch(
            &CDIST,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &ac), (3, &bc)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

fn pdist(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let p = k.op.float_or("p", 2.0)?;
    let Some(kind) = kind(p) else {
        return Ok(None);
    };
    if x.dtype != DType::F32 || !k.out_is(DType::F32) || x.rank() != 2 || !k.fits(&x) {
        return Ok(None);
    }
    let (n, m) = (x.sizes[0], x.sizes[1]);
    let numel = n * n.saturating_sub(1) / 2;
    if numel >= u32::MAX as usize || !features_fit(k, m) {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let out = k.new_out(DType::F32, &[numel])?;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let meta = DistMeta {
            numel: numel as u32,
            row,
            kind,
            m: m as u32,
            rows_a: n as u32,
            rows_b: n as u32,
            p: p as f32,
            _pad: 0,
        };
        k.dispatch(
            &PDIST,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &xc), (3, &xc)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, On};
    t.kernel(
        &["aten.cdist", "aten._cdist_forward"],
        On::All,
        cdist,
        all_f32,
    );
    t.kernel(
        &["aten.pdist", "aten._pdist_forward"],
        On::All,
        pdist,
        all_f32,
    );
    t.variants(&[CDIST, PDIST]);
}
