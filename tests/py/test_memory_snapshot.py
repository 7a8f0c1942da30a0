"""`pt2web run --memory-snapshot FILE.json` (issue 19 item 3) writes the GPU pool and its
history in the layout of torch.cuda.memory._snapshot(): torch's own tools
(torch.cuda._memory_viz) read it as they read a CUDA snapshot, and its numbers add up.
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch.cuda import _memory_viz

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))
FIXTURES = ROOT / "tests" / "fixtures"


def pt2web(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True)


def gpu_or_skip():
    r = pt2web("devices", "--json")
    assert r.returncode == 0, r.stderr
    if not json.loads(r.stdout)["adapters"]:
        if os.environ.get("PT2WEB_REQUIRE_GPU") == "1":
            pytest.fail("no GPU adapter (PT2WEB_REQUIRE_GPU=1)")
        pytest.skip("no GPU adapter")


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """The convnet fixture run twice on the GPU with --memory-snapshot; its output checked
    against PyTorch's (from the fixture's io file)."""
    gpu_or_skip()
    tmp = tmp_path_factory.mktemp("memory")
    ep = torch.export.load(FIXTURES / "convnet_core.pt2")
    (name,) = ep.graph_signature.user_inputs
    io = load_file(FIXTURES / "convnet_core.io.safetensors")
    np.save(tmp / "x.npy", io["input_0"].numpy())
    out, snap = tmp / "out.safetensors", tmp / "snapshot.json"
    r = pt2web("run", str(FIXTURES / "convnet_core.pt2"), f"{name}={tmp / 'x.npy'}",
               "--device", "gpu", "--repeat", "2", "--out", str(out),
               "--memory-snapshot", str(snap))
    assert r.returncode == 0, r.stderr
    torch.testing.assert_close(load_file(out)["output_0"], io["output_0"], atol=1e-4, rtol=1e-4)
    return json.loads(snap.read_text()), ep


def test_torch_memory_viz_reads_the_snapshot(snapshot):
    snap, _ = snapshot
    text = lambda lines: lines  # noqa: E731  (the flame graph's input, not flamegraph.pl's svg)
    # segsum raises on a segment whose blocks do not add up to it, or totals that do not.
    summary = _memory_viz.segsum(snap)
    assert f"segments: {len(snap['segments'])}" in summary
    trace = _memory_viz.trace(snap)
    assert "Device 0" in trace and "cudaMalloc" in trace
    by_block = _memory_viz.memory(snap, format_flamegraph=text)
    _memory_viz.segments(snap, format_flamegraph=text)
    # The flame graph's active memory is the live blocks: the weights after the runs.
    live = sum(int(l.rsplit(" ", 1)[1]) for l in by_block.splitlines() if ";active_allocated;" in l)
    assert live > 0
    assert live == sum(s["allocated_size"] for s in snap["segments"])
    for plot in (_memory_viz.trace_plot(snap), _memory_viz.segment_plot(snap),
                 _memory_viz.trace_plot(snap, plot_segments=True)):
        assert "snapshot.pickle" in plot


def test_history_names_the_programs_nodes(snapshot):
    snap, ep = snapshot
    (trace,) = snap["device_traces"]
    actions = {e["action"] for e in trace}
    assert {"segment_alloc", "alloc", "free_requested", "free_completed"} <= actions
    allocs = [e for e in trace if e["action"] == "alloc"]
    frees = [e for e in trace if e["action"] == "free_completed"]
    live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    # The history starts at load: every live block is an alloc not yet freed.
    assert len(allocs) - len(frees) == len(live)
    assert sum(e["size"] for e in allocs) - sum(e["size"] for e in frees) == sum(b["size"] for b in live)
    # Frames name ops and nodes of the program as torch exported it (where the runtime's
    # passes fused nodes, the frame names pt2web's fused op and the node it kept).
    ops = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    nodes = {n.name for n in ep.graph.nodes}
    named = {(f["name"], f["filename"]) for e in allocs for f in e["frames"]}
    assert {op for op, _ in named} & ops, named
    assert {node for _, node in named} & nodes, named
    # The weights' uploads at load come before any node runs.
    assert allocs[0]["frames"][0]["name"] == "<outside a node>"


def test_memory_snapshot_needs_the_gpu(tmp_path):
    r = pt2web("run", "--device", "cpu", "--memory-snapshot", str(tmp_path / "s.json"))
    assert r.returncode == 1
    assert "--memory-snapshot" in r.stderr and "--device gpu" in r.stderr, r.stderr
