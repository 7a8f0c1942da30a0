//! Dense f64 matrix routines with LAPACK's conventions (row-major `a[i * cols + j]`): LU with
//! partial pivoting (getrf: the first entry of largest magnitude in the column), triangular
//! solves, Cholesky (potrf), Householder QR (geqrf / orgqr / ormqr, dlarfg's signs),
//! symmetric eigenvalues (Jacobi), singular values (one-sided Jacobi) and the matrix
//! exponential (Padé 13 with scaling and squaring).

/// LU with partial pivoting of an `m`×`n` matrix in place (L below the diagonal with a unit
/// diagonal, U on and above). Returns the 1-based pivots (`min(m, n)`) and LAPACK's `info`:
/// the 1-based index of the first exactly zero pivot, 0 when there is none.
pub fn getrf(a: &mut [f64], m: usize, n: usize) -> (Vec<i32>, i32) {
    let k = m.min(n);
    let mut piv = vec![0i32; k];
    let mut info = 0;
    for j in 0..k {
        let mut p = j;
        let mut best = a[j * n + j].abs();
        for i in j + 1..m {
            let v = a[i * n + j].abs();
            if v > best {
                best = v;
                p = i;
            }
        }
        piv[j] = p as i32 + 1;
        if a[p * n + j] != 0.0 {
            if p != j {
                for c in 0..n {
                    a.swap(p * n + c, j * n + c);
                }
            }
            let d = a[j * n + j];
            for i in j + 1..m {
                a[i * n + j] /= d;
            }
        } else if info == 0 {
            info = j as i32 + 1;
        }
        for i in j + 1..m {
            let l = a[i * n + j];
            if l != 0.0 {
                for c in j + 1..n {
                    a[i * n + c] -= l * a[j * n + c];
                }
            }
        }
    }
    (piv, info)
}

/// The row permutation of `getrf`'s pivots: row `i` of `L U` is row `perm[i]` of `A`.
pub fn perm_of(piv: &[i32], m: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..m).collect();
    for (i, &p) in piv.iter().enumerate() {
        let p = (p - 1).clamp(0, m as i32 - 1) as usize;
        perm.swap(i, p);
    }
    perm
}

/// Solves `op(T) X = B` for an `n`×`n` triangular `t` (only its triangle is read) and an
/// `n`×`k` `b`, in place. `op` is the transpose when `trans`.
pub fn trsm(t: &[f64], n: usize, b: &mut [f64], k: usize, upper: bool, trans: bool, unit: bool) {
    let at = |i: usize, j: usize| if trans { t[j * n + i] } else { t[i * n + j] };
    // op(T) is upper when T is upper and not transposed, or lower and transposed.
    let eff_upper = upper != trans;
    let rows: Vec<usize> = if eff_upper {
        (0..n).rev().collect()
    } else {
        (0..n).collect()
    };
    for &i in &rows {
        for c in 0..k {
            let mut s = b[i * k + c];
            if eff_upper {
                for j in i + 1..n {
                    s -= at(i, j) * b[j * k + c];
                }
            } else {
                for j in 0..i {
                    s -= at(i, j) * b[j * k + c];
                }
            }
            b[i * k + c] = if unit { s } else { s / at(i, i) };
        }
    }
}

/// Solves `A X = B` (or `Aᵀ X = B` when `adjoint`) from `getrf`'s output, `b` `n`×`k` in place.
pub fn getrs(lu: &[f64], piv: &[i32], n: usize, b: &mut [f64], k: usize, adjoint: bool) {
    if !adjoint {
        for (i, &p) in piv.iter().enumerate() {
            let p = (p - 1) as usize;
            if p != i && p < n {
                for c in 0..k {
                    b.swap(i * k + c, p * k + c);
                }
            }
        }
        trsm(lu, n, b, k, false, false, true);
        trsm(lu, n, b, k, true, false, false);
    } else {
        trsm(lu, n, b, k, true, true, false);
        trsm(lu, n, b, k, false, true, true);
        for (i, &p) in piv.iter().enumerate().rev() {
            let p = (p - 1) as usize;
            if p != i && p < n {
                for c in 0..k {
                    b.swap(i * k + c, p * k + c);
                }
            }
        }
    }
}

