//! The contraction path of `einsum` (and of the ops contracted like it: `bilinear`,
//! `_trilinear`, `tensordot`), shared by the CPU kernel (einsum.rs) and the GPU one
//! (src/gpu/kernels/contract.rs) so both contract in the same order.
//!
//! A path is a list of pairs `(a, b)`, `a < b`, of positions in the current operand list: the
//! pair's product replaces operand `a` and operand `b` leaves the list. Left to right is
//! `(0, 1)` repeated. The cost of a pair is the product of the sizes of every label the two
//! operands hold (the multiply-adds of its batched GEMM); a path's cost is the sum over its
//! pairs. `backends::opt_einsum` chooses the search (torch's `torch.backends.opt_einsum`):
//! exhaustive over contraction trees (dynamic programming over operand subsets, opt_einsum's
//! `optimal`), the cheapest pair first (`greedy`), or disabled (left to right).

use crate::backends::opt_einsum::{self, Strategy};
use crate::error::Result;
use std::collections::BTreeMap;

/// Past this many operands `optimal` is `greedy` (the subset search costs 3^n).
const OPTIMAL_MAX: usize = 8;
/// Up to this many operands `auto` is `optimal` (opt_einsum's `auto` searches exhaustively
/// up to 4 and nearly so up to 8).
const AUTO_OPTIMAL_MAX: usize = 5;

/// The operands' labels (without the ones summed out before any pair, see [`needed`]) and
/// the size of each label.
struct Problem {
    sets: Vec<Vec<u32>>,
    size: BTreeMap<u32, usize>,
    out: Vec<u32>,
}

impl Problem {
    /// `operands`: each operand's labels with their sizes (a size-1 dim broadcasts: a label
    /// takes the size other than 1 that some operand gives it).
    fn new(operands: &[Vec<(u32, usize)>], out: &[u32]) -> Problem {
        let mut size = BTreeMap::new();
        for &(l, n) in operands.iter().flatten() {
            let e = size.entry(l).or_insert(n);
            if *e == 1 {
                *e = n;
            }
        }
        let all: Vec<Vec<u32>> = operands
            .iter()
            .map(|o| o.iter().map(|&(l, _)| l).collect())
            .collect();
        let sets = (0..all.len())
            .map(|i| {
                let others: Vec<&Vec<u32>> = (0..all.len())
                    .filter(|&j| j != i)
                    .map(|j| &all[j])
                    .collect();
                needed(&all[i], &others, out)
            })
            .collect();
        Problem {
            sets,
            size,
            out: out.to_vec(),
        }
    }

    /// The multiply-adds of contracting operands with labels `a` and `b`.
    fn pair_cost(&self, a: &[u32], b: &[u32]) -> u128 {
        self.numel(&union(a, b))
    }

    /// The elements of a tensor with these labels.
    fn numel(&self, labels: &[u32]) -> u128 {
        labels.iter().fold(1u128, |c, l| {
            c.saturating_mul(self.size.get(l).copied().unwrap_or(1) as u128)
        })
    }
}

/// The labels of `labels` that the output or one of `others` still needs.
fn needed(labels: &[u32], others: &[&Vec<u32>], out: &[u32]) -> Vec<u32> {
    labels
        .iter()
        .copied()
        .filter(|l| out.contains(l) || others.iter().any(|o| o.contains(l)))
        .collect()
}

fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    a.iter()
        .copied()
        .chain(b.iter().copied().filter(|l| !a.contains(l)))
        .collect()
}

/// The path under the current `backends::opt_einsum` switches.
pub(crate) fn current_path(operands: &[Vec<(u32, usize)>], out: &[u32]) -> Vec<(usize, usize)> {
    let n = operands.len();
    if !opt_einsum::enabled() || n < 3 {
        return left_to_right(n);
    }
    path(operands, out, opt_einsum::strategy())
}

/// `(0, 1)` for every pair.
pub(crate) fn left_to_right(n: usize) -> Vec<(usize, usize)> {
    vec![(0, 1); n.saturating_sub(1)]
}

/// The path `strategy` chooses.
pub(crate) fn path(
    operands: &[Vec<(u32, usize)>],
    out: &[u32],
    strategy: Strategy,
) -> Vec<(usize, usize)> {
    let n = operands.len();
    let p = Problem::new(operands, out);
    let exhaustive = match strategy {
        Strategy::Auto => n <= AUTO_OPTIMAL_MAX,
        Strategy::Optimal => n <= OPTIMAL_MAX,
        Strategy::Greedy => false,
    };
    if n < 3 {
        left_to_right(n)
    } else if exhaustive {
        optimal(&p)
    } else {
        greedy(&p)
    }
}

