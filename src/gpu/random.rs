//! Seeded random ops on the GPU with the CPU generator's exact streams (shaders/random.wgsl).
//!
//! The CPU generator ([`crate::runtime::Rng`]) is SplitMix64, which is counter-based: draw `j`
//! after state `s` is `mix(s + (j + 1) * GAMMA)`. A kernel therefore gets the state before the
//! op, every thread computes the draws of its element, and the host advances the state by the
//! number of draws the CPU kernel would have made (`Rng::advance`). Element `i` of `rand` uses
//! draw `i`, of `randn` draws `2i` and `2i + 1` (Box–Muller), of `bernoulli` and dropout draw
//! `i`, exactly as src/ops/factory/random.rs does, so a program gives the same numbers on both
//! devices (up to f32 versus f64 rounding) and leaves the generator in the same state.
//!
//! GPU: `rand`, `rand_like`, `randn`, `randn_like`, `uniform`, `normal_functional`,
//! `bernoulli` (with a number `p`, or probabilities in `self`), `dropout` and `native_dropout`
//! in training (f32), `multinomial` of f32 weights (sample `s` of row `r` uses draw
//! `r * num_samples + s`, with the CPU kernel's f32 sums, so the indices are identical). In-place forms (`uniform_`, `normal_`, `bernoulli_`, `dropout_`),
//! feature/alpha dropout, `randint` and other dtypes run the CPU kernel, which draws the same
//! stream from the same generator, so mixing the two keeps the streams aligned.

use super::exec::Slot;
use super::kernels::{contiguous, grid, one, KernelCtx, Out};
use super::shaders::{Shader, Variant};
use crate::dtype::DType;
use crate::program::Arg;
use bytemuck::{Pod, Zeroable};

/// Mirrors `Meta` in shaders/random.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Default, Debug)]
pub struct RandMeta {
    pub numel: u32,
    pub row: u32,
    pub state_lo: u32,
    pub state_hi: u32,
    pub a: f32,
    pub b: f32,
    pub thr_lo: u32,
    pub thr_hi: u32,
}

pub const UNIFORM: Variant = Variant::new(Shader::Random, "rand_uniform");
pub const NORMAL: Variant = Variant::new(Shader::Random, "rand_normal");
pub const BERNOULLI_P: Variant = Variant::new(Shader::Random, "rand_bernoulli_p");
pub const BERNOULLI_T: Variant = Variant::new(Shader::Random, "rand_bernoulli_t");
pub const DROPOUT: Variant = Variant::new(Shader::Random, "rand_dropout");
/// Every random variant (validated by the naga test).
pub const RANDINT: Variant = Variant::new(Shader::Random, "rand_int");
pub const FEATURE_DROPOUT: Variant = Variant::new(Shader::Random, "rand_feature_dropout");
pub const EXPONENTIAL: Variant = Variant::new(Shader::Random, "rand_exponential");
pub const RANDPERM: Variant = Variant::new(Shader::Random, "rand_perm");
pub const MULTINOMIAL: Variant = Variant::new(Shader::Random, "rand_multinomial");
pub const MULTINOMIAL_DISTINCT: Variant = Variant::new(Shader::Random, "rand_multinomial_distinct");
pub const VARIANTS: [Variant; 11] = [
    UNIFORM,
    NORMAL,
    BERNOULLI_P,
    BERNOULLI_T,
    DROPOUT,
    RANDINT,
    FEATURE_DROPOUT,
    EXPONENTIAL,
    RANDPERM,
    MULTINOMIAL,
    MULTINOMIAL_DISTINCT,
];

/// `ceil(p * 2^53)`: a 53-bit draw `m` satisfies `m / 2^53 < p` iff `m < threshold(p)`.
pub fn threshold(p: f64) -> u64 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        1 << 53
    } else {
        (p * (1u64 << 53) as f64).ceil() as u64
    }
}

fn op_name(k: &KernelCtx) -> String {
    k.op.node.target.split('.').nth(1).unwrap_or("").to_string()
}

