//! Decompositions of composite shape ops: the `atleast_*` family, stacks and splits,
//! diagonals, `kron`, `broadcast_tensors`, `meshgrid` and friends (views, `cat`, `expand`
//! and `where` underneath, as `torch._refs` writes them).

use super::{boolean, int, ints, opt_int, string, tensor, tensors, wrap, Builder, DResult};
use crate::program::{Arg, Node, ValueKind};

fn one(v: usize) -> DResult<Vec<Arg>> {
    Ok(vec![Arg::Tensor(v)])
}

fn atleast(b: &mut Builder, n: &Node, want: usize) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let r = b.rank(x)?;
    if r >= want {
        return one(x);
    }
    let s: Vec<i64> = b.sizes(x)?.iter().map(|&s| s as i64).collect();
    // torch: 0-d → [1]*want; 1-d [n] → [1, n] (2d) or [1, n, 1] (3d); 2-d [a, b] → [a, b, 1].
    let shape = match (r, want) {
        (0, w) => vec![1; w],
        (1, 2) => vec![1, s[0]],
        (1, 3) => vec![1, s[0], 1],
        (2, 3) => vec![s[0], s[1], 1],
        _ => return Err(format!("atleast_{want}d of rank {r}")),
    };
    one(b.reshape(x, &shape)?)
}

pub(super) fn atleast_1d(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    atleast(b, n, 1)
}
pub(super) fn atleast_2d(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    atleast(b, n, 2)
}
pub(super) fn atleast_3d(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    atleast(b, n, 3)
}

pub(super) fn ravel(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    one(b.reshape(x, &[-1])?)
}

