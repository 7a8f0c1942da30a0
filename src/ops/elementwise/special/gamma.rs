//! Gamma-family and error-function relatives of `torch.special`, ported from PyTorch's
//! `aten/src/ATen/native/Math.h` (Cephes digamma, zeta, i0/i1 and ndtri; SciPy's incomplete
//! gamma with Boost's Lanczos sum; the Faddeeva package's erfcx), computed in f64.
#![allow(clippy::excessive_precision)]

use super::tables::{erfcx_y100, I0E_A, I0E_B, I1E_A, I1E_B, IGAM_D};
use crate::ops::elementwise::real::erfc;
use std::f64::consts::PI;

const MACHEP: f64 = 1.11022302462515654042E-16;

/// `ln|Γ(x)|` (the C library's `lgamma`).
pub(crate) fn lgamma(x: f64) -> f64 {
    libm::lgamma(x)
}

/// Cephes' `polevl`: coefficients highest degree first.
fn polevl(x: f64, a: &[f64]) -> f64 {
    a.iter().fold(0.0, |r, &c| r * x + c)
}

/// Cephes' `chbevl`: a Chebyshev series.
fn chbevl(x: f64, a: &[f64]) -> f64 {
    let (mut b0, mut b1, mut b2) = (a[0], 0.0, 0.0);
    for &c in &a[1..] {
        b2 = b1;
        b1 = b0;
        b0 = x * b1 - b2 + c;
    }
    0.5 * (b0 - b2)
}

/// Hurwitz zeta `ζ(x, q)` (Cephes).
pub(crate) fn zeta(x: f64, q: f64) -> f64 {
    const A: [f64; 12] = [
        12.0,
        -720.0,
        30240.0,
        -1209600.0,
        47900160.0,
        -1.8924375803183791606e9,
        7.47242496e10,
        -2.950130727918164224e12,
        1.1646782814350067249e14,
        -4.5979787224074726105e15,
        1.8152105401943546773e17,
        -7.1661652561756670113e18,
    ];
    if x == 1.0 {
        return f64::INFINITY;
    }
    if x < 1.0 {
        return f64::NAN;
    }
    if q <= 0.0 {
        if q == q.floor() {
            return f64::INFINITY;
        }
        if x != x.floor() {
            return f64::NAN;
        }
    }
    let mut s = q.powf(-x);
    let mut a = q;
    let mut i = 0;
    let mut b = 0.0;
    while i < 9 || a <= 9.0 {
        i += 1;
        a += 1.0;
        b = a.powf(-x);
        s += b;
        if -MACHEP * s < b && b < MACHEP * s {
            return s;
        }
    }
    let w = a;
    s += b * w / (x - 1.0);
    s -= 0.5 * b;
    let mut a = 1.0;
    let mut k = 0.0;
    for ai in A {
        a *= x + k;
        b /= w;
        let t = a * b / ai;
        s += t;
        if (t / s).abs() < MACHEP {
            return s;
        }
        k += 1.0;
        a *= x + k;
        b /= w;
        k += 1.0;
    }
    s
}