/// Encode one random kernel over `numel` elements from the current generator state, then
/// advance the state by `draws` (what the CPU kernel consumes).
fn launch(
    k: &mut KernelCtx,
    v: Variant,
    mut meta: RandMeta,
    bufs: &[(u32, &super::store::GTensor)],
    numel: usize,
    draws: u64,
) -> crate::Result<()> {
    let rng = &mut k.op.state.rng;
    let s = rng.state();
    meta.numel = numel as u32;
    meta.state_lo = s as u32;
    meta.state_hi = (s >> 32) as u32;
    if numel > 0 {
        let (gx, gy, row) = grid(numel, 64);
        meta.row = row;
        k.dispatch(&v, bytemuck::bytes_of(&meta), bufs, (gx, gy, 1))?;
    }
    k.op.state.rng.advance(draws);
    Ok(())
}

/// `numel` standard normal f32 values of shape `sizes` from the randn stream (None: too
/// many for one kernel).
pub fn standard_normal(
    k: &mut KernelCtx,
    sizes: &[usize],
) -> crate::Result<Option<super::store::GTensor>> {
    let numel: usize = sizes.iter().product();
    if !small_enough(numel) {
        return Ok(None);
    }
    let out = k.new_out(DType::F32, sizes)?;
    let meta = RandMeta {
        a: 0.0,
        b: 1.0,
        ..Default::default()
    };
    launch(k, NORMAL, meta, &[(1, &out)], numel, 2 * numel as u64)?;
    Ok(Some(out))
}

/// randint(high, size) / randint.low(low, high, size): `low + next_u64() % (high - low)`
/// per element as the CPU kernel, for int32/int64 outputs with a range below 2^31.
pub fn randint(k: &mut KernelCtx) -> Out {
    if !k.op.has("size") || matches!(k.op.arg("high"), Some(Arg::Tensor(_))) {
        return Ok(None);
    }
    let sizes = crate::ops::sizes_arg(&k.op, "size")?;
    let Some(dtype) = k
        .out_dtype(0)
        .filter(|d| matches!(d, DType::I64 | DType::I32))
    else {
        return Ok(None);
    };
    let low = k.op.opt_int("low")?.unwrap_or(0);
    let Some(high) = k.op.opt_int("high")? else {
        return Ok(None);
    };
    let range = high as i128 - low as i128;
    if range <= 0
        || range >= 1 << 31
        || i32::try_from(low).is_err()
        || i32::try_from(high - 1).is_err()
    {
        return Ok(None);
    }
    let numel: usize = sizes.iter().product();
    if !small_enough(numel) {
        return Ok(None);
    }
    let out = k.new_out(dtype, &sizes)?;
    let meta = RandMeta {
        thr_lo: low as i32 as u32,
        thr_hi: range as u32,
        ..Default::default()
    };
    launch(k, RANDINT, meta, &[(3, &out)], numel, numel as u64)?;
    one(Ok(Some(out)))
}

/// exponential(self, lambd): `-ln(1 - u) / lambd` per element, u from the 24-bit uniform
/// stream (f32).
pub fn exponential(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    let lambd = k.op.float_or("lambd", 1.0)?;
    if !(lambd > 0.0 && lambd.is_finite())
        || x.dtype != DType::F32
        || k.out_dtype(0) != Some(DType::F32)
        || !small_enough(x.numel())
    {
        return Ok(None); // the CPU kernel reports a bad lambd
    }
    let out = k.new_out(DType::F32, &x.sizes)?;
    let meta = RandMeta {
        a: lambd as f32,
        ..Default::default()
    };
    let n = x.numel();
    launch(k, EXPONENTIAL, meta, &[(1, &out)], n, n as u64)?;
    one(Ok(Some(out)))
}

/// The largest `randperm` the GPU shuffles: the shuffle is one sequential invocation.
pub const RANDPERM_MAX: i64 = 1 << 20;

/// randperm(n) to int32/int64: the CPU kernel's Fisher–Yates on the same draws.
pub fn randperm(k: &mut KernelCtx) -> Out {
    let n = k.op.int("n")?;
    let Some(dtype) = k
        .out_dtype(0)
        .filter(|d| matches!(d, DType::I64 | DType::I32))
    else {
        return Ok(None);
    };
    if !(0..=RANDPERM_MAX).contains(&n) {
        return Ok(None); // the CPU kernel reports n < 0
    }
    let n = n as usize;
    // One invocation takes about 35 loop steps per element (the identity, the swap, mod64's
    // 32 bits): past the loop cap of CPU adapters the CPU kernel shuffles (lavapipe gave a
    // non-permutation for n = 100,000).
    if !crate::gpu::kernels::loops_fit(k, n, 35) {
        return Ok(None);
    }
    let out = k.new_out(dtype, &[n])?;
    let rng = &mut k.op.state.rng;
    let s = rng.state();
    let meta = RandMeta {
        numel: n as u32,
        state_lo: s as u32,
        state_hi: (s >> 32) as u32,
        ..Default::default()
    };
    if n > 0 {
        k.dispatch(
            &RANDPERM,
            bytemuck::bytes_of(&meta),
            &[(3, &out)],
            (1, 1, 1),
        )?;
    }
    k.op.state.rng.advance(n.saturating_sub(1) as u64);
    one(Ok(Some(out)))
}

