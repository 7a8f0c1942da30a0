"""Generate tests/fixtures/sym_cases.json: symbolic shape expressions and their values.

Every expected value in the output is computed by sympy + torch's own sympy functions
(torch/utils/_sympy/functions.py) or by evaluating torch's guards_code with Python, never by
pt2web. The Rust tests in src/sym/tests.rs parse the strings and compare.

Run: .venv/bin/python tests/fixgen/gen_sym_cases.py   (torch 2.15, sympy as torch pins it)

Sections of the output:
  cases         one expression in three spellings: `srepr` (what model.json holds),
                `str` (sympy str, as in range_constraints keys) and `py` (torch's
                PythonPrinter, the dialect of guards_code; absent where it cannot print),
                each with `evals`: symbol values -> {kind: int|rational|float|bool|error, value}.
  python_cases  plain Python expressions (the guards_code dialect) and Python's values.
  exports       real torch.export programs: every SymInt expr_str with its hint (the value at
                the example inputs), range_constraints and guards_code, plus guards_code
                evaluated by Python at other input shapes.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
import zipfile

import sympy
import torch
import torch.nn.functional as F
from torch.export import Dim, export, save
from torch.utils._sympy import functions as tf
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

warnings.filterwarnings("ignore")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(REPO, "tests", "fixtures", "sym_cases.json")

# Sizes are positive integers; n0 has no sign assumption so negative values are legal
# (that is where FloorDiv/PythonMod differ from C-style division).
s0 = sympy.Symbol("s0", integer=True, positive=True)
s1 = sympy.Symbol("s1", integer=True, positive=True)
n0 = sympy.Symbol("n0", integer=True)

POS_ENVS = [{"s0": 1, "s1": 3}, {"s0": 4, "s1": 5}, {"s0": 7, "s1": 2}, {"s0": 12, "s1": 12}]
NEG_ENVS = [{"n0": -7, "s0": 3}, {"n0": -1, "s0": 2}, {"n0": 0, "s0": 5}, {"n0": 9, "s0": 4}]


def expressions():
    """(expr, envs) pairs. Built through torch's functions so auto-simplification is real."""
    P = POS_ENVS
    N = NEG_ENVS
    E = []
    add = lambda e, envs=P: E.append((e, envs))  # noqa: E731
    # numbers
    for e in [sympy.Integer(5), sympy.Integer(-3), sympy.Rational(3, 7), sympy.S.Half,
              sympy.Float(1.5), sympy.Float(-0.25), sympy.S.One, sympy.S.Zero, sympy.S.NegativeOne,
              sympy.true, sympy.false, sympy.oo, -sympy.oo, int_oo, -int_oo]:
        add(e, [{}])
    # polynomial arithmetic
    add(s0)
    add(s0 + 1)
    add(2 * s0)
    add(2 * s0 + 1)
    add(3 - s0)
    add(-s0)
    add(s0 * s1 + 4)
    add(s0**2)
    add(s0**3 - 2 * s1)
    add(1 / s0)
    add(s0 / 2)
    add(3 * s0 / 2)
    add(s0 / s1)
    add((s0 + 1) * (s1 - 1))
    # torch integer functions
    add(tf.FloorDiv(s0, 2))
    add(tf.FloorDiv(s0 - 3, 2) + 1)
    add(tf.FloorDiv(s0 + 2, 3))
    add(tf.FloorDiv(s1, tf.FloorDiv(s1, 2)))
    add(4 * tf.FloorDiv(s1 * 3, s0))
    add(tf.FloorDiv(n0, 3), N)
    add(tf.FloorDiv(n0 - 1, 2), N)
    add(tf.CleanDiv(2 * s0, 2))
    add(tf.CeilDiv(s0, 3))
    add(tf.Mod(s0, 3))
    add(tf.Mod(s0 + s1, 4))
    add(tf.PythonMod(n0, 3), N)
    add(tf.PythonMod(n0, -4), N)
    add(tf.ModularIndexing(s0 + 5, 2, 3))
    add(tf.ModularIndexing(s1, 1, 4))
    add(tf.Max(1, tf.FloorDiv(s0 - 3, 2) + 1))
    add(tf.Max(s0, s1))
    add(tf.Min(s0, 4, s1))
    add(tf.Min(n0, 0), N)
    add(3 * tf.Max(1, tf.FloorDiv(s0 - 3, 2) + 1))
    add(tf.PowByNatural(s0, 3))
    add(tf.PowByNatural(s0, s1))
    add(tf.LShift(s0, 2))
    add(tf.RShift(s0 + s1, 1))
    add(sympy.Abs(n0 - 2), N)
    add(sympy.floor(s0 / 3))
    add(sympy.ceiling(s0 / 3))
    add(tf.Identity(s0 + 1))
    add(tf.BitwiseFn_bitwise_and(s0, 6))
    add(tf.BitwiseFn_bitwise_or(s0, s1))
    add(tf.BitwiseFn_bitwise_xor(s0, 5))
    add(tf.IsNonOverlappingAndDenseIndicator(s0, 3, 3, 1))
    add(tf.IsNonOverlappingAndDenseIndicator(s0, s1, 1, s0))
    # float functions
    add(tf.ToFloat(s0))
    add(tf.IntTrueDiv(s0, 4))
    add(tf.FloatTrueDiv(tf.ToFloat(s0), 4.0))
    add(tf.FloatPow(tf.ToFloat(s0), 0.5))
    add(tf.OpaqueUnaryFn_sqrt(s0))
    add(tf.OpaqueUnaryFn_exp(tf.ToFloat(s1) / 4))
    add(tf.OpaqueUnaryFn_log2(s0))
    add(tf.OpaqueUnaryFn_cos(s0))
    add(tf.CeilToInt(tf.IntTrueDiv(s0, 4)))
    add(tf.FloorToInt(tf.IntTrueDiv(s0, 4)))
    add(tf.TruncToInt(tf.IntTrueDiv(n0, 4)), N)
    add(tf.RoundToInt(tf.IntTrueDiv(s0, 2)))
    add(tf.TruncToFloat(tf.IntTrueDiv(s0, 3)))
    add(tf.RoundDecimal(tf.IntTrueDiv(s0, 7), 2))
    add(tf.ToFloat(s0) * 1.5 + 2)
    # booleans
    add(sympy.Eq(s0, 4))
    add(sympy.Ne(s0, 4))
    add(s0 < 5)
    add(s0 <= 4)
    add(s0 > s1)
    add(2 * s0 >= s1 + 3)
    add(sympy.And(s0 > 1, s0 < 10))
    add(sympy.Or(sympy.Eq(s0, 1), s1 > 4))
    add(sympy.Not(s0 > 4))
    add(sympy.Eq(tf.Mod(s0, 2), 0))
    add(tf.Where(s0 > 3, s0, 1))
    add(tf.Where(sympy.Eq(s1, s0), 2 * s0, s1 - 1))
    # division by zero must be an error
    add(tf.FloorDiv(s0, n0), [{"s0": 4, "n0": 0}])
    add(tf.PythonMod(s0, n0), [{"s0": 4, "n0": 0}])
    return E


