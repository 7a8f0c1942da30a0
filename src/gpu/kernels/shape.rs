//! Shape ops that build new tensors (shaders/shape.wgsl, and the strided copy of
//! shaders/index.wgsl), on 32-bit words, so every GPU dtype:
//!
//! - a per-dimension gather (`map`): `pad` / `constant_pad_nd` (constant, reflect, replicate,
//!   circular; negative pads crop), `roll`, `repeat` / `tile`, `repeat_interleave` with an
//!   integer count, `flip`, `rot90`;
//! - `tril` / `triu`;
//! - the scatters into a copy of `self`: `slice_scatter`, `diagonal_scatter`,
//!   `as_strided_scatter`, `select_scatter`;
//! - `diff` (f32 and ints, without prepend / append) as subtractions of two views.

use super::index::{encode_copy, word};
use super::ints::{self, IntBinaryOp, WOperand};
use super::{elementwise, grid, norm_dim, one, pad8, BinaryOp, KernelCtx, Operand, Out, MAX_RANK};
use crate::dtype::DType;
use crate::error::Result;
use crate::gpu::exec::Slot;
use crate::gpu::shaders::{Shader, Variant};
use crate::gpu::store::{gpu_dtype, GTensor};
use crate::ops::shape::pad::{PadMode, PadParams};
use crate::ops::shape::remap::{flip_dims, repeats, Roll, Rot90};
use bytemuck::{Pod, Zeroable};

pub const MAP: Variant = Variant::new(Shader::Shape, "map");
pub const TRI: Variant = Variant::new(Shader::Shape, "tri");

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default)]
pub struct ShapeMeta {
    pub numel: u32,
    pub rank: u32,
    pub row: u32,
    pub value: u32,
    pub out_shape: [u32; 8],
    pub src_shape: [u32; 8],
    pub src_strides: [u32; 8],
    pub before: [u32; 8],
    pub modes: [u32; 8],
    pub offset: u32,
    pub diag: u32,
    pub tri: u32,
    pub _p: u32,
}

const CONSTANT: u32 = 0;
const REFLECT: u32 = 1;
const REPLICATE: u32 = 2;
const CIRCULAR: u32 = 3;
const DIVIDE: u32 = 4;
const REVERSE: u32 = 5;

/// One dim of a map: (output size, mode, before).
type DimMap = (usize, u32, i64);

fn fits_i32(v: i64) -> bool {
    i32::try_from(v).is_ok()
}

/// out[o] = src[map(o)] per dim; `value` where a constant-mode dim falls outside.
fn encode_map(k: &mut KernelCtx, src: &GTensor, dims: &[DimMap], value: u32) -> Out {
    if !k.out_is(src.dtype) {
        return Ok(None);
    }
    // complex64: the map of its f32 pairs, the pair dim kept (`value` fills both parts, so
    // only a zero fill is a complex value's).
    if src.dtype == DType::Complex64 {
        let mut pair_dims = dims.to_vec();
        pair_dims.push((2, CONSTANT, 0));
        if value != 0 || dims.len() >= MAX_RANK {
            return Ok(None);
        }
        let Some(pairs) = map_into(k, &src.as_pairs(), &pair_dims, 0)? else {
            return Ok(None);
        };
        return Ok(Some(vec![Slot::Tensor(pairs.from_pairs())]));
    }
    Ok(map_into(k, src, dims, value)?.map(|t| vec![Slot::Tensor(t)]))
}

/// [`encode_map`] into a new tensor of `src`'s dtype (a GPU word dtype).
fn map_into(
    k: &mut KernelCtx,
    src: &GTensor,
    dims: &[DimMap],
    value: u32,
) -> Result<Option<GTensor>> {
    let dtype = src.dtype;
    let out_sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
    let numel: usize = out_sizes.iter().product();
    if !gpu_dtype(dtype)
        || src.rank() != dims.len()
        || src.rank() > MAX_RANK
        || numel >= u32::MAX as usize
        || !k.fits(src)
        || src.sizes.iter().any(|&n| n >= i32::MAX as usize)
        || dims
            .iter()
            .any(|d| !fits_i32(d.2) || d.0 >= i32::MAX as usize)
    {
        return Ok(None);
    }
    // A source dim of size 0 only works when nothing reads it.
    if numel > 0 && src.numel() == 0 && dims.iter().any(|d| d.1 != CONSTANT) {
        return Ok(None);
    }
    k.ensure(src)?;
    let out = k.new_out(dtype, &out_sizes)?;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let mut before = [0u32; 8];
        let mut modes = [0u32; 8];
        for (i, d) in dims.iter().enumerate() {
            modes[i] = d.1;
            before[i] = d.2 as i32 as u32;
        }
        let meta = ShapeMeta {
            numel: numel as u32,
            rank: dims.len() as u32,
            row,
            value,
            out_shape: pad8(&out_sizes),
            src_shape: pad8(&src.sizes),
            src_strides: pad8(&src.strides),
            before,
            modes,
            offset: src.offset as u32,
            ..Default::default()
        };
        k.dispatch(
            &MAP,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, src)],
            (gx, gy, 1),
        )?;
    }
    Ok(Some(out))
}