/// multinomial(self, num_samples, replacement) of f32 weights: the CPU kernel's scheme and
/// f32 arithmetic ([`Multinomial::sample`]) on the same draws, so both devices draw the same
/// indices for a seed. With replacement one invocation per sample inverts its row's CDF;
/// without, one invocation per row draws its samples in order, removing each drawn category
/// from a copy of the row (the `out` scratch).
///
/// [`Multinomial::sample`]: crate::ops::factory::random::Multinomial::sample
pub fn multinomial(k: &mut KernelCtx) -> Out {
    use crate::ops::factory::random::Multinomial;
    let Some(w) = k.t("self") else {
        return Ok(None);
    };
    if w.dtype != DType::F32 || k.out_dtype(0) != Some(DType::I64) {
        return Ok(None);
    }
    let samples = k.op.int("num_samples")?;
    let replacement = k.op.bool_or("replacement", false)?;
    // Bad arguments and bad weights: the CPU kernel reports torch's error. The weights need
    // their values: a tensor with a current CPU copy is checked here; one that only lives on
    // the GPU is not (a negative or NaN weight then counts as 0).
    let Ok(m) = Multinomial::parse(&w.sizes, w.dtype, samples, replacement) else {
        return Ok(None);
    };
    let n = m.rows * m.samples;
    // An invocation walks the categories twice per draw (and once more to copy them without
    // replacement): past the loop cap of CPU adapters the CPU kernel draws.
    let walks = if m.replacement { 2 } else { 1 + 2 * m.samples };
    if !small_enough(n) || !small_enough(w.numel()) || !super::kernels::loops_fit(k, m.cats, walks)
    {
        return Ok(None);
    }
    if super::store::lock(&w.cell).cpu_valid {
        crate::gpu::tape::note_host_read();
        if m.check_weights(&w.cpu_view()?.to_vec::<f64>()).is_err() {
            return Ok(None);
        }
    }
    let Some(wc) = contiguous(k, &w)? else {
        return Ok(None);
    };
    let out = k.new_out(DType::I64, &m.out_sizes(w.rank()))?;
    let meta = RandMeta {
        thr_lo: m.cats as u32,
        thr_hi: m.samples as u32,
        ..Default::default()
    };
    // Both entry points share the pick, which names `out`: with replacement it is never read
    // and one word stands in for it.
    let (v, left, threads) = if m.replacement {
        (MULTINOMIAL, k.new_out(DType::F32, &[1])?, n)
    } else {
        let left = k.new_out(DType::F32, &[m.rows, m.cats])?;
        (MULTINOMIAL_DISTINCT, left, m.rows)
    };
    let bufs = [(1, &left), (2, &wc), (3, &out)];
    launch(k, v, meta, &bufs, threads, n as u64)?;
    one(Ok(Some(out)))
}

/// Elements one kernel may cover: every draw index (`2 * numel` for randn) must fit in u32.
fn small_enough(numel: usize) -> bool {
    numel < (u32::MAX / 2) as usize
}

