//! Decompositions of the core ATen backward ops of joint training graphs: layer and group
//! norm backward (torch's `_decomp` formulas, step for step), `convolution_backward` (the
//! input gradient is the transposed convolution of the output gradient, or the plain one for
//! a transposed layer; the weight gradient a grouped convolution of the input with the
//! output gradient), the average pooling backwards (window matrices multiplied in on both
//! sides), `embedding_dense_backward` and `max_pool2d_with_indices_backward` (gathers of
//! the gradients onto the rows or positions they came from: `index_add` / `scatter_add`,
//! whose GPU kernels combine each target's entries in order, with no float atomics).
//!
//! Outputs that `output_mask` turns off are `None` in torch and [`Arg::None`] here.

use super::{boolean, int, ints, opt_int, opt_tensor, tensor, Builder, DResult};
use crate::dtype::DType;
use crate::program::{Arg, Node};

/// The node's `output_mask` (three flags).
fn output_mask(n: &Node) -> DResult<[bool; 3]> {
    match n.arg("output_mask") {
        Some(Arg::Bools(v)) if v.len() == 3 => Ok([v[0], v[1], v[2]]),
        other => Err(format!("output_mask is {other:?}, not three bools")),
    }
}

/// The three optional results in torch's order, each `None` where it is off.
fn results(r: [Option<usize>; 3]) -> Vec<Arg> {
    r.iter().map(|v| v.map_or(Arg::None, Arg::Tensor)).collect()
}

fn i64s(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}

