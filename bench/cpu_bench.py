"""CPU benchmark: pt2web vs PyTorch eager on the same archives and inputs, in the same run.

    .venv/bin/python bench/cpu_bench.py [--models resnet18,mobilenet_v3_small,minilm] [--runs 10]

Needs the real-model cache (scripts/build_models.sh) and a release build of the CLI
(cargo build --release -p pt2web-native). For each model: PyTorch runs `torch.export.load(pt2)
.module()` on the stored example inputs (MiniLM at seq 128); pt2web runs `pt2web run --repeat`.
Both report the median of warm runs; the ratio pt2web/PyTorch is the number to watch
(target: <= 2.0 on this 2-core machine).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers.modeling_outputs  # noqa: F401  (ModelOutput pytree types for MiniLM/GPT-2)
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "models"
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))


def torch_median(ep, args, kwargs, runs):
    m = ep.module()
    with torch.no_grad():
        for _ in range(2):
            m(*args, **kwargs)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            m(*args, **kwargs)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mobilenet_v3_small,minilm")
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    rows = []
    for name in a.models.split(","):
        meta = json.loads((CACHE / f"{name}.meta.json").read_text())
        prog = meta["programs"]["model"]
        case = prog["io_cases"][0]
        io = load_file(str(CACHE / case["file"]))
        flat = [io[i["key"]] for i in case["inputs"]]
        ep = torch.export.load(CACHE / meta["archive"])
        args, kwargs = torch.utils._pytree.tree_unflatten(flat, ep.call_spec.in_spec)
        t_torch = torch_median(ep, args, kwargs, a.runs)
        with tempfile.TemporaryDirectory() as d:
            inp = Path(d) / "in.safetensors"
            save_file({n: t.contiguous() for n, t in zip(prog["input_names"], flat)}, str(inp))
            r = subprocess.run([BIN, "run", str(CACHE / meta["archive"]), "--inputs", str(inp), "--repeat", str(a.runs + 1), "--json"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: pt2web failed: {r.stderr.strip()}", file=sys.stderr)
                rows.append((name, t_torch, None, None))
                continue
            s = json.loads(r.stdout)
            t_ours = s["timings_ms"]["median_run"]
            rows.append((name, t_torch, t_ours, s["timings_ms"]["first_run"]))
    print(f"\n{'model':<22}{'inputs':<22}{'PyTorch CPU ms':>16}{'pt2web CPU ms':>16}{'ratio':>8}   (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    for name, tt, to, first in rows:
        meta = json.loads((CACHE / f"{name}.meta.json").read_text())
        shapes = "x".join(str(s) for s in meta["programs"]["model"]["io_cases"][0]["inputs"][0]["shape"])
        if to is None:
            print(f"{name:<22}{shapes:<22}{tt:>16.1f}{'failed':>16}{'-':>8}")
        else:
            print(f"{name:<22}{shapes:<22}{tt:>16.1f}{to:>16.1f}{to / tt:>8.2f}")


if __name__ == "__main__":
    main()