# Spellings that auto-simplification never leaves in a fresh sympy expression but that
# model.json may still hold (older torch, unevaluated constructors), or literal-only forms.
RAW_SREPR = [
    "CeilDiv(Symbol('s0', integer=True, positive=True), Integer(3))",
    "CleanDiv(Mul(Integer(2), Symbol('s0', integer=True, positive=True)), Integer(2))",
    "LShift(Symbol('s0', integer=True, positive=True), Integer(2))",
    "RShift(Add(Symbol('s0', integer=True, positive=True), Symbol('s1', integer=True, positive=True)), Integer(1))",
    "Not(StrictGreaterThan(Symbol('s0', integer=True, positive=True), Integer(4)))",
    "IsNonOverlappingAndDenseIndicator(Symbol('s0', integer=True, positive=True), Integer(3), Integer(3), Integer(1))",
    "IsNonOverlappingAndDenseIndicator(Integer(2), Symbol('s0', integer=True, positive=True), Integer(1), Integer(4))",
    "Max(Integer(1), Symbol('s0', positive=True, integer=True))",
    "FloorDiv(Integer(-7), Integer(2))",
    "PythonMod(Integer(-7), Integer(3))",
    "Mod(Integer(17), Integer(5))",
    "Pow(Integer(2), Integer(-2))",
    "Pow(Symbol('s0', integer=True, positive=True), Integer(0))",
    "Mul(Integer(-1), Add(Symbol('s0', integer=True, positive=True), Integer(-3)))",
    "Add(Integer(1), Integer(2), Mul(Integer(3), Integer(4)))",
    "Where(Equality(Mod(Symbol('s0', integer=True, positive=True), Integer(2)), Integer(0)), FloorDiv(Symbol('s0', integer=True, positive=True), Integer(2)), Symbol('s0', integer=True, positive=True))",
    "Xor(StrictGreaterThan(Symbol('s0', integer=True, positive=True), Integer(3)), StrictGreaterThan(Symbol('s1', integer=True, positive=True), Integer(3)))",
    "Rational(6, 4)",
    "Float('2.5e-3', precision=53)",
]