/// rand/randn (+ `_like`), uniform, normal_functional: f32 outputs.
pub fn rand(k: &mut KernelCtx) -> Out {
    let name = op_name(k);
    let sizes = if k.op.has("size") {
        crate::ops::sizes_arg(&k.op, "size")?
    } else {
        match k.t("self") {
            Some(t) => t.sizes.clone(),
            None => return Ok(None),
        }
    };
    if k.out_dtype(0) != Some(DType::F32) {
        return Ok(None);
    }
    let numel: usize = sizes.iter().product();
    if !small_enough(numel) {
        return Ok(None);
    }
    let normal = name.starts_with("randn") || name.starts_with("normal");
    let (v, a, b, draws) = if normal {
        let (mean, std) = (k.op.float_or("mean", 0.0)?, k.op.float_or("std", 1.0)?);
        if std < 0.0 {
            return Ok(None); // the CPU kernel reports the error
        }
        (NORMAL, mean, std, 2 * numel as u64)
    } else {
        let (lo, hi) = (k.op.float_or("from", 0.0)?, k.op.float_or("to", 1.0)?);
        if lo > hi {
            return Ok(None);
        }
        (UNIFORM, lo, hi, numel as u64)
    };
    let out = k.new_out(DType::F32, &sizes)?;
    let meta = RandMeta {
        a: a as f32,
        b: b as f32,
        ..Default::default()
    };
    launch(k, v, meta, &[(1, &out)], numel, draws)?;
    one(Ok(Some(out)))
}

/// bernoulli(self) (probabilities in `self`) and bernoulli.p(self, p): f32 in and out.
pub fn bernoulli(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("self") else {
        return Ok(None);
    };
    if x.dtype != DType::F32 || k.out_dtype(0) != Some(DType::F32) || !small_enough(x.numel()) {
        return Ok(None);
    }
    let numel = x.numel();
    match k.op.arg("p") {
        None | Some(Arg::None) => {
            // Probabilities outside [0, 1] are an error the CPU kernel reports. It needs the
            // values: a tensor with a current CPU copy is checked here; one that only lives on
            // the GPU is not (there p < 0 acts as 0 and p > 1 as 1).
            if super::store::lock(&x.cell).cpu_valid && !in_unit_range(k, &x)? {
                return Ok(None);
            }
            let Some(p) = contiguous(k, &x)? else {
                return Ok(None);
            };
            let out = k.new_out(DType::F32, &x.sizes)?;
            launch(
                k,
                BERNOULLI_T,
                RandMeta::default(),
                &[(1, &out), (2, &p)],
                numel,
                numel as u64,
            )?;
            one(Ok(Some(out)))
        }
        Some(Arg::Float(_) | Arg::Int(_)) => {
            let p = k.op.float("p")?;
            if !(0.0..=1.0).contains(&p) {
                return Ok(None);
            }
            let t = threshold(p);
            let out = k.new_out(DType::F32, &x.sizes)?;
            let meta = RandMeta {
                thr_lo: t as u32,
                thr_hi: (t >> 32) as u32,
                ..Default::default()
            };
            launch(k, BERNOULLI_P, meta, &[(1, &out)], numel, numel as u64)?;
            one(Ok(Some(out)))
        }
        _ => Ok(None),
    }
}

/// Whether every probability of a tensor with a current CPU copy is in [0, 1].
fn in_unit_range(_k: &mut KernelCtx, x: &super::store::GTensor) -> crate::Result<bool> {
    crate::gpu::tape::note_host_read();
    let t = x.cpu_view()?;
    Ok(t.to_vec::<f64>().iter().all(|p| (0.0..=1.0).contains(p)))
}

/// Keep threshold and scale of dropout with drop probability `p` (as the CPU kernel).
fn keep_params(p: f64) -> (u64, f32) {
    let keep = 1.0 - p;
    let scale = if keep == 0.0 { 0.0 } else { 1.0 / keep };
    (threshold(keep), scale as f32)
}

/// dropout(input, p, train): the input itself in eval (or p == 0), masked and scaled in
/// training.
pub fn dropout(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let p = k.op.float("p")?;
    if !(0.0..=1.0).contains(&p) {
        return Ok(None);
    }
    if !k.op.bool_or("train", true)? || p == 0.0 || x.numel() == 0 {
        return Ok(Some(vec![Slot::Tensor(x)]));
    }
    if x.dtype != DType::F32 || k.out_dtype(0) != Some(DType::F32) || !small_enough(x.numel()) {
        return Ok(None);
    }
    let out = masked(k, &x, p, false)?;
    Ok(out.map(|(o, _)| vec![Slot::Tensor(o)]))
}

/// native_dropout(input, p, train) -> (output, bool mask), in training.
pub fn native_dropout(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let p = k.op.float("p")?;
    let train = k.op.bool_or("train", true)?;
    if !train
        || x.numel() == 0
        || x.dtype != DType::F32
        || k.out_dtype(0) != Some(DType::F32)
        || k.out_dtype(1) != Some(DType::Bool)
        || !small_enough(x.numel())
    {
        return Ok(None);
    }
    let out = masked(k, &x, p, true)?;
    Ok(out.map(|(o, m)| {
        let mut v = vec![Slot::Tensor(o)];
        v.extend(m.map(Slot::Tensor));
        v
    }))
}

