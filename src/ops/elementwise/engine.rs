//! The elementwise engine: operands that may be tensors or Python numbers, torch's type
//! promotion, broadcasting maps with contiguous fast paths, and in-place write-back.
//!
//! Kernels pick a compute type from the promoted dtype (f32 for f32/f16/bf16 as torch's CPU
//! "opmath" does, f64, or i64 for every integer and bool dtype), run a monomorphized map over
//! plain slices, and cast to the output dtype. Integer results computed in i64 and cast back
//! wrap exactly as torch's narrower integer arithmetic does.

use super::real::Real;
use crate::cpu::promote::{result_type, Operand};
use crate::cpu::{broadcast_shapes, cast, Data, Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::matmul::gemm::{num_threads, par_chunks};
use crate::ops::{OpCtx, Scalar};
use crate::program::Arg;
use crate::runtime::RValue;
use crate::with_dtype;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::{Arc, RwLockReadGuard};

/// An argument that may be a tensor or a Python number (`x + 2` exports as
/// `aten.add.Tensor(x, 2)`, so even `Tensor` overloads receive numbers).
#[derive(Clone, Debug)]
pub(crate) enum Val {
    T(Tensor),
    S(Scalar),
}

impl Val {
    pub fn operand(&self) -> Operand {
        match self {
            Val::T(t) => Operand::Tensor {
                dtype: t.dtype,
                zero_dim: t.rank() == 0,
            },
            Val::S(s) => s.operand(),
        }
    }
    /// As a tensor: numbers become 0-d i64/f64/bool tensors, which convert exactly to any
    /// compute type.
    pub fn tensor(&self) -> Tensor {
        match self {
            Val::T(t) => t.clone(),
            Val::S(Scalar::Int(i)) => Tensor::scalar(*i),
            Val::S(Scalar::Float(f)) => Tensor::scalar(*f),
            Val::S(Scalar::Bool(b)) => Tensor::scalar(*b),
        }
    }
    /// As a tensor for an op computing in `common`: integer ops cast numbers to `common`
    /// first, as torch does (`int8_tensor < 1000` compares with `1000` wrapped to -24).
    pub fn tensor_for(&self, common: DType) -> Tensor {
        match self {
            Val::S(s) if compute_of(common) == Compute::Int => {
                scalar_full(common, &[], *s).unwrap_or_else(|_| self.tensor())
            }
            _ => self.tensor(),
        }
    }
}

/// Read argument `name` as a tensor or a number.
pub(crate) fn val(ctx: &OpCtx, name: &str) -> Result<Val> {
    match ctx.arg(name) {
        Some(Arg::Tensor(_) | Arg::OptTensor(Some(_))) => Ok(Val::T(ctx.tensor(name)?)),
        _ => Ok(Val::S(ctx.scalar(name)?)),
    }
}

/// Like [`val`], `None` when absent.
pub(crate) fn opt_val(ctx: &OpCtx, name: &str) -> Result<Option<Val>> {
    match ctx.arg(name) {
        None | Some(Arg::None | Arg::OptTensor(None)) => Ok(None),
        Some(_) => val(ctx, name).map(Some),
    }
}

/// torch's result dtype of the operands.
pub(crate) fn promote(vals: &[&Val]) -> DType {
    let ops: Vec<Operand> = vals.iter().map(|v| v.operand()).collect();
    result_type(&ops)
}

/// The type a kernel computes in for a (promoted) dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Compute {
    F32,
    F64,
    Int,
}

pub(crate) fn compute_of(d: DType) -> Compute {
    match d {
        DType::F64 => Compute::F64,
        d if d.is_float() => Compute::F32,
        _ => Compute::Int,
    }
}

/// The float dtype an integer or bool input is promoted to by float-only math (`sqrt(int)`).
pub(crate) fn float_dtype(d: DType) -> DType {
    if d.is_float() {
        d
    } else {
        DType::F32
    }
}

/// Cast `t` to `dtype` unless it already has it.
pub(crate) fn finish(t: Tensor, dtype: DType) -> Result<Tensor> {
    if t.dtype == dtype {
        Ok(t)
    } else {
        t.to_dtype(dtype)
    }
}

