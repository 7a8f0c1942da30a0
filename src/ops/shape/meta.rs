//! Rules of the shape family: views (`view` with `-1`, `permute`, `expand`, `slice`,
//! `select`, `narrow`, `unflatten`, `squeeze`...), ops that split a tensor into pieces (several
//! outputs); the copies (`cat`, `stack`, `pad`, `repeat`...) are in `meta_copy.rs`. Sizes follow torch's view
//! geometry; `infer_size` and `split_pieces` are the CPU family's own.

use crate::meta::{MValue, MetaCtx, MetaTensor, RuleResult};
use crate::ops::elementwise::meta::one;
use crate::ops::shape::geometry::{infer_size, split_pieces};

fn tensors(v: Vec<MetaTensor>) -> RuleResult<Vec<MValue>> {
    Ok(vec![MValue::Tensors(v)])
}

/// `-1` resolved against the element count.
fn infer(ctx: &MetaCtx, shape: &[i64], numel: usize) -> RuleResult<Vec<usize>> {
    ctx.with_op(|c| infer_size(c, shape, numel))
}

pub(super) fn view(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    // `view.dtype` reinterprets the bytes: the last dim scales by the size ratio.
    if let Some(d) = ctx.opt_dtype("dtype")? {
        let (a, b) = (t.dtype.size(), d.size());
        let mut s = t.sizes.clone();
        if a != b {
            let last = s
                .last_mut()
                .ok_or("view(dtype) of a 0-d tensor needs equal sizes")?;
            if (*last * a) % b != 0 {
                return Err(format!(
                    "cannot view {} as {d}: the last dim ({}) times {a} bytes is not a multiple of {b}",
                    t.dtype, *last
                ));
            }
            *last = *last * a / b;
        }
        return one(MetaTensor::new(d, s));
    }
    let shape = match ctx.arg("size").or_else(|| ctx.arg("shape")) {
        Some(a) => ctx.ints_of(a, "size")?,
        None => return Err("missing argument 'size'".into()),
    };
    let s = infer(ctx, &shape, t.numel())?;
    one(t.with_sizes(s))
}

pub(super) fn view_as(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let o = ctx.tensor("other")?;
    if o.numel() != t.numel() {
        return Err(format!(
            "shape {:?} is invalid for input of size {}",
            o.sizes,
            t.numel()
        ));
    }
    one(t.with_sizes(o.sizes))
}

pub(super) fn flatten(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return one(t.with_sizes(vec![1]));
    }
    let s = ctx.wrap_dim(ctx.int_or("start_dim", 0)?, t.rank())?;
    let e = ctx.wrap_dim(ctx.int_or("end_dim", -1)?, t.rank())?;
    if s > e {
        return Err("flatten() has invalid args: start_dim cannot come after end_dim".into());
    }
    let mut out = t.sizes[..s].to_vec();
    out.push(
        t.sizes[s..=e]
            .iter()
            .fold(1usize, |a, &b| a.saturating_mul(b)),
    );
    out.extend_from_slice(&t.sizes[e + 1..]);
    one(t.with_sizes(out))
}

pub(super) fn unflatten(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let d = ctx.wrap_dim(ctx.int("dim")?, t.rank())?;
    let n = *t.sizes.get(d).ok_or("unflatten of a 0-d tensor")?;
    let parts = infer(ctx, &ctx.ints("sizes")?, n)?;
    let mut out = t.sizes[..d].to_vec();
    out.extend(parts);
    out.extend_from_slice(&t.sizes[d + 1..]);
    one(t.with_sizes(out))
}

pub(super) fn squeeze(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let dims: Vec<usize> = match ctx.opt_ints("dim")? {
        None => (0..t.rank()).collect(),
        Some(ds) => ds
            .iter()
            .map(|&d| ctx.wrap_dim(d, t.rank()))
            .collect::<RuleResult<_>>()?,
    };
    let out = t
        .sizes
        .iter()
        .enumerate()
        .filter(|&(i, &s)| !(s == 1 && dims.contains(&i)))
        .map(|(_, &s)| s)
        .collect();
    one(t.with_sizes(out))
}

pub(super) fn unsqueeze(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let d = ctx.wrap_dim(ctx.int("dim")?, t.rank() + 1)?;
    let mut s = t.sizes.clone();
    s.insert(d, 1);
    one(t.with_sizes(s))
}

