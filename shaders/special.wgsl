// Special functions of `torch.special` in f32 for the elementwise kernels (appended to
// math.wgsl: `special_k` is where its unary switch ends). Each follows torch's float path
// (aten/src/ATen/native/Math.h; the CPU ports in src/ops/elementwise/special/ compute the
// same algorithms in f64): Cephes' digamma, i0/i1 Chebyshev series and ndtri; lgamma by
// shifting to x >= 8 and Stirling's series (the C library's lgammaf has no WGSL form);
// erfcx and log_ndtr from the Chebyshev fit of erfc_ written as exp(-z^2 + p(t)) * t, whose
// factor exp(-z^2) cancels (erfcx) or is taken in logs (log_ndtr) without underflow.

const PI_F: f32 = 3.14159265358979323846;

// sin(pi * x), exact at the integers (the argument reduced first).
fn sinpi_(x: f32) -> f32 {
    let r = x - 2.0 * round(0.5 * x);
    return sin_cos(PI_F * r, false);
}

// Stirling's series of ln Gamma(x) for x >= 8.
fn lgamma_stirling(x: f32) -> f32 {
    let z = 1.0 / (x * x);
    let s = (0.0833333333333 - z * (0.00277777777778 - z * (0.000793650793651 - z * 0.000595238095238))) / x;
    return (x - 0.5) * log(x) - x + 0.918938533204672742 + s;
}

// ln |Gamma(x)| for x > 0: shifted to x >= 8 (the product of the shifts taken in one log).
fn lgamma_pos(x: f32) -> f32 {
    if x >= 8.0 {
        return lgamma_stirling(x);
    }
    var y = x;
    var p = 1.0;
    loop {
        if y >= 8.0 {
            break;
        }
        p = p * y;
        y = y + 1.0;
    }
    return lgamma_stirling(y) - log(p);
}

// ln |Gamma(x)|: +inf at the poles (0 and the negative integers) and at +-inf.
fn lgamma_(x: f32) -> f32 {
    if is_nan(x) {
        return x;
    }
    if is_inf(x) {
        return inf_();
    }
    if x <= 0.0 && x == floor(x) {
        return inf_();
    }
    if x > 0.0 {
        return lgamma_pos(x);
    }
    // Reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x).
    return log(PI_F / abs(sinpi_(x))) - lgamma_pos(1.0 - x);
}

// psi(x) (Cephes, torch's calc_digamma): -inf / +inf at +0 / -0, NaN at the negative
// integers, reflection below 0, the recurrence up to 10 and the asymptotic series.
fn digamma_(x_in: f32) -> f32 {
    var x = x_in;
    if x == 0.0 {
        return select(-inf_(), inf_(), (bitcast<u32>(x) & 0x80000000u) != 0u);
    }
    if is_nan(x) || x == -inf_() {
        return nan_();
    }
    var result = 0.0;
    if x < 0.0 {
        if x == trunc(x) {
            return nan_();
        }
        // psi(1 - x) - pi / tan(pi * frac(x)).
        let r = PI_F * (x - trunc(x));
        result = -PI_F * sin_cos(r, true) / sin_cos(r, false);
        x = 1.0 - x;
    }
    loop {
        if x >= 10.0 {
            break;
        }
        result = result - 1.0 / x;
        x = x + 1.0;
    }
    if x == 10.0 {
        return result + 2.25175258906672110764;
    }
    var y = 0.0;
    if x < 1.0e17 {
        let z = 1.0 / (x * x);
        y = z * ((((((8.33333333333333333333E-2 * z - 2.10927960927960927961E-2) * z
            + 7.57575757575757575758E-3) * z - 4.16666666666666666667E-3) * z
            + 3.96825396825396825397E-3) * z - 8.33333333333333333333E-3) * z
            + 8.33333333333333333333E-2);
    }
    return result + log(x) - 0.5 / x - y;
}

const I0E_A = array<f32, 30>(
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1,
);