/// Can a value of `from` be written into a tensor of `to` by an in-place op (torch's
/// `canCast`: no float into integer, nothing non-bool into bool)?
pub(crate) fn can_cast(from: DType, to: DType) -> bool {
    !((from.is_float() && !to.is_float()) || (from != DType::Bool && to == DType::Bool))
}

/// True for in-place targets (`aten.add_.Tensor`), not for dunder names (`aten.__lshift__`).
pub(crate) fn is_inplace(ctx: &OpCtx) -> bool {
    let op = ctx.target().split('.').nth(1).unwrap_or("");
    op.ends_with('_') && !op.ends_with("__")
}

/// Finish an op: for in-place targets write `result` into `dst` (checking torch's shape and
/// dtype rules) and return `dst`; otherwise return `result`.
pub(crate) fn output(ctx: &OpCtx, dst: &Tensor, result: Tensor) -> Result<Vec<RValue>> {
    if !is_inplace(ctx) {
        return Ok(vec![RValue::Tensor(result)]);
    }
    if result.sizes != dst.sizes {
        return Err(ctx.err(format!(
            "output with shape {:?} doesn't match the broadcast shape {:?}",
            dst.sizes, result.sizes
        )));
    }
    if !can_cast(result.dtype, dst.dtype) {
        return Err(ctx.err(format!(
            "result type {} can't be cast to the desired output type {}",
            result.dtype, dst.dtype
        )));
    }
    if !write_dense(dst, &result) {
        dst.copy_from(&result)?;
    }
    Ok(vec![RValue::Tensor(dst.clone())])
}

/// Copy `src` into `dst` as one slice copy when both are contiguous of one dtype in distinct
/// storages (the common in-place case); false when that does not apply.
fn write_dense(dst: &Tensor, src: &Tensor) -> bool {
    if src.dtype != dst.dtype
        || !src.is_contiguous()
        || !dst.is_contiguous()
        || Arc::ptr_eq(&src.data, &dst.data)
    {
        return false;
    }
    let n = dst.numel();
    with_dtype!(dst.dtype, T => {
        let g = src.read();
        let Some(s) = T::slice(&g).and_then(|s| s.get(src.offset..src.offset + n)) else { return false };
        let mut w = dst.write();
        match T::slice_mut(&mut w).and_then(|d| d.get_mut(dst.offset..dst.offset + n)) {
            Some(d) => {
                d.copy_from_slice(s);
                true
            }
            None => false,
        }
    }, else false)
}

/// `t`'s strides when its elements fill `storage[offset..offset + numel]` without overlap
/// (contiguous, or a permutation of it such as `x.t()` or NHWC), else `None`. Elementwise
/// kernels walk such tensors in memory order and give the result the same strides, as
/// torch's TensorIterator does.
pub(crate) fn dense_strides(t: &Tensor) -> Option<Vec<usize>> {
    if t.is_contiguous() {
        return Some(t.strides.clone());
    }
    if t.numel() == 0 {
        return None;
    }
    let mut dims: Vec<usize> = (0..t.rank()).filter(|&d| t.sizes[d] != 1).collect();
    dims.sort_by_key(|&d| t.strides[d]);
    let mut expected = 1;
    for &d in &dims {
        if t.strides[d] != expected {
            return None;
        }
        expected *= t.sizes[d];
    }
    Some(t.strides.clone())
}

/// Whether two tensors of the same sizes lay their elements out alike (size-1 dims aside).
fn same_layout(a: &Tensor, b: &Tensor) -> bool {
    a.sizes == b.sizes && (0..a.rank()).all(|d| a.sizes[d] == 1 || a.strides[d] == b.strides[d])
}

/// A result in the memory order of an input with strides `strides`.
fn with_layout<O: Elem>(out: Vec<O>, sizes: &[usize], strides: Vec<usize>) -> Tensor {
    let t = Tensor::from_vec(out, sizes);
    if t.strides == strides {
        t
    } else {
        t.view_with(sizes.to_vec(), strides, 0)
    }
}

