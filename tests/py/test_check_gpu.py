"""`pt2web check --device gpu`: per op target, how many nodes would run a GPU kernel, how many
are views, and how many fall back to the CPU kernel with the reason. Judged against the op
counts torch recorded for the fixture (meta.json from tests/fixgen). No GPU is needed: the
report is static (target + the dtypes torch recorded for each node).
"""
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))


def check(name, *args, passes=None):
    env = dict(os.environ)
    if passes is not None:
        env["PT2WEB_PASSES"] = passes
    r = subprocess.run([BIN, "check", str(FIX / f"{name}.pt2"), *args],
                       capture_output=True, text=True, env=env)
    return r


def op_counts(name):
    meta = json.loads((FIX / f"{name}.meta.json").read_text())
    (pm,) = meta["programs"].values()
    return pm["op_counts"]


def test_convnet_runs_entirely_on_the_gpu():
    # The graph as exported (the passes fold its batch norms away: see the next test).
    r = check("convnet_core", "--device", "gpu", "--json", passes="none")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    g = out["gpu"]
    ops = {o["op"]: o for o in g["ops"]}
    counts = op_counts("convnet_core")
    for op in ["aten.convolution.default", "aten._native_batch_norm_legit_no_training.default",
               "aten.max_pool2d_with_indices.default", "aten.addmm.default",
               "aten.relu.default"]:
        assert ops[op]["gpu"] == counts[op] and ops[op]["cpu"] == 0, ops[op]
    assert ops["aten.view.default"]["view"] == counts["aten.view.default"]
    assert g["fallback_nodes"] == 0
    assert g["gpu_nodes"] + g["view_nodes"] == sum(o["gpu"] + o["view"] for o in g["ops"])


def test_check_shows_the_graph_after_the_passes():
    # Up to fusion: the batch norms are folded into the convolutions.
    r = check("convnet_core", "--device", "gpu", "--json", passes="noop,dce,fold_bn,fuse")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ops = {o["op"]: o for o in out["gpu"]["ops"]}
    counts = op_counts("convnet_core")
    assert "aten._native_batch_norm_legit_no_training.default" not in ops, ops
    assert ops["aten.convolution.default"]["gpu"] == counts["aten.convolution.default"]
    assert out["gpu"]["fallback_nodes"] == 0
    assert out["memory"]["derived_bytes"] > 0
    # Every pass: each convolution and its relu are one fused epilogue node on the GPU (the
    # report also counts the nodes inside it).
    r = check("convnet_core", "--device", "gpu", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ops = {o["op"]: o for o in out["gpu"]["ops"]}
    assert ops["pt2web.fused_epilogue.default"]["gpu"] == counts["aten.convolution.default"], ops
    assert out["gpu"]["fallback_nodes"] == 0


def test_fallbacks_name_their_reason():
    r = check("dtypes", "--device", "gpu", "--json")
    out = json.loads(r.stdout)
    g = out["gpu"]
    fallbacks = [o for o in g["ops"] if o["cpu"] > 0]
    assert fallbacks, g
    for o in fallbacks:
        assert o["reasons"], o
        assert all(x == "no GPU kernel" or x.startswith("no GPU kernel for inputs") for x in o["reasons"]), o
    assert g["fallback_nodes"] == sum(o["cpu"] for o in g["ops"])
    # The text form lists the fallbacks first, with the reason.
    t = check("dtypes", "--device", "gpu")
    assert "on the gpu device:" in t.stdout
    assert any(line.strip().startswith("cpu aten.") for line in t.stdout.splitlines()), t.stdout


def test_default_device_has_no_gpu_report():
    r = check("convnet_core", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu"] is None
    assert "on the gpu device" not in check("convnet_core").stdout


def test_subgraph_nodes_are_counted():
    """`cond`'s branches run on the GPU too: every aten node torch has in the program, in the
    top-level graph and in each branch, is in the report."""
    import collections
    import torch
    ep = torch.export.load(str(FIX / "cond.pt2"))
    want = collections.Counter()
    for _, m in ep.graph_module.named_modules():
        g = getattr(m, "graph", None)
        for n in (g.nodes if g is not None else []):
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                want[str(n.target)] += 1
    assert sum(want.values()) > 3, want  # the branches hold aten nodes of their own
    r = check("cond", "--device", "gpu", "--json")
    assert r.returncode == 0, r.stderr
    ops = {o["op"]: o for o in json.loads(r.stdout)["gpu"]["ops"]}
    for op, n in want.items():
        assert op in ops, (op, sorted(ops))
        o = ops[op]
        assert o["gpu"] + o["view"] + o["cpu"] == n, (op, o, n)