/// Apply a permutation of dims, checking it is one.
fn permuted(ctx: &MetaCtx, t: &MetaTensor, dims: &[i64]) -> RuleResult<MetaTensor> {
    if dims.len() != t.rank() {
        return Err(format!(
            "permute: the number of dims {dims:?} does not match the rank of {:?}",
            t.sizes
        ));
    }
    let mut seen = vec![false; t.rank()];
    let mut out = Vec::with_capacity(t.rank());
    for &d in dims {
        let w = ctx.wrap_dim(d, t.rank())?;
        if std::mem::replace(&mut seen[w], true) {
            return Err(format!("permute: dim {d} is repeated in {dims:?}"));
        }
        out.push(t.sizes[w]);
    }
    Ok(t.with_sizes(out))
}

pub(super) fn permute(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    one(permuted(ctx, &t, &ctx.ints("dims")?)?)
}

pub(super) fn swap(ctx: &MetaCtx, t: &MetaTensor, a: i64, b: i64) -> RuleResult<MetaTensor> {
    let mut s = t.sizes.clone();
    if t.rank() > 0 {
        let (a, b) = (ctx.wrap_dim(a, t.rank())?, ctx.wrap_dim(b, t.rank())?);
        s.swap(a, b);
    }
    Ok(t.with_sizes(s))
}

pub(super) fn transpose(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let (a, b) = match (ctx.opt_int("dim0")?, ctx.opt_int("axis0")?) {
        (Some(a), _) => (a, ctx.int("dim1")?),
        (_, Some(a)) => (a, ctx.int("axis1")?),
        _ => return Err("missing argument 'dim0'".into()),
    };
    one(swap(ctx, &t, a, b)?)
}

pub(super) fn t_(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() > 2 {
        return Err(format!(
            "t() expects a tensor with <= 2 dims, got {:?}",
            t.sizes
        ));
    }
    let mut s = t.sizes.clone();
    s.reverse();
    one(t.with_sizes(s))
}

pub(super) fn numpy_t(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let mut s = t.sizes.clone();
    s.reverse();
    one(t.with_sizes(s))
}

pub(super) fn mt(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() < 2 {
        return Err(format!(
            "mT expects a tensor with >= 2 dims, got {:?}",
            t.sizes
        ));
    }
    one(swap(ctx, &t, -2, -1)?)
}

pub(super) fn movedim(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let r = t.rank();
    let src: Vec<usize> = ctx
        .ints("source")?
        .iter()
        .map(|&d| ctx.wrap_dim(d, r))
        .collect::<RuleResult<_>>()?;
    let dst: Vec<usize> = ctx
        .ints("destination")?
        .iter()
        .map(|&d| ctx.wrap_dim(d, r))
        .collect::<RuleResult<_>>()?;
    if src.len() != dst.len() {
        return Err(format!(
            "movedim: source {src:?} and destination {dst:?} differ in length"
        ));
    }
    // A 0-d tensor's dim 0 (or -1) wraps to 0, as in torch: one slot, nothing to move.
    let mut order: Vec<Option<usize>> = vec![None; r.max(1)];
    for (&s, &d) in src.iter().zip(&dst) {
        order[d] = Some(s);
    }
    let mut rest = (0..r).filter(|i| !src.contains(i));
    let perm: Vec<i64> = order
        .into_iter()
        .take(r)
        .map(|o| o.or_else(|| rest.next()).unwrap_or(0) as i64)
        .collect();
    one(permuted(ctx, &t, &perm)?)
}

/// `expand(size)`: new leading dims, `-1` keeps a dim, only size-1 dims grow.
fn expanded(t: &MetaTensor, size: &[i64]) -> RuleResult<MetaTensor> {
    if size.len() < t.rank() {
        return Err(format!(
            "expand: the number of sizes {size:?} must be >= the rank of {:?}",
            t.sizes
        ));
    }
    let lead = size.len() - t.rank();
    let mut out = Vec::with_capacity(size.len());
    for (i, &s) in size.iter().enumerate() {
        let v = if i < lead {
            if s < 0 {
                return Err(format!(
                    "expand: -1 is not allowed in a new leading dim ({size:?})"
                ));
            }
            s as usize
        } else {
            let have = t.sizes[i - lead];
            if s == -1 || s as usize == have {
                have
            } else if have == 1 && s >= 0 {
                s as usize
            } else {
                return Err(format!(
                    "the expanded size {s} must match the existing size {have} at dim {i} \
                     (expanding {:?} to {size:?})",
                    t.sizes
                ));
            }
        };
        out.push(v);
    }
    Ok(t.with_sizes(out))
}

pub(super) fn expand(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    one(expanded(&t, &ctx.ints("size")?)?)
}