/// The elements of a dense `t` in memory order as `C`, borrowed when the dtype matches.
/// (Generic over `f`, so one copy per caller: the conversion lives in [`storage_as`], one copy
/// per `C`, which keeps the crate's compiled size in check.)
fn with_storage<C: Elem, R>(t: &Tensor, f: impl FnOnce(&[C]) -> R) -> R {
    {
        let g = t.read();
        if let Some(s) = C::slice(&g).and_then(|s| s.get(t.offset..t.offset + t.numel())) {
            return f(s);
        }
    }
    f(&storage_as::<C>(t))
}

/// The elements of a dense `t` in memory order, converted to `C`.
#[inline(never)]
fn storage_as<C: Elem>(t: &Tensor) -> Vec<C> {
    let n = t.numel();
    let g = t.read();
    with_dtype!(t.dtype, S => S::slice(&g)
        .and_then(|s| s.get(t.offset..t.offset + n))
        .map(|s| s.iter().map(|&x| cast::<S, C>(x)).collect())
        .unwrap_or_default(), else Vec::new())
}

/// The elements of `t` in row-major order as `C`. Strided tensors are walked with a running
/// offset (no per-element index vector); out-of-storage offsets read as zero, never panic.
pub(crate) fn read_vec<C: Elem>(t: &Tensor) -> Vec<C> {
    let n = t.numel();
    if t.is_contiguous() || n == 0 {
        return t.to_vec::<C>();
    }
    let g = t.read();
    with_dtype!(t.dtype, S => {
        let src = S::slice(&g).unwrap_or(&[]);
        let r = t.rank();
        let (inner, is) = (t.sizes[r - 1], t.strides[r - 1]);
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; r - 1];
        let mut base = t.offset;
        for _ in 0..n / inner {
            if is == 1 && base + inner <= src.len() {
                out.extend(src[base..base + inner].iter().map(|&x| cast::<S, C>(x)));
            } else {
                out.extend((0..inner).map(|j| src.get(base + j * is).map_or(C::default(), |&x| cast::<S, C>(x))));
            }
            for d in (0..r - 1).rev() {
                idx[d] += 1;
                base += t.strides[d];
                if idx[d] < t.sizes[d] {
                    break;
                }
                base -= t.strides[d] * t.sizes[d];
                idx[d] = 0;
            }
        }
        out
    }, else Vec::new())
}

/// Two tensors as row-major slices of `C` (borrowed from storage where a tensor is contiguous
/// of type `C`) passed to `f`, holding one lock when they share storage. Copies
/// (strided or of another dtype) are made before any lock is taken, and `f` is called from
/// one place for all cases but a malformed view (one compiled copy of `f` per caller instead
/// of one per case).
fn with_slices<C: Elem, R>(a: &Tensor, b: &Tensor, f: impl FnOnce(&[C], &[C]) -> R) -> R {
    let direct = |t: &Tensor| t.dtype == C::DTYPE && t.is_contiguous();
    let (da, db) = (direct(a), direct(b));
    let shared = da && db && Arc::ptr_eq(&a.data, &b.data);
    let av = (!da).then(|| read_vec::<C>(a));
    let bv = (!db).then(|| read_vec::<C>(b));
    let ga = da.then(|| a.read());
    let gb = (db && !shared).then(|| b.read());
    fn view<'g, C: Elem>(g: &'g Option<RwLockReadGuard<'_, Data>>, t: &Tensor) -> Option<&'g [C]> {
        C::slice(g.as_ref()?)?.get(t.offset..t.offset + t.numel())
    }
    let x = av.as_deref().or_else(|| view(&ga, a));
    let y = bv
        .as_deref()
        .or_else(|| view(if shared { &ga } else { &gb }, b));
    if let (Some(x), Some(y)) = (x, y) {
        return f(x, y);
    }
    // A view past its storage: read as zeros past the end, as read_vec does.
    drop((ga, gb));
    f(&read_vec::<C>(a), &read_vec::<C>(b))
}

/// `t` broadcast to `shape`, as a row-major vector of `C`.
pub(crate) fn gather<C: Elem>(t: &Tensor, shape: &[usize]) -> Result<Vec<C>> {
    if t.sizes == shape {
        Ok(read_vec::<C>(t))
    } else {
        Ok(read_vec::<C>(&t.expand_to(shape)?))
    }
}

