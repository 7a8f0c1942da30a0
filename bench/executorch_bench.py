"""ExecuTorch's XNNPACK backend on a benchmark model; run by bench/cpu_bench.py in a Python that
has `executorch` (PyPI):

    .cache/venv-et/bin/python bench/executorch_bench.py --model resnet18 --batch 1 [--runs 10] [--threads 2]

Loads the same .pt2 archive as pt2web (same weights), re-exports its module at the batch's
static shape (inputs: the archive's first stored example, rows repeated to the batch, as
cpu_bench.py does), lowers it with `to_edge_transform_and_lower(..., XnnpackPartitioner())`,
caches the .pte in .cache/models/NAME.b{BATCH}.xnnpack.pte, checks its output against PyTorch's
and prints one JSON line: {"median_ms": ..., "max_abs_err": ...}.
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import transformers.modeling_outputs  # noqa: F401  (ModelOutput pytree types)
from safetensors.torch import load_file

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "models"


class Positional(torch.nn.Module):
    """The archive's module called with its flattened inputs, returning its flattened outputs
    (ExecuTorch methods take and return flat tensor lists)."""

    def __init__(self, module, in_spec):
        super().__init__()
        self.module = module
        self.in_spec = in_spec

    def forward(self, *flat):
        args, kwargs = torch.utils._pytree.tree_unflatten(list(flat), self.in_spec)
        out = self.module(*args, **kwargs)
        return tuple(torch.utils._pytree.tree_leaves(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    meta = json.loads((CACHE / f"{a.model}.meta.json").read_text())
    case = meta["programs"]["model"]["io_cases"][0]
    io = load_file(str(CACHE / case["file"]))
    flat = []
    for i in case["inputs"]:
        t = io[i["key"]]
        flat.append(t.index_select(0, torch.arange(a.batch) % t.shape[0]).contiguous())
    ep = torch.export.load(CACHE / meta["archive"])
    wrapped = Positional(ep.module(), ep.call_spec.in_spec)
    with torch.no_grad():
        want = wrapped(*flat)
    pte = CACHE / f"{a.model}.b{a.batch}.xnnpack.pte"
    if not pte.exists():
        static = torch.export.export(wrapped, tuple(flat))
        lowered = to_edge_transform_and_lower(static, partitioner=[XnnpackPartitioner()]).to_executorch()
        pte.write_bytes(lowered.buffer)
    if a.threads:
        try:
            from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool
            _unsafe_reset_threadpool(a.threads)
        except ImportError:
            pass
    method = Runtime.get().load_program(pte).load_method("forward")
    got = method.execute(flat)
    err = max(float((g.float() - w.float()).abs().max()) for g, w in zip(got, want) if w.is_floating_point())
    for _ in range(2):
        method.execute(flat)
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        method.execute(flat)
        times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times), "max_abs_err": err}))


if __name__ == "__main__":
    main()
