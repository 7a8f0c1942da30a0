// Random kernels that draw exactly the CPU generator's stream (src/runtime/mod.rs `Rng`,
// SplitMix64). SplitMix64 is counter-based: draw j (0-based) from state s is
// mix(s + (j + 1) * GAMMA), so every thread computes its own draws with no shared state.
// WGSL has no 64-bit integers: a u64 is a vec2<u32> (x = low word, y = high word).
// `Meta` mirrors `RandMeta` in src/gpu/random.rs (a naga test checks the size).

struct Meta {
    numel: u32,
    // Threads per row of the 2-D dispatch grid (x workgroups * 64).
    row: u32,
    // The generator state before this op (low, high).
    state_lo: u32,
    state_hi: u32,
    // uniform: [a, b) bounds; normal: mean a, std b; dropout: b = scale.
    a: f32,
    b: f32,
    // bernoulli_p / dropout: keep an element when its 53-bit draw m < threshold (hi, lo).
    thr_lo: u32,
    thr_hi: u32,
}

@group(0) @binding(0) var<uniform> params: Meta;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> mask: array<u32>;

const GAMMA: vec2<u32> = vec2<u32>(0x7F4A7C15u, 0x9E3779B9u);
const M1: vec2<u32> = vec2<u32>(0x1CE4E5B9u, 0xBF58476Du);
const M2: vec2<u32> = vec2<u32>(0x133111EBu, 0x94D049BBu);

// The full 64-bit product of two u32 (16-bit limbs).
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xFFFFu;
    let a1 = a >> 16u;
    let b0 = b & 0xFFFFu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xFFFFu) + (p10 & 0xFFFFu);
    let lo = (p00 & 0xFFFFu) | (mid << 16u);
    let hi = p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
    return vec2<u32>(lo, hi);
}

// a * b mod 2^64.
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    let carry = select(0u, 1u, lo < a.x);
    return vec2<u32>(lo, a.y + b.y + carry);
}

// a >> k for 0 < k < 32.
fn shr64(a: vec2<u32>, k: u32) -> vec2<u32> {
    return vec2<u32>((a.x >> k) | (a.y << (32u - k)), a.y >> k);
}

fn xor_shr(z: vec2<u32>, k: u32) -> vec2<u32> {
    return z ^ shr64(z, k);
}

// Draw j (0-based) after the op's starting state: SplitMix64's output.
fn draw(j: u32) -> vec2<u32> {
    // s + (j + 1) * GAMMA; (j + 1) fits in u32 for every op this backend runs.
    var z = add64(vec2<u32>(params.state_lo, params.state_hi), mul64(GAMMA, vec2<u32>(j + 1u, 0u)));
    z = mul64(xor_shr(z, 30u), M1);
    z = mul64(xor_shr(z, 27u), M2);
    return xor_shr(z, 31u);
}

// The top 53 bits of a draw as (low 32 bits, high 21 bits).
fn bits53(z: vec2<u32>) -> vec2<u32> {
    return shr64(z, 11u);
}

// Uniform in [0, 1) from the top 24 bits: exact in f32, as the CPU's `uniform01(rng, 24)`.
fn uniform24(z: vec2<u32>) -> f32 {
    return f32(z.y >> 8u) * 5.9604644775390625e-8;
}

// ln(u) of the CPU's 53-bit uniform u = m / 2^53 (clamped to f64::MIN_POSITIVE), without
// losing the digits f32 cannot hold when u is close to 1.
fn ln_uniform53(z: vec2<u32>) -> f32 {
    let m = bits53(z);
    if m.x == 0u && m.y == 0u {
        // ln(f64::MIN_POSITIVE)
        return -708.3964185322641;
    }
    if m.y >= 0x1FF800u {
        // u > 1 - 2^-10: ln(1 - d) by its series, with d = (2^53 - m) / 2^53 from the integers.
        let d = f32(0x1FFFFFu - m.y) * 4.76837158203125e-7
            + (f32(~m.x) + 1.0) * 1.1102230246251565e-16;
        return -d * (1.0 + d * (0.5 + d * (1.0 / 3.0 + d * (0.25 + d * 0.2))));
    }
    let u = f32(m.y) * 4.76837158203125e-7 + f32(m.x) * 1.1102230246251565e-16;
    return log(u);
}