pub(super) fn expand_as(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let o = ctx.tensor("other")?;
    let size: Vec<i64> = o.sizes.iter().map(|&s| s as i64).collect();
    one(expanded(&t, &size)?)
}

/// Clamp a slice as torch does; returns the length.
fn slice_len(n: usize, start: Option<i64>, end: Option<i64>, step: i64) -> RuleResult<usize> {
    if step <= 0 {
        return Err(format!("slice step must be positive, got {step}"));
    }
    let n = n as i64;
    let clamp = |v: i64| -> i64 {
        let v = if v < 0 { v + n } else { v };
        v.clamp(0, n)
    };
    let s = clamp(start.unwrap_or(0));
    let e = clamp(end.unwrap_or(n));
    Ok(if e > s {
        ((e - s + step - 1) / step) as usize
    } else {
        0
    })
}

fn sliced(
    ctx: &MetaCtx,
    t: &MetaTensor,
    dim: i64,
    start: Option<i64>,
    end: Option<i64>,
    step: i64,
) -> RuleResult<MetaTensor> {
    let d = ctx.wrap_dim(dim, t.rank())?;
    let mut s = t.sizes.clone();
    if t.rank() == 0 {
        return Err("slice() cannot be applied to a 0-dim tensor".into());
    }
    s[d] = slice_len(s[d], start, end, step)?;
    Ok(t.with_sizes(s))
}

pub(super) fn slice(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    // A data-dependent bound (`x[:n.item()]`): the whole dim is the upper bound.
    let bound = |name: &str| -> RuleResult<Option<i64>> {
        if ctx.is_unknown(name) {
            Ok(None)
        } else {
            ctx.opt_int(name)
        }
    };
    let mut r = sliced(
        ctx,
        &t,
        ctx.int_or("dim", 0)?,
        bound("start")?,
        bound("end")?,
        ctx.int_or("step", 1)?,
    )?;
    r.data_dependent |= ctx.is_unknown("start") || ctx.is_unknown("end");
    one(r)
}

pub(super) fn select(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return Err("select() cannot be applied to a 0-dim tensor".into());
    }
    let d = ctx.wrap_dim(ctx.int("dim")?, t.rank())?;
    let i = ctx.int("index")?;
    let n = t.sizes[d] as i64;
    if i < -n || i >= n {
        return Err(format!(
            "select(): index {i} out of range for tensor of size {:?} at dimension {d}",
            t.sizes
        ));
    }
    let mut s = t.sizes.clone();
    s.remove(d);
    one(t.with_sizes(s))
}

pub(super) fn narrow(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return Err("narrow() cannot be applied to a 0-dim tensor".into());
    }
    let d = ctx.wrap_dim(ctx.int("dim")?, t.rank())?;
    let n = t.sizes[d] as i64;
    // Data-dependent start or length (`item()`): the length is exact when given, else
    // bounded by the rest of the dim.
    let start = if ctx.is_unknown("start")
        || matches!(ctx.arg("start"), Some(crate::program::Arg::Tensor(_)))
    {
        None
    } else {
        Some(ctx.int("start")?)
    };
    let len = if ctx.is_unknown("length") {
        None
    } else {
        Some(ctx.int("length")?)
    };
    let data_dependent = start.is_none() || len.is_none();
    let start = start.map(|s| if s < 0 { s + n } else { s });
    let len = match (start, len) {
        (_, Some(l)) => l,
        (Some(s), None) => n - s,
        (None, None) => n,
    };
    let s0 = start.unwrap_or(0);
    if s0 < 0 || len < 0 || s0 + len > n {
        return Err(format!(
            "narrow: start {s0} + length {len} exceeds dimension size {n} of {:?}",
            t.sizes
        ));
    }
    let mut s = t.sizes.clone();
    s[d] = len as usize;
    let mut r = t.with_sizes(s);
    r.data_dependent = data_dependent;
    one(r)
}

pub(super) fn as_strided(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    one(t.with_sizes(ctx.sizes("size")?))
}

pub(super) fn unbind(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return Err("unbind() cannot be applied to a 0-dim tensor".into());
    }
    let d = ctx.wrap_dim(ctx.int_or("dim", 0)?, t.rank())?;
    let mut s = t.sizes.clone();
    let n = s.remove(d);
    tensors(vec![t.with_sizes(s); n])
}