fn identity(x: &GTensor) -> Vec<DimMap> {
    x.sizes.iter().map(|&n| (n, CONSTANT, 0)).collect()
}

/// `x` with `extra` zeros appended along its last dim (a new contiguous tensor).
pub(super) fn zero_pad_last(
    k: &mut KernelCtx,
    x: &GTensor,
    extra: usize,
) -> Result<Option<GTensor>> {
    let mut dims = identity(x);
    if let Some(last) = dims.last_mut() {
        last.0 += extra;
    }
    map_into(k, x, &dims, 0)
}

/// The ten padding targets, with the op table's [`PadParams`] (parsed and checked as the
/// CPU kernel and the shape rule do).
pub(super) fn pad(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let p = PadParams::parse(&k.op)?;
    let mode = match p.mode {
        PadMode::Constant => CONSTANT,
        PadMode::Reflect => REFLECT,
        PadMode::Replicate => REPLICATE,
        PadMode::Circular => CIRCULAR,
    };
    // A complex64 tensor is padded with zeros only (a real fill value is not a pair's word).
    let w = match x.dtype {
        DType::Complex64 => (p.value.as_f64() == 0.0).then_some(0),
        d => word(d, p.value),
    };
    let Some(w) = w else {
        return Ok(None);
    };
    let mut dims = identity(&x);
    for d in p.dims(&k.op, &x.sizes)? {
        dims[d.dim] = (d.size, mode, d.lo);
    }
    encode_map(k, &x, &dims, w)
}

/// roll(self, shifts, dims): circular maps (the flattened tensor when `dims` is empty).
pub(super) fn roll(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let Roll { shifts, dims } = Roll::parse(&k.op)?;
    if dims.is_empty() {
        if !x.is_contiguous() {
            return Ok(None);
        }
        let n = x.numel();
        let flat = x.view(vec![n], vec![1], x.offset);
        let s = shifts[0].rem_euclid(n.max(1) as i64);
        let Some(mut res) = encode_map(k, &flat, &[(n, CIRCULAR, s)], 0)? else {
            return Ok(None);
        };
        let Some(Slot::Tensor(t)) = res.pop() else {
            return Ok(None);
        };
        let st = super::contiguous_strides(&x.sizes);
        return Ok(Some(vec![Slot::Tensor(t.view(x.sizes.clone(), st, 0))]));
    }
    let mut m = identity(&x);
    for (&s, &d) in shifts.iter().zip(&dims) {
        let Some(d) = norm_dim(d, x.rank()) else {
            return Ok(None);
        };
        if x.rank() == 0 {
            return Ok(None);
        }
        let n = x.sizes[d].max(1) as i64;
        m[d] = (x.sizes[d], CIRCULAR, (m[d].2 + s).rem_euclid(n));
    }
    encode_map(k, &x, &m, 0)
}

/// flip, fliplr and flipud.
pub(super) fn flip(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let ds = flip_dims(&k.op, x.rank())?;
    let mut m = identity(&x);
    if x.rank() > 0 {
        for d in ds {
            m[d].1 = REVERSE;
        }
    }
    encode_map(k, &x, &m, 0)
}

pub(super) fn rot90(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let Rot90 { k: kk, a, b } = Rot90::parse(&k.op, x.rank())?;
    // k = 1: the transposed view reversed along a; k = 3: along b; k = 2: x reversed
    // along both.
    let mut v = x.clone();
    if kk % 2 == 1 {
        v.sizes.swap(a, b);
        v.strides.swap(a, b);
    }
    let mut m = identity(&v);
    match kk {
        1 => m[a].1 = REVERSE,
        2 => {
            m[a].1 = REVERSE;
            m[b].1 = REVERSE;
        }
        3 => m[b].1 = REVERSE,
        _ => {}
    }
    encode_map(k, &v, &m, 0)
}

