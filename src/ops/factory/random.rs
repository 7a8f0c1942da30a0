//! Random factories (rand, randn, randint, bernoulli, normal, uniform_, multinomial, ...) and dropout,
//! drawn from the run's seeded generator (`ctx.state.rng`). Streams are reproducible for a
//! seed but are not torch's: tests check shapes, dtypes, ranges and statistics.

use super::{one, sizes_arg};
use crate::cpu::{cast, Elem, Tensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::convert::preserved_strides;
use crate::ops::elementwise::engine::output;
use crate::ops::{OpCtx, OpTable};
use crate::program::Arg;
use crate::runtime::{RValue, Rng};
use crate::with_dtype;

pub(super) fn register(r: &mut OpTable) {
    r.define_op("aten.rand", rand, super::meta::sized);
    r.define_op("aten.rand_like", rand, super::meta::like);
    r.define_op("aten.randn", rand, super::meta::sized);
    r.define_op("aten.randn_like", rand, super::meta::like);
    r.define_op("aten.uniform", rand, super::meta::like);
    r.define_op("aten.uniform_", rand, super::meta::like);
    r.define_op("aten.normal_", rand, super::meta::like);
    r.define_op("aten.normal_functional", rand, super::meta::like);
    r.define_op("aten.randint", randint, super::meta::randint);
    r.define_op("aten.randint_like", randint, super::meta::randint);
    r.define_op("aten.random_", randint, super::meta::like);
    r.define_op(
        "aten.bernoulli",
        bernoulli,
        crate::ops::elementwise::meta::same,
    );
    r.define_op(
        "aten.bernoulli_",
        bernoulli,
        crate::ops::elementwise::meta::same,
    );
    r.define_op("aten.normal", normal, super::meta::normal);
    r.define_op("aten.exponential_", exponential, super::meta::like);
    r.define_op("aten.exponential", exponential, super::meta::like);
    r.define_op("aten.randperm", randperm, super::meta::randperm);
    r.define_op("aten.multinomial", multinomial, super::meta::multinomial);
    for op in [
        "dropout",
        "feature_dropout",
        "alpha_dropout",
        "feature_alpha_dropout",
    ] {
        r.cpu_op(&format!("aten.{op}"), dropout);
        r.cpu_op(&format!("aten.{op}_"), dropout);
    }
    r.cpu_op("aten.native_dropout", native_dropout);
    r.define(
        "aten.native_dropout_backward.default",
        native_dropout_backward,
        crate::ops::elementwise::meta::same,
    );
}

/// Mantissa bits of a float dtype: uniform samples are multiples of 2^-bits, so they are
/// exactly representable and strictly below 1 (as torch's `uniform_real_distribution`).
fn digits(d: DType) -> u32 {
    match d {
        DType::F64 => 53,
        DType::F16 => 11,
        DType::BF16 => 8,
        _ => 24,
    }
}

fn uniform01(rng: &mut Rng, bits: u32) -> f64 {
    (rng.next_u64() >> (64 - bits)) as f64 / (1u64 << bits) as f64
}

/// A tensor of `dtype` and `sizes` with values from `f`.
fn generate(dtype: DType, sizes: &[usize], mut f: impl FnMut() -> f64) -> Result<Tensor> {
    let n: usize = sizes.iter().product();
    let v: Vec<f64> = (0..n).map(|_| f()).collect();
    Tensor::from_vec(v, sizes).to_dtype(dtype)
}

fn op_name<'a>(ctx: &'a OpCtx) -> &'a str {
    ctx.target().split('.').nth(1).unwrap_or("")
}