/// The float dtype the gradients are computed in: f32 for the half types (as
/// `utils.get_computation_dtype`), the tensor's own otherwise.
fn computation(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// `sum(x, dims)`, or `x` itself when `dims` is empty (an empty list would sum all).
fn sum_dims(b: &mut Builder, x: usize, dims: &[i64], keepdim: bool) -> DResult<usize> {
    if dims.is_empty() {
        Ok(x)
    } else {
        b.sum(x, dims, keepdim)
    }
}

pub(super) fn layer_norm(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let [m_in, m_w, m_b] = output_mask(n)?;
    let x0 = tensor(n, "input")?;
    let xs = b.sizes(x0)?;
    let shape = ints(n, "normalized_shape")?.ok_or("normalized_shape is missing")?;
    let axis = xs
        .len()
        .checked_sub(shape.len())
        .filter(|&a| xs[a..] == shape.iter().map(|&d| d as usize).collect::<Vec<_>>()[..])
        .ok_or_else(|| format!("normalized_shape {shape:?} does not end the input {xs:?}"))?;
    let dt = b.dtype(x0)?;
    let ct = computation(dt);
    let (w0, bias0) = (opt_tensor(n, "weight")?, opt_tensor(n, "bias")?);
    let x = b.cast(x0, ct)?;
    let g = b.cast(tensor(n, "grad_out")?, ct)?;
    // mean and rstd: the outer dims, then ones (keepdim shape).
    let mut kept = i64s(&xs[..axis]);
    kept.resize(xs.len(), 1);
    let mean = b.cast(tensor(n, "mean")?, ct)?;
    let mean = b.reshape(mean, &kept)?;
    let rstd = b.cast(tensor(n, "rstd")?, ct)?;
    let rstd = b.reshape(rstd, &kept)?;
    let inner: Vec<i64> = (axis as i64..xs.len() as i64).collect();
    let outer: Vec<i64> = (0..axis as i64).collect();
    let count: usize = xs[axis..].iter().product();
    let centered = b.bin("sub", x, mean)?;
    let x_hat = b.bin("mul", centered, rstd)?;
    let mut d_input = None;
    if m_in {
        let gxh = match w0 {
            Some(w) => {
                let w = b.cast(w, ct)?;
                b.bin("mul", g, w)?
            }
            None => g,
        };
        let a = b.bin_s("mul", gxh, count as f64)?;
        let bsum = b.sum(gxh, &inner, true)?;
        let c1 = b.bin("mul", gxh, x_hat)?;
        let c2 = b.sum(c1, &inner, true)?;
        let c3 = b.bin("mul", x_hat, c2)?;
        let ab = b.bin("sub", a, bsum)?;
        let inner_ = b.bin("sub", ab, c3)?;
        let scale = b.bin_s("div", rstd, count as f64)?;
        let d = b.bin("mul", scale, inner_)?;
        d_input = Some(b.cast(d, dt)?);
    }
    let mut d_weight = None;
    if let (true, Some(w)) = (m_w, w0) {
        let gx = b.bin("mul", g, x_hat)?;
        let d = sum_dims(b, gx, &outer, false)?;
        let wt = b.dtype(w)?;
        d_weight = Some(b.cast(d, wt)?);
    }
    let mut d_bias = None;
    if let (true, Some(bias)) = (m_b, bias0) {
        let d = sum_dims(b, g, &outer, false)?;
        let bt = b.dtype(bias)?;
        d_bias = Some(b.cast(d, bt)?);
    }
    Ok(results([d_input, d_weight, d_bias]))
}

pub(super) fn group_norm(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let [m_in, m_w, m_b] = output_mask(n)?;
    let (x0, g0) = (tensor(n, "input")?, tensor(n, "grad_out")?);
    let xs = b.sizes(x0)?;
    let (bn, c, hxw, group) = (
        int(n, "N", None)?,
        int(n, "C", None)?,
        int(n, "HxW", None)?,
        int(n, "group", None)?,
    );
    if group <= 0 || c % group != 0 || xs.iter().product::<usize>() as i64 != bn * c * hxw {
        return Err(format!(
            "input {xs:?} is not N={bn} x C={c} x HxW={hxw} in {group} groups"
        ));
    }
    let cpg = c / group;
    let dt = b.dtype(x0)?;
    let ct = computation(dt);
    let x = b.cast(x0, ct)?;
    let g = b.cast(g0, ct)?;
    let mean = b.cast(tensor(n, "mean")?, ct)?;
    let mean = b.reshape(mean, &[bn, group])?;
    let rstd = b.cast(tensor(n, "rstd")?, ct)?;
    let rstd = b.reshape(rstd, &[bn, group])?;
    let gamma = opt_tensor(n, "weight")?;
    // Per (sample, channel): the sums of grad * x and of grad.
    let gx = b.bin("mul", g, x)?;
    let gx = b.reshape(gx, &[bn, c, hxw])?;
    let ds = b.sum(gx, &[2], false)?;
    let g3 = b.reshape(g, &[bn, c, hxw])?;
    let db = b.sum(g3, &[2], false)?;
    let mut d_input = None;
    if m_in {
        let s = 1.0 / (hxw * cpg) as f64;
        let rstd3 = b.unsqueeze(rstd, -1)?;
        let (ds_w, db_w, c1) = match gamma {
            Some(w) => {
                let w = b.cast(w, ct)?;
                let w1 = b.unsqueeze(w, 0)?;
                let dsw = b.bin("mul", ds, w1)?;
                let dbw = b.bin("mul", db, w1)?;
                let wg = b.reshape(w, &[1, group, cpg])?;
                (dsw, dbw, b.bin("mul", rstd3, wg)?)
            }
            None => (ds, db, rstd3),
        };
        let ds_w = b.reshape(ds_w, &[bn, group, cpg])?;
        let ds_val = b.sum(ds_w, &[2], false)?;
        let db_w = b.reshape(db_w, &[bn, group, cpg])?;
        let db_val = b.sum(db_w, &[2], false)?;
        // c2 = (db_val * mean - ds_val) * rstd^3 * s; c3 = -c2 * mean - db_val * rstd * s
        let dbm = b.bin("mul", db_val, mean)?;
        let c2 = b.bin("sub", dbm, ds_val)?;
        let c2 = b.bin("mul", c2, rstd)?;
        let c2 = b.bin("mul", c2, rstd)?;
        let c2 = b.bin("mul", c2, rstd)?;
        let c2 = b.bin_s("mul", c2, s)?;
        let c2m = b.bin("mul", c2, mean)?;
        let c3a = b.un("neg", c2m)?;
        let dbr = b.bin("mul", db_val, rstd)?;
        let dbr = b.bin_s("mul", dbr, s)?;
        let c3 = b.bin("sub", c3a, dbr)?;
        let c1 = b.unsqueeze(c1, -1)?;
        let c2 = b.reshape(c2, &[bn, group, 1, 1])?;
        let c3 = b.reshape(c3, &[bn, group, 1, 1])?;
        let g4 = b.reshape(g, &[bn, group, cpg, hxw])?;
        let x4 = b.reshape(x, &[bn, group, cpg, hxw])?;
        let t1 = b.bin("mul", g4, c1)?;
        let t2 = b.bin("mul", x4, c2)?;
        let d = b.bin("add", t1, t2)?;
        let d = b.bin("add", d, c3)?;
        let d = b.reshape(d, &i64s(&xs))?;
        d_input = Some(b.cast(d, dt)?);
    }
    let mut d_gamma = None;
    if m_w {
        let ds3 = b.reshape(ds, &[bn, group, cpg])?;
        let db3 = b.reshape(db, &[bn, group, cpg])?;
        let mean3 = b.unsqueeze(mean, -1)?;
        let dbm = b.bin("mul", db3, mean3)?;
        let t = b.bin("sub", ds3, dbm)?;
        let rstd3 = b.unsqueeze(rstd, -1)?;
        let t = b.bin("mul", t, rstd3)?;
        let t = b.sum(t, &[0], false)?;
        let t = b.reshape(t, &[c])?;
        let gt = match gamma {
            Some(w) => b.dtype(w)?,
            None => dt,
        };
        d_gamma = Some(b.cast(t, gt)?);
    }
    let mut d_bias = None;
    if m_b {
        let t = b.sum(db, &[0], false)?;
        d_bias = Some(b.cast(t, dt)?);
    }
    Ok(results([d_input, d_gamma, d_bias]))
}

/// A convolution's geometry as `convolution_backward` gives it.
struct ConvArgs {
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    groups: i64,
}

/// `aten.convolution(x, w)` without bias.
fn convolution(
    b: &mut Builder,
    x: usize,
    w: usize,
    a: &ConvArgs,
    transposed: bool,
    output_padding: &[i64],
) -> DResult<usize> {
    b.t(
        "aten.convolution.default",
        vec![
            ("input", Arg::Tensor(x)),
            ("weight", Arg::Tensor(w)),
            ("bias", Arg::None),
            ("stride", Arg::Ints(a.stride.clone())),
            ("padding", Arg::Ints(a.padding.clone())),
            ("dilation", Arg::Ints(a.dilation.clone())),
            ("transposed", Arg::Bool(transposed)),
            ("output_padding", Arg::Ints(output_padding.to_vec())),
            ("groups", Arg::Int(a.groups)),
        ],
    )
}

/// The weight gradient of a (plain) convolution of `x` [N, Cx, *I] giving `gy` [N, Cy, *O]:
/// [Cy, Cx / groups, *k]. A convolution over the batch: the input's channels become the
/// batch and the samples (per group) the channels, `gy` is the kernel, and stride and
/// dilation trade places; the result covers at least `k` taps and is cut to them.
fn weight_grad(b: &mut Builder, x: usize, gy: usize, a: &ConvArgs, k: &[usize]) -> DResult<usize> {
    let xs = b.sizes(x)?;
    let (n, cx, g) = (xs[0] as i64, xs[1] as i64, a.groups);
    let nd = k.len();
    let mut grouped = vec![n, g, cx / g];
    grouped.extend(i64s(&xs[2..]));
    let x5 = b.reshape(x, &grouped)?;
    let mut perm = vec![2, 1, 0];
    perm.extend(3..3 + nd as i64);
    let xp = b.permute(x5, &perm)?;
    let mut batched = vec![cx / g, g * n];
    batched.extend(i64s(&xs[2..]));
    let xp = b.reshape(xp, &batched)?;
    let gt = b.transpose(gy, 0, 1)?;
    let swapped = ConvArgs {
        stride: a.dilation.clone(),
        padding: a.padding.clone(),
        dilation: a.stride.clone(),
        groups: g,
    };
    let mut gw = convolution(b, xp, gt, &swapped, false, &vec![0; nd])?;
    let got = b.sizes(gw)?;
    for (i, &kk) in k.iter().enumerate() {
        if got[2 + i] != kk {
            gw = b.slice(gw, 2 + i as i64, 0, kk as i64, 1)?;
        }
    }
    b.transpose(gw, 0, 1)
}

pub(super) fn convolution_backward(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let [m_in, m_w, m_b] = output_mask(n)?;
    let (gy, x, w) = (
        tensor(n, "grad_output")?,
        tensor(n, "input")?,
        tensor(n, "weight")?,
    );
    let (xs, ws, gs) = (b.sizes(x)?, b.sizes(w)?, b.sizes(gy)?);
    let nd = ws.len().saturating_sub(2);
    if nd == 0 || xs.len() != nd + 2 || gs.len() != nd + 2 {
        return Err(format!(
            "input {xs:?}, weight {ws:?} and grad_output {gs:?} are not one batched convolution"
        ));
    }
    let per_dim = |name: &str| -> DResult<Vec<i64>> {
        let v = ints(n, name)?.ok_or_else(|| format!("{name} is missing"))?;
        match v.len() {
            1 => Ok(vec![v[0]; nd]),
            l if l == nd => Ok(v),
            _ => Err(format!("{name} {v:?} does not have {nd} entries")),
        }
    };
    let a = ConvArgs {
        stride: per_dim("stride")?,
        padding: per_dim("padding")?,
        dilation: per_dim("dilation")?,
        groups: int(n, "groups", Some(1))?,
    };
    if a.groups <= 0 || a.stride.iter().chain(&a.dilation).any(|&v| v <= 0) {
        return Err("groups, strides and dilations must be positive".into());
    }
    let transposed = boolean(n, "transposed", false)?;
    let k = &ws[2..];
    let mut d_input = None;
    if m_in {
        d_input = Some(if transposed {
            // The input gradient of a transposed convolution is the plain one.
            convolution(b, gy, w, &a, false, &vec![0; nd])?
        } else {
            // The transposed convolution, its output padded out to the input's sizes.
            let op: Vec<i64> = (0..nd)
                .map(|i| {
                    let reach = (gs[2 + i] as i64 - 1) * a.stride[i] - 2 * a.padding[i]
                        + a.dilation[i] * (k[i] as i64 - 1)
                        + 1;
                    xs[2 + i] as i64 - reach
                })
                .collect();
            convolution(b, gy, w, &a, true, &op)?
        });
    }
    let mut d_weight = None;
    if m_w {
        d_weight = Some(if transposed {
            // The kernel maps the output gradient's positions onto the input's: the same
            // formula with the two in swapped roles.
            weight_grad(b, gy, x, &a, k)?
        } else {
            weight_grad(b, x, gy, &a, k)?
        });
    }
    let mut d_bias = None;
    if m_b {
        let mut dims = vec![0];
        dims.extend(2..2 + nd as i64);
        d_bias = Some(b.sum(gy, &dims, false)?);
    }
    Ok(results([d_input, d_weight, d_bias]))
}

/// Which of `cols` (a [1, C] row of positions) each output window `[lo, hi)` covers: a
/// [R, C] matrix of 0 / 1 in `dtype` (`lo`, `hi`: [R, 1] columns).
fn windows(b: &mut Builder, lo: usize, hi: usize, cols: usize, dtype: DType) -> DResult<usize> {
    let ge = b.bin("ge", cols, lo)?;
    let lt = b.bin("lt", cols, hi)?;
    let both = b.bin("logical_and", ge, lt)?;
    b.cast(both, dtype)
}

/// `[start, end)` of positions `start..end` as a [1, end - start] row (f32: exact for the
/// sizes a tensor has).
fn positions(b: &mut Builder, start: i64, end: i64) -> DResult<usize> {
    let p = b.arange(start, end, DType::F32)?;
    b.reshape(p, &[1, end - start])
}

/// The output windows `0..out` of a pooling as an [out, 1] column of f32 indices.
fn outputs(b: &mut Builder, out: usize) -> DResult<usize> {
    let o = b.arange(0, out as i64, DType::F32)?;
    b.reshape(o, &[out as i64, 1])
}

/// The pooling backward as window matrices on both sides: `Mh^T @ (gy / divisor) @ Mw`,
/// where `M[o, i]` says whether output window `o` covers input position `i`. Both poolings
/// here have separable windows; the divisor is applied to `gy` first.
fn spread(b: &mut Builder, gy: usize, mh: usize, mw: usize) -> DResult<usize> {
    let t = b.t(
        "aten.matmul.default",
        vec![("self", Arg::Tensor(gy)), ("other", Arg::Tensor(mw))],
    )?;
    let mht = b.transpose(mh, 0, 1)?;
    b.t(
        "aten.matmul.default",
        vec![("self", Arg::Tensor(mht)), ("other", Arg::Tensor(t))],
    )
}

/// The last two sizes of the input and of the output gradient (a pooling's planes lead).
fn planes(b: &mut Builder, x: usize, gy: usize) -> DResult<([usize; 2], [usize; 2])> {
    let (xs, gs) = (b.sizes(x)?, b.sizes(gy)?);
    let r = xs.len();
    if !(3..=4).contains(&r) || gs.len() != r || xs[..r - 2] != gs[..r - 2] {
        return Err(format!(
            "input {xs:?} and grad_output {gs:?} are not 3-D or 4-D with the same planes"
        ));
    }
    Ok(([xs[r - 2], xs[r - 1]], [gs[r - 2], gs[r - 1]]))
}

/// One dim of `avg_pool2d`: the window matrix over the input and the window sizes torch
/// divides by (clipped to the padded input, or to the input without `count_include_pad`).
fn avg_dim(
    b: &mut Builder,
    (input, out): (usize, usize),
    (k, s, p): (i64, i64, i64),
    include_pad: bool,
    dt: DType,
) -> DResult<(usize, usize)> {
    let o = outputs(b, out)?;
    let lo = b.bin_s("mul", o, s as f64)?;
    let lo = b.bin_s("sub", lo, p as f64)?;
    let hi = b.bin_s("add", lo, k as f64)?;
    let cols = positions(b, 0, input as i64)?;
    let m = windows(b, lo, hi, cols, dt)?;
    let counted = if include_pad {
        let padded = positions(b, -p, input as i64 + p)?;
        windows(b, lo, hi, padded, dt)?
    } else {
        m
    };
    let size = b.sum(counted, &[1], false)?;
    Ok((m, size))
}

pub(super) fn avg_pool2d(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let (gy, x) = (tensor(n, "grad_output")?, tensor(n, "self")?);
    let (ins, outs) = planes(b, x, gy)?;
    let pair = |name: &str, default: Option<&[i64]>| -> DResult<[i64; 2]> {
        let v = ints(n, name)?.unwrap_or_default();
        let v = if v.is_empty() {
            default
                .ok_or_else(|| format!("{name} is missing"))?
                .to_vec()
        } else {
            v
        };
        match v[..] {
            [a] => Ok([a, a]),
            [a, c] => Ok([a, c]),
            _ => Err(format!("{name} {v:?} does not have 1 or 2 entries")),
        }
    };
    let k = pair("kernel_size", None)?;
    let s = pair("stride", Some(&k))?;
    let p = pair("padding", Some(&[0]))?;
    if k.iter().chain(&s).any(|&v| v <= 0) || p.iter().any(|&v| v < 0) {
        return Err(format!(
            "kernel_size {k:?} and stride {s:?} must be positive, padding {p:?} not negative"
        ));
    }
    let include_pad = boolean(n, "count_include_pad", true)?;
    let dt = b.dtype(gy)?;
    let (mh, sh) = avg_dim(b, (ins[0], outs[0]), (k[0], s[0], p[0]), include_pad, dt)?;
    let (mw, sw) = avg_dim(b, (ins[1], outs[1]), (k[1], s[1], p[1]), include_pad, dt)?;
    let scaled = match opt_int(n, "divisor_override")? {
        Some(0) => return Err("divisor_override is 0".into()),
        Some(d) => b.bin_s("div", gy, d as f64)?,
        None => {
            let sh = b.reshape(sh, &[outs[0] as i64, 1])?;
            let size = b.bin("mul", sh, sw)?;
            b.bin("div", gy, size)?
        }
    };
    Ok(vec![Arg::Tensor(spread(b, scaled, mh, mw)?)])
}

/// One dim of adaptive average pooling: the window matrix (window `o` spans
/// `[floor(o * in / out), ceil((o + 1) * in / out))`) and the window sizes.
fn adaptive_dim(b: &mut Builder, input: usize, out: usize, dt: DType) -> DResult<(usize, usize)> {
    let o = outputs(b, out)?;
    let lo = b.bin_s("mul", o, input as f64)?;
    let lo = b.bin_s("div", lo, out as f64)?;
    let lo = b.un("floor", lo)?;
    let hi = b.bin_s("add", o, 1.0)?;
    let hi = b.bin_s("mul", hi, input as f64)?;
    let hi = b.bin_s("div", hi, out as f64)?;
    let hi = b.un("ceil", hi)?;
    let cols = positions(b, 0, input as i64)?;
    let m = windows(b, lo, hi, cols, dt)?;
    let size = b.sum(m, &[1], false)?;
    Ok((m, size))
}

pub(super) fn adaptive_avg_pool2d(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let (gy, x) = (tensor(n, "grad_output")?, tensor(n, "self")?);
    let (ins, outs) = planes(b, x, gy)?;
    if outs.contains(&0) {
        return Err(format!("output sizes {outs:?} hold a 0"));
    }
    let dt = b.dtype(gy)?;
    let (mh, sh) = adaptive_dim(b, ins[0], outs[0], dt)?;
    let (mw, sw) = adaptive_dim(b, ins[1], outs[1], dt)?;
    let sh = b.reshape(sh, &[outs[0] as i64, 1])?;
    let size = b.bin("mul", sh, sw)?;
    let scaled = b.bin("div", gy, size)?;
    Ok(vec![Arg::Tensor(spread(b, scaled, mh, mw)?)])
}

/// `zeros` with the entries of `src` added at `index` along `dim`: `index_add` (one index
/// per row along `dim`) or `scatter_add` (an index per element); both GPU kernels gather each
/// target's entries in order.
fn add_at(
    b: &mut Builder,
    (target, src_name): (&str, &str),
    zeros: usize,
    dim: i64,
    index: usize,
    src: usize,
) -> DResult<usize> {
    b.t(
        target,
        vec![
            ("self", Arg::Tensor(zeros)),
            ("dim", Arg::Int(dim)),
            ("index", Arg::Tensor(index)),
            (src_name, Arg::Tensor(src)),
        ],
    )
}

/// `index_add(zeros, 0, index, source)`.
fn add_rows(b: &mut Builder, zeros: usize, index: usize, source: usize) -> DResult<usize> {
    add_at(
        b,
        ("aten.index_add.default", "source"),
        zeros,
        0,
        index,
        source,
    )
}

pub(super) fn embedding_dense(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let (gy, idx) = (tensor(n, "grad_output")?, tensor(n, "indices")?);
    let num_weights = int(n, "num_weights", None)?;
    let padding_idx = int(n, "padding_idx", Some(-1))?;
    let (gs, is) = (b.sizes(gy)?, b.sizes(idx)?);
    if num_weights < 0 || gs.len() != is.len() + 1 || gs[..is.len()] != is[..] {
        return Err(format!(
            "grad_output {gs:?} is not indices {is:?} plus one embedding dim (num_weights {num_weights})"
        ));
    }
    let (count, dim) = (is.iter().product::<usize>() as i64, gs[is.len()] as i64);
    let dt = b.dtype(gy)?;
    let ids = b.reshape(idx, &[count])?;
    let mut rows = b.reshape(gy, &[count, dim])?;
    if boolean(n, "scale_grad_by_freq", false)? {
        // Each row's gradient divided by how often its index occurs.
        let zeros = b.full(&[num_weights], 0.0, dt)?;
        let ones = b.full(&[count], 1.0, dt)?;
        let freq = add_rows(b, zeros, ids, ones)?;
        let per_row = b.index_select(freq, 0, ids)?;
        let per_row = b.unsqueeze(per_row, 1)?;
        rows = b.bin("div", rows, per_row)?;
    }
    // The padding row gets no gradient (torch's -1: none).
    let keep = b.cmp_s("ne", ids, Arg::Int(padding_idx))?;
    let keep = b.unsqueeze(keep, 1)?;
    let zero = b.scalar(0.0, dt)?;
    rows = b.where_(keep, rows, zero)?;
    let zeros = b.full(&[num_weights, dim], 0.0, dt)?;
    Ok(vec![Arg::Tensor(add_rows(b, zeros, ids, rows)?)])
}

pub(super) fn max_pool2d_with_indices(b: &mut Builder, n: &Node) -> DResult<Vec<Arg>> {
    let (gy, x, idx) = (
        tensor(n, "grad_output")?,
        tensor(n, "self")?,
        tensor(n, "indices")?,
    );
    let (ins, outs) = planes(b, x, gy)?;
    if b.sizes(idx)? != b.sizes(gy)? {
        return Err("indices and grad_output differ in shape".into());
    }
    let xs = b.sizes(x)?;
    let count = xs[..xs.len() - 2].iter().product::<usize>() as i64;
    let (per_in, per_out) = ((ins[0] * ins[1]) as i64, (outs[0] * outs[1]) as i64);
    let dt = b.dtype(x)?;
    let g = b.cast(gy, dt)?;
    let g = b.reshape(g, &[count, per_out])?;
    let at = b.reshape(idx, &[count, per_out])?;
    let zeros = b.full(&[count, per_in], 0.0, dt)?;
    let sums = add_at(b, ("aten.scatter_add.default", "src"), zeros, 1, at, g)?;
    Ok(vec![Arg::Tensor(b.reshape(sums, &i64s(&xs))?)])
}