/// The broadcast shape of several sizes (numpy rules).
pub(super) fn broadcast_shape(shapes: &[Vec<usize>]) -> DResult<Vec<usize>> {
    let rank = shapes.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(format!("sizes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

/// Each of `xs` expanded to their common shape.
pub(super) fn broadcast(b: &mut Builder, xs: &[usize]) -> DResult<Vec<usize>> {
    let shapes = xs
        .iter()
        .map(|&x| b.sizes(x))
        .collect::<DResult<Vec<_>>>()?;
    let shape = broadcast_shape(&shapes)?;
    let target: Vec<i64> = shape.iter().map(|&s| s as i64).collect();
    xs.iter()
        .zip(&shapes)
        .map(|(&x, s)| {
            if *s == shape {
                Ok(x)
            } else {
                b.expand(x, &target)
            }
        })
        .collect()
}

pub(super) fn broadcast_tensors(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = tensors(n, "tensors")?;
    Ok(vec![Arg::Tensors(broadcast(b, &xs)?)])
}

/// `meshgrid(tensors, indexing)`: grids of the 0-d / 1-d inputs.
fn grids(b: &mut Builder, xs: &[usize], xy: bool) -> DResult<Vec<usize>> {
    let mut xs = xs.to_vec();
    let swap = xy && xs.len() >= 2;
    if swap {
        xs.swap(0, 1);
    }
    let mut lens = Vec::new();
    for &x in &xs {
        let s = b.sizes(x)?;
        if s.len() > 1 {
            return Err("meshgrid takes 0-d or 1-d tensors".into());
        }
        lens.push(s.first().copied().unwrap_or(1) as i64);
    }
    let mut out = Vec::new();
    for (i, &x) in xs.iter().enumerate() {
        let mut shape = vec![1i64; xs.len()];
        shape[i] = -1;
        let v = b.reshape(x, &shape)?;
        out.push(b.expand(v, &lens)?);
    }
    if swap {
        // torch: the grids of (b, a, ...) with the first two swapped back.
        out.swap(0, 1);
    }
    Ok(out)
}

pub(super) fn meshgrid(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = tensors(n, "tensors")?;
    let xy = match string(n, "indexing")?.as_deref() {
        None | Some("ij") => false,
        Some("xy") => true,
        Some(o) => return Err(format!("indexing '{o}'")),
    };
    Ok(vec![Arg::Tensors(grids(b, &xs, xy)?)])
}

pub(super) fn column_stack(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = tensors(n, "tensors")?;
    let mut cols = Vec::new();
    for x in xs {
        if b.rank(x)? <= 1 {
            let numel: usize = b.sizes(x)?.iter().product();
            cols.push(b.reshape(x, &[numel as i64, 1])?);
        } else {
            cols.push(x);
        }
    }
    one(b.cat(&cols, 1)?)
}

pub(super) fn dstack(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = tensors(n, "tensors")?;
    let mut parts = Vec::new();
    for x in xs {
        let s: Vec<i64> = b.sizes(x)?.iter().map(|&s| s as i64).collect();
        parts.push(match s.len() {
            0 => b.reshape(x, &[1, 1, 1])?,
            1 => b.reshape(x, &[1, s[0], 1])?,
            2 => b.reshape(x, &[s[0], s[1], 1])?,
            _ => x,
        });
    }
    one(b.cat(&parts, 2)?)
}

/// `tensor_split` of `self` along `dim` by the node's `sections` or `indices`.
fn split_along(b: &mut Builder, n: &Node, dim: i64) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let outs = if let Some(s) = opt_int(n, "sections")? {
        let len = b.sizes(x)?[dim as usize];
        if s <= 0 || len % s as usize != 0 {
            return Err(format!("{len} does not split into {s} equal sections"));
        }
        b.list(
            "aten.tensor_split.sections",
            vec![
                ("self", Arg::Tensor(x)),
                ("sections", Arg::Int(s)),
                ("dim", Arg::Int(dim)),
            ],
        )?
    } else {
        let idx = ints(n, "indices")?.ok_or("no sections or indices")?;
        b.list(
            "aten.tensor_split.indices",
            vec![
                ("self", Arg::Tensor(x)),
                ("indices", Arg::Ints(idx)),
                ("dim", Arg::Int(dim)),
            ],
        )?
    };
    Ok(vec![Arg::Tensors(outs)])
}

pub(super) fn hsplit(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let r = b.rank(tensor(n, "self")?)?;
    if r == 0 {
        return Err("hsplit of a 0-d tensor".into());
    }
    split_along(b, n, if r == 1 { 0 } else { 1 })
}
pub(super) fn vsplit(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    if b.rank(tensor(n, "self")?)? < 2 {
        return Err("vsplit needs 2 or more dims".into());
    }
    split_along(b, n, 0)
}
pub(super) fn dsplit(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    if b.rank(tensor(n, "self")?)? < 3 {
        return Err("dsplit needs 3 or more dims".into());
    }
    split_along(b, n, 2)
}

/// `diag_embed(x, offset, dim1, dim2)`: x's last dim on a diagonal of a new square pair of
/// dims (zeros elsewhere).
fn embed(b: &mut Builder, x: usize, offset: i64, dim1: i64, dim2: i64) -> DResult<usize> {
    let s = b.sizes(x)?;
    let r = s.len();
    if r == 0 {
        return Err("diag_embed of a 0-d tensor".into());
    }
    let dtype = b.dtype(x)?;
    let m = s[r - 1] as i64 + offset.abs();
    // x padded to length m on its last dim: x[i] sits on row i (offset >= 0) or column i.
    let xp = if offset != 0 {
        let mut zs: Vec<i64> = s.iter().map(|&d| d as i64).collect();
        zs[r - 1] = offset.abs();
        let z = b.full(&zs, 0.0, dtype)?;
        b.cat(&[x, z], -1)?
    } else {
        x
    };
    let vals = if offset >= 0 {
        b.unsqueeze(xp, -1)?
    } else {
        b.unsqueeze(xp, -2)?
    };
    let cols = b.arange(0, m, crate::DType::I64)?;
    let rows0 = b.arange(0, m, crate::DType::I64)?;
    let rows = b.unsqueeze(rows0, -1)?;
    let diff = b.bin("sub", cols, rows)?;
    let on = b.cmp_s("eq", diff, Arg::Int(offset))?;
    let zero = b.scalar(0.0, dtype)?;
    let y = b.where_(on, vals, zero)?;
    // y is [..., m (dim1), m (dim2)]: move those two dims where the caller wants them.
    let out_rank = r + 1;
    let d1 = wrap(dim1, out_rank)? as usize;
    let d2 = wrap(dim2, out_rank)? as usize;
    if d1 == d2 {
        return Err("diag_embed: dim1 and dim2 are the same".into());
    }
    let mut batch = 0..out_rank - 2;
    let perm: Vec<i64> = (0..out_rank)
        .map(|k| {
            if k == d1 {
                (out_rank - 2) as i64
            } else if k == d2 {
                (out_rank - 1) as i64
            } else {
                batch.next().unwrap_or(0) as i64
            }
        })
        .collect();
    if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
        Ok(y)
    } else {
        b.permute(y, &perm)
    }
}

pub(super) fn diag_embed(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let offset = int(n, "offset", Some(0))?;
    let d1 = int(n, "dim1", Some(-2))?;
    let d2 = int(n, "dim2", Some(-1))?;
    one(embed(b, x, offset, d1, d2)?)
}

fn diag_of(b: &mut Builder, x: usize, k: i64) -> DResult<usize> {
    match b.rank(x)? {
        1 => embed(b, x, k, 0, 1),
        2 => {
            let d = b.diagonal(x, k, 0, 1)?;
            // A copy, as torch's diag returns (not a view).
            b.un("clone", d)
        }
        r => Err(format!("diag of a {r}-d tensor")),
    }
}

pub(super) fn diag(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let k = int(n, "diagonal", Some(0))?;
    one(diag_of(b, x, k)?)
}

pub(super) fn diagflat(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let k = int(n, "offset", Some(0))?;
    let flat = b.reshape(x, &[-1])?;
    one(embed(b, flat, k, 0, 1)?)
}

pub(super) fn linalg_diagonal(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "A")?;
    let offset = int(n, "offset", Some(0))?;
    let d1 = int(n, "dim1", Some(-2))?;
    let d2 = int(n, "dim2", Some(-1))?;
    one(b.diagonal(x, offset, d1, d2)?)
}