const I0E_B = array<f32, 25>(
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1,
);

const I1E_A = array<f32, 29>(
    2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
    -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
    4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
    -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
    2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
    -1.76416518357834055153E-1, 2.52587186443633654823E-1,
);

const I1E_B = array<f32, 25>(
    7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
    3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
    -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
    7.78576235018280120474E-1,
);

// Cephes' chbevl over the first `n` coefficients of one of the tables above (`which`: 0
// I0E_A, 1 I0E_B, 2 I1E_A, 3 I1E_B).
fn chbevl_(x: f32, which: u32) -> f32 {
    var b0 = 0.0;
    var b1 = 0.0;
    var b2 = 0.0;
    var n = 30u;
    switch which {
        case 1u, 3u: { n = 25u; }
        case 2u: { n = 29u; }
        default: {}
    }
    for (var i = 0u; i < n; i = i + 1u) {
        var c = 0.0;
        switch which {
            case 0u: { c = I0E_A[i]; }
            case 1u: { c = I0E_B[i]; }
            case 2u: { c = I1E_A[i]; }
            default: { c = I1E_B[i]; }
        }
        b2 = b1;
        b1 = b0;
        b0 = x * b1 - b2 + c;
    }
    return 0.5 * (b0 - b2);
}

// e^-|x| I0(x) (order 0) or e^-|x| I1(|x|) (order 1), from the two Chebyshev ranges.
fn bessel_ie_(x: f32, order: u32) -> f32 {
    let a = abs(x);
    if a <= 8.0 {
        let s = chbevl_(a / 2.0 - 2.0, 2u * order);
        return select(s, s * a, order == 1u);
    }
    return chbevl_(32.0 / a - 2.0, 2u * order + 1u) / sqrt(a);
}

fn i0_(x: f32) -> f32 {
    return exp(abs(x)) * bessel_ie_(x, 0u);
}

fn i1_(x: f32) -> f32 {
    let r = exp(abs(x)) * bessel_ie_(x, 1u);
    return select(r, -r, x < 0.0);
}

fn i1e_(x: f32) -> f32 {
    let r = bessel_ie_(x, 1u);
    return select(r, -r, x < 0.0);
}

// The inverse of the standard normal CDF (Cephes, torch's calc_ndtri).
fn ndtri_(y0: f32) -> f32 {
    if y0 == 0.0 {
        return -inf_();
    }
    if y0 == 1.0 {
        return inf_();
    }
    if y0 < 0.0 || y0 > 1.0 || is_nan(y0) {
        return nan_();
    }
    let exp_m2 = 0.13533528323661269189;
    var y = y0;
    var negate = true;
    if y > 1.0 - exp_m2 {
        y = 1.0 - y;
        negate = false;
    }
    if y > exp_m2 {
        y = y - 0.5;
        let y2 = y * y;
        let p = (((-5.99633501014107895267E1 * y2 + 9.80010754185999661536E1) * y2
            - 5.66762857469070293439E1) * y2 + 1.39312609387279679503E1) * y2
            - 1.23916583867381258016E0;
        let q = (((((((y2 + 1.95448858338141759834E0) * y2 + 4.67627912898881538453E0) * y2
            + 8.63602421390890590575E1) * y2 - 2.25462687854119370527E2) * y2
            + 2.00260212380060660359E2) * y2 - 8.20372256168333339912E1) * y2
            + 1.59056225126211695515E1) * y2 - 1.18331621121330003142E0;
        return (y + y * (y2 * p / q)) * 2.50662827463100050242;
    }
    let x = sqrt(-2.0 * log(y));
    let x0 = x - log(x) / x;
    let z = 1.0 / x;
    var x1 = 0.0;
    if x < 8.0 {
        let p = (((((((4.05544892305962419923E0 * z + 3.15251094599893866154E1) * z
            + 5.71628192246421288162E1) * z + 4.40805073893200834700E1) * z
            + 1.46849561928858024014E1) * z + 2.18663306850790267539E0) * z
            - 1.40256079171354495875E-1) * z - 3.50424626827848203418E-2) * z
            - 8.57456785154685413611E-4;
        let q = (((((((z + 1.57799883256466749731E1) * z + 4.53907635128879210584E1) * z
            + 4.13172038254672030440E1) * z + 1.50425385692907503408E1) * z
            + 2.50464946208309415979E0) * z - 1.42182922854787788574E-1) * z
            - 3.80806407691578277194E-2) * z - 9.33259480895457427372E-4;
        x1 = z * p / q;
    } else {
        let p = (((((((3.23774891776946035970E0 * z + 6.91522889068984211695E0) * z
            + 3.93881025292474443415E0) * z + 1.33303460815807542389E0) * z
            + 2.01485389549179081538E-1) * z + 1.23716634817820021358E-2) * z
            + 3.01581553508235416007E-4) * z + 2.65806974686737550832E-6) * z
            + 6.23974539184983293730E-9;
        let q = (((((((z + 6.02427039364742014255E0) * z + 3.67983563856160859403E0) * z
            + 1.37702099489081330271E0) * z + 2.16236993594496635890E-1) * z
            + 1.34204006088543189037E-2) * z + 3.28014464682127739104E-4) * z
            + 2.89247864745380683936E-6) * z + 6.79019408009981274425E-9;
        x1 = z * p / q;
    }
    let r = x0 - x1;
    return select(r, -r, negate);
}