def namespace(env):
    """Names the srepr strings use; Symbol(...) yields the env value (None: a real Symbol).

    torch's own deserializer does the same: sympy.sympify(expr_str, locals=...), so
    evaluating the srepr with numbers in place of symbols runs torch's eval() rules."""
    ns = dict(vars(sympy))
    ns.update({k: v for k, v in vars(tf).items() if not k.startswith("_")})
    ns["int_oo"] = int_oo
    if env is not None:
        ns["Symbol"] = lambda name, **kw: sympy.Integer(env[name])
    return ns


def value_of(e):
    """sympy's value of a fully evaluated expression as {kind, value}."""
    while isinstance(e, tf.Identity):
        e = e.args[0]
    if e in (sympy.true, sympy.false):
        return {"kind": "bool", "value": bool(e)}
    if e in (sympy.oo, int_oo):
        return {"kind": "float", "value": "inf"}
    if e in (-sympy.oo, -int_oo):
        return {"kind": "float", "value": "-inf"}
    if isinstance(e, sympy.Integer):
        return {"kind": "int", "value": int(e)}
    if isinstance(e, sympy.Rational):
        return {"kind": "rational", "value": [int(e.p), int(e.q)]}
    if isinstance(e, sympy.Float):
        return {"kind": "float", "value": float(e)}
    raise ValueError(f"not a number after substitution: {e!r}")


def evaluate(srepr, env):
    try:
        return value_of(eval(srepr, namespace(env)))
    except ZeroDivisionError:
        return {"kind": "error"}


def py_str(e):
    try:
        s = PythonPrinter().doprint(e)
    except Exception:  # the printer refuses some (ToFloat, Pow with negative exponents...)
        return None
    return None if "Infinity()" in s else s


def case(srepr, envs):
    # Unevaluated, so `str`/`py` spell the same expression as `srepr` (sympy's symbolic
    # simplification can assume things concrete evaluation does not, e.g. sizes >= 2).
    with sympy.evaluate(False):
        e = eval(srepr, namespace(None))
    c = {"srepr": srepr, "str": str(e)}
    p = py_str(e)
    if p is not None:
        c["py"] = p
    c["evals"] = [dict(env=env, **evaluate(srepr, env)) for env in envs]
    return c


def gen_cases():
    cases = [case(sympy.srepr(e), envs) for e, envs in expressions()]
    cases += [case(s, POS_ENVS) for s in RAW_SREPR]
    return cases


# Plain Python expressions (the guards_code dialect) evaluated by Python itself: precedence,
# chained comparisons, the ternary, floor division and modulus of negatives.
PY_INFIX = [
    "1 if s0 > 2 else 0",
    "not s0 == 4",
    "-2**2",
    "2**-1",
    "s0 < 5 < 10",
    "1 < s0 <= 7 != s0 + 1",
    "math.floor(s0 / 4)",
    "(s0 + 1) // 2 * 3 % 5",
    "max(s0, 3) - min(s0, 3)",
    "abs(3 - s0)",
    "s0 << 2 >> 1",
    "s0 & 6 | 1 ^ 2",
    "~s0",
    "s0 != 4 and s0 >= 2 or s0 == 1",
    "round(s0 / 2)",
    "round(s0 / 7, 2)",
    "math.trunc(-s0 / 4)",
    "-s0 // 3",
    "-s0 % 3",
    "s0 ** 2 ** 1",
    "float(s0) * 0.5 + 1e-3",
    "math.sqrt(s0) >= 2",
]


def gen_py_cases():
    out = []
    for src in PY_INFIX:
        evals = []
        for env in POS_ENVS:
            v = eval(src, {"math": math}, dict(env))
            kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"
            evals.append({"env": env, "kind": kind, "value": v})
        out.append({"py": src, "evals": evals})
    return out


# ------------------------------------------------------------------------------------------
# real exports
# ------------------------------------------------------------------------------------------


class Derived(torch.nn.Module):
    """x: [b, 3], y: [b+1, 3], z: [2b, 4], w: [1, 3, L]; pools give FloorDiv sizes."""

    def forward(self, x, y, z, w):
        a = torch.cat([x, y], 0)
        c = z.reshape(-1, 2, 4)
        p = F.avg_pool1d(w, 3, 2)
        q = w[..., ::3]
        return a.sum(0), c.mean(1), p, z.view(x.shape[0], -1), q