pub(super) fn kron(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let y = tensor(n, "other")?;
    let (sx, sy) = (b.sizes(x)?, b.sizes(y)?);
    let nd = sx.len().max(sy.len());
    let pad = |s: &[usize]| -> Vec<i64> {
        let mut v = vec![1i64; nd - s.len()];
        v.extend(s.iter().map(|&d| d as i64));
        v
    };
    let (px, py) = (pad(&sx), pad(&sy));
    let vx: Vec<i64> = px.iter().flat_map(|&d| [d, 1]).collect();
    let vy: Vec<i64> = py.iter().flat_map(|&d| [1, d]).collect();
    let a = b.reshape(x, &vx)?;
    let c = b.reshape(y, &vy)?;
    let m = b.bin("mul", a, c)?;
    let out: Vec<i64> = px.iter().zip(&py).map(|(a, c)| a * c).collect();
    one(b.reshape(m, &out)?)
}

/// The dtype torch gives output `i` of `n`.
fn out_dtype(b: &Builder, n: &Node) -> DResult<crate::DType> {
    match n.outputs.first() {
        Some(Arg::Tensor(v)) => match &b.g.values[*v].kind {
            ValueKind::Tensor { dtype, .. } => Ok(*dtype),
            _ => Err("output is not a tensor".into()),
        },
        _ => Err("no tensor output".into()),
    }
}

