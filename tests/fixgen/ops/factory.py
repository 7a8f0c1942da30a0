"""Factories (src/ops/factory/): constant fills, ranges, eye, the `_like`/`new_` forms, random
factories and dropout. Random values cannot match torch's generator, so those cases return
shapes (as `r * 0`), ranges and statistics as exact bools."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

from .case import ONE, Case, long_ints, randint, randn

f16, bf16, f64, i32 = torch.float16, torch.bfloat16, torch.float64, torch.int32


def filled_empty(x):
    return torch.empty(2, 3).fill_(1.5), torch.empty_like(x).fill_(2.0), x.new_empty((2, 2)).fill_(3)


def empty_strided(x):
    y = torch.empty_strided((2, 3), (1, 2))
    y.copy_(x)
    return y + 0, y.t().contiguous()


def in_range(r, lo, hi):
    return ((r >= lo) & (r < hi)).all()


def rand_checks(x):
    r = torch.rand(64, 16)
    u = torch.empty(500).uniform_(2.0, 3.0)
    return in_range(r, 0, 1), r * 0, in_range(u, 2.0, 3.0), (r.mean() - 0.5).abs() < 0.05


def randn_checks(x):
    r = torch.randn(4096)
    n = torch.empty(2000).normal_(5.0, 0.1)
    return r * 0, (r.mean().abs() < 0.1) & ((r.std() - 1).abs() < 0.1), ((n - 5).abs() < 1).all()


def like_checks(x):
    return torch.rand_like(x) * 0, torch.randn_like(x) * 0, in_range(torch.rand_like(x), 0, 1)


def randint_checks(x):
    r = torch.randint(0, 10, (500,))
    s = torch.randint(5, (3, 4), dtype=i32)
    return in_range(r, 0, 10), r * 0, s * 0, in_range(s, 0, 5), (r == 9).any() & (r == 0).any()


def bernoulli_checks(x):
    z = torch.bernoulli(torch.zeros(50))
    o = torch.bernoulli(torch.ones(50))
    h = torch.bernoulli(torch.full((4000,), 0.5))
    return z, o, (h.mean() - 0.5).abs() < 0.05, ((h == 0) | (h == 1)).all()


def normal_checks(m):
    r = torch.normal(m, 0.01)
    return (r - m).abs().max() < 0.1, r * 0


def perm_exp_checks(x):
    p = torch.randperm(12)
    e = torch.empty(4000).exponential_(2.0)
    return p.sort().values, p * 0, (e >= 0).all(), (e.mean() - 0.5).abs() < 0.05


def perm_long_checks(x):
    # Past lavapipe's 65,535 loop steps per invocation (the GPU shuffles in one invocation):
    # still a permutation of 0..n-1.
    n = 100_000
    return (torch.randperm(n).sort().values == torch.arange(n)).all(), x * 0


def sdpa_dropout(q, k, v):
    # attention weights are dropped (0) or kept and scaled by 1 / (1 - p) = 2
    out, attn = torch.ops.aten._scaled_dot_product_attention_math.default(q, k, v, None, 0.5)
    w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1)
    kept_or_dropped = ((attn == 0) | ((attn - 2 * w).abs() < 1e-5)).all()
    plain = F.scaled_dot_product_attention(q, k, v, dropout_p=0.25)
    return kept_or_dropped, (out - attn @ v).abs().max() < 1e-5, out * 0, plain * 0


def dropout_train(x):
    y = F.dropout(x, 0.5, training=True)
    return ((y == 0) | (y == 2 * x)).all(), y * 0, F.dropout(x, 0.0, training=True), F.dropout(x, 1.0, training=True)


def feature_dropout_train(x):
    y = F.dropout2d(x, 0.5, training=True)
    kept = (y == 2 * x).flatten(2).all(-1)
    dropped = (y == 0).flatten(2).all(-1)
    return (kept | dropped).all()



def multinomial_many_categories(n):
    """multinomial over 70,000 categories (one invocation walks them twice per draw: past
    lavapipe's loop cap, issue 17), with weight at the end only, so the draws are known."""
    t = n * torch.arange(70_000)
    w = (t == 69_999).float() + 0.5 * (t == 40_000)
    last = (t >= 69_999).float()
    return torch.multinomial(last, 5, replacement=True), torch.multinomial(w, 2).sort().values


CASES = [
    # ranges
    Case("arange_end", lambda x: torch.arange(5), [randn(1)], tol="exact"),
    Case("arange_start_step", lambda x: (torch.arange(1, 10, 3), torch.arange(10, 0, -2), torch.arange(-3, 4)), [randn(1)], tol="exact"),
    Case("arange_float", lambda x: (torch.arange(0, 1, 0.1), torch.arange(0.5, 4), torch.arange(5.0, -1.0, -1.5)), [randn(1)]),
    Case("arange_dtype", lambda x: (torch.arange(6, dtype=torch.float32), torch.arange(2, 7, dtype=f64), torch.arange(4, dtype=i32)), [randn(1)]),
    Case("arange_dynamic", lambda x: torch.arange(x.shape[0]) * 2 + x.sum().long() * 0, [randn(6)], tol="exact", dynamic_shapes=(({0: Dim("n", min=2, max=64)},),)),
    Case("linspace", lambda x: (torch.linspace(0, 1, 5), torch.linspace(-1, 1, 7, dtype=f64), torch.linspace(2, 3, 1), torch.linspace(0, 10, 6, dtype=torch.int64)), [randn(1)]),
    Case("linspace_odd", lambda x: torch.linspace(-3.3, 7.1, 11), [randn(1)]),
    Case("logspace", lambda x: (torch.logspace(0, 2, 3), torch.logspace(-1, 1, 5, base=2.0)), [randn(1)]),
    Case("eye", lambda x: (torch.eye(3), torch.eye(2, 4), torch.eye(3, dtype=torch.int64)), [randn(1)], tol="exact"),
    # fills
    Case("full", lambda x: (torch.full((2, 3), 1.5), torch.full((2,), 7), torch.full((3,), True), torch.full((2, 2), 2, dtype=f16)), [randn(1)], tol="exact"),
    Case("zeros_ones", lambda x: (torch.zeros(2, 3), torch.ones(3, dtype=torch.int64), torch.zeros(0, 2), torch.ones(2, 2, dtype=torch.bool)), [randn(1)], tol="exact"),
    Case("like", lambda x: (torch.zeros_like(x), torch.ones_like(x, dtype=torch.int64), torch.full_like(x, 3.5), torch.full_like(x, 2, dtype=i32)), [randn(3, 4)], tol="exact"),
    Case("like_noncontig", lambda x: torch.ones_like(x.t()) + x.t(), [randn(3, 4)]),
    Case("new_factories", lambda x: (x.new_zeros(2, 3), x.new_ones((4,)), x.new_full((2, 2), -1.0), x.new_zeros(2, dtype=torch.int64)), [randn(3, 4, dtype=f64)], tol="exact"),
    Case("empty_filled", filled_empty, [randn(3, 4)], tol="exact"),
    Case("empty_strided", empty_strided, [randn(2, 3)]),
    Case("scalar_tensor", lambda x: (torch.scalar_tensor(3), torch.scalar_tensor(2.5, dtype=f64), x + torch.scalar_tensor(1)), [randn(3)]),
    Case("new_zeros_dynamic", lambda x: x.new_zeros(x.shape[0], 2) + 1, [randn(5, 3)], dynamic_shapes=(({0: Dim("b", min=2, max=64)},),)),
    Case("full_dynamic", lambda x: torch.full((x.shape[0], 2), 0.5) * x[:, :2], [randn(5, 3)], dynamic_shapes=(({0: Dim("b", min=2, max=64)},),)),
    # random: ranges, shapes and statistics
    Case("rand", rand_checks, [randn(1)], tol="exact"),
    Case("randn", randn_checks, [randn(1)], tol="exact"),
    Case("rand_like", like_checks, [randn(3, 4, dtype=f64)], tol="exact"),
    Case("randint", randint_checks, [randn(1)], tol="exact"),
    Case("bernoulli", bernoulli_checks, [randn(1)], tol="exact"),
    Case("normal_tensor_mean", normal_checks, [randn(3, 4)], tol="exact"),
    Case("randperm_exponential", perm_exp_checks, [randn(1)], tol="exact"),
    Case("randperm_long", perm_long_checks, [randn(1)], tol="exact"),
    # dropout: identity in eval; masked and rescaled in training
    Case("dropout_eval", nn.Sequential(nn.Dropout(0.5), nn.Dropout2d(0.3), nn.AlphaDropout(0.2)), [randn(2, 3, 4, 4)]),
    Case("dropout_eval_fn", lambda x: F.dropout(x, 0.5, training=False) + 1, [randn(3, 4)]),
    Case("dropout_train", dropout_train, [randn(8, 16) + 0.1], tol="exact"),
    Case("feature_dropout_train", feature_dropout_train, [randn(4, 6, 3, 3) + 0.1], tol="exact"),
    Case("sdpa_dropout", sdpa_dropout, [randn(2, 2, 5, 8), randn(2, 2, 6, 8, seed=1), randn(2, 2, 6, 8, seed=2)], tol="exact", core=False),
    Case("alpha_dropout_train", lambda x: F.alpha_dropout(x, 0.0, training=True), [randn(3, 4)]),
]


# --- issue 16: native_dropout_backward
CASES += [
    Case("native_dropout_backward", lambda g, m: (torch.ops.aten.native_dropout_backward(g, m, 2.0),
                                                  torch.ops.aten.native_dropout_backward(g.t(), m.t(), 0.5)),
         [randn(3, 4, seed=95), randn(3, 4, seed=96) > 0]),
]


# --- issue 16: multinomial. The streams are not torch's: the outputs are shapes (`r * 0`,
# int64) and checks torch's own samples pass: values in range, zero-weight categories never
# drawn, no repeats without replacement, and per-category counts within 5 sigma of n * p.
def within_5_sigma(samples, p, cats):
    counts = (samples.unsqueeze(-1) == torch.arange(cats)).sum(-2).to(p.dtype)
    n = samples.shape[-1]
    p = p / p.sum(-1, keepdim=True)
    sigma = (n * p * (1 - p)).sqrt()
    return ((counts - n * p).abs() <= 5 * sigma + 1e-6).all()


def multinomial_replacement(w, v):
    r = torch.multinomial(w, 20000, replacement=True)
    one_d = torch.multinomial(v, 7, replacement=True)
    in_range = ((r >= 0) & (r < w.shape[-1])).all()
    return r[:, :5] * 0, one_d * 0, in_range, within_5_sigma(r, w, w.shape[-1]), (v[one_d] > 0).all()


def multinomial_no_replacement(w, v):
    s = torch.multinomial(w, 4)
    picked = torch.gather(w, 1, s)
    distinct = (s.unsqueeze(-1) != s.unsqueeze(-2)).sum((-1, -2)) == 4 * 3
    all_of_v = torch.multinomial(v, v.shape[0]).sort().values
    # The first draw of many rows without replacement is distributed as one with replacement.
    first = torch.multinomial(w[:1].expand(8000, -1), 2)[:, 0]
    return s * 0, (picked > 0).all(), distinct.all(), all_of_v, within_5_sigma(first, w[0], w.shape[-1])


MULTINOMIAL_W = torch.tensor([[1.0, 0.0, 3.0, 0.5, 0.0, 2.5], [0.2, 0.2, 0.0, 0.2, 0.2, 0.2], [0.0, 9.0, 0.0, 0.0, 1.0, 0.01]])
MULTINOMIAL_V = torch.tensor([0.3, 0.0, 1.7, 4.0, 0.0, 0.0, 2.0, 1.0])
CASES += [
    Case("multinomial_replacement", multinomial_replacement, [MULTINOMIAL_W, MULTINOMIAL_V], tol="exact"),
    Case("multinomial_no_replacement", multinomial_no_replacement, [MULTINOMIAL_W, torch.rand(9, generator=torch.Generator().manual_seed(3)) + 0.1], tol="exact"),
    Case("multinomial_f64", lambda w: (torch.multinomial(w, 3) * 0, torch.multinomial(w, 50, True).max() < 4), [MULTINOMIAL_W[:, :4].double()], tol="exact"),
    Case("multinomial_many_categories", multinomial_many_categories, [ONE], tol="exact", core=False),
]