/// rand/randn and their `_like` forms, uniform/uniform_, normal_/normal_functional.
fn rand(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let name = op_name(ctx).to_string();
    let (sizes, like) = if ctx.has("size") {
        (sizes_arg(ctx, "size")?, None)
    } else {
        let t = ctx.tensor("self")?;
        (t.sizes.clone(), Some(t))
    };
    let dtype = ctx
        .opt_dtype("dtype")?
        .or(like.as_ref().map(|t| t.dtype))
        .unwrap_or(DType::F32);
    if !dtype.is_float() {
        return Err(ctx.err(format!("is not implemented for dtype {dtype}; use randint")));
    }
    let bits = digits(dtype);
    let r = if name.starts_with("randn") || name.starts_with("normal") {
        let (mean, std) = (ctx.float_or("mean", 0.0)?, ctx.float_or("std", 1.0)?);
        if std < 0.0 {
            return Err(ctx.err(format!("normal expects std >= 0.0, but found std {std}")));
        }
        let rng = &mut ctx.state.rng;
        generate(dtype, &sizes, || mean + std * rng.normal())?
    } else {
        let (lo, hi) = (ctx.float_or("from", 0.0)?, ctx.float_or("to", 1.0)?);
        if lo > hi {
            return Err(ctx.err(format!(
                "uniform expects from <= to, but got from={lo} > to={hi}"
            )));
        }
        let rng = &mut ctx.state.rng;
        generate(dtype, &sizes, || lo + (hi - lo) * uniform01(rng, bits))?
    };
    match &like {
        Some(t) if name.ends_with('_') => output(ctx, t, r),
        _ => one(r),
    }
}

