//! Pooling on the GPU (shaders/pool.wgsl): max (with or without indices), average and
//! adaptive average and max pooling in 1-D, 2-D and 3-D, f32; max pooling of every int dtype
//! and average pooling of int64 (the `INT` forms: torch's integer kernels, which exist for
//! those dtypes; the others decline to the CPU kernel). The window comes from the op table's
//! `PoolParams` (src/ops/pool/window.rs), as the CPU kernels and the shape rules take it, so
//! a call torch refuses gets their error.

use super::{contiguous, grid, KernelCtx, Out};
use crate::dtype::DType;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::ops::pool::{adaptive_sizes, Planes, PoolParams};
use bytemuck::{Pod, Zeroable};

pub const MAX_POOL: Variant = Variant::new(Shader::Pool, "max_pool");
pub const MAX_POOL_INDICES: Variant = Variant::new(Shader::Pool, "max_pool_indices");
pub const AVG_POOL: Variant = Variant::new(Shader::Pool, "avg_pool");
pub const ADAPTIVE_AVG: Variant = Variant::new(Shader::Pool, "adaptive_avg");
pub const ADAPTIVE_MAX: Variant = Variant::new(Shader::Pool, "adaptive_max");
/// Max pooling (without and with indices) and average pooling of int words.
pub const INT_POOLS: [Variant; 3] = [
    Variant::with(Shader::Pool, "max_pool", "INT", 1),
    Variant::with(Shader::Pool, "max_pool_indices", "INT", 1),
    Variant::with(Shader::Pool, "avg_pool", "INT", 1),
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct PoolMeta {
    pub numel: u32,
    pub row: u32,
    pub flags: u32,
    pub divisor: i32,
    /// (d, h, w, d * h * w)
    pub ins: [u32; 4],
    pub outs: [u32; 4],
    pub k: [u32; 4],
    pub s: [u32; 4],
    pub p: [u32; 4],
    pub d: [u32; 4],
}

fn vec4(v: [usize; 3]) -> [u32; 4] {
    [
        v[0] as u32,
        v[1] as u32,
        v[2] as u32,
        (v[0] * v[1] * v[2]) as u32,
    ]
}

pub(super) fn pool(k: &mut KernelCtx) -> Out {
    let target = k.target().to_string();
    let op = target.split('.').nth(1).unwrap_or("").to_string();
    let Some(nd) = crate::ops::pool::window::nd_of(&op) else {
        return Ok(None);
    };
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    // Int tensors: max pooling (torch has no int max_pool1d without indices) and int64
    // average pooling, as torch's CPU kernels.
    let int = super::ints::is_int(x.dtype);
    let int_ok = (op.starts_with("max_pool") && op != "max_pool1d")
        || (op.starts_with("avg_pool") && x.dtype == DType::I64);
    if !(x.dtype == DType::F32 || (int && int_ok)) || !k.out_is(x.dtype) || !k.fits(&x) {
        return Ok(None);
    }
    let pl = Planes::of(&x.sizes, nd, false).map_err(|m| k.op.err(m))?;
    let mut meta = PoolMeta {
        ins: vec4(pl.ins),
        ..Default::default()
    };
    let (variant, outs, indices) = if op.contains("adaptive_avg") || op.contains("adaptive_max") {
        let outs = adaptive_sizes(&k.op.ints("output_size")?, &pl).map_err(|m| k.op.err(m))?;
        if op.contains("adaptive_max") {
            if outs.contains(&0) || k.out_dtype(1) != Some(DType::I64) {
                return Ok(None);
            }
            (ADAPTIVE_MAX, outs, true)
        } else {
            (ADAPTIVE_AVG, outs, false)
        }
    } else if op.starts_with("max_pool") || op.starts_with("avg_pool") {
        let p = PoolParams::parse(&k.op)?;
        let w = p.window(&pl).map_err(|m| k.op.err(m))?;
        meta.k = vec4(w.k);
        meta.s = vec4(w.s);
        meta.p = vec4(w.p);
        meta.d = vec4(w.d);
        if p.max {
            if p.with_indices && k.out_dtype(1) != Some(DType::I64) {
                return Ok(None);
            }
            let v = if p.with_indices {
                MAX_POOL_INDICES
            } else {
                MAX_POOL
            };
            (v, w.outs, p.with_indices)
        } else {
            match p.divisor_override {
                Some(v) if v > i32::MAX as i64 || v < i32::MIN as i64 => return Ok(None),
                Some(v) => {
                    meta.flags |= 2;
                    meta.divisor = v as i32;
                }
                None => {}
            }
            meta.flags |= p.count_include_pad as u32;
            (AVG_POOL, w.outs, false)
        }
    } else {
        return Ok(None);
    };
    let ins = pl.ins;
    let sizes = pl.out_sizes(&outs);
    let numel: usize = sizes.iter().product();
    if numel >= u32::MAX as usize || (ins.contains(&0) && numel > 0) {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let out = k.new_out(x.dtype, &sizes)?;
    let idx = if indices {
        Some(k.new_out(DType::I64, &sizes)?)
    } else {
        None
    };
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        meta.numel = numel as u32;
        meta.row = row;
        meta.outs = vec4(outs);
        let mut bufs = vec![(1, &out), (2, &xc)];
        if let Some(i) = &idx {
            bufs.push((3, i));
        }
        let variant = match variant {
            v if int => Variant::with(v.shader, v.entry, "INT", 1),
            v => v,
        };
        k.dispatch(&variant, bytemuck::bytes_of(&meta), &bufs, (gx, gy, 1))?;
    }
    let mut res = vec![Slot::Tensor(out)];
    if let Some(i) = idx {
        res.push(Slot::Tensor(i));
    }
    Ok(Some(res))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all_f32, f32, int, On};
    t.kernel(
        &[
            "aten.max_pool1d_with_indices",
            "aten.max_pool2d_with_indices",
            "aten.max_pool3d_with_indices",
        ],
        On::All,
        pool,
        |i, o| i.len() == 1 && (f32(i[0]) || int(i[0])) && o == [i[0], DType::I64],
    );
    // Max pooling of every int dtype (torch has no int max_pool1d), int64 average pooling.
    t.kernel(
        &["aten.max_pool2d", "aten.max_pool3d"],
        On::All,
        pool,
        |i, o| i.len() == 1 && (f32(i[0]) || int(i[0])) && o == i,
    );
    t.kernel(
        &["aten.avg_pool1d", "aten.avg_pool2d", "aten.avg_pool3d"],
        On::All,
        pool,
        |i, o| i.len() == 1 && matches!(i[0], DType::F32 | DType::I64) && o == i,
    );
    t.kernel(
        &[
            "aten.max_pool1d",
            "aten.adaptive_avg_pool1d",
            "aten.adaptive_avg_pool2d",
            "aten.adaptive_avg_pool3d",
            "aten._adaptive_avg_pool2d",
            "aten._adaptive_avg_pool3d",
        ],
        On::All,
        pool,
        all_f32,
    );
    t.kernel(
        &[
            "aten.adaptive_max_pool1d",
            "aten.adaptive_max_pool2d",
            "aten.adaptive_max_pool3d",
        ],
        On::All,
        pool,
        |i, o| i == [DType::F32] && o == [DType::F32, DType::I64],
    );
}
