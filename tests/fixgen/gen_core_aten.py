"""The op list pt2web must cover by construction: tests/fixtures/core_aten.json.

    .venv/bin/python tests/fixgen/gen_core_aten.py [--check]

- "aten": every overload torch tags as core ATen (`torch.Tag.core`): what
  `run_decompositions()` leaves in a program;
- "symbolic": the targets of symbolic-shape arithmetic and guards a program may hold
  (torch.export's serializable sym ops, `_operator.getitem`, `sym_size`, the asserts);
- "higher_order": the higher-order ops found in small programs exported with `cond`,
  `while_loop`, `map` and `scan` after `run_decompositions()` (plus their own targets).

tests/op_table.rs asserts that each one has a shape rule and a CPU kernel, and a GPU kernel or
a documented reason why it runs on the CPU. `--check` exits 1 when the file is not what this
torch would write (CI does not run it: torch's tags change only with torch).
"""
import json
import sys
from pathlib import Path

import torch
from torch._export.serde import serialize

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "core_aten.json"


def core_aten():
    out = []
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not hasattr(packet, "overloads"):
            continue
        for ov in packet.overloads():
            if torch.Tag.core in getattr(packet, ov).tags:
                out.append(f"aten.{name}.{ov}")
    return sorted(out)


def symbolic():
    names = {f"{getattr(o, '__module__', '')}.{o.__name__}" for o in serialize._SYM_OPS}
    names |= {
        "_operator.getitem",
        "aten.sym_size.int",
        "aten.sym_stride.int",
        "aten.sym_numel.default",
        "aten.sym_storage_offset.default",
        "aten._assert_scalar.default",
        "aten.sym_constrain_range_for_size.default",
    }
    return sorted(names)


def target_name(t) -> str:
    """The target as a .pt2 archive names it (pt2web's node targets)."""
    if isinstance(t, torch._ops.OpOverload):
        return f"{t.namespace}.{t._opname}.{t._overloadname}"
    if isinstance(t, torch._ops.HigherOrderOperator):
        return f"higher_order.{t.name()}"
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__name__', t)}"


def higher_order():
    """The targets of small control-flow programs after run_decompositions()."""

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))

    class While(torch.nn.Module):
        def forward(self, x):
            return torch._higher_order_ops.while_loop(
                lambda i, x: i < 3, lambda i, x: (i + 1, x * 2), (torch.tensor(0), x))

    class Map(torch.nn.Module):
        def forward(self, xs):
            return torch._higher_order_ops.map(lambda x: x + 1, xs)

    class Scan(torch.nn.Module):
        def forward(self, xs):
            return torch._higher_order_ops.scan(
                lambda c, x: (c + x, c * x), torch.zeros(3), xs)

    targets = set()
    for m in (Cond(), While(), Map(), Scan()):
        try:
            ep = torch.export.export(m, (torch.randn(2, 3),)).run_decompositions()
        except Exception as e:  # an op this torch cannot export is not on the list
            print(f"  {type(m).__name__}: not exportable ({type(e).__name__})", file=sys.stderr)
            continue
        for gm in ep.graph_module.modules():
            for n in getattr(gm, "graph", torch.fx.Graph()).nodes:
                if n.op == "call_function":
                    name = target_name(n.target)
                    if name.startswith("higher_order."):
                        targets.add(name)
    return sorted(targets)


def main():
    data = {
        "torch": torch.__version__.split("+")[0],
        "aten": core_aten(),
        "symbolic": symbolic(),
        "higher_order": higher_order(),
    }
    text = json.dumps(data, indent=1) + "\n"
    if "--check" in sys.argv:
        ok = OUT.is_file() and OUT.read_text() == text
        print("up to date" if ok else f"{OUT} differs from what torch {data['torch']} gives")
        sys.exit(0 if ok else 1)
    OUT.write_text(text)
    print(f"{OUT}: {len(data['aten'])} core ATen overloads, {len(data['symbolic'])} symbolic, "
          f"{len(data['higher_order'])} higher-order ({data['higher_order']})")


if __name__ == "__main__":
    main()