/// The multiply-adds `path` costs (the operation count `opt_einsum` reports).
#[cfg(test)]
pub(crate) fn path_cost(
    operands: &[Vec<(u32, usize)>],
    out: &[u32],
    path: &[(usize, usize)],
) -> u128 {
    let p = Problem::new(operands, out);
    let mut sets = p.sets.clone();
    let mut total = 0u128;
    for &(a, b) in path {
        if a >= b || b >= sets.len() {
            break;
        }
        total = total.saturating_add(p.pair_cost(&sets[a], &sets[b]));
        merge(&mut sets, a, b, &p.out);
    }
    total
}

/// Replace `sets[a]` by the labels of the product of `sets[a]` and `sets[b]` that are still
/// needed, and remove `sets[b]`.
fn merge(sets: &mut Vec<Vec<u32>>, a: usize, b: usize, out: &[u32]) {
    let sb = sets.remove(b);
    let sa = std::mem::take(&mut sets[a]);
    let others: Vec<&Vec<u32>> = sets.iter().collect();
    sets[a] = needed(&union(&sa, &sb), &others, out);
}

/// opt_einsum's greedy choice, repeated until one operand is left: the pair whose product
/// shrinks the operands most (its size less the two operands' sizes), ties by fewer
/// multiply-adds, then the leftmost. Taking the fewest multiply-adds alone is myopic: on
/// `ab,bc,cd,de->ae` with a small `c` every first pair costs the same and it would go left
/// to right.
fn greedy(p: &Problem) -> Vec<(usize, usize)> {
    let mut sets = p.sets.clone();
    let mut steps = Vec::new();
    while sets.len() > 1 {
        let mut best = (0, 1, (i128::MAX, u128::MAX));
        for a in 0..sets.len() {
            for b in a + 1..sets.len() {
                let mut after = sets.clone();
                merge(&mut after, a, b, &p.out);
                let n = |ls: &[u32]| i128::try_from(p.numel(ls)).unwrap_or(i128::MAX);
                let grown = n(&after[a])
                    .saturating_sub(n(&sets[a]))
                    .saturating_sub(n(&sets[b]));
                let key = (grown, p.pair_cost(&sets[a], &sets[b]));
                if key < best.2 {
                    best = (a, b, key);
                }
            }
        }
        steps.push((best.0, best.1));
        merge(&mut sets, best.0, best.1, &p.out);
    }
    steps
}

/// The cheapest contraction tree: for every subset of operands (a bit mask) the cheapest
/// split into two contracted halves, smallest subsets first.
fn optimal(p: &Problem) -> Vec<(usize, usize)> {
    let n = p.sets.len();
    let full = (1usize << n) - 1;
    // The labels of a subset's product that operands outside it or the output need.
    let labels_of = |mask: usize| -> Vec<u32> {
        let inside = (0..n)
            .filter(|i| mask >> i & 1 == 1)
            .fold(Vec::new(), |u, i| union(&u, &p.sets[i]));
        let outside: Vec<&Vec<u32>> = (0..n)
            .filter(|i| mask >> i & 1 == 0)
            .map(|i| &p.sets[i])
            .collect();
        needed(&inside, &outside, &p.out)
    };
    let labels: Vec<Vec<u32>> = (0..=full).map(labels_of).collect();
    let mut cost = vec![u128::MAX; full + 1];
    let mut split = vec![0usize; full + 1];
    for i in 0..n {
        cost[1 << i] = 0;
    }
    for mask in 1..=full {
        if mask.count_ones() < 2 {
            continue;
        }
        // Halves that hold the lowest operand of `mask`, so each split is seen once.
        let low = mask & mask.wrapping_neg();
        let mut s = (mask - 1) & mask;
        while s > 0 {
            if s & low != 0 {
                let r = mask ^ s;
                let c = cost[s]
                    .saturating_add(cost[r])
                    .saturating_add(p.pair_cost(&labels[s], &labels[r]));
                if c < cost[mask] {
                    cost[mask] = c;
                    split[mask] = s;
                }
            }
            s = (s - 1) & mask;
        }
    }
    let mut slots: Vec<usize> = (0..n).map(|i| 1 << i).collect();
    let mut steps = Vec::new();
    emit(full, &split, &mut slots, &mut steps);
    steps
}

/// The steps that contract the subset `mask` into one slot, its halves first.
fn emit(mask: usize, split: &[usize], slots: &mut Vec<usize>, steps: &mut Vec<(usize, usize)>) {
    if mask.count_ones() < 2 {
        return;
    }
    let (s, r) = (split[mask], mask ^ split[mask]);
    emit(s, split, slots, steps);
    emit(r, split, slots, steps);
    let (Some(i), Some(j)) = (
        slots.iter().position(|&m| m == s),
        slots.iter().position(|&m| m == r),
    ) else {
        return;
    };
    let (a, b) = (i.min(j), i.max(j));
    steps.push((a, b));
    slots[a] = mask;
    slots.remove(b);
}