/// Cholesky of the lower triangle of an `n`×`n` matrix: the lower factor L (upper part
/// zero) and LAPACK's `info` (the order of the first leading minor that is not positive
/// definite, 0 on success).
pub fn potrf(a: &[f64], n: usize) -> (Vec<f64>, i32) {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= l[j * n + k] * l[j * n + k];
        }
        if s.is_nan() || s <= 0.0 {
            l[j * n + j] = s;
            return (l, j as i32 + 1);
        }
        let d = s.sqrt();
        l[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= l[i * n + k] * l[j * n + k];
            }
            l[i * n + j] = s / d;
        }
    }
    (l, 0)
}

/// `x`'s transpose (`m`×`n` → `n`×`m`).
pub fn transpose(x: &[f64], m: usize, n: usize) -> Vec<f64> {
    let mut t = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            t[j * m + i] = x[i * n + j];
        }
    }
    t
}

/// `a` (`m`×`k`) times `b` (`k`×`n`).
pub fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p];
            if x == 0.0 {
                continue;
            }
            for j in 0..n {
                c[i * n + j] += x * b[p * n + j];
            }
        }
    }
    c
}

/// The `n`×`n` identity.
pub fn eye(n: usize) -> Vec<f64> {
    let mut e = vec![0.0; n * n];
    for i in 0..n {
        e[i * n + i] = 1.0;
    }
    e
}

fn hypot(a: f64, b: f64) -> f64 {
    a.hypot(b)
}

/// Householder QR of an `m`×`n` matrix in place (LAPACK geqr2): R on and above the diagonal,
/// the reflectors' tails below it; returns `tau` (`min(m, n)`).
pub fn geqrf(a: &mut [f64], m: usize, n: usize) -> Vec<f64> {
    let k = m.min(n);
    let mut tau = vec![0.0; k];
    for i in 0..k {
        // dlarfg on (a[i][i], a[i+1..m][i]).
        let alpha = a[i * n + i];
        let xnorm = (i + 1..m).map(|r| a[r * n + i]).fold(0.0f64, hypot);
        if xnorm == 0.0 {
            tau[i] = 0.0;
            continue_apply(a, m, n, i, 0.0);
            continue;
        }
        let beta = -hypot(alpha, xnorm).copysign(alpha);
        tau[i] = (beta - alpha) / beta;
        let scale = 1.0 / (alpha - beta);
        for r in i + 1..m {
            a[r * n + i] *= scale;
        }
        a[i * n + i] = beta;
        continue_apply(a, m, n, i, tau[i]);
    }
    tau
}

/// Applies H(i) = I - tau v vᵀ (v from column i, v[i] = 1) to the columns right of i.
fn continue_apply(a: &mut [f64], m: usize, n: usize, i: usize, tau: f64) {
    if tau == 0.0 {
        return;
    }
    for c in i + 1..n {
        let mut w = a[i * n + c];
        for r in i + 1..m {
            w += a[r * n + i] * a[r * n + c];
        }
        let w = tau * w;
        a[i * n + c] -= w;
        for r in i + 1..m {
            a[r * n + c] -= w * a[r * n + i];
        }
    }
}

/// Applies the reflector `i` stored in column `i` of `v` (`rows`×`vcols`, v[i] = 1 implied,
/// entries above i zero) with `tau` to `c` (`rows`×`ncols`) from the left.
fn reflect_left(
    v: &[f64],
    vcols: usize,
    i: usize,
    tau: f64,
    c: &mut [f64],
    rows: usize,
    ncols: usize,
) {
    if tau == 0.0 {
        return;
    }
    for col in 0..ncols {
        let mut w = c[i * ncols + col];
        for r in i + 1..rows {
            w += v[r * vcols + i] * c[r * ncols + col];
        }
        let w = tau * w;
        c[i * ncols + col] -= w;
        for r in i + 1..rows {
            c[r * ncols + col] -= w * v[r * vcols + i];
        }
    }
}