/// Pieces of sizes `parts` along `d`.
fn pieces(t: &MetaTensor, d: usize, parts: &[i64]) -> RuleResult<Vec<MValue>> {
    let total: i64 = parts.iter().sum();
    if parts.iter().any(|&p| p < 0) || total != t.sizes[d] as i64 {
        return Err(format!(
            "split sizes {parts:?} do not sum to the size {} of dim {d} of {:?}",
            t.sizes[d], t.sizes
        ));
    }
    tensors(
        parts
            .iter()
            .map(|&p| {
                let mut s = t.sizes.clone();
                s[d] = p as usize;
                t.with_sizes(s)
            })
            .collect(),
    )
}

pub(super) fn split(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return Err("split expects at least a 1-dimensional tensor".into());
    }
    let d = ctx.wrap_dim(ctx.int_or("dim", 0)?, t.rank())?;
    let parts = match ctx.arg("split_size") {
        Some(a)
            if !matches!(
                a,
                crate::program::Arg::Ints(_) | crate::program::Arg::SymInts(_)
            ) =>
        {
            let s = ctx.int_of(a, "split_size")?;
            ctx.with_op(|c| split_pieces(c, t.sizes[d], s))?
        }
        Some(a) => ctx.ints_of(a, "split_size")?,
        None => ctx.ints("split_sizes")?,
    };
    pieces(&t, d, &parts)
}

pub(super) fn chunk(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return Err("chunk expects at least a 1-dimensional tensor".into());
    }
    let chunks = ctx.int("chunks")?;
    if chunks <= 0 {
        return Err(format!(
            "chunk expects `chunks` to be greater than 0, got: {chunks}"
        ));
    }
    let d = ctx.wrap_dim(ctx.int_or("dim", 0)?, t.rank())?;
    let n = t.sizes[d] as i64;
    let size = (n + chunks - 1) / chunks;
    let parts = if size == 0 {
        vec![0; chunks as usize]
    } else {
        ctx.with_op(|c| split_pieces(c, n as usize, size))?
    };
    pieces(&t, d, &parts)
}

pub(super) fn tensor_split(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    if t.rank() == 0 {
        return Err("tensor_split expects at least a 1-dimensional tensor".into());
    }
    let dim = ctx.int_or("dim", 0)?;
    let d = ctx.wrap_dim(dim, t.rank())?;
    let n = t.sizes[d] as i64;
    let bounds: Vec<i64> = if ctx.has("sections") {
        let s = ctx.int("sections")?;
        if s <= 0 {
            return Err(format!("number of sections must be larger than 0, got {s}"));
        }
        let (q, r) = (n / s, n % s);
        let mut acc = 0;
        (0..s - 1)
            .map(|i| {
                acc += q + (i < r) as i64;
                acc
            })
            .collect()
    } else if ctx.has("indices") {
        ctx.ints("indices")?
    } else {
        return Err("tensor_split with a tensor of indices depends on data".into());
    };
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut prev = 0i64;
    for &b in bounds.iter().chain(std::iter::once(&n)) {
        out.push(sliced(ctx, &t, dim, Some(prev), Some(b), 1)?);
        prev = b;
    }
    tensors(out)
}

pub(super) fn diagonal(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let r = t.rank();
    let a = ctx.wrap_dim(ctx.int_or("dim1", 0)?, r)?;
    let b = ctx.wrap_dim(ctx.int_or("dim2", 1)?, r)?;
    if a == b {
        return Err(format!("diagonal dimensions cannot be identical {a}, {b}"));
    }
    let off = ctx.int_or("offset", 0)?;
    let (na, nb) = (t.sizes[a] as i64, t.sizes[b] as i64);
    let len = if off >= 0 {
        na.min(nb - off)
    } else {
        (na + off).min(nb)
    }
    .max(0) as usize;
    let mut s: Vec<usize> = (0..r)
        .filter(|&i| i != a && i != b)
        .map(|i| t.sizes[i])
        .collect();
    s.push(len);
    one(t.with_sizes(s))
}

pub(super) fn unfold(ctx: &mut MetaCtx) -> RuleResult<Vec<MValue>> {
    let t = ctx.first()?;
    let size = ctx.int("size")?;
    let step = ctx.int("step")?;
    if size < 0 || step <= 0 {
        return Err(format!(
            "unfold: size {size} must be >= 0 and step {step} > 0"
        ));
    }
    if t.rank() == 0 {
        return one(t.with_sizes(vec![size as usize]));
    }
    let d = ctx.wrap_dim(ctx.int("dimension")?, t.rank())?;
    let n = t.sizes[d] as i64;
    if size > n {
        return Err(format!(
            "maximum size for tensor at dimension {d} is {n} but size is {size}"
        ));
    }
    let mut s = t.sizes.clone();
    s[d] = ((n - size) / step + 1) as usize;
    s.push(size as usize);
    one(t.with_sizes(s))
}