/// `ψ'(x)`.
pub(crate) fn trigamma(mut x: f64) -> f64 {
    let mut sign = 1.0;
    let mut result = 0.0;
    if x < 0.5 {
        sign = -1.0;
        let s = (PI * x).sin();
        result -= (PI * PI) / (s * s);
        x = 1.0 - x;
    }
    for _ in 0..6 {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    let ixx = 1.0 / (x * x);
    result +=
        (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x;
    sign * result
}

/// `ψ'(x)` in f32 arithmetic, as torch's float overload.
pub(crate) fn trigamma_f32(mut x: f32) -> f32 {
    let pi = std::f32::consts::PI;
    let mut sign = 1.0f32;
    let mut result = 0.0f32;
    if x < 0.5 {
        sign = -1.0;
        let s = (pi * x).sin();
        result -= (pi * pi) / (s * s);
        x = 1.0 - x;
    }
    for _ in 0..6 {
        result += 1.0 / (x * x);
        x += 1.0;
    }
    let ixx = 1.0 / (x * x);
    result +=
        (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x;
    sign * result
}

/// `ψ(x)` (Cephes).
pub(crate) fn digamma(mut x: f64) -> f64 {
    const PSI_10: f64 = 2.25175258906672110764;
    const A: [f64; 7] = [
        8.33333333333333333333E-2,
        -2.10927960927960927961E-2,
        7.57575757575757575758E-3,
        -4.16666666666666666667E-3,
        3.96825396825396825397E-3,
        -8.33333333333333333333E-3,
        8.33333333333333333333E-2,
    ];
    if x == 0.0 {
        return f64::INFINITY.copysign(-x);
    }
    if x < 0.0 {
        if x == x.trunc() {
            return f64::NAN;
        }
        let r = x.fract();
        return digamma(1.0 - x) - PI / (PI * r).tan();
    }
    let mut result = 0.0;
    while x < 10.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    if x == 10.0 {
        return result + PSI_10;
    }
    let mut y = 0.0;
    if x < 1.0e17 {
        let z = 1.0 / (x * x);
        y = z * polevl(z, &A);
    }
    result + x.ln() - (0.5 / x) - y
}

/// `ψ⁽ⁿ⁾(x)`: digamma and trigamma for n = 0, 1, else through the Hurwitz zeta.
pub(crate) fn polygamma(n: i64, x: f64) -> f64 {
    match n {
        0 => digamma(x),
        1 => trigamma(x),
        _ => {
            let sign = if n % 2 != 0 { 1.0 } else { -1.0 };
            sign * lgamma(n as f64 + 1.0).exp() * zeta((n + 1) as f64, x)
        }
    }
}

/// `ln Γ_p(x)`, the multivariate log-gamma (torch's decomposition: a sum of lgammas).
pub(crate) fn mvlgamma(x: f64, p: i64) -> f64 {
    let c = 0.25 * (p * (p - 1)) as f64 * PI.ln();
    let s: f64 = (0..p).map(|j| lgamma(x + 0.5 * (j + 1 - p) as f64)).sum();
    s + c
}

fn ratevl(x: f64, num: &[f64], denom: &[f64]) -> f64 {
    let absx = x.abs();
    let (m, n) = (num.len() as i32 - 1, denom.len() as i32 - 1);
    if absx > 1.0 {
        let y = 1.0 / x;
        let na = num.iter().rev().fold(0.0, |r, &c| r * y + c);
        let da = denom.iter().rev().fold(0.0, |r, &c| r * y + c);
        x.powi(n - m) * na / da
    } else {
        polevl(x, num) / polevl(x, denom)
    }
}

fn lanczos_sum_expg_scaled(x: f64) -> f64 {
    const NUM: [f64; 13] = [
        0.006061842346248906525783753964555936883222,
        0.5098416655656676188125178644804694509993,
        19.51992788247617482847860966235652136208,
        449.9445569063168119446858607650988409623,
        6955.999602515376140356310115515198987526,
        75999.29304014542649875303443598909137092,
        601859.6171681098786670226533699352302507,
        3481712.15498064590882071018964774556468,
        14605578.08768506808414169982791359218571,
        43338889.32467613834773723740590533316085,
        86363131.28813859145546927288977868422342,
        103794043.1163445451906271053616070238554,
        56906521.91347156388090791033559122686859,
    ];
    const DENOM: [f64; 13] = [
        1., 66., 1925., 32670., 357423., 2637558., 13339535., 45995730., 105258076., 150917976.,
        120543840., 39916800., 0.,
    ];
    ratevl(x, &NUM, &DENOM)
}

/// `x^a e^-x / Γ(a)`.
fn igam_fac(a: f64, x: f64) -> f64 {
    const MAXLOG: f64 = 7.09782712893383996843E2;
    const EXP1: f64 = std::f64::consts::E;
    const LANCZOS_G: f64 = 6.024680040776729583740234375;
    if (a - x).abs() > 0.4 * a.abs() {
        let ax = a * x.ln() - x - lgamma(a);
        if ax < -MAXLOG {
            return 0.0;
        }
        return ax.exp();
    }
    let fac = a + LANCZOS_G - 0.5;
    let mut res = (fac / EXP1).sqrt() / lanczos_sum_expg_scaled(a);
    if a < 200.0 && x < 200.0 {
        res *= (a - x).exp() * (x / fac).powf(a);
    } else {
        let num = x - a - LANCZOS_G + 0.5;
        let numfac = num / fac;
        res *= (a * (numfac.ln_1p() - numfac) + x * (0.5 - LANCZOS_G) / fac).exp();
    }
    res
}

fn igam_series(a: f64, x: f64) -> f64 {
    let ax = igam_fac(a, x);
    if ax == 0.0 {
        return 0.0;
    }
    let (mut r, mut c, mut ans) = (a, 1.0, 1.0);
    for _ in 0..2000 {
        r += 1.0;
        c *= x / r;
        ans += c;
        if c <= MACHEP * ans {
            break;
        }
    }
    ans * ax / a
}

fn igamc_series(a: f64, x: f64) -> f64 {
    let (mut fac, mut sum) = (1.0, 0.0);
    for n in 1..2000 {
        fac *= -x / n as f64;
        let term = fac / (a + n as f64);
        sum += term;
        if term.abs() <= MACHEP * sum.abs() {
            break;
        }
    }
    let logx = x.ln();
    let term = -(a * logx - lgamma(1.0 + a)).exp_m1();
    term - (a * logx - lgamma(a)).exp() * sum
}

fn igam_asymptotic_series(a: f64, x: f64, igam: bool) -> f64 {
    let mut maxpow = 0;
    let lambda = x / a;
    let sigma = (x - a) / a;
    let mut absoldterm = f64::INFINITY;
    let mut etapow = [0.0f64; 25];
    etapow[0] = 1.0;
    let mut sum = 0.0;
    let mut afac = 1.0;
    let sgn = if igam { -1.0 } else { 1.0 };
    let eta = if lambda > 1.0 {
        (-2.0 * (sigma.ln_1p() - sigma)).sqrt()
    } else if lambda < 1.0 {
        -(-2.0 * (sigma.ln_1p() - sigma)).sqrt()
    } else {
        0.0
    };
    let mut res = 0.5 * erfc(sgn * eta * (a / 2.0).sqrt());
    for row in IGAM_D.iter() {
        let mut ck = row[0];
        for n in 1..25 {
            if n > maxpow {
                etapow[n] = eta * etapow[n - 1];
                maxpow += 1;
            }
            let ckterm = row[n] * etapow[n];
            ck += ckterm;
            if ckterm.abs() < MACHEP * ck.abs() {
                break;
            }
        }
        let term = ck * afac;
        let absterm = term.abs();
        if absterm > absoldterm {
            break;
        }
        sum += term;
        if absterm < MACHEP * sum.abs() {
            break;
        }
        absoldterm = absterm;
        afac /= a;
    }
    // torch multiplies by c10::pi<float> here.
    res += sgn * (-0.5 * a * eta * eta).exp() * sum / (2.0 * (PI as f32 as f64) * a).sqrt();
    res
}

fn igamc_continued_fraction(a: f64, x: f64) -> f64 {
    const BIG: f64 = 4.503599627370496e15;
    const BIGINV: f64 = 2.22044604925031308085e-16;
    let ax = igam_fac(a, x);
    if ax == 0.0 {
        return 0.0;
    }
    let mut y = 1.0 - a;
    let mut z = x + y + 1.0;
    let mut c = 0.0;
    let mut pkm2 = 1.0;
    let mut qkm2 = x;
    let mut pkm1 = x + 1.0;
    let mut qkm1 = z * x;
    let mut ans = pkm1 / qkm1;
    for _ in 0..2000 {
        c += 1.0;
        y += 1.0;
        z += 2.0;
        let yc = y * c;
        let pk = pkm1 * z - pkm2 * yc;
        let qk = qkm1 * z - qkm2 * yc;
        let t = if qk != 0.0 {
            let r = pk / qk;
            let t = ((ans - r) / r).abs();
            ans = r;
            t
        } else {
            1.0
        };
        pkm2 = pkm1;
        pkm1 = pk;
        qkm2 = qkm1;
        qkm1 = qk;
        if pk.abs() > BIG {
            pkm2 *= BIGINV;
            pkm1 *= BIGINV;
            qkm2 *= BIGINV;
            qkm1 *= BIGINV;
        }
        if t <= MACHEP {
            break;
        }
    }
    ans * ax
}

/// The regularized upper incomplete gamma function `Q(a, x)`.
pub(crate) fn igammac(a: f64, x: f64) -> f64 {
    if x < 0.0 || a < 0.0 {
        return f64::NAN;
    } else if a == 0.0 {
        return if x > 0.0 { 0.0 } else { f64::NAN };
    } else if x == 0.0 {
        return 1.0;
    } else if a.is_infinite() {
        return if x.is_infinite() { f64::NAN } else { 1.0 };
    } else if x.is_infinite() {
        return 0.0;
    }
    let absxma_a = (x - a).abs() / a;
    if (a > 20.0 && a < 200.0 && absxma_a < 0.3) || (a > 200.0 && absxma_a < 4.5 / a.sqrt()) {
        return igam_asymptotic_series(a, x, false);
    }
    if x > 1.1 {
        if x < a {
            1.0 - igam_series(a, x)
        } else {
            igamc_continued_fraction(a, x)
        }
    } else if x <= 0.5 {
        if -0.4 / x.ln() < a {
            1.0 - igam_series(a, x)
        } else {
            igamc_series(a, x)
        }
    } else if x * 1.1 < a {
        1.0 - igam_series(a, x)
    } else {
        igamc_series(a, x)
    }
}

/// The regularized lower incomplete gamma function `P(a, x)`.
pub(crate) fn igamma(a: f64, x: f64) -> f64 {
    if x < 0.0 || a < 0.0 {
        return f64::NAN;
    } else if a == 0.0 {
        return if x > 0.0 { 1.0 } else { f64::NAN };
    } else if x == 0.0 {
        return 0.0;
    } else if a.is_infinite() {
        return if x.is_infinite() { f64::NAN } else { 0.0 };
    } else if x.is_infinite() {
        return 1.0;
    }
    let absxma_a = (x - a).abs() / a;
    if (a > 20.0 && a < 200.0 && absxma_a < 0.3) || (a > 200.0 && absxma_a < 4.5 / a.sqrt()) {
        return igam_asymptotic_series(a, x, true);
    }
    if x > 1.0 && x > a {
        return 1.0 - igammac(a, x);
    }
    igam_series(a, x)
}

/// `e^-|x| I0(x)`.
pub(crate) fn i0e(x: f64) -> f64 {
    let x = x.abs();
    if x <= 8.0 {
        return chbevl(x / 2.0 - 2.0, &I0E_A);
    }
    chbevl(32.0 / x - 2.0, &I0E_B) / x.sqrt()
}

/// `I0(x)`.
pub(crate) fn i0(x: f64) -> f64 {
    let x = x.abs();
    if x <= 8.0 {
        return x.exp() * chbevl(x / 2.0 - 2.0, &I0E_A);
    }
    x.exp() * chbevl(32.0 / x - 2.0, &I0E_B) / x.sqrt()
}

/// `I1(x)`.
pub(crate) fn i1(x0: f64) -> f64 {
    let x = x0.abs();
    let out = if x <= 8.0 {
        x.exp() * x * chbevl(x / 2.0 - 2.0, &I1E_A)
    } else {
        x.exp() * chbevl(32.0 / x - 2.0, &I1E_B) / x.sqrt()
    };
    if x0 < 0.0 {
        -out
    } else {
        out
    }
}

/// `e^-|x| I1(x)`.
pub(crate) fn i1e(x0: f64) -> f64 {
    let x = x0.abs();
    let out = if x <= 8.0 {
        chbevl(x / 2.0 - 2.0, &I1E_A) * x
    } else {
        chbevl(32.0 / x - 2.0, &I1E_B) / x.sqrt()
    };
    if x0 < 0.0 {
        -out
    } else {
        out
    }
}

/// The inverse of the standard normal CDF (Cephes).
pub(crate) fn ndtri(y0: f64) -> f64 {
    const S2PI: f64 = 2.50662827463100050242E0;
    const P0: [f64; 5] = [
        -5.99633501014107895267E1,
        9.80010754185999661536E1,
        -5.66762857469070293439E1,
        1.39312609387279679503E1,
        -1.23916583867381258016E0,
    ];
    const Q0: [f64; 9] = [
        1.00000000000000000000E0,
        1.95448858338141759834E0,
        4.67627912898881538453E0,
        8.63602421390890590575E1,
        -2.25462687854119370527E2,
        2.00260212380060660359E2,
        -8.20372256168333339912E1,
        1.59056225126211695515E1,
        -1.18331621121330003142E0,
    ];
    const P1: [f64; 9] = [
        4.05544892305962419923E0,
        3.15251094599893866154E1,
        5.71628192246421288162E1,
        4.40805073893200834700E1,
        1.46849561928858024014E1,
        2.18663306850790267539E0,
        -1.40256079171354495875E-1,
        -3.50424626827848203418E-2,
        -8.57456785154685413611E-4,
    ];
    const Q1: [f64; 9] = [
        1.00000000000000000000E0,
        1.57799883256466749731E1,
        4.53907635128879210584E1,
        4.13172038254672030440E1,
        1.50425385692907503408E1,
        2.50464946208309415979E0,
        -1.42182922854787788574E-1,
        -3.80806407691578277194E-2,
        -9.33259480895457427372E-4,
    ];
    const P2: [f64; 9] = [
        3.23774891776946035970E0,
        6.91522889068984211695E0,
        3.93881025292474443415E0,
        1.33303460815807542389E0,
        2.01485389549179081538E-1,
        1.23716634817820021358E-2,
        3.01581553508235416007E-4,
        2.65806974686737550832E-6,
        6.23974539184983293730E-9,
    ];
    const Q2: [f64; 9] = [
        1.00000000000000000000E0,
        6.02427039364742014255E0,
        3.67983563856160859403E0,
        1.37702099489081330271E0,
        2.16236993594496635890E-1,
        1.34204006088543189037E-2,
        3.28014464682127739104E-4,
        2.89247864745380683936E-6,
        6.79019408009981274425E-9,
    ];
    const EXP_M2: f64 = 0.13533528323661269189;
    if y0 == 0.0 {
        return f64::NEG_INFINITY;
    }
    if y0 == 1.0 {
        return f64::INFINITY;
    }
    if !(0.0..=1.0).contains(&y0) {
        return f64::NAN;
    }
    let mut code = true;
    let mut y = y0;
    if y > 1.0 - EXP_M2 {
        y = 1.0 - y;
        code = false;
    }
    if y > EXP_M2 {
        y -= 0.5;
        let y2 = y * y;
        let x = y + y * (y2 * polevl(y2, &P0) / polevl(y2, &Q0));
        return x * S2PI;
    }
    let x = (-2.0 * y.ln()).sqrt();
    let x0 = x - x.ln() / x;
    let z = 1.0 / x;
    let x1 = if x < 8.0 {
        z * polevl(z, &P1) / polevl(z, &Q1)
    } else {
        z * polevl(z, &P2) / polevl(z, &Q2)
    };
    let x = x0 - x1;
    if code {
        -x
    } else {
        x
    }
}

/// `exp(x²) erfc(x)` (the Faddeeva package's erfcx).
pub(crate) fn erfcx(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x >= 0.0 {
        if x > 50.0 {
            const ISPI: f64 = 0.56418958354775628694807945156;
            if x > 5e7 {
                return ISPI / x;
            }
            return ISPI * ((x * x) * (x * x + 4.5) + 2.0) / (x * ((x * x) * (x * x + 5.0) + 3.75));
        }
        return erfcx_y100(400.0 / (4.0 + x));
    }
    if x < -26.7 {
        f64::INFINITY
    } else if x < -6.1 {
        2.0 * (x * x).exp()
    } else {
        2.0 * (x * x).exp() - erfcx_y100(400.0 / (4.0 - x))
    }
}

/// `ln Φ(x)` (SciPy's form).
pub(crate) fn log_ndtr(x: f64) -> f64 {
    let t = x * std::f64::consts::FRAC_1_SQRT_2;
    if x < -1.0 {
        (erfcx(-t) / 2.0).ln() - t * t
    } else {
        (-erfc(t) / 2.0).ln_1p()
    }
}

/// `Φ(x)`, the standard normal CDF (torch: `(1 + erf(x / √2)) / 2`).
pub(crate) fn ndtr(x: f64) -> f64 {
    (1.0 + crate::ops::elementwise::real::erf(x * std::f64::consts::FRAC_1_SQRT_2)) * 0.5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // Values from scipy.special; torch's algorithms (ported here) agree to about 1e-9
        // (trigamma's asymptotic series stops after the x^-7 term).
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(close(digamma(1.0), -0.5772156649015329));
        assert!(close(digamma(-0.5), 0.03648997397857652));
        assert!(close(trigamma(1.0), 1.6449340668482264));
        assert!(close(polygamma(2, 1.5), -0.8287966442343199));
        assert!(close(zeta(2.0, 1.0), 1.6449340668482264));
        assert!(close(igamma(2.0, 3.0), 0.8008517265285442));
        assert!(close(igammac(2.0, 3.0), 0.1991482734714558));
        assert!(close(i0(1.0), 1.2660658777520082));
        assert!(close(i1e(-2.0), -0.2152692892489376));
        assert!(close(ndtri(0.975), 1.959963984540054));
        assert!(close(erfcx(1.0), 0.42758357615580705));
        assert!(close(log_ndtr(-3.0), -6.607726221510349));
    }
}