/// feature_dropout(input, p, train) in training: one keep draw per (n, c) channel (the
/// CPU kernel's order), the channel's elements masked and scaled by 1 / (1 - p).
pub fn feature_dropout(k: &mut KernelCtx) -> Out {
    let Some(x) = k.t("input") else {
        return Ok(None);
    };
    let p = k.op.float("p")?;
    if !(0.0..=1.0).contains(&p)
        || x.rank() < 2
        || x.numel() == 0
        || x.dtype != DType::F32
        || k.out_dtype(0) != Some(DType::F32)
        || !small_enough(x.numel())
    {
        return Ok(None);
    }
    let numel = x.numel();
    let channels = x.sizes[0] * x.sizes[1];
    let inner = numel / channels;
    if inner >= 1 << 24 {
        return Ok(None);
    }
    let Some(xc) = contiguous(k, &x)? else {
        return Ok(None);
    };
    let (t, scale) = keep_params(p);
    let out = k.new_out(DType::F32, &x.sizes)?;
    let mask = k.new_out(DType::Bool, &x.sizes)?;
    let meta = RandMeta {
        a: inner as f32,
        b: scale,
        thr_lo: t as u32,
        thr_hi: (t >> 32) as u32,
        ..Default::default()
    };
    launch(
        k,
        FEATURE_DROPOUT,
        meta,
        &[(1, &out), (2, &xc), (3, &mask)],
        numel,
        channels as u64,
    )?;
    one(Ok(Some(out)))
}

type Masked = Option<(super::store::GTensor, Option<super::store::GTensor>)>;

pub(super) fn masked(
    k: &mut KernelCtx,
    x: &super::store::GTensor,
    p: f64,
    want_mask: bool,
) -> crate::Result<Masked> {
    let Some(xc) = contiguous(k, x)? else {
        return Ok(None);
    };
    let numel = x.numel();
    let (t, scale) = keep_params(p);
    let out = k.new_out(DType::F32, &x.sizes)?;
    // The shader always writes a mask; without one to return it goes to a scratch buffer.
    let mask = k.new_out(DType::Bool, &x.sizes)?;
    let meta = RandMeta {
        b: scale,
        thr_lo: t as u32,
        thr_hi: (t >> 32) as u32,
        ..Default::default()
    };
    launch(
        k,
        DROPOUT,
        meta,
        &[(1, &out), (2, &xc), (3, &mask)],
        numel,
        numel as u64,
    )?;
    Ok(Some((out, want_mask.then_some(mask))))
}

/// The seeded random ops: the CPU generator's exact streams (the GPU side of the op table,
/// `kernels/table.rs`).
pub(crate) fn register(t: &mut super::kernels::table::GpuTable) {
    use super::kernels::table::{all, all_f32, int, On};
    t.kernel(
        &[
            "aten.rand",
            "aten.rand_like",
            "aten.randn",
            "aten.randn_like",
            "aten.uniform",
            "aten.normal_functional",
        ],
        On::All,
        rand,
        all_f32,
    );
    t.kernel(
        &["aten.exponential"],
        On::Only(&["default"]),
        exponential,
        all_f32,
    );
    // Seeded int draws.
    fn int_draws(i: &[DType], o: &[DType]) -> bool {
        all(i, int) && (o == [DType::I64] || o == [DType::I32])
    }
    t.kernel(
        &["aten.randperm"],
        On::Only(&["default"]),
        randperm,
        int_draws,
    );
    t.kernel(&["aten.bernoulli"], On::All, bernoulli, all_f32);
    t.kernel(
        &["aten.multinomial"],
        On::Only(&["default"]),
        multinomial,
        |i, o| i == [DType::F32] && o == [DType::I64],
    );
    t.kernel(
        &["aten.randint"],
        On::Only(&["default", "low"]),
        randint,
        int_draws,
    );
    t.kernel(&["aten.dropout"], On::All, dropout, |_, _| true);
    t.kernel(&["aten.native_dropout"], On::All, native_dropout, |i, o| {
        i == [DType::F32] && o == [DType::F32, DType::Bool]
    });
}