pub(super) fn block_diag(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = tensors(n, "tensors")?;
    let dtype = out_dtype(b, n)?;
    let mut mats = Vec::new();
    for x in xs {
        let s = b.sizes(x)?;
        let x = b.cast(x, dtype)?;
        mats.push(match s.len() {
            0 => b.reshape(x, &[1, 1])?,
            1 => b.reshape(x, &[1, s[0] as i64])?,
            2 => x,
            r => return Err(format!("block_diag of a {r}-d tensor")),
        });
    }
    let shapes = mats
        .iter()
        .map(|&m| b.sizes(m))
        .collect::<DResult<Vec<_>>>()?;
    let cols: i64 = shapes.iter().map(|s| s[1] as i64).sum();
    let mut rows = Vec::new();
    let mut left = 0i64;
    for (&m, s) in mats.iter().zip(&shapes) {
        let (r, c) = (s[0] as i64, s[1] as i64);
        let mut parts = Vec::new();
        if left > 0 {
            parts.push(b.full(&[r, left], 0.0, dtype)?);
        }
        parts.push(m);
        let right = cols - left - c;
        if right > 0 {
            parts.push(b.full(&[r, right], 0.0, dtype)?);
        }
        rows.push(if parts.len() == 1 {
            m
        } else {
            b.cat(&parts, 1)?
        });
        left += c;
    }
    if rows.is_empty() {
        return one(b.full(&[0, 0], 0.0, dtype)?);
    }
    one(b.cat(&rows, 0)?)
}

pub(super) fn cartesian_prod(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let xs = tensors(n, "tensors")?;
    if xs.len() == 1 {
        return one(xs[0]);
    }
    let gs = grids(b, &xs, false)?;
    let flat = gs
        .into_iter()
        .map(|g| b.reshape(g, &[-1]))
        .collect::<DResult<Vec<_>>>()?;
    one(b.stack(&flat, 1)?)
}

pub(super) fn channel_shuffle(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let g = int(n, "groups", None)?;
    let s: Vec<i64> = b.sizes(x)?.iter().map(|&d| d as i64).collect();
    if s.len() < 3 || g <= 0 || s[1] % g != 0 {
        return Err(format!("channel_shuffle of {s:?} in {g} groups"));
    }
    let mut grouped = vec![s[0], g, s[1] / g];
    grouped.extend(&s[2..]);
    let v = b.reshape(x, &grouped)?;
    let t = b.transpose(v, 1, 2)?;
    one(b.reshape(t, &s)?)
}

pub(super) fn take_along_dim(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let idx = tensor(n, "indices")?;
    let Some(dim) = opt_int(n, "dim")? else {
        let fx = b.reshape(x, &[-1])?;
        let fi = b.reshape(idx, &[-1])?;
        return one(b.gather(fx, 0, fi)?);
    };
    let (sx, si) = (b.sizes(x)?, b.sizes(idx)?);
    if sx.len() != si.len() {
        return Err("take_along_dim: self and indices differ in rank".into());
    }
    let d = wrap(dim, sx.len())? as usize;
    // Broadcast every dim but `dim`.
    let mut bx = sx.clone();
    let mut bi = si.clone();
    bx[d] = 1;
    bi[d] = 1;
    let common = broadcast_shape(&[bx, bi])?;
    let mut tx: Vec<i64> = common.iter().map(|&s| s as i64).collect();
    let mut ti = tx.clone();
    tx[d] = sx[d] as i64;
    ti[d] = si[d] as i64;
    let xe = if tx.iter().zip(&sx).all(|(&a, &c)| a == c as i64) {
        x
    } else {
        b.expand(x, &tx)?
    };
    let ie = if ti.iter().zip(&si).all(|(&a, &c)| a == c as i64) {
        idx
    } else {
        b.expand(idx, &ti)?
    };
    one(b.gather(xe, d as i64, ie)?)
}

pub(super) fn sum_to_size(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    let size = ints(n, "size")?.ok_or("no size")?;
    let s = b.sizes(x)?;
    if size.len() > s.len() {
        return Err(format!("sum_to_size {size:?} of {s:?}"));
    }
    if size.is_empty() {
        // torch's sum_to: a full `sum` (which promotes integers to int64), even of a 0-d tensor.
        return one(b.un("sum", x)?);
    }
    let lead = s.len() - size.len();
    let inner: Vec<i64> = size
        .iter()
        .enumerate()
        .filter(|(i, &t)| t == 1 && s[lead + i] != 1)
        .map(|(i, _)| (lead + i) as i64)
        .collect();
    let mut y = x;
    if !inner.is_empty() {
        y = b.sum(y, &inner, true)?;
    }
    if lead > 0 {
        let dims: Vec<i64> = (0..lead as i64).collect();
        y = b.sum(y, &dims, false)?;
    }
    one(y)
}