/// randint(high, size) / randint.low(low, high, size) / randint_like / random_: integers
/// uniform in [low, high).
fn randint(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let like = if ctx.has("size") {
        None
    } else {
        Some(ctx.tensor("self")?)
    };
    let sizes = match &like {
        Some(t) => t.sizes.clone(),
        None => sizes_arg(ctx, "size")?,
    };
    let low = ctx.opt_int("low")?.or(ctx.opt_int("from")?).unwrap_or(0);
    let high = match ctx.arg("high") {
        Some(Arg::Tensor(_)) => ctx.tensor("high")?.item_f64() as i64,
        _ => ctx
            .opt_int("high")?
            .or(ctx.opt_int("to")?)
            .unwrap_or(1i64 << 24),
    };
    if high <= low {
        return Err(ctx.err(format!(
            "random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )));
    }
    let dtype = ctx
        .opt_dtype("dtype")?
        .or(like.as_ref().map(|t| t.dtype))
        .unwrap_or(DType::I64);
    let range = (high as i128 - low as i128) as u128;
    let n: usize = sizes.iter().product();
    let rng = &mut ctx.state.rng;
    let vals: Vec<i64> = (0..n)
        .map(|_| (low as i128 + (rng.next_u64() as u128 % range) as i128) as i64)
        .collect();
    let r = with_dtype!(dtype, T => Tensor::from_vec(vals.into_iter().map(cast::<i64, T>).collect(), &sizes),
        else return Err(ctx.err(format!("dtype {dtype} is not supported"))));
    match &like {
        Some(t) if op_name(ctx).ends_with('_') => output(ctx, t, r),
        _ => one(r),
    }
}

/// bernoulli(self) draws with probabilities `self`; bernoulli.p / bernoulli_.float with a
/// number `p`; bernoulli.Tensor / bernoulli_.Tensor with a tensor `p` broadcast to `self`.
fn bernoulli(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let probs: Vec<f64> = match ctx.arg("p") {
        None | Some(Arg::None) => t.to_vec::<f64>(),
        Some(Arg::Tensor(_)) => {
            let p = ctx.tensor("p")?;
            p.expand_to(&t.sizes)
                .map_err(|_| {
                    ctx.err(format!(
                        "p of shape {:?} cannot be broadcast to {:?}",
                        p.sizes, t.sizes
                    ))
                })?
                .to_vec::<f64>()
        }
        Some(_) => vec![ctx.float("p")?; t.numel()],
    };
    if let Some(bad) = probs.iter().find(|p| !(0.0..=1.0).contains(*p)) {
        return Err(ctx.err(format!("bernoulli expects 0 <= p <= 1, got {bad}")));
    }
    let rng = &mut ctx.state.rng;
    let vals: Vec<f64> = probs
        .iter()
        .map(|&p| if uniform01(rng, 53) < p { 1.0 } else { 0.0 })
        .collect();
    let r = Tensor::from_vec(vals, &t.sizes).to_dtype(t.dtype)?;
    output(ctx, &t, r)
}

/// normal with tensor mean and/or std (the result takes their broadcast shape), or with
/// numbers and a `size`.
fn normal(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let get = |name: &str| -> Result<Option<Tensor>> {
        match ctx.arg(name) {
            Some(Arg::Tensor(_)) => ctx.tensor(name).map(Some),
            _ => Ok(None),
        }
    };
    let (mt, st) = (get("mean")?, get("std")?);
    let (sizes, dtype) = match (&mt, &st) {
        (None, None) => (
            sizes_arg(ctx, "size")?,
            ctx.opt_dtype("dtype")?.unwrap_or(DType::F32),
        ),
        (Some(m), None) => (m.sizes.clone(), m.dtype),
        (None, Some(s)) => (s.sizes.clone(), s.dtype),
        (Some(m), Some(s)) => (
            crate::ops::elementwise::engine::broadcast(ctx, &m.sizes, &s.sizes)?,
            crate::cpu::promote::promote_types(m.dtype, s.dtype),
        ),
    };
    let n: usize = sizes.iter().product();
    let vals = |t: &Option<Tensor>, name: &str| -> Result<Vec<f64>> {
        Ok(match t {
            Some(t) => t.expand_to(&sizes)?.to_vec::<f64>(),
            None => vec![ctx.float_or(name, if name == "std" { 1.0 } else { 0.0 })?; n],
        })
    };
    let (means, stds) = (vals(&mt, "mean")?, vals(&st, "std")?);
    if let Some(bad) = stds.iter().find(|&&s| s < 0.0) {
        return Err(ctx.err(format!("normal expects std >= 0.0, but found std {bad}")));
    }
    let rng = &mut ctx.state.rng;
    let v: Vec<f64> = means
        .iter()
        .zip(&stds)
        .map(|(&m, &s)| m + s * rng.normal())
        .collect();
    one(Tensor::from_vec(v, &sizes).to_dtype(dtype)?)
}

/// exponential_(self, lambd): `-ln(1 - u) / lambd` in place (`exponential`: a new tensor).
fn exponential(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let lambd = ctx.float_or("lambd", 1.0)?;
    if lambd <= 0.0 || !t.dtype.is_float() {
        return Err(ctx.err(format!(
            "exponential_ expects lambd > 0 and a float tensor, got {lambd} and {}",
            t.dtype
        )));
    }
    let bits = digits(t.dtype);
    let rng = &mut ctx.state.rng;
    let r = generate(t.dtype, &t.sizes, || {
        -(1.0 - uniform01(rng, bits)).ln() / lambd
    })?;
    output(ctx, &t, r)
}

/// randperm(n): a uniformly random permutation of 0..n (Fisher–Yates).
fn randperm(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let n = ctx.int("n")?;
    if n < 0 {
        return Err(ctx.err(format!("n must be non-negative, got {n}")));
    }
    super::check_numel(ctx, n as u64)?;
    let dtype = ctx.opt_dtype("dtype")?.unwrap_or(DType::I64);
    let mut v: Vec<i64> = (0..n).collect();
    let rng = &mut ctx.state.rng;
    for i in (1..v.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    let len = v.len();
    let r = with_dtype!(dtype, T => Tensor::from_vec(v.into_iter().map(cast::<i64, T>).collect(), &[len]),
        else return Err(ctx.err(format!("dtype {dtype} is not supported"))));
    one(r)
}

/// The most categories `multinomial` samples from (torch's limit).
const MULTINOMIAL_MAX_CATEGORIES: usize = 1 << 24;
/// The most row steps of one `multinomial` without replacement (rows x samples x
/// categories; seconds of work).
const MULTINOMIAL_MAX_STEPS: u128 = 1 << 32;

/// The checked arguments of `multinomial(self, num_samples, replacement)`: `rows` rows of
/// `cats` non-negative finite weights (row-major, f64) with a positive sum.
pub struct Multinomial {
    pub rows: usize,
    pub cats: usize,
    pub samples: usize,
    pub replacement: bool,
    /// Whether the arithmetic is f32 (every input dtype but float64), as on the GPU.
    pub f32: bool,
}

impl Multinomial {
    /// torch's checks, in torch's order and with its messages (the weights are checked
    /// separately by [`Multinomial::check_weights`], which needs the values).
    pub fn parse(
        sizes: &[usize],
        dtype: DType,
        samples: i64,
        replacement: bool,
    ) -> std::result::Result<Multinomial, String> {
        if !dtype.is_float() {
            return Err(format!(
                "multinomial only supports floating-point dtypes for input, got: {dtype}"
            ));
        }
        let (rows, cats) = match sizes {
            [c] => (1, *c),
            [r, c] => (*r, *c),
            _ => return Err("prob_dist must be 1 or 2 dim".into()),
        };
        if samples <= 0 {
            return Err("cannot sample n_sample <= 0 samples".into());
        }
        let samples = samples as usize;
        if !replacement && samples > cats {
            return Err(
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement".into(),
            );
        }
        if cats > MULTINOMIAL_MAX_CATEGORIES {
            return Err("number of categories cannot exceed 2^24".into());
        }
        // Without replacement each sample is a pass over its row (sequential draws, the
        // same on CPU and GPU): bounded so that a program cannot ask for hours of work.
        let steps = (rows as u128) * (samples as u128) * (cats as u128);
        if !replacement && steps > MULTINOMIAL_MAX_STEPS {
            return Err(format!(
                "multinomial without replacement takes a pass over the row per sample: \
                 {rows} rows x {samples} samples x {cats} categories is more than \
                 {MULTINOMIAL_MAX_STEPS} steps"
            ));
        }
        Ok(Multinomial {
            rows,
            cats,
            samples,
            replacement,
            f32: dtype != DType::F64,
        })
    }

    /// The output's sizes: `[num_samples]` or `[rows, num_samples]`.
    pub fn out_sizes(&self, in_rank: usize) -> Vec<usize> {
        if in_rank == 1 {
            vec![self.samples]
        } else {
            vec![self.rows, self.samples]
        }
    }

    /// torch's errors for weights that are negative, infinite or NaN, or a row summing to 0.
    pub fn check_weights(&self, w: &[f64]) -> std::result::Result<(), String> {
        if w.iter().any(|&p| !(p.is_finite() && p >= 0.0)) {
            return Err("probability tensor contains either `inf`, `nan` or element < 0".into());
        }
        let empty_rows = self.cats == 0 && self.rows > 0;
        if empty_rows
            || w.chunks(self.cats.max(1))
                .any(|row| row.iter().sum::<f64>() <= 0.0)
        {
            return Err("invalid multinomial distribution (sum of probabilities <= 0)".into());
        }
        Ok(())
    }

    /// Rounds an f64 result of an operation on two operands to the kernel's precision: for
    /// f32 operands, an f64 sum or product rounded to f32 is the f32 operation's result, so
    /// the CPU reproduces the GPU's f32 arithmetic bit for bit.
    fn round(&self, x: f64) -> f64 {
        if self.f32 {
            x as f32 as f64
        } else {
            x
        }
    }

    /// The sampled categories of every row: `draws[r * samples + s]` is the 64-bit draw of
    /// sample `s` of row `r` (draw index `r * samples + s`, so the GPU knows every draw).
    ///
    /// Each sample inverts the CDF of the row's (remaining) weights: with `u` uniform in
    /// [0, 1) (24 bits in f32, 53 in f64), the first category whose running sum exceeds
    /// `u * total`. Without replacement the drawn category's weight then drops out of the
    /// row (sequential draws without replacement, distributed as torch's exponential race),
    /// and once only zero weights remain the smallest unused categories follow. Only sums,
    /// one product and comparisons: no transcendental whose last bit differs between devices.
    pub fn sample(&self, w: &[f64], draws: &[u64]) -> Vec<i64> {
        let bits = if self.f32 { 24 } else { 53 };
        let mut out = Vec::with_capacity(self.rows * self.samples);
        for (r, row) in w.chunks(self.cats.max(1)).take(self.rows).enumerate() {
            if self.replacement {
                // The row's running sums once (a scan per sample would make rows x samples x
                // categories steps): bisection finds the first category whose sum exceeds the
                // target, the one the scan of `pick` finds (the sums never decrease, and only
                // a positive weight raises them).
                let mut acc = 0.0;
                let sums: Vec<f64> = row
                    .iter()
                    .map(|&p| {
                        if p > 0.0 {
                            acc = self.round(acc + p);
                        }
                        acc
                    })
                    .collect();
                let last = row.iter().rposition(|&p| p > 0.0).unwrap_or(0);
                for s in 0..self.samples {
                    let z = draws[r * self.samples + s];
                    let u = (z >> (64 - bits)) as f64 / (1u64 << bits) as f64;
                    let target = self.round(u * acc);
                    let c = sums.partition_point(|&x| x <= target);
                    out.push(if c < row.len() { c } else { last } as i64);
                }
                continue;
            }
            let mut left = row.to_vec();
            for s in 0..self.samples {
                let z = draws[r * self.samples + s];
                let u = (z >> (64 - bits)) as f64 / (1u64 << bits) as f64;
                let c = self.pick(&left, u);
                if !self.replacement {
                    left[c] = -1.0;
                }
                out.push(c as i64);
            }
        }
        out
    }

    /// The category of uniform `u` in weights `w` (-1 marks a category already drawn).
    fn pick(&self, w: &[f64], u: f64) -> usize {
        let total = w.iter().fold(
            0.0,
            |acc, &p| if p > 0.0 { self.round(acc + p) } else { acc },
        );
        let target = self.round(u * total);
        let mut acc = 0.0;
        let mut last = None;
        for (i, &p) in w.iter().enumerate() {
            if p > 0.0 {
                acc = self.round(acc + p);
                last = Some(i);
                if acc > target {
                    return i;
                }
            }
        }
        // Rounding left `u * total` at the total: the last positive category; no positive
        // weight left (without replacement): the first unused category.
        last.or_else(|| w.iter().position(|&p| p >= 0.0))
            .unwrap_or(0)
    }
}

/// multinomial(self, num_samples, replacement): int64 category indices per row, from the
/// run's generator ([`Multinomial::sample`]; one draw per sample).
fn multinomial(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("self")?;
    let m = Multinomial::parse(
        &t.sizes,
        t.dtype,
        ctx.int("num_samples")?,
        ctx.bool_or("replacement", false)?,
    )
    .map_err(|e| ctx.err(e))?;
    let n = m.rows as u64 * m.samples as u64;
    super::check_numel(ctx, n)?;
    let w = t.to_vec::<f64>();
    m.check_weights(&w).map_err(|e| ctx.err(e))?;
    let rng = &mut ctx.state.rng;
    let draws: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
    let v = m.sample(&w, &draws);
    one(Tensor::from_vec(v, &m.out_sizes(t.rank())))
}

/// Keep-masks for dropout: one draw per element, or per (N, C) channel for feature dropout
/// (broadcast over the remaining dims).
fn keep_mask(rng: &mut Rng, sizes: &[usize], feature: bool, keep: f64) -> Vec<f64> {
    let n: usize = sizes.iter().product();
    if !feature || sizes.len() < 2 {
        return (0..n)
            .map(|_| if uniform01(rng, 53) < keep { 1.0 } else { 0.0 })
            .collect();
    }
    let channels = sizes[0] * sizes[1];
    let inner = n / channels.max(1);
    let per: Vec<f64> = (0..channels)
        .map(|_| if uniform01(rng, 53) < keep { 1.0 } else { 0.0 })
        .collect();
    per.iter()
        .flat_map(|&m| std::iter::repeat_n(m, inner))
        .collect()
}

/// dropout / feature_dropout / alpha_dropout / feature_alpha_dropout (and `_` forms): the
/// input itself in eval (as torch returns it), masked and rescaled in training.
fn dropout(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let name = op_name(ctx).to_string();
    let t = if ctx.has("input") {
        ctx.tensor("input")?
    } else {
        ctx.tensor("self")?
    };
    let p = ctx.float("p")?;
    if !(0.0..=1.0).contains(&p) {
        return Err(ctx.err(format!(
            "dropout probability has to be between 0 and 1, but got {p}"
        )));
    }
    if !ctx.bool_or("train", true)? || p == 0.0 || t.numel() == 0 {
        return one(t);
    }
    if !t.dtype.is_float() {
        return Err(ctx.err(format!(
            "dropout is only implemented for floating dtypes, got {}",
            t.dtype
        )));
    }
    let feature = name.starts_with("feature");
    let x = t.to_vec::<f64>();
    let mask = keep_mask(&mut ctx.state.rng, &t.sizes, feature, 1.0 - p);
    let out: Vec<f64> = if name.contains("alpha") {
        // SELU-preserving dropout: dropped units go to the negative saturation value, then an
        // affine map restores mean and variance.
        const ALPHA: f64 = 1.7580993408473766;
        let a = 1.0 / ((ALPHA * ALPHA * p + 1.0) * (1.0 - p)).sqrt();
        x.iter()
            .zip(&mask)
            .map(|(&v, &m)| v * (m * a) + ((m - 1.0) * ALPHA * a + ALPHA * a * p))
            .collect()
    } else if p == 1.0 {
        x.iter().map(|&v| v * 0.0).collect()
    } else {
        let scale = 1.0 / (1.0 - p);
        x.iter().zip(&mask).map(|(&v, &m)| v * m * scale).collect()
    };
    let r = Tensor::from_vec(out, &t.sizes).to_dtype(t.dtype)?;
    output(ctx, &t, r)
}

/// native_dropout(input, p, train) -> (output, bool mask); `train` None means training.
fn native_dropout(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let t = ctx.tensor("input")?;
    let p = ctx.float("p")?;
    let train = ctx.bool_or("train", true)?;
    if !train || t.numel() == 0 {
        let copy = match preserved_strides(&t) {
            Some(st) => crate::ops::elementwise::convert::materialize(&t, t.dtype, Some(st))?,
            None => t.to_dtype(t.dtype)?,
        };
        return Ok(vec![
            RValue::Tensor(copy),
            RValue::Tensor(Tensor::from_vec(vec![true; t.numel()], &t.sizes)),
        ]);
    }
    if !t.dtype.is_float() {
        return Err(ctx.err(format!(
            "dropout is only implemented for floating dtypes, got {}",
            t.dtype
        )));
    }
    let keep = 1.0 - p;
    let scale = if keep == 0.0 { 0.0 } else { 1.0 / keep };
    let mask = keep_mask(&mut ctx.state.rng, &t.sizes, false, keep);
    let x = t.to_vec::<f64>();
    let out: Vec<f64> = x.iter().zip(&mask).map(|(&v, &m)| v * m * scale).collect();
    Ok(vec![
        RValue::Tensor(Tensor::from_vec(out, &t.sizes).to_dtype(t.dtype)?),
        RValue::Tensor(Tensor::from_vec(
            mask.iter().map(|&m| m != 0.0).collect::<Vec<bool>>(),
            &t.sizes,
        )),
    ])
}

/// `native_dropout_backward(grad_output, mask, scale)`: `grad_output * (mask * scale)`, in
/// grad_output's dtype, as torch (a dropped NaN or infinite gradient stays NaN: `x * 0`).
fn native_dropout_backward(ctx: &mut OpCtx) -> Result<Vec<RValue>> {
    let (g, mask) = (ctx.tensor("grad_output")?, ctx.tensor("mask")?);
    let scale = ctx.float("scale")?;
    if mask.sizes != g.sizes {
        return Err(ctx.err(format!(
            "mask {:?} must have the shape of grad_output {:?}",
            mask.sizes, g.sizes
        )));
    }
    if !g.dtype.is_float() {
        return Err(ctx.err(format!(
            "grad_output must be floating-point, got {}",
            g.dtype
        )));
    }
    let m = mask.to_vec::<bool>();
    with_dtype!(g.dtype, T => {
        let s = T::from_f64(scale).to_f64();
        let v: Vec<T> = g
            .to_vec::<T>()
            .into_iter()
            .zip(&m)
            .map(|(x, &k)| T::from_f64(x.to_f64() * if k { s } else { 0.0 }))
            .collect();
        Ok(vec![Tensor::from_vec(v, &g.sizes).into()])
    }, else Err(ctx.err(format!("dtype {} is not supported", g.dtype))))
}

#[cfg(test)]
mod multinomial_tests {
    use super::*;

    /// Sampling without replacement is a pass over the row per sample: a request that would
    /// take more than `MULTINOMIAL_MAX_STEPS` steps is refused up front (on every device,
    /// which all parse through here); the same sizes with replacement are fine.
    #[test]
    fn sampling_without_replacement_is_bounded() {
        let e = Multinomial::parse(&[1, 1 << 17], DType::F32, 1 << 16, false)
            .err()
            .unwrap();
        assert!(
            e.contains("1 rows x 65536 samples x 131072 categories"),
            "{e}"
        );
        assert!(Multinomial::parse(&[1, 1 << 17], DType::F32, 1 << 16, true).is_ok());
        assert!(Multinomial::parse(&[4, 1 << 12], DType::F32, 1 << 12, false).is_ok());
    }
}