/// `f` over `x` into `d`, compiled for AVX2 too and picked at run time on x86-64: the loop
/// (and the op's math, inlined into it) runs eight f32 lanes wide where the baseline build
/// runs four. Same operations per element, so the same values.
fn map_block<C: Copy, O>(x: &[C], d: &mut [MaybeUninit<O>], f: &impl Fn(C) -> O) {
    #[inline(always)]
    fn each<C: Copy, O>(x: &[C], d: &mut [MaybeUninit<O>], f: &impl Fn(C) -> O) {
        for (d, &v) in d.iter_mut().zip(x) {
            d.write(f(v));
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<C: Copy, O>(x: &[C], d: &mut [MaybeUninit<O>], f: &impl Fn(C) -> O) {
            each(x, d, f)
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { avx2(x, d, f) };
        }
    }
    each(x, d, f)
}

/// `f` over `x` as a new vector, by [`map_block`]: in one block, or (`par`) in blocks
/// spread over threads when `x` is large (the same values either way).
fn map_slice<C: Copy + Sync, O: Send>(x: &[C], f: &(impl Fn(C) -> O + Sync)) -> Vec<O> {
    let mut out = Vec::with_capacity(x.len());
    let d = &mut out.spare_capacity_mut()[..x.len()];
    // Split from four blocks on (64 Ki elements), where a second thread pays for its start.
    par_chunks(d, MAP_BLOCK, MAP_BLOCK * 2, |i, d| {
        map_block(&x[i * MAP_BLOCK..i * MAP_BLOCK + d.len()], d, f)
    });
    // SAFETY: the blocks above initialized all x.len() elements.
    unsafe { out.set_len(x.len()) };
    out
}

/// [`map_slice`] on the calling thread (for an `f` that cannot be shared between threads).
fn map_slice_serial<C: Copy, O>(x: &[C], f: &impl Fn(C) -> O) -> Vec<O> {
    let mut out = Vec::with_capacity(x.len());
    map_block(x, &mut out.spare_capacity_mut()[..x.len()], f);
    // SAFETY: map_block initialized all x.len() elements.
    unsafe { out.set_len(x.len()) };
    out
}

/// Elements per block when a map is split over threads.
const MAP_BLOCK: usize = 1 << 14;

/// Apply `f` elementwise in compute type `C`, producing `O`. Dense inputs are walked in
/// memory order and the result keeps their strides; large ones are split over threads.
pub(crate) fn map<C: Elem, O: Elem>(t: &Tensor, f: impl Fn(C) -> O + Sync) -> Tensor {
    map_with(t, &f, |x| map_slice(x, &f))
}

/// [`map`] on the calling thread alone (for an `f` that cannot be shared between threads).
fn map_serial<C: Elem, O: Elem>(t: &Tensor, f: impl Fn(C) -> O) -> Tensor {
    map_with(t, &f, |x| map_slice_serial(x, &f))
}

/// `f` over `t` in its memory order when it is dense (`dense` maps such a slice), else in
/// row-major order.
fn map_with<C: Elem, O: Elem>(
    t: &Tensor,
    f: &impl Fn(C) -> O,
    dense: impl Fn(&[C]) -> Vec<O>,
) -> Tensor {
    let layout = if t.is_contiguous() {
        Some(None)
    } else {
        dense_strides(t).map(Some)
    };
    if let Some(strides) = layout {
        let out: Vec<O> = with_storage(t, |x: &[C]| dense(x));
        return match strides {
            None => Tensor::from_vec(out, &t.sizes),
            Some(strides) => with_layout(out, &t.sizes, strides),
        };
    }
    let out: Vec<O> = read_vec::<C>(t).into_iter().map(f).collect();
    Tensor::from_vec(out, &t.sizes)
}

pub(crate) fn broadcast(ctx: &OpCtx, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    broadcast_shapes(a, b).ok_or_else(|| {
        ctx.err(format!(
            "shapes {a:?} and {b:?} cannot be broadcast together"
        ))
    })
}

/// Number of trailing elements of `shape` that `small` (with leading 1s stripped) repeats, when
/// broadcasting `small` to `shape` is a plain repetition of its contiguous data (a bias row).
fn suffix_repeat(small: &Tensor, shape: &[usize]) -> Option<usize> {
    let s: &[usize] = {
        let lead = small.sizes.iter().take_while(|&&d| d == 1).count();
        &small.sizes[lead..]
    };
    (s.len() <= shape.len() && s == &shape[shape.len() - s.len()..] && small.is_contiguous())
        .then(|| s.iter().product())
}

/// When `small` (contiguous) broadcasts to `shape` by repeating each of its elements over
/// `shape`'s trailing dims and the whole over its leading dims (a per-channel operand,
/// [1, C, 1, 1] against [N, C, H, W]): its element count and the run each element covers.
fn channel_repeat(small: &Tensor, shape: &[usize]) -> Option<(usize, usize)> {
    let s = &small.sizes;
    if s.len() > shape.len() || !small.is_contiguous() {
        return None;
    }
    let at = shape.len() - s.len();
    let lead = s.iter().take_while(|&&d| d == 1).count();
    let trail = s[lead..].iter().rev().take_while(|&&d| d == 1).count();
    let mid = &s[lead..s.len() - trail];
    let inner: usize = shape[shape.len() - trail..].iter().product();
    // A run of one element is no broadcast over trailing dims (same shapes, or `small`
    // repeated whole): `zip_map`'s vector loops serve those, not a lookup per element.
    (!mid.is_empty() && mid == &shape[at + lead..shape.len() - trail] && inner > 1)
        .then(|| (mid.iter().product(), inner))
}

/// `f(v, small[channel])` for each element `v` of `big`, whose runs of `inner` elements
/// cycle through the channels of `small` (a per-channel scale or bias, e.g. a
/// squeeze-and-excitation multiply), split over threads when large.
fn channel_zip<C: Elem, O: Elem>(
    big: &[C],
    small: &[C],
    inner: usize,
    f: &(impl Fn(C, C) -> O + Sync),
) -> Vec<O> {
    let mut out = Vec::with_capacity(big.len());
    let d = &mut out.spare_capacity_mut()[..big.len()];
    // Whole channels per task, one task per thread. A multiply-add per element costs about
    // eight of par_chunks' work units (a GEMM's multiply-adds), so a second thread starts
    // from about 16 Ki elements.
    let channels = big.len() / inner;
    let per = channels.div_ceil(num_threads()).max(1) * inner;
    par_chunks(d, per, per * 8, |i, d| {
        let from = i * per;
        for (k, (run, dst)) in big[from..from + d.len()]
            .chunks_exact(inner)
            .zip(d.chunks_exact_mut(inner))
            .enumerate()
        {
            let q = small[(from / inner + k) % small.len()];
            for (o, &p) in dst.iter_mut().zip(run) {
                o.write(f(p, q));
            }
        }
    });
    // SAFETY: the runs above wrote all big.len() elements (big.len() is a multiple of inner).
    unsafe { out.set_len(big.len()) };
    out
}

/// The elements from which [`zip_map_shared`] splits a per-channel broadcast over threads.
const CHANNEL_ZIP_MIN: usize = 1 << 14;

/// [`zip_map`] for an `f` that threads may share: a large per-channel broadcast (one
/// operand [.., C, 1, 1], the other the full shape) is split over threads; the rest as
/// [`zip_map`] computes it. The same values either way.
pub(crate) fn zip_map_shared<C: Elem, O: Elem>(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(C, C) -> O + Sync,
) -> Result<Tensor> {
    let shape = broadcast(ctx, &a.sizes, &b.sizes)?;
    let n: usize = shape.iter().product();
    if n >= CHANNEL_ZIP_MIN {
        if let (true, Some((c, inner))) = (a.sizes == shape, channel_repeat(b, &shape)) {
            let out = with_slices(a, b, |x: &[C], y: &[C]| {
                channel_zip(x, &y[..c], inner, &|p, q| f(p, q))
            });
            return Ok(Tensor::from_vec(out, &shape));
        }
        if let (true, Some((c, inner))) = (b.sizes == shape, channel_repeat(a, &shape)) {
            let out = with_slices(a, b, |x: &[C], y: &[C]| {
                channel_zip(y, &x[..c], inner, &|q, p| f(p, q))
            });
            return Ok(Tensor::from_vec(out, &shape));
        }
    }
    zip_map(ctx, a, b, f)
}

/// Broadcast two tensors and apply `f` in compute type `C`, producing `O`.
pub(crate) fn zip_map<C: Elem, O: Elem>(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(C, C) -> O,
) -> Result<Tensor> {
    let shape = broadcast(ctx, &a.sizes, &b.sizes)?;
    if same_layout(a, b) && !a.is_contiguous() && !Arc::ptr_eq(&a.data, &b.data) {
        if let Some(strides) = dense_strides(a) {
            // Both permuted alike (x.t() + y.t()): memory order, result keeps the layout.
            let out: Vec<O> = with_storage(a, |x: &[C]| {
                with_storage(b, |y: &[C]| {
                    x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect()
                })
            });
            return Ok(with_layout(out, &shape, strides));
        }
    }
    let out: Vec<O> = if a.sizes == b.sizes {
        with_slices(a, b, |x: &[C], y: &[C]| {
            x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect()
        })
    } else if b.numel() == 1 && a.sizes == shape {
        let y = read_vec::<C>(b)[0];
        return Ok(map_serial(a, |p| f(p, y)));
    } else if a.numel() == 1 && b.sizes == shape {
        let x = read_vec::<C>(a)[0];
        return Ok(map_serial(b, |q| f(x, q)));
    } else if let (true, Some(m)) = (
        a.sizes == shape,
        suffix_repeat(b, &shape).filter(|&m| m > 0),
    ) {
        with_slices(a, b, |x: &[C], y: &[C]| {
            let mut out = Vec::with_capacity(x.len());
            for row in x.chunks_exact(m) {
                out.extend(row.iter().zip(y).map(|(&p, &q)| f(p, q)));
            }
            out
        })
    } else if let (true, Some(m)) = (
        b.sizes == shape,
        suffix_repeat(a, &shape).filter(|&m| m > 0),
    ) {
        with_slices(a, b, |x: &[C], y: &[C]| {
            let mut out = Vec::with_capacity(y.len());
            for row in y.chunks_exact(m) {
                out.extend(x.iter().zip(row).map(|(&p, &q)| f(p, q)));
            }
            out
        })
    } else if let (true, Some((c, inner))) = (a.sizes == shape, channel_repeat(b, &shape)) {
        with_slices(a, b, |x: &[C], y: &[C]| {
            let mut out = Vec::with_capacity(x.len());
            for (run, &q) in x.chunks_exact(inner).zip(y[..c].iter().cycle()) {
                out.extend(run.iter().map(|&p| f(p, q)));
            }
            out
        })
    } else if let (true, Some((c, inner))) = (b.sizes == shape, channel_repeat(a, &shape)) {
        with_slices(a, b, |x: &[C], y: &[C]| {
            let mut out = Vec::with_capacity(y.len());
            for (run, &p) in y.chunks_exact(inner).zip(x[..c].iter().cycle()) {
                out.extend(run.iter().map(|&q| f(p, q)));
            }
            out
        })
    } else {
        let (x, y) = (gather::<C>(a, &shape)?, gather::<C>(b, &shape)?);
        x.iter().zip(&y).map(|(&p, &q)| f(p, q)).collect()
    };
    Ok(Tensor::from_vec(out, &shape))
}

/// Broadcast three tensors and apply `f` (types may differ per operand, e.g. `where`).
pub(crate) fn zip3_map<A: Elem, B: Elem, C: Elem, O: Elem>(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    f: impl Fn(A, B, C) -> O,
) -> Result<Tensor> {
    let shape = broadcast(ctx, &broadcast(ctx, &a.sizes, &b.sizes)?, &c.sizes)?;
    let (x, y, z) = (
        gather::<A>(a, &shape)?,
        gather::<B>(b, &shape)?,
        gather::<C>(c, &shape)?,
    );
    let out: Vec<O> = x
        .iter()
        .zip(&y)
        .zip(&z)
        .map(|((&p, &q), &r)| f(p, q, r))
        .collect();
    Ok(Tensor::from_vec(out, &shape))
}

/// A binary op written once for every compute type.
pub(crate) trait BinaryOp {
    fn float<R: Real>(&self, a: R, b: R) -> R;
    /// `None` marks an integer division by zero (an error in torch).
    fn int(&self, a: i64, b: i64) -> Option<i64>;
}

/// Run `op` on `a`, `b` computing in `common`'s compute type; the result has dtype `out`.
pub(crate) fn run_binary<O: BinaryOp + Sync>(
    ctx: &OpCtx,
    a: &Tensor,
    b: &Tensor,
    common: DType,
    out: DType,
    op: &O,
) -> Result<Tensor> {
    let t = match compute_of(common) {
        Compute::F32 => zip_map_shared::<f32, f32>(ctx, a, b, |x, y| op.float(x, y))?,
        Compute::F64 => zip_map_shared::<f64, f64>(ctx, a, b, |x, y| op.float(x, y))?,
        Compute::Int => {
            let zero_div = Cell::new(false);
            let t = zip_map::<i64, i64>(ctx, a, b, |x, y| {
                op.int(x, y).unwrap_or_else(|| {
                    zero_div.set(true);
                    0
                })
            })?;
            if zero_div.get() {
                return Err(ctx.err("ZeroDivisionError: integer division by zero"));
            }
            // Narrow integers wrap as torch's do: go through the common dtype first.
            finish(t, common)?
        }
    };
    finish(t, out)
}

/// A unary op written once for every compute type.
pub(crate) trait UnaryOp: Sync {
    fn float<R: Real>(&self, x: R) -> R;
    fn int(&self, x: i64) -> i64;
}

/// Run `op` computing in `dtype`'s compute type (the input is converted to it first); the
/// result has dtype `dtype`.
pub(crate) fn run_unary<O: UnaryOp>(t: &Tensor, dtype: DType, op: &O) -> Result<Tensor> {
    let r = match compute_of(dtype) {
        Compute::F32 => map::<f32, f32>(t, |x| op.float(x)),
        Compute::F64 => map::<f64, f64>(t, |x| op.float(x)),
        Compute::Int => map::<i64, i64>(t, |x| op.int(x)),
    };
    finish(r, dtype)
}

/// A tensor of `dtype` and `sizes` filled with a Python number (ints stay exact).
pub(crate) fn scalar_full(dtype: DType, sizes: &[usize], s: Scalar) -> Result<Tensor> {
    match s {
        Scalar::Int(i) => {
            let n: usize = sizes.iter().product();
            with_dtype!(dtype, T => Ok(Tensor::from_vec(vec![cast::<i64, T>(i); n], sizes)),
                else Err(crate::error::Error::op("full", format!("dtype {dtype} is not supported"))))
        }
        Scalar::Bool(b) => Tensor::full(dtype, sizes, b as u8 as f64),
        Scalar::Float(f) => Tensor::full(dtype, sizes, f),
    }
}

/// The largest and smallest finite values of a float dtype (torch's `finfo`).
pub(crate) fn finfo(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (half::f16::MAX.to_f64(), half::f16::MIN.to_f64()),
        DType::BF16 => (half::bf16::MAX.to_f64(), half::bf16::MIN.to_f64()),
        DType::F64 => (f64::MAX, f64::MIN),
        _ => (f32::MAX as f64, f32::MIN as f64),
    }
}

#[cfg(test)]
mod map_tests {
    use super::*;

    /// A map split over threads gives the serial map's values, element for element, on
    /// sizes around the block edges.
    #[test]
    fn threaded_map_matches_serial() {
        for n in [0, 1, MAP_BLOCK - 1, 4 * MAP_BLOCK, 5 * MAP_BLOCK + 7] {
            let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.013).sin() * 4.0).collect();
            let f =
                |v: f32| v * 0.5 * (1.0 + <f32 as Real>::erf(v * std::f32::consts::FRAC_1_SQRT_2));
            let par = map_slice(&x, &f);
            let ser = map_slice_serial(&x, &f);
            assert_eq!(par.len(), n);
            assert!(
                par.iter()
                    .zip(&ser)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "n = {n}"
            );
        }
    }
}