/// `mH` / `matrix_H`: the conjugate transpose of the last two dims (real tensors).
pub(super) fn adjoint(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let x = tensor(n, "self")?;
    if b.dtype(x)?.is_complex() {
        return Err("conjugate transpose of a complex tensor".into());
    }
    if b.rank(x)? < 2 {
        return Err("mH needs 2 or more dims".into());
    }
    one(b.transpose(x, -2, -1)?)
}

/// `affine_grid_generator(theta, size, align_corners)` (`F.affine_grid`): the base grid of
/// normalized pixel coordinates `(x, y[, z], 1)` times `theta`ᵀ, as torch's decomposition:
/// a `[N, H, W, 2]` grid from `theta` `[N, 2, 3]` and size `[N, C, H, W]`, or
/// `[N, D, H, W, 3]` from `[N, 3, 4]` and `[N, C, D, H, W]`.
pub(super) fn affine_grid_generator(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let theta = tensor(n, "theta")?;
    let size = ints(n, "size")?.ok_or("no size")?;
    let align = boolean(n, "align_corners", false)?;
    let spatial = match size.len() {
        4 => 2,
        5 => 3,
        r => return Err(format!("size of {r} dims (4 or 5 expected)")),
    };
    let (batch, dims) = (size[0], &size[2..]);
    let want = [batch as usize, spatial, spatial + 1];
    if b.sizes(theta)? != want {
        return Err(format!("theta must be {want:?} for size {size:?}"));
    }
    let dtype = b.dtype(theta)?;
    // One coordinate per spatial dim, x (along the last dim) first, then the ones.
    let mut coords = Vec::new();
    for (k, &steps) in dims.iter().rev().enumerate() {
        // torch's _linspace_from_neg_one: linspace(-a, a, steps), a = (steps - 1) / steps
        // unless align_corners; 0 for a single step.
        let a = match (steps > 1, align) {
            (false, _) => 0.0,
            (true, true) => 1.0,
            (true, false) => (steps - 1) as f64 / steps as f64,
        };
        let step = if steps > 1 {
            2.0 * a / (steps - 1) as f64
        } else {
            0.0
        };
        let i = b.arange(0, steps, dtype)?;
        let scaled = b.bin_s("mul", i, step)?;
        let line = b.bin_s("add", scaled, -a)?;
        let mut shape = vec![1; spatial];
        shape[spatial - 1 - k] = steps;
        let line = b.reshape(line, &shape)?;
        coords.push(b.expand(line, dims)?);
    }
    coords.push(b.full(dims, 1.0, dtype)?);
    let base = b.stack(&coords, -1)?;
    let pixels: i64 = dims.iter().product();
    let width = spatial as i64 + 1;
    let base = b.reshape(base, &[1, pixels, width])?;
    let base = b.expand(base, &[batch, pixels, width])?;
    let theta_t = b.transpose(theta, 1, 2)?;
    let grid = b.t(
        "aten.bmm.default",
        vec![("self", Arg::Tensor(base)), ("mat2", Arg::Tensor(theta_t))],
    )?;
    let mut out = vec![batch];
    out.extend_from_slice(dims);
    out.push(spatial as i64);
    one(b.reshape(grid, &out)?)
}

/// `prims.convert_element_type(a, dtype)` (left in some core ATen programs by torch's own
/// decompositions): the copy into `dtype` that `_to_copy` makes.
pub(super) fn convert_element_type(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let a = tensor(n, "a")?;
    let dtype = match n.arg("dtype") {
        Some(Arg::ScalarType(d)) => *d,
        other => return Err(format!("argument 'dtype' is {other:?}, not a dtype")),
    };
    one(b.t(
        "aten._to_copy.default",
        vec![("self", Arg::Tensor(a)), ("dtype", Arg::ScalarType(dtype))],
    )?)
}