/// repeat(self, repeats) / tile(self, dims): circular maps over leading size-1 dims.
pub(super) fn repeat(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let reps = repeats(&k.op, x.rank())?;
    if reps.len() > MAX_RANK {
        return Ok(None);
    }
    let lead = reps.len() - x.rank();
    let mut sizes = vec![1; lead];
    sizes.extend(&x.sizes);
    let mut strides = vec![0; lead];
    strides.extend(&x.strides);
    let src = x.view(sizes.clone(), strides, x.offset);
    let m: Vec<DimMap> = sizes
        .iter()
        .zip(&reps)
        .map(|(&n, &r)| (n * r as usize, CIRCULAR, 0))
        .collect();
    encode_map(k, &src, &m, 0)
}

/// repeat_interleave.self_int: each element `repeats` times along `dim` (or flattened).
pub(super) fn repeat_interleave(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if k.is_tensor_arg("repeats") {
        return Ok(None);
    }
    let r = k.op.int("repeats")?;
    if r <= 0 || r > i32::MAX as i64 {
        return Ok(None);
    }
    let (src, d) = match k.op.opt_int("dim")? {
        None => {
            if !x.is_contiguous() {
                return Ok(None);
            }
            (x.view(vec![x.numel()], vec![1], x.offset), 0)
        }
        Some(d) => match norm_dim(d, x.rank()) {
            Some(d) if x.rank() > 0 => (x.clone(), d),
            _ => return Ok(None),
        },
    };
    let mut m = identity(&src);
    m[d] = (src.sizes[d] * r as usize, DIVIDE, r);
    encode_map(k, &src, &m, 0)
}

/// tril / triu (and their in-place forms through a copy into `self`).
pub(super) fn tri(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let op = k.target().split('.').nth(1).unwrap_or("").to_string();
    let inplace = op.ends_with('_');
    let lower = op.starts_with("tril");
    let diag = k.op.int_or("diagonal", 0)?;
    let numel = x.numel();
    if x.rank() < 2
        || x.rank() > MAX_RANK
        || !gpu_dtype(x.dtype)
        || !k.out_is(x.dtype)
        || !fits_i32(diag)
        || numel >= u32::MAX as usize
        || !k.fits(&x)
    {
        return Ok(None);
    }
    if inplace
        && x.sizes
            .iter()
            .zip(&x.strides)
            .any(|(&n, &s)| n > 1 && s == 0)
    {
        return Ok(None);
    }
    k.ensure(&x)?;
    let out = k.new_out(x.dtype, &x.sizes)?;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        let meta = ShapeMeta {
            numel: numel as u32,
            rank: x.rank() as u32,
            row,
            out_shape: pad8(&x.sizes),
            src_shape: pad8(&x.sizes),
            src_strides: pad8(&x.strides),
            offset: x.offset as u32,
            diag: diag as i32 as u32,
            tri: if lower { 1 } else { 2 },
            ..Default::default()
        };
        k.dispatch(
            &TRI,
            bytemuck::bytes_of(&meta),
            &[(1, &out), (2, &x)],
            (gx, gy, 1),
        )?;
    }
    if inplace {
        super::index::copy_into(k, &out, &x)?;
        crate::gpu::store::lock(&x.cell).cpu_valid = false;
        return Ok(Some(vec![Slot::Tensor(x)]));
    }
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// The view of `out` a scatter writes, from the node's arguments.
fn scatter_view(k: &KernelCtx, out: &GTensor) -> Result<Option<GTensor>> {
    let op = k.target().split('.').nth(1).unwrap_or("").to_string();
    let r = out.rank();
    Ok(match op.as_str() {
        "slice_scatter" => {
            let Some(d) = norm_dim(k.op.int_or("dim", 0)?, r) else {
                return Ok(None);
            };
            if r == 0 {
                return Ok(None);
            }
            let n = out.sizes[d] as i64;
            let step = k.op.int_or("step", 1)?;
            if step <= 0 {
                return Ok(None);
            }
            let clampi = |v: i64| {
                let v = if v < 0 { v + n } else { v };
                v.clamp(0, n)
            };
            let start = clampi(k.op.opt_int("start")?.unwrap_or(0));
            let end = clampi(k.op.opt_int("end")?.unwrap_or(n)).max(start);
            let len = (end - start + step - 1) / step;
            let mut sizes = out.sizes.clone();
            let mut strides = out.strides.clone();
            sizes[d] = len as usize;
            strides[d] *= step as usize;
            Some(out.view(sizes, strides, out.offset + start as usize * out.strides[d]))
        }
        "select_scatter" => {
            let Some(d) = norm_dim(k.op.int("dim")?, r) else {
                return Ok(None);
            };
            if r == 0 {
                return Ok(None);
            }
            let n = out.sizes[d] as i64;
            let i = k.op.int("index")?;
            let i = if i < 0 { i + n } else { i };
            if !(0..n).contains(&i) {
                return Ok(None);
            }
            let mut sizes = out.sizes.clone();
            let mut strides = out.strides.clone();
            sizes.remove(d);
            strides.remove(d);
            Some(out.view(sizes, strides, out.offset + i as usize * out.strides[d]))
        }
        "diagonal_scatter" => {
            let (Some(d1), Some(d2)) = (
                norm_dim(k.op.int_or("dim1", 0)?, r),
                norm_dim(k.op.int_or("dim2", 1)?, r),
            ) else {
                return Ok(None);
            };
            if r < 2 || d1 == d2 {
                return Ok(None);
            }
            let off = k.op.int_or("offset", 0)?;
            let (n1, n2) = (out.sizes[d1] as i64, out.sizes[d2] as i64);
            let len = if off >= 0 {
                n1.min(n2 - off)
            } else {
                (n1 + off).min(n2)
            }
            .max(0) as usize;
            let start = if len == 0 {
                0
            } else if off >= 0 {
                off as usize * out.strides[d2]
            } else {
                (-off) as usize * out.strides[d1]
            };
            let mut sizes = Vec::new();
            let mut strides = Vec::new();
            for i in 0..r {
                if i != d1 && i != d2 {
                    sizes.push(out.sizes[i]);
                    strides.push(out.strides[i]);
                }
            }
            sizes.push(len);
            strides.push(out.strides[d1] + out.strides[d2]);
            Some(out.view(sizes, strides, out.offset + start))
        }
        "as_strided_scatter" => {
            let size = k.op.ints("size")?;
            let stride = k.op.ints("stride")?;
            let off = k.op.opt_int("storage_offset")?.unwrap_or(0);
            if size.len() != stride.len() || size.iter().chain(&stride).any(|&v| v < 0) || off < 0 {
                return Ok(None);
            }
            let v = out.view(
                size.iter().map(|&v| v as usize).collect(),
                stride.iter().map(|&v| v as usize).collect(),
                off as usize,
            );
            // Inside the copy, and no element written twice (a plain strided copy).
            if v.span() > out.numel() || !no_overlap(&v) {
                return Ok(None);
            }
            Some(v)
        }
        _ => None,
    })
}