class Nested(torch.nn.Module):
    """Pytree inputs: guards_code then reads L['xs'][1] and L['d']['q']."""

    def forward(self, xs, d, *, k):
        a, b = xs
        return a.reshape(-1)[: b.shape[0] // 2 * 2], d["q"] + k


def model_json(ep):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.pt2")
        save(ep, path)
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith("models/model.json"))
            return json.loads(z.read(name))


def collect_exprs(j):
    found = {}

    def walk(o):
        if isinstance(o, dict):
            if "expr_str" in o:
                hint = o.get("hint")
                found[o["expr_str"]] = hint.get("as_int") if isinstance(hint, dict) else None
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(j)
    return [{"srepr": k, "hint": v} for k, v in sorted(found.items())]


def eval_guards(guards, shapes):
    """Python's own verdict on each guards_code string for inputs of the given shapes."""
    def build(v):
        if isinstance(v, dict):
            return {k: build(x) for k, x in v.items()}
        if isinstance(v, list) and v and isinstance(v[0], list):
            return [build(x) for x in v]
        return torch.empty(v)

    L = build(shapes)
    return [bool(eval(g, {"L": L, "math": math, "torch": torch})) for g in guards]


def export_case(name, module, args, kwargs, dynamic_shapes, shapes_list):
    ep = export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
    j = model_json(ep)
    guards = j.get("guards_code") or []
    return {
        "name": name,
        "range_constraints": j["range_constraints"],
        "exprs": collect_exprs(j),
        "guards_code": guards,
        "guard_checks": [{"shapes": s, "expect": eval_guards(guards, s)} for s in shapes_list],
    }


def gen_exports():
    out = []
    b = Dim("batch", min=2, max=64)
    L = Dim("len", min=8)
    x, y, z, w = torch.randn(4, 3), torch.randn(5, 3), torch.randn(8, 4), torch.randn(1, 3, 20)
    good = {"x": [4, 3], "y": [5, 3], "z": [8, 4], "w": [1, 3, 20]}
    bad_y = {"x": [4, 3], "y": [6, 3], "z": [8, 4], "w": [1, 3, 20]}
    bad_z = {"x": [4, 3], "y": [5, 3], "z": [6, 4], "w": [1, 3, 9]}
    out.append(export_case(
        "derived_dims", Derived(), (x, y, z, w), None,
        {"x": {0: b}, "y": {0: b + 1}, "z": {0: 2 * b}, "w": {2: L}},
        [good, bad_y, bad_z, {"x": [9, 3], "y": [10, 3], "z": [18, 4], "w": [1, 3, 33]}]))
    auto = {"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}, "z": {0: Dim.AUTO}, "w": {2: Dim.AUTO}}
    out.append(export_case(
        "auto_dims", Derived(), (x, y, z, w), None, auto,
        [good, bad_y, {"x": [4, 3], "y": [5, 3], "z": [2, 4], "w": [1, 3, 4]},
         {"x": [3, 3], "y": [7, 3], "z": [6, 4], "w": [1, 3, 11]}]))
    out.append(export_case(
        "nested", Nested(), ((torch.randn(6, 3), torch.randn(7)), {"q": torch.randn(5)}),
        {"k": torch.randn(5)},
        {"xs": ({0: Dim.AUTO}, {0: Dim.AUTO}), "d": {"q": {0: Dim.AUTO}}, "k": {0: Dim.AUTO}},
        [{"xs": [[6, 3], [7]], "d": {"q": [5]}, "k": [5]},
         {"xs": [[2, 3], [9]], "d": {"q": [5]}, "k": [5]},
         {"xs": [[6, 3], [7]], "d": {"q": [5]}, "k": [4]}]))
    return out


def main():
    data = {
        "generated_by": "tests/fixgen/gen_sym_cases.py",
        "torch": torch.__version__,
        "sympy": sympy.__version__,
        "cases": gen_cases(),
        "python_cases": gen_py_cases(),
        "exports": gen_exports(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    # One list item per line: small, and diffs show which case changed.
    lines = []
    for k, v in data.items():
        if isinstance(v, list):
            items = ",\n".join("  " + json.dumps(x, separators=(",", ":")) for x in v)
            lines.append(f"{json.dumps(k)}: [\n{items}\n ]")
        else:
            lines.append(f"{json.dumps(k)}: {json.dumps(v)}")
    with open(OUT, "w") as f:
        f.write("{\n " + ",\n ".join(lines) + "\n}\n")
    print(f"wrote {OUT}: {len(data['cases'])} cases, {len(data['exports'])} exports")


if __name__ == "__main__":
    main()