// The CPU's 53-bit uniform as f32 (for the angle of Box–Muller).
fn uniform53(z: vec2<u32>) -> f32 {
    let m = bits53(z);
    return f32(m.y) * 4.76837158203125e-7 + f32(m.x) * 1.1102230246251565e-16;
}

// m < threshold, both 53-bit numbers as (low, high).
fn below(m: vec2<u32>, t: vec2<u32>) -> bool {
    return m.y < t.y || (m.y == t.y && m.x < t.x);
}

// ceil(p * 2^53) for 0 <= p <= 1 (an f32), exactly: `u < p` with u = m / 2^53 holds iff
// m < ceil(p * 2^53).
fn threshold(p: f32) -> vec2<u32> {
    if !(p > 0.0) {
        return vec2<u32>(0u, 0u);
    }
    if p >= 1.0 {
        return vec2<u32>(0u, 0x200000u);
    }
    let bits = bitcast<u32>(p);
    let e = max((bits >> 23u) & 0xFFu, 1u);
    var mant = bits & 0x7FFFFFu;
    if ((bits >> 23u) & 0xFFu) != 0u {
        mant = mant | 0x800000u;
    }
    // p * 2^53 = mant * 2^(e - 150 + 53) = mant * 2^(e - 97); e <= 126 here.
    if e >= 97u {
        let s = e - 97u;
        if s == 0u {
            return vec2<u32>(mant, 0u);
        }
        return vec2<u32>(mant << s, mant >> (32u - s));
    }
    let s = 97u - e;
    if s >= 32u {
        return vec2<u32>(select(0u, 1u, mant != 0u), 0u);
    }
    let q = mant >> s;
    let rem = mant & ((1u << s) - 1u);
    return vec2<u32>(q + select(0u, 1u, rem != 0u), 0u);
}

fn index(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * params.row;
}

// out[i] = a + (b - a) * u, u uniform in [0, 1) from draw i (rand, uniform).
@compute @workgroup_size(64)
fn rand_uniform(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    out[i] = params.a + (params.b - params.a) * uniform24(draw(i));
}

// out[i] = a + b * z, z standard normal by Box–Muller from draws 2i and 2i + 1 (randn, normal).
@compute @workgroup_size(64)
fn rand_normal(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let l = ln_uniform53(draw(2u * i));
    let u2 = uniform53(draw(2u * i + 1u));
    let z = sqrt(-2.0 * l) * cos(6.283185307179586 * u2);
    out[i] = params.a + params.b * z;
}

// out[i] = 1 when draw i's 53-bit uniform is below the threshold (bernoulli with a number p).
@compute @workgroup_size(64)
fn rand_bernoulli_p(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    out[i] = select(0.0, 1.0, below(bits53(draw(i)), vec2<u32>(params.thr_lo, params.thr_hi)));
}

// out[i] = 1 with probability x[i] (bernoulli(self), probabilities from a contiguous tensor).
@compute @workgroup_size(64)
fn rand_bernoulli_t(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    out[i] = select(0.0, 1.0, below(bits53(draw(i)), threshold(x[i])));
}

// Dropout in training: keep x[i] (times the scale b) when draw i is below the keep threshold;
// mask[i] = kept (native_dropout's second output).
@compute @workgroup_size(64)
fn rand_dropout(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let keep = below(bits53(draw(i)), vec2<u32>(params.thr_lo, params.thr_hi));
    out[i] = x[i] * select(0.0, 1.0, keep) * params.b;
    mask[i] = select(0u, 1u, keep);
}

// z mod r for a 64-bit draw z and 0 < r < 2^31: the high word's remainder, then the low word
// bit by bit (the running remainder doubles within a u32).
fn mod64(z: vec2<u32>, r: u32) -> u32 {
    var rem = z.y % r;
    for (var j = 0u; j < 32u; j = j + 1u) {
        rem = rem * 2u + ((z.x >> (31u - j)) & 1u);
        if rem >= r {
            rem = rem - r;
        }
    }
    return rem;
}

// randint: low + draw(i) mod range as an int word into `mask` (low in thr_lo as i32 bits,
// range in thr_hi, below 2^31).
@compute @workgroup_size(64)
fn rand_int(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    mask[i] = params.thr_lo + mod64(draw(i), params.thr_hi);
}