/// Whether distinct indices of `v` address distinct elements (a sufficient check: sorted by
/// stride, each stride at least the extent of the smaller dims).
fn no_overlap(v: &GTensor) -> bool {
    let mut d: Vec<(usize, usize)> = v
        .sizes
        .iter()
        .zip(&v.strides)
        .filter(|(&n, _)| n > 1)
        .map(|(&n, &s)| (s, n))
        .collect();
    d.sort();
    let mut extent = 1;
    for (s, n) in d {
        if s < extent {
            return false;
        }
        extent += s * (n - 1);
    }
    true
}

/// slice_scatter / select_scatter / diagonal_scatter / as_strided_scatter: a contiguous copy
/// of `self`, then `src` copied into the view.
pub(super) fn scatter(k: &mut KernelCtx) -> Out {
    let (Some(x), Some(src)) = (k.t("self"), k.t("src")) else {
        return Ok(None);
    };
    if !gpu_dtype(x.dtype)
        || src.dtype != x.dtype
        || !k.out_is(x.dtype)
        || x.rank() > MAX_RANK
        || !k.fits(&x)
        || !k.fits(&src)
        || x.numel() >= u32::MAX as usize
    {
        return Ok(None);
    }
    let out = k.new_out(x.dtype, &x.sizes)?;
    let Some(v) = scatter_view(k, &out)? else {
        return Ok(None);
    };
    if v.sizes != src.sizes || v.rank() > MAX_RANK {
        return Ok(None);
    }
    encode_copy(k, &x, &out)?;
    encode_copy(k, &src, &v)?;
    Ok(Some(vec![Slot::Tensor(out)]))
}