/// Applies reflector `i` to `c` (`nrows`×`cols`, `cols` = the reflector's length) from the
/// right: C ← C H.
fn reflect_right(
    v: &[f64],
    vcols: usize,
    i: usize,
    tau: f64,
    c: &mut [f64],
    nrows: usize,
    cols: usize,
) {
    if tau == 0.0 {
        return;
    }
    for row in 0..nrows {
        let cr = &mut c[row * cols..(row + 1) * cols];
        let mut w = cr[i];
        for r in i + 1..cols {
            w += cr[r] * v[r * vcols + i];
        }
        let w = tau * w;
        cr[i] -= w;
        for r in i + 1..cols {
            cr[r] -= w * v[r * vcols + i];
        }
    }
}

/// The first `cols` columns of Q = H(0) H(1) ... H(k-1) from reflectors in an `m`×`vcols`
/// matrix (LAPACK orgqr / householder_product).
pub fn orgqr(v: &[f64], m: usize, vcols: usize, tau: &[f64], cols: usize) -> Vec<f64> {
    let mut q = vec![0.0; m * cols];
    for i in 0..m.min(cols) {
        q[i * cols + i] = 1.0;
    }
    for i in (0..tau.len()).rev() {
        reflect_left(v, vcols, i, tau[i], &mut q, m, cols);
    }
    q
}

/// LAPACK ormqr: `op(Q) C` (left) or `C op(Q)` with Q = H(0)...H(k-1) from reflectors in
/// `v` (`nq`×`vcols`); `c` is `rows`×`cols` and is updated in place.
#[allow(clippy::too_many_arguments)]
pub fn ormqr(
    v: &[f64],
    vcols: usize,
    tau: &[f64],
    c: &mut [f64],
    rows: usize,
    cols: usize,
    left: bool,
    trans: bool,
) {
    let k = tau.len();
    // Q C applies H(k-1) first; Qᵀ C applies H(0) first; C Q applies H(0) first; C Qᵀ H(k-1).
    let forward = left == trans;
    let order: Vec<usize> = if forward {
        (0..k).collect()
    } else {
        (0..k).rev().collect()
    };
    for i in order {
        if left {
            reflect_left(v, vcols, i, tau[i], c, rows, cols);
        } else {
            reflect_right(v, vcols, i, tau[i], c, rows, cols);
        }
    }
}

/// Eigenvalues (ascending) and eigenvectors (columns of an `n`×`n` matrix) of a symmetric
/// matrix, by cyclic Jacobi rotations.
pub fn eigh(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut a = a.to_vec();
    let mut v = eye(n);
    for _sweep in 0..100 {
        let mut off = 0.0;
        let mut diag = 0.0;
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    off += a[i * n + j] * a[i * n + j];
                } else {
                    diag += a[i * n + i] * a[i * n + i];
                }
            }
        }
        if off <= 1e-30 * diag || off == 0.0 || !off.is_finite() {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let akp = a[k * n + p];
                    let akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let apk = a[p * n + k];
                    let aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let vkp = v[k * n + p];
                    let vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&x, &y| a[x * n + x].total_cmp(&a[y * n + y]));
    let w: Vec<f64> = idx.iter().map(|&i| a[i * n + i]).collect();
    let mut vs = vec![0.0; n * n];
    for (c, &i) in idx.iter().enumerate() {
        for r in 0..n {
            vs[r * n + c] = v[r * n + i];
        }
    }
    (w, vs)
}

