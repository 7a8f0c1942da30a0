"""Control family: higher-order ops (cond, while_loop, map), symbolic-size arithmetic of
dynamic-shape graphs (sym_size, _operator.*, torch.sym_*), item() with runtime asserts."""
import torch
from torch.export import Dim

from .case import Case, randn

x34 = randn(3, 4)


def _cond(x, y):
    def t(x, y):
        return x.flip(0), y.t().flip(0)

    def f(x, y):
        return x.roll(1, 0), y.transpose(0, 1).flip(1)

    return torch.cond(x.sum() > 0, t, f, (x, y))


def _cond_sym(x):
    # The predicate is a SymBool of the dynamic batch size.
    return torch.cond(x.shape[0] > 4, lambda x: x.flip(0), lambda x: x.roll(1, 1), (x,))


def _while(x):
    def cond_fn(i, x):
        return i < 3

    def body_fn(i, x):
        return i + 1, x.roll(1, 0)

    return torch._higher_order_ops.while_loop(cond_fn, body_fn, (torch.tensor(0), x))


def _while_n(n, x):
    # As many iterations as the input `n` asks for: bad calls (tests/bad_calls.rs) pass a
    # huge n to meet the loop limit, a timeout and a cancel.
    def cond_fn(i, x):
        return i < n

    def body_fn(i, x):
        return i + 1, x * 0.5 + 1.0

    return torch._higher_order_ops.while_loop(cond_fn, body_fn, (torch.tensor(0), x))


def _scan(init, xs, w):
    from torch._higher_order_ops.scan import scan

    def f(carry, x):
        c = carry * 0.5 + x @ w
        return c, c.sum(-1)

    return scan(f, init, xs)


def _scan_reverse(init, xs, y):
    from torch._higher_order_ops.scan import scan

    # A cumulative product-and-sum run backwards along dim 1, with two outputs per step.
    def f(carry, x):
        c = torch.tanh(carry + x) * y[0]
        return c, (c * 2.0, x + 1.0)

    return scan(f, init, xs, dim=1, reverse=True)


def _scan_two(a, xs):
    from torch._higher_order_ops.scan import scan

    def f(carry, x):
        s, m = carry
        s2 = s + x
        m2 = torch.maximum(m, x)
        return (s2, m2), s2 * m2

    return scan(f, (a, a.clone()), xs)


def _map(xs, y):
    def body(x, y):
        return x.flip(0), torch.cat([x, y])

    return torch._higher_order_ops.map(body, xs, y)


def _sym_arith(x):
    n = x.shape[0]
    a = x[: n // 2 + n % 3]  # floordiv, mod, add
    b = x.narrow(0, 1, n - 4)  # sub
    c = x.reshape(n * 2, -1)  # mul
    e = x[-(n // 3):]  # neg
    return a, b, c, e


def _sym_minmax(x):
    # Needs `torch.sym_max`/`torch.sym_min` in the loader's guards_code parser too.
    n = x.shape[0]
    return x[: max(n - 4, 2)], x[: min(n, 5) - 1]


def _sym_float(x):
    n = x.shape[0]
    return x.flip(0)[: torch.sym_int(n / 2)]  # sym_float, truediv, trunc


def _sym_ite(x):
    n = x.shape[0]
    return x * torch.sym_ite(n > 5, n - 1, n - 2)


def _item(x, i):
    k = i.item()
    torch._check(k >= 1)
    torch._check(k <= x.shape[0])
    return x[:k], x.narrow(1, 0, k)


def _numel(x):
    return x.reshape(x.numel() // 2, 2)


dyn0 = Dim.AUTO

CASES = [
    Case("cond_true", _cond, [x34.abs(), randn(2, 3)]),
    Case("cond_false", _cond, [-x34.abs(), randn(2, 3)]),
    Case("cond_sym_pred", _cond_sym, [randn(6, 3)], dynamic_shapes=(({0: Dim("b", min=2, max=64)},),)),
    Case("while_loop", _while, [x34]),
    Case("while_input_bound", _while_n, [torch.tensor(7), randn(3, 4)]),
    Case("map", _map, [randn(3, 4), randn(2)]),
    Case("scan", _scan, [randn(2, 3), randn(5, 2, 3, seed=1), randn(3, 3, seed=2)]),
    Case("scan_reverse_dim1", _scan_reverse, [randn(2), randn(2, 4, seed=3), randn(4, 2, seed=4)]),
    Case("scan_two_carries", _scan_two, [randn(3), randn(4, 3, seed=5)]),
    Case("sym_arith", _sym_arith, [randn(9, 2)], dynamic_shapes=(({0: dyn0},),)),
    Case("sym_float", _sym_float, [randn(8, 2)], dynamic_shapes=(({0: dyn0},),)),
    Case("sym_numel", _numel, [randn(6, 4)], dynamic_shapes=(({0: Dim("b", min=2, max=64)},),)),
    Case("item_assert", _item, [randn(5, 4), torch.tensor(3)]),
]

# Programs the kernels run but the loader cannot read yet (src/sym): guards_code spelling
# `torch.sym_max`/`torch.sym_min`, and sympy `Piecewise(ExprCondPair(...), ...)` values of
# `sym_ite`. Move them into CASES once the symbolic-expression parser knows these forms.
LOADER_GAP_CASES = [
    Case("sym_minmax", _sym_minmax, [randn(9, 2)], dynamic_shapes=(({0: dyn0},),)),
    Case("sym_ite", _sym_ite, [randn(8, 2)], dynamic_shapes=(({0: dyn0},),)),
]