/// diff(self, n, dim) without prepend / append: x[1:] - x[:-1], n times.
pub(super) fn diff(k: &mut KernelCtx) -> Out {
    let Some(mut x) = k.t("self") else {
        return Ok(None);
    };
    let n = k.op.int_or("n", 1)?;
    let dtype = x.dtype;
    if n < 0
        || x.rank() == 0
        || !(dtype == DType::F32 || dtype == DType::Bool || ints::is_int(dtype))
    {
        return Ok(None);
    }
    if !k.out_is(dtype) {
        return Ok(None);
    }
    let Some(d) = norm_dim(k.op.int_or("dim", -1)?, x.rank()) else {
        return Ok(None);
    };
    // prepend / append: concatenated along `d` first (same dtype and other sizes).
    let (pre, app) = (k.is_tensor_arg("prepend"), k.is_tensor_arg("append"));
    if pre || app {
        let mut parts = Vec::new();
        for (name, on) in [("prepend", pre), ("self", true), ("append", app)] {
            if !on {
                continue;
            }
            match k.t(name) {
                Some(t)
                    if t.dtype == dtype
                        && t.rank() == x.rank()
                        && (0..t.rank()).all(|i| i == d || t.sizes[i] == x.sizes[i])
                        && k.fits(&t) =>
                {
                    parts.push(t)
                }
                _ => return Ok(None),
            }
        }
        let mut sizes = x.sizes.clone();
        sizes[d] = parts.iter().map(|t| t.sizes[d]).sum();
        let out = k.new_out(dtype, &sizes)?;
        let mut start = 0;
        for t in &parts {
            k.ensure(t)?;
            let dst = out.view(t.sizes.clone(), out.strides.clone(), start * out.strides[d]);
            super::index::encode_copy(k, t, &dst)?;
            start += t.sizes[d];
        }
        x = out;
    }
    for _ in 0..n {
        let len = x.sizes[d];
        if len == 0 {
            break;
        }
        let mut sizes = x.sizes.clone();
        sizes[d] = len - 1;
        let hi = x.view(sizes.clone(), x.strides.clone(), x.offset + x.strides[d]);
        let lo = x.view(sizes, x.strides.clone(), x.offset);
        let r = if dtype == DType::F32 {
            elementwise(
                k,
                BinaryOp::Sub.variant(),
                dtype,
                &hi,
                Some(&Operand::T(lo)),
                None,
                1.0,
                0.0,
            )?
        } else if dtype == DType::Bool {
            // torch's diff of bools: logical_xor of neighbours.
            ints::encode(
                k,
                ints::LogicalOp::Xor.variant(),
                dtype,
                &hi,
                Some(&WOperand::T(lo)),
                None,
                0,
                0,
            )?
        } else {
            ints::encode(
                k,
                IntBinaryOp::Sub.variant(),
                dtype,
                &hi,
                Some(&WOperand::T(lo)),
                None,
                0,
                1,
            )?
        };
        match r {
            Some(t) => x = t,
            None => return Ok(None),
        }
    }
    if n == 0 {
        return one(super::contiguous(k, &x));
    }
    Ok(Some(vec![Slot::Tensor(x)]))
}

/// The targets of this file (the GPU side of the op table, `table.rs`).
pub(super) fn register(t: &mut super::table::GpuTable) {
    use super::table::{all, f32, int, same_gpu_dtype, On};
    t.kernel(
        &[
            "aten.pad",
            "aten.constant_pad_nd",
            "aten._pad_enum",
            "aten._pad_circular",
            "aten.reflection_pad1d",
            "aten.reflection_pad2d",
            "aten.reflection_pad3d",
            "aten.replication_pad1d",
            "aten.replication_pad2d",
            "aten.replication_pad3d",
        ],
        On::Only(&["default"]),
        pad,
        same_gpu_dtype,
    );
    t.kernel(&["aten.roll"], On::All, roll, same_gpu_dtype);
    t.kernel(
        &["aten.flip", "aten.fliplr", "aten.flipud"],
        On::All,
        flip,
        same_gpu_dtype,
    );
    t.kernel(&["aten.rot90"], On::All, rot90, same_gpu_dtype);
    t.kernel(
        &["aten.repeat", "aten.tile"],
        On::All,
        repeat,
        same_gpu_dtype,
    );
    t.kernel(
        &["aten.repeat_interleave"],
        On::Only(&["self_int"]),
        repeat_interleave,
        same_gpu_dtype,
    );
    t.kernel(
        &["aten.tril", "aten.triu", "aten.tril_", "aten.triu_"],
        On::Only(&["default"]),
        tri,
        same_gpu_dtype,
    );
    t.kernel(
        &[
            "aten.slice_scatter",
            "aten.select_scatter",
            "aten.diagonal_scatter",
            "aten.as_strided_scatter",
        ],
        On::Only(&["default"]),
        scatter,
        same_gpu_dtype,
    );
    t.kernel(&["aten.diff"], On::Only(&["default"]), diff, |i, o| {
        let first = i.first().copied();
        first.is_some_and(|d| f32(d) || int(d) || d == DType::Bool)
            && all(i, |d| Some(d) == first)
            && o.first() == first.as_ref()
    });
}