/// The thin SVD of an `m`×`n` matrix: U (`m`×`k`, or `m`×`m` when `full`), S (`k`,
/// descending), V (`n`×`k`, or `n`×`n`), `k = min(m, n)`, by one-sided Jacobi rotations.
pub fn svd(a: &[f64], m: usize, n: usize, full: bool) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    if m < n {
        let (u, s, v) = svd(&transpose(a, m, n), n, m, full);
        return (v, s, u);
    }
    // m >= n: orthogonalise the columns of U = A, accumulating V.
    let mut u = a.to_vec();
    let mut v = eye(n);
    for _sweep in 0..100 {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let (mut al, mut be, mut ga) = (0.0, 0.0, 0.0);
                for r in 0..m {
                    let x = u[r * n + p];
                    let y = u[r * n + q];
                    al += x * x;
                    be += y * y;
                    ga += x * y;
                }
                if ga == 0.0 || ga.abs() <= 1e-15 * (al * be).sqrt() || !ga.is_finite() {
                    continue;
                }
                rotated = true;
                let zeta = (be - al) / (2.0 * ga);
                let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
                let t = if zeta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (1.0 + t * t).sqrt();
                let s = c * t;
                for r in 0..m {
                    let x = u[r * n + p];
                    let y = u[r * n + q];
                    u[r * n + p] = c * x - s * y;
                    u[r * n + q] = s * x + c * y;
                }
                for r in 0..n {
                    let x = v[r * n + p];
                    let y = v[r * n + q];
                    v[r * n + p] = c * x - s * y;
                    v[r * n + q] = s * x + c * y;
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<f64> = (0..n)
        .map(|j| {
            (0..m)
                .map(|r| u[r * n + j] * u[r * n + j])
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by(|&x, &y| norms[y].total_cmp(&norms[x]));
    let s: Vec<f64> = idx.iter().map(|&i| norms[i]).collect();
    let ucols = if full { m } else { n };
    let mut uo = vec![0.0; m * ucols];
    let mut vo = vec![0.0; n * n];
    let smax = s.first().copied().unwrap_or(0.0);
    let mut have = Vec::new();
    for (c, &i) in idx.iter().enumerate() {
        for r in 0..n {
            vo[r * n + c] = v[r * n + i];
        }
        if norms[i] > smax * 1e-300 && norms[i] > 0.0 {
            for r in 0..m {
                uo[r * ucols + c] = u[r * n + i] / norms[i];
            }
            have.push(c);
        }
    }
    // Complete U's columns (zero singular values, full matrices) to an orthonormal basis.
    let mut e = 0;
    for c in 0..ucols {
        if have.contains(&c) {
            continue;
        }
        while e < m {
            let mut x = vec![0.0; m];
            x[e] = 1.0;
            e += 1;
            for _ in 0..2 {
                for &h in &have {
                    let d: f64 = (0..m).map(|r| x[r] * uo[r * ucols + h]).sum();
                    for r in 0..m {
                        x[r] -= d * uo[r * ucols + h];
                    }
                }
            }
            let nx = x.iter().map(|y| y * y).sum::<f64>().sqrt();
            if nx > 1e-8 {
                for r in 0..m {
                    uo[r * ucols + c] = x[r] / nx;
                }
                have.push(c);
                break;
            }
        }
    }
    (uo, s, vo)
}

/// The inverse of an `n`×`n` matrix by LU, with getrf's `info`.
pub fn inverse(a: &[f64], n: usize) -> (Vec<f64>, i32) {
    let mut lu = a.to_vec();
    let (piv, info) = getrf(&mut lu, n, n);
    let mut x = eye(n);
    getrs(&lu, &piv, n, &mut x, n, false);
    (x, info)
}

/// The matrix exponential of an `n`×`n` matrix (Padé 13 with scaling and squaring).
pub fn expm(a: &[f64], n: usize) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    const B: [f64; 14] = [
        64764752532480000.0,
        32382376266240000.0,
        7771770303897600.0,
        1187353796428800.0,
        129060195264000.0,
        10559470521600.0,
        670442572800.0,
        33522128640.0,
        1323241920.0,
        40840800.0,
        960960.0,
        16380.0,
        182.0,
        1.0,
    ];
    let norm1 = (0..n)
        .map(|j| (0..n).map(|i| a[i * n + j].abs()).sum::<f64>())
        .fold(0.0, f64::max);
    if !norm1.is_finite() {
        return vec![f64::NAN; n * n];
    }
    let theta = 5.371920351148152;
    let s = if norm1 > theta {
        (norm1 / theta).log2().ceil().max(0.0) as i32
    } else {
        0
    };
    let scale = 0.5f64.powi(s);
    let a: Vec<f64> = a.iter().map(|x| x * scale).collect();
    let id = eye(n);
    let a2 = matmul(&a, &a, n, n, n);
    let a4 = matmul(&a2, &a2, n, n, n);
    let a6 = matmul(&a4, &a2, n, n, n);
    let lin = |c: &[(f64, &[f64])]| -> Vec<f64> {
        let mut o = vec![0.0; n * n];
        for (k, m) in c {
            for i in 0..n * n {
                o[i] += k * m[i];
            }
        }
        o
    };
    let u1 = lin(&[(B[13], &a6), (B[11], &a4), (B[9], &a2)]);
    let u1 = matmul(&a6, &u1, n, n, n);
    let u2 = lin(&[
        (1.0, &u1),
        (B[7], &a6),
        (B[5], &a4),
        (B[3], &a2),
        (B[1], &id),
    ]);
    let u = matmul(&a, &u2, n, n, n);
    let v1 = lin(&[(B[12], &a6), (B[10], &a4), (B[8], &a2)]);
    let v1 = matmul(&a6, &v1, n, n, n);
    let v = lin(&[
        (1.0, &v1),
        (B[6], &a6),
        (B[4], &a4),
        (B[2], &a2),
        (B[0], &id),
    ]);
    let p: Vec<f64> = (0..n * n).map(|i| v[i] + u[i]).collect();
    let q: Vec<f64> = (0..n * n).map(|i| v[i] - u[i]).collect();
    let mut lu = q;
    let (piv, _) = getrf(&mut lu, n, n);
    let mut r = p;
    getrs(&lu, &piv, n, &mut r, n, false);
    for _ in 0..s {
        r = matmul(&r, &r, n, n, n);
    }
    r
}

/// Bunch-Kaufman LDLᵀ of the symmetric `n`×`n` matrix whose lower triangle is `a`, in place
/// (LAPACK's unblocked `dsytf2` with UPLO = 'L', which `sytrf` runs for small matrices):
/// L's multipliers and the 1×1 / 2×2 blocks of D in the lower triangle. Returns the 1-based
/// pivots (a 2×2 block's two entries both `-p`) and `info` (the first zero diagonal block,
/// 0 when there is none). The strict upper triangle is left as it was.
pub fn sytf2_lower(a: &mut [f64], n: usize) -> (Vec<i32>, i32) {
    let alpha = (1.0 + 17f64.sqrt()) / 8.0;
    let at = |i: usize, j: usize| i * n + j;
    let mut ipiv = vec![0i32; n];
    let mut info = 0;
    let mut k = 0;
    while k < n {
        let mut kstep = 1;
        let absakk = a[at(k, k)].abs();
        // The first largest entry below the diagonal of column k (idamax).
        let (imax, colmax) = if k + 1 < n {
            let mut im = k + 1;
            let mut best = a[at(k + 1, k)].abs();
            for i in k + 2..n {
                let v = a[at(i, k)].abs();
                if v > best {
                    best = v;
                    im = i;
                }
            }
            (im, best)
        } else {
            (k, 0.0)
        };
        let mut kp = k;
        if absakk.max(colmax) == 0.0 || absakk.is_nan() {
            if info == 0 {
                info = k as i32 + 1;
            }
        } else {
            if absakk < alpha * colmax {
                // The largest off-diagonal entry of row (and column) imax.
                let mut rowmax = 0.0f64;
                for j in k..imax {
                    rowmax = rowmax.max(a[at(imax, j)].abs());
                }
                for i in imax + 1..n {
                    rowmax = rowmax.max(a[at(i, imax)].abs());
                }
                if absakk >= alpha * colmax * (colmax / rowmax) {
                    kp = k;
                } else if a[at(imax, imax)].abs() >= alpha * rowmax {
                    kp = imax;
                } else {
                    kp = imax;
                    kstep = 2;
                }
            }
            let kk = k + kstep - 1;
            if kp != kk {
                // Rows and columns kk and kp of the trailing submatrix interchanged.
                for i in kp + 1..n {
                    a.swap(at(i, kk), at(i, kp));
                }
                for j in kk + 1..kp {
                    a.swap(at(j, kk), at(kp, j));
                }
                a.swap(at(kk, kk), at(kp, kp));
                if kstep == 2 {
                    a.swap(at(k + 1, k), at(kp, k));
                }
            }
            if kstep == 1 {
                if k + 1 < n {
                    // A22 -= x xᵀ / d11 (dsyr, lower), then x /= d11.
                    let d11 = 1.0 / a[at(k, k)];
                    for j in k + 1..n {
                        let xj = a[at(j, k)];
                        if xj != 0.0 {
                            let t = -d11 * xj;
                            for i in j..n {
                                a[at(i, j)] += a[at(i, k)] * t;
                            }
                        }
                    }
                    for i in k + 1..n {
                        a[at(i, k)] *= d11;
                    }
                }
            } else if k + 2 < n {
                let d21 = a[at(k + 1, k)];
                let d11 = a[at(k + 1, k + 1)] / d21;
                let d22 = a[at(k, k)] / d21;
                let t = 1.0 / (d11 * d22 - 1.0);
                let d21 = t / d21;
                for j in k + 2..n {
                    let wk = d21 * (d11 * a[at(j, k)] - a[at(j, k + 1)]);
                    let wkp1 = d21 * (d22 * a[at(j, k + 1)] - a[at(j, k)]);
                    for i in j..n {
                        a[at(i, j)] = a[at(i, j)] - a[at(i, k)] * wk - a[at(i, k + 1)] * wkp1;
                    }
                    a[at(j, k)] = wk;
                    a[at(j, k + 1)] = wkp1;
                }
            }
        }
        if kstep == 1 {
            ipiv[k] = kp as i32 + 1;
        } else {
            ipiv[k] = -(kp as i32 + 1);
            ipiv[k + 1] = ipiv[k];
        }
        k += kstep;
    }
    (ipiv, info)
}

/// Solves `A X = B` with `sytf2_lower`'s factors `ld` and pivots `piv` (LAPACK's `dsytrs`,
/// UPLO = 'L'); `b` is `n`×`nrhs`, overwritten by X. The pivots must be in 1..=n.
pub fn sytrs_lower(ld: &[f64], piv: &[i32], n: usize, b: &mut [f64], nrhs: usize) {
    let a = |i: usize, j: usize| ld[i * n + j];
    let swap_rows = |b: &mut [f64], r: usize, s: usize| {
        if r != s {
            for c in 0..nrhs {
                b.swap(r * nrhs + c, s * nrhs + c);
            }
        }
    };
    // L D Y = P B.
    let mut k = 0;
    while k < n {
        if piv[k] > 0 {
            swap_rows(b, k, piv[k] as usize - 1);
            for i in k + 1..n {
                for c in 0..nrhs {
                    b[i * nrhs + c] -= a(i, k) * b[k * nrhs + c];
                }
            }
            let d = 1.0 / a(k, k);
            for c in 0..nrhs {
                b[k * nrhs + c] *= d;
            }
            k += 1;
        } else {
            if k + 1 >= n {
                break;
            }
            swap_rows(b, k + 1, (-piv[k]) as usize - 1);
            for i in k + 2..n {
                for c in 0..nrhs {
                    b[i * nrhs + c] -= a(i, k) * b[k * nrhs + c];
                }
                for c in 0..nrhs {
                    b[i * nrhs + c] -= a(i, k + 1) * b[(k + 1) * nrhs + c];
                }
            }
            let akm1k = a(k + 1, k);
            let akm1 = a(k, k) / akm1k;
            let ak = a(k + 1, k + 1) / akm1k;
            let denom = akm1 * ak - 1.0;
            for c in 0..nrhs {
                let bkm1 = b[k * nrhs + c] / akm1k;
                let bk = b[(k + 1) * nrhs + c] / akm1k;
                b[k * nrhs + c] = (ak * bkm1 - bk) / denom;
                b[(k + 1) * nrhs + c] = (akm1 * bk - bkm1) / denom;
            }
            k += 2;
        }
    }
    // Lᵀ Pᵀ X = Y.
    let mut k = n;
    while k > 0 {
        let ku = k - 1;
        let dot = |b: &[f64], col: usize, c: usize| -> f64 {
            (ku + 1..n).map(|i| b[i * nrhs + c] * a(i, col)).sum()
        };
        if piv[ku] > 0 {
            for c in 0..nrhs {
                let s = dot(b, ku, c);
                b[ku * nrhs + c] -= s;
            }
            swap_rows(b, ku, piv[ku] as usize - 1);
            k -= 1;
        } else {
            if ku == 0 {
                break;
            }
            for c in 0..nrhs {
                let s = dot(b, ku, c);
                b[ku * nrhs + c] -= s;
                let s = dot(b, ku - 1, c);
                b[(ku - 1) * nrhs + c] -= s;
            }
            swap_rows(b, ku, (-piv[ku]) as usize - 1);
            k -= 2;
        }
    }
}