/// An operand's labels paired with its sizes, as [`contract_along`] takes them.
pub(crate) fn labelled(labels: &[u32], sizes: &[usize]) -> Vec<(u32, usize)> {
    labels.iter().copied().zip(sizes.iter().copied()).collect()
}

/// Contract `ops` along the current path, the same way on every device: `labels` gives an
/// operand's labels and sizes, `pair(a, b, keep)` contracts two operands keeping the labels
/// for which `keep` holds (`None`: the device declines, and so does the whole contraction).
/// Returns the last operand, whose labels still need summing out to the output's.
pub(crate) fn contract_along<O>(
    mut ops: Vec<O>,
    out: &[u32],
    labels: impl Fn(&O) -> Vec<(u32, usize)>,
    mut pair: impl FnMut(O, O, &dyn Fn(u32) -> bool) -> Result<Option<O>>,
) -> Result<Option<O>> {
    let described: Vec<Vec<(u32, usize)>> = ops.iter().map(&labels).collect();
    for (a, b) in current_path(&described, out) {
        if a >= b || b >= ops.len() {
            return Ok(None);
        }
        let ob = ops.remove(b);
        let oa = ops.remove(a);
        let rest: Vec<Vec<u32>> = ops
            .iter()
            .map(|o| labels(o).into_iter().map(|(l, _)| l).collect())
            .collect();
        let keep = |l: u32| out.contains(&l) || rest.iter().any(|r| r.contains(&l));
        let Some(r) = pair(oa, ob, &keep)? else {
            return Ok(None);
        };
        ops.insert(a, r);
    }
    Ok(ops.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ab,bc,cd,de->ae` with a small inner size: left to right builds a 64×64 intermediate,
    /// contracting the middle pair first keeps them 64×2.
    fn chain() -> (Vec<Vec<(u32, usize)>>, Vec<u32>) {
        let (a, b, c, d, e) = (0, 1, 2, 3, 4);
        let ops = vec![
            vec![(a, 64), (b, 64)],
            vec![(b, 64), (c, 2)],
            vec![(c, 2), (d, 64)],
            vec![(d, 64), (e, 64)],
        ];
        (ops, vec![a, e])
    }

    #[test]
    fn optimized_paths_cost_fewer_operations_than_left_to_right() {
        let (ops, out) = chain();
        let ltr = path_cost(&ops, &out, &left_to_right(ops.len()));
        // ab·bc (64·64·2) + ac·cd (64·2·64) + ad·de (64·64·64).
        assert_eq!(ltr, 8192 + 8192 + 262_144);
        for s in Strategy::ALL {
            let p = path(&ops, &out, s);
            assert_eq!(p.len(), 3, "{s:?}: one pair per step");
            let c = path_cost(&ops, &out, &p);
            assert!(c < ltr, "{s:?}: {c} multiply-adds, left to right {ltr}");
        }
        // The best tree: ab·bc and cd·de (8192 each), then ac·ce (64·2·64).
        let best = path(&ops, &out, Strategy::Optimal);
        assert_eq!(path_cost(&ops, &out, &best), 8192 * 3);
    }

    #[test]
    fn matrix_vector_chain_contracts_the_vector_first() {
        // ij,jk,k->i: (ij·jk)·k costs i·j·k + i·k, ij·(jk·k) costs j·k + i·j.
        let ops = vec![
            vec![(0, 50), (1, 60)],
            vec![(1, 60), (2, 70)],
            vec![(2, 70)],
        ];
        let out = [0];
        let ltr = path_cost(&ops, &out, &left_to_right(3));
        assert_eq!(ltr, 50 * 60 * 70 + 50 * 70);
        for s in Strategy::ALL {
            let p = path(&ops, &out, s);
            assert_eq!(p, vec![(1, 2), (0, 1)], "{s:?}");
            assert_eq!(path_cost(&ops, &out, &p), 60 * 70 + 50 * 60);
        }
    }

    #[test]
    fn two_operands_have_one_path() {
        let ops = vec![vec![(0, 5), (1, 6)], vec![(1, 6), (2, 7)]];
        let ltr = path_cost(&ops, &[0, 2], &left_to_right(2));
        for s in Strategy::ALL {
            let p = path(&ops, &[0, 2], s);
            assert_eq!(p, vec![(0, 1)]);
            assert_eq!(path_cost(&ops, &[0, 2], &p), ltr);
        }
        assert_eq!(ltr, 5 * 6 * 7);
    }

    #[test]
    fn many_operands_fall_back_to_greedy() {
        // A 10-link chain: `optimal` past OPTIMAL_MAX operands is greedy, still a full path.
        let ops: Vec<Vec<(u32, usize)>> = (0..10u32).map(|i| vec![(i, 3), (i + 1, 4)]).collect();
        let out = [0, 10];
        let p = path(&ops, &out, Strategy::Optimal);
        assert_eq!(p, path(&ops, &out, Strategy::Greedy));
        assert_eq!(p.len(), 9);
    }
}