// For z >= 0: (t, p) with erfc(z) = t * exp(-z^2 + p) (erfc_'s Chebyshev fit).
fn erfc_parts(z: f32) -> vec2<f32> {
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277))))))));
    return vec2<f32>(t, p);
}

// exp(x^2) erfc(x): for x >= 0 the fit's t * exp(p) (no exp(x^2) to overflow), below 0
// 2 exp(x^2) - erfcx(-x) (+inf once exp(x^2) overflows).
fn erfcx_(x: f32) -> f32 {
    let e = erfc_parts(abs(x));
    let pos = e.x * exp(e.y);
    if x >= 0.0 {
        return pos;
    }
    return 2.0 * exp(x * x) - pos;
}

// Phi(x) = (1 + erf(x / sqrt(2))) / 2.
fn ndtr_(x: f32) -> f32 {
    return 0.5 * erfc_(-x * 0.70710678118654752);
}

// ln Phi(x): below -1 the log of erfc's fit (ln t - z^2 + p - ln 2), else log1p(-erfc(t) / 2).
fn log_ndtr_(x: f32) -> f32 {
    let t = x * 0.70710678118654752;
    if x < -1.0 {
        let e = erfc_parts(-t);
        return log(e.x) - t * t + e.y - 0.69314718055994531;
    }
    return log1p_(-0.5 * erfc_(t));
}

// -x ln x (0 at 0, -inf below 0).
fn entr_(x: f32) -> f32 {
    if x > 0.0 {
        return -x * log_(x);
    }
    return select(-inf_(), 0.0, x == 0.0);
}

// The special functions' unary op codes (unary_op2_k's default).
fn special_k(op: u32, x: f32) -> f32 {
    switch op {
        case UnaryOp_Lgamma: { return lgamma_(x); }
        case UnaryOp_Digamma: { return digamma_(x); }
        case UnaryOp_I0: { return i0_(x); }
        case UnaryOp_I0e: { return bessel_ie_(x, 0u); }
        case UnaryOp_I1: { return i1_(x); }
        case UnaryOp_I1e: { return i1e_(x); }
        case UnaryOp_Ndtri: { return ndtri_(x); }
        case UnaryOp_Ndtr: { return ndtr_(x); }
        case UnaryOp_LogNdtr: { return log_ndtr_(x); }
        case UnaryOp_Erfcx: { return erfcx_(x); }
        case UnaryOp_Entr: { return entr_(x); }
        default: { return x; }
    }
}