// exponential: -ln(1 - u) / lambd (lambd in a), u uniform from draw i's top 24 bits as the
// CPU kernel (1 - u is exact in f32); below 2^-10 the series of -ln(1 - u) keeps the digits.
@compute @workgroup_size(64)
fn rand_exponential(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let u = uniform24(draw(i));
    var e = -log(1.0 - u);
    if u < 0.0009765625 {
        e = u * (1.0 + u * (0.5 + u * (1.0 / 3.0 + u * 0.25)));
    }
    out[i] = e / params.a;
}

// randperm(n): the CPU kernel's Fisher–Yates, for i = n - 1 down to 1 swap i with draw
// (n - 1 - i) mod (i + 1), into `mask` as int words. Sequential by nature: one invocation
// (the host bounds n).
@compute @workgroup_size(1)
fn rand_perm(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x != 0u || gid.y != 0u {
        return;
    }
    let n = params.numel;
    for (var i = 0u; i < n; i = i + 1u) {
        mask[i] = i;
    }
    for (var i = n - 1u; i >= 1u && i < n; i = i - 1u) {
        let j = mod64(draw(n - 1u - i), i + 1u);
        let t = mask[i];
        mask[i] = mask[j];
        mask[j] = t;
    }
}

// feature_dropout: one draw per (n, c) channel (`a` = elements per channel, exact in f32),
// otherwise as rand_dropout.
@compute @workgroup_size(64)
fn rand_feature_dropout(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let keep = below(bits53(draw(i / u32(params.a))), vec2<u32>(params.thr_lo, params.thr_hi));
    out[i] = x[i] * select(0.0, 1.0, keep) * params.b;
    mask[i] = select(0u, 1u, keep);
}

// multinomial: the category of sample i's uniform in its row of the weights `x` (`thr_lo`
// categories per row), as `Multinomial::pick` in src/ops/factory/random.rs: f32 running sums
// of the positive weights in order, the first category whose sum exceeds u * total; the last
// positive one when rounding leaves none; the first unused (w >= 0) when no weight is left.
// `w` holds the row in `out` (without replacement, drawn categories are -1) or in `x`.
fn multinomial_pick(base: u32, cats: u32, u: f32, from_out: bool) -> u32 {
    var total = 0.0;
    for (var c = 0u; c < cats; c = c + 1u) {
        let p = select(x[base + c], out[base + c], from_out);
        if p > 0.0 {
            total = total + p;
        }
    }
    let goal = u * total;
    var acc = 0.0;
    var last = cats;
    var unused = cats;
    for (var c = 0u; c < cats; c = c + 1u) {
        let p = select(x[base + c], out[base + c], from_out);
        if p > 0.0 {
            acc = acc + p;
            last = c;
            if acc > goal {
                return c;
            }
        }
        if p >= 0.0 && unused == cats {
            unused = c;
        }
    }
    if last < cats {
        return last;
    }
    return select(0u, unused, unused < cats);
}

// multinomial with replacement: sample i (of numel = rows * samples, samples in thr_hi) of row
// i / samples from draw i, into `mask` as an int word.
@compute @workgroup_size(64)
fn rand_multinomial(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = index(gid);
    if i >= params.numel {
        return;
    }
    let cats = params.thr_lo;
    let row = i / params.thr_hi;
    mask[i] = multinomial_pick(row * cats, cats, uniform24(draw(i)), false);
}

// multinomial without replacement: one invocation per row (numel = rows) draws its samples in
// order (sample s from draw row * samples + s), each drawn category set to -1 in the row's
// copy in `out`.
@compute @workgroup_size(64)
fn rand_multinomial_distinct(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = index(gid);
    if row >= params.numel {
        return;
    }
    let cats = params.thr_lo;
    let samples = params.thr_hi;
    let base = row * cats;
    for (var c = 0u; c < cats; c = c + 1u) {
        out[base + c] = x[base + c];
    }
    for (var s = 0u; s < samples; s = s + 1u) {
        let j = row * samples + s;
        let c = multinomial_pick(base, cats, uniform24(draw(j)), true);
        mask[j] = c;
        out[base + c] = -1.0;
    }
}
